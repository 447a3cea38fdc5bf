/**
 * The local GGUF a model bench loads (answers, tool-calling), so two models are compared on the
 * same cases: `<PREFIX>_GGUF` (a file) or `<PREFIX>_MODEL` (a models/manifest.json entry of kind
 * llm); by default the server's own choice (LLM_LOCAL_MODEL, llm-default unless set).
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadManifest, modelPath } from '../../src/models/manifest.js';
import { DEFAULT_LLM_MODEL_NAME, loadLocalLlmModel } from '../../src/providers/llm/config.js';

export function benchLocalModel(prefix: string, modelsDir: string, env: NodeJS.ProcessEnv = process.env): { file: string; name: string } {
  const gguf = env[`${prefix}_GGUF`]?.trim();
  if (gguf) {
    const file = path.resolve(gguf);
    if (!fs.statSync(file, { throwIfNoEntry: false })?.isFile()) throw new Error(`${prefix}_GGUF: no such file: ${file}`);
    return { file, name: path.basename(file) };
  }
  const name = env[`${prefix}_MODEL`]?.trim() || loadLocalLlmModel(env);
  const llms = loadManifest(modelsDir).models.filter((m) => m.kind === 'llm').map((m) => m.name);
  if (!llms.includes(name)) throw new Error(`${prefix}_MODEL: '${name}' is no language model of models/manifest.json; its language models: ${llms.join(', ')}`);
  const file = modelPath(modelsDir, name);
  if (!file) throw new Error(`the local model '${name}' is not fetched (run npm run setup:models${name === DEFAULT_LLM_MODEL_NAME ? '' : ` -- --only ${name}`})`);
  return { file, name };
}
