/**
 * Converts every fetched CTranslate2 Whisper model of models/manifest.json (Whisper base and
 * tiny.en) into whisper.cpp's ggml file (src/models/whisper-ggml.ts); run by setup.sh after the
 * model fetch. Prints one line per model converted or not fetched, nothing for one already there;
 * exits 0 when the CT2 files are absent (the models are optional), 1 when a result does not have
 * the manifest's hash (the other models are still converted). Environment: MODELS_DIR (default:
 * the repository's models/).
 */
import path from 'node:path';
import { loadManifest, modelsDirFrom } from '../models/manifest.js';
import { convertWhisperModel, whisperConversions } from '../models/whisper-ggml.js';

try {
  const modelsDir = modelsDirFrom(process.env);
  for (const { target, model, tokenizer } of whisperConversions(loadManifest(modelsDir))) {
    const started = Date.now();
    try {
      const { state, file } = convertWhisperModel(modelsDir, target.name);
      const rel = path.relative(process.cwd(), file);
      if (state === 'converted') console.log(`model ${target.name}: converted ${rel} in ${((Date.now() - started) / 1000).toFixed(1)} s (sha256 verified)`);
      else if (state === 'missing') console.log(`model ${target.name}: ${rel} is not made, ${model.name} and ${tokenizer.name} are not fetched (see models/manifest.json)`);
    } catch (err) {
      console.error(`model ${target.name}: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    }
  }
} catch (err) {
  console.error(`model asr whisper: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
