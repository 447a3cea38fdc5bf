/**
 * What `npm run bench` was asked for (benchmarks/run.ts), read and checked before anything is
 * measured, so a mistake is refused in a second rather than after minutes of measuring.
 *
 * Targets: each `--target` is an endpoint to measure (an http(s) or ws(s) base URL), or `self`:
 * this server, started by the benchmark with its embedded models. With no --target, only `self`.
 * `--key` gives the API key of each URL target in the order they are given; one --key serves them
 * all. Several targets are measured one after another by the same benchmarks, each into its own
 * results file, so one command compares two endpoints:
 *
 *   npm run bench -- report --target self --target https://api.openai.com --key sk-...
 */
import { parseArgs } from 'node:util';

/** One endpoint to measure: a URL and its key, or null for this server started by the benchmark. */
export type BenchTarget = { url: string; key: string } | null;

export interface RunOptions {
  /** Benchmarks named on the command line (`report` not among them). */
  names: string[];
  report: boolean;
  runs: number;
  targets: BenchTarget[];
  replot: boolean;
  screenshot: string | undefined;
}

export const SELF_TARGET = 'self';

export function readRunOptions(args: string[]): RunOptions {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      runs: { type: 'string', default: '3' },
      target: { type: 'string', multiple: true },
      key: { type: 'string', multiple: true },
      replot: { type: 'boolean', default: false },
      screenshot: { type: 'string' },
    },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs takes a positive integer');
  return {
    names: positionals.filter((p) => p !== 'report'),
    report: positionals.includes('report'),
    runs,
    targets: readTargets(values.target ?? [], values.key ?? []),
    replot: values.replot ?? false,
    screenshot: values.screenshot,
  };
}

function readTargets(given: string[], keys: string[]): BenchTarget[] {
  const urls = given.filter((t) => t !== SELF_TARGET);
  if (urls.length === 0 && keys.length > 0) throw new Error('--key needs --target URL (the base URL of an OpenAI Realtime endpoint, e.g. https://api.openai.com)');
  for (const url of urls) {
    if (!/^(https?|wss?):\/\/[^\s]+$/i.test(url)) throw new Error(`--target must be an http(s) or ws(s) base URL or '${SELF_TARGET}', not '${url}'`);
  }
  if (urls.length > 0 && keys.length === 0) throw new Error('--target needs --key KEY (the API key the endpoint expects)');
  if (keys.some((k) => k === '')) throw new Error('--key is empty');
  if (keys.length > 1 && keys.length !== urls.length) throw new Error(`${keys.length} --key for ${urls.length} --target URL: give one key for all, or one per URL in the same order`);
  if (new Set(given).size !== given.length) throw new Error('the same --target is given twice');
  if (given.length === 0) return [null];
  let next = 0;
  return given.map((t) => (t === SELF_TARGET ? null : { url: t.replace(/\/+$/, ''), key: keys.length === 1 ? keys[0]! : keys[next++]! }));
}
