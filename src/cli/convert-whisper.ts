/**
 * Converts the fetched CTranslate2 Whisper base into whisper.cpp's ggml file
 * (src/models/whisper-ggml.ts); run by setup.sh after the model fetch. Prints one line; exits 0
 * when the CT2 files are absent (the model is optional), 1 when the result does not have the
 * manifest's hash. Environment: MODELS_DIR (default: the repository's models/).
 */
import path from 'node:path';
import { modelsDirFrom } from '../models/manifest.js';
import { convertWhisperModel } from '../models/whisper-ggml.js';

const started = Date.now();
try {
  const { state, file } = convertWhisperModel(modelsDirFrom(process.env));
  const rel = path.relative(process.cwd(), file);
  if (state === 'converted') console.log(`model asr whisper: converted ${rel} in ${((Date.now() - started) / 1000).toFixed(1)} s (sha256 verified)`);
  else if (state === 'missing') console.log('model asr whisper: the CT2 files are not fetched; no offline speech recognition (see models/manifest.json asr-whisper-base-ct2)');
} catch (err) {
  console.error(`model asr whisper: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
