/**
 * The module rules as a test (docs/development.md's "Module rules" section points here). Every import in
 * src/ (static, type-only, dynamic, and worker files named by `new URL('./x.ts', import.meta.url)`)
 * is an edge from one part of the tree to another; a part is a folder of src/ (`providers/<kind>`
 * for each provider kind, `providers` for the files shared by the kinds) or one of the top files
 * (`config`, `main`). An edge is allowed when:
 *
 *  - the target part is in the source part's row of MAY_IMPORT (the layering: core/ at the bottom
 *    importing nothing of the project, the engine in realtime/ importing no transport or media
 *    code, providers importing no other kind and no cli/, nothing importing cli/ or server/ but
 *    their entry points);
 *  - and no NARROWING rule forbids it: some parts may see another only through its seam (a
 *    provider kind through its `base.ts`, the engine through its two doors from the media side
 *    (`realtime/avatar-output.ts`, `realtime/input-images.ts`), from the
 *    media side, the media plane through its speech doors from the providers, only
 *    `media/native.ts` loading the native addon, the engine's file imported by the connection
 *    alone: its ports and the reply request have files of their own);
 *  - and a package with an owner (`ws`, `node-datachannel`, koa, the SQLite driver) is imported
 *    only by its owner.
 *
 * A few things must be written once, which no import edge shows (WRITTEN_ONCE: relaying a socket
 * to a worker, handing on held client events, asking where a session runs, starting an avatar,
 * naming the CPU renderer): the sources of src/ and of the native crates are scanned for their
 * marks outside the one file allowed to hold each.
 *
 * A new folder fails the test until it has a row; a forbidden import fails it with the rule it
 * breaks. The second test feeds deliberate breaks through the same checker so that a rule that
 * stopped catching anything would fail too.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const ROOT = path.resolve(import.meta.dirname, '..');
const SRC = path.join(ROOT, 'src');

const PROVIDER_KINDS = ['providers/llm', 'providers/tts', 'providers/asr', 'providers/vad', 'providers/turn', 'providers/mcp'];

/** Which parts each part may import (besides itself). Lower layers first. */
const MAY_IMPORT: Record<string, string[]> = {
  core: [],
  audio: ['core'],
  models: ['core', 'audio'],
  store: ['core'],
  fleet: ['core', 'store', 'sessions'],
  providers: ['core'],
  'providers/llm': ['core', 'providers', 'models'],
  'providers/vad': ['core', 'providers', 'models'],
  'providers/turn': ['core', 'audio', 'providers', 'models'],
  'providers/asr': ['core', 'audio', 'providers', 'models', 'media'],
  'providers/tts': ['core', 'audio', 'providers', 'models', 'media', 'assets'],
  'providers/mcp': ['core', 'providers'],
  config: ['core', 'models', ...PROVIDER_KINDS],
  auth: ['core', 'store'],
  assets: ['core', 'store'],
  usage: ['core', 'store', 'config'],
  sessions: ['core', 'store', 'assets', 'providers/tts'],
  media: ['core', 'audio', 'store', 'assets', 'realtime'],
  realtime: ['core', 'audio', 'sessions', 'providers', ...PROVIDER_KINDS],
  transport: ['core'],
  signaling: ['core', 'audio', 'auth', 'store', 'sessions', 'realtime', 'transport', 'media', 'providers', ...PROVIDER_KINDS],
  server: ['core', 'audio', 'config', 'models', 'store', 'auth', 'assets', 'usage', 'sessions', 'fleet', 'media', 'realtime', 'transport', 'signaling', 'providers', ...PROVIDER_KINDS],
  cli: ['core', 'config', 'models', 'store', 'auth', 'assets', 'media', 'server', 'fleet', 'main', 'providers/tts'],
  main: ['core', 'config', 'server'],
};

interface Edge {
  /** Repository-relative path of the importing file. */
  from: string;
  /** Repository-relative path of the imported file (extension .ts), or a package name. */
  to: string;
}

interface Narrowing {
  rule: string;
  forbids(edge: Edge, from: string, to: string | null): boolean;
}

/** Parts that wire everything together and may see concrete implementations. */
const COMPOSITION = new Set(['server', 'cli']);

const NARROWINGS: Narrowing[] = [
  {
    rule: 'only src/media/native.ts loads the native addon (native/)',
    forbids: (e) => e.to.startsWith('native/') && e.from !== 'src/media/native.ts',
  },
  {
    rule: 'outside server/ and cli/, a provider kind is seen only through its seam <kind>/base.ts (config.ts: through <kind>/config.ts)',
    forbids: (e, from, to) =>
      to !== null && PROVIDER_KINDS.includes(to) && from !== to && !COMPOSITION.has(from) &&
      !e.to.endsWith(from === 'config' ? '/config.ts' : '/base.ts'),
  },
  {
    rule: 'the media plane sees the engine only through its AvatarOutput and InputImages interfaces (realtime/avatar-output.ts, realtime/input-images.ts)',
    forbids: (e, from, to) => from === 'media' && to === 'realtime' && e.to !== 'src/realtime/avatar-output.ts' && e.to !== 'src/realtime/input-images.ts',
  },
  {
    rule: 'the engine (realtime/session-engine.ts) is constructed by the connection alone (signaling/realtime-connection.ts); its ports and the reply request are in realtime/engine-ports.ts and realtime/reply-request.ts',
    forbids: (e) => e.to === 'src/realtime/session-engine.ts' && e.from !== 'src/signaling/realtime-connection.ts',
  },
  {
    rule: 'providers reach the media plane only through its speech doors (media/speech-synth.ts, media/speech-recognition.ts)',
    forbids: (e, from, to) => from.startsWith('providers/') && to === 'media' && !/^src\/media\/speech-(synth|recognition)\.ts$/.test(e.to),
  },
];

/** Packages only one part may import: the transports, the HTTP framework, the database driver, the validator. */
const PACKAGE_OWNERS: Record<string, string> = {
  ajv: 'core',
  ws: 'signaling',
  'node-datachannel': 'transport',
  koa: 'server',
  '@koa/router': 'server',
  busboy: 'server',
  'better-sqlite3': 'store',
  pg: 'store',
  ioredis: 'fleet',
  '@modelcontextprotocol/sdk': 'providers/mcp',
};

/** The part a source file belongs to, or null for a file outside src/. */
function partOf(file: string): string | null {
  if (!file.startsWith('src/')) return null;
  const segments = file.slice('src/'.length).split('/');
  if (segments.length === 1) return segments[0]!.replace(/\.ts$/, '');
  if (segments[0] === 'providers' && segments.length > 2) return `providers/${segments[1]}`;
  return segments[0]!;
}

function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** Every import of one source file (static, type-only, dynamic, and worker URLs). */
function importsOf(file: string, source: string): Edge[] {
  const specifiers = ts.preProcessFile(source, true, true).importedFiles.map((i) => i.fileName);
  for (const m of source.matchAll(/new URL\(\s*'(\.[^']+)'\s*,\s*import\.meta\.url\s*\)/g)) specifiers.push(m[1]!);
  return specifiers
    .filter((s) => !s.startsWith('node:'))
    .map((s) => {
      if (!s.startsWith('.')) return { from: file, to: packageName(s) };
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), s)).replace(/\.js$/, '.ts');
      return { from: file, to: target };
    });
}

/** The rules an edge breaks (none: allowed). */
function violations(edge: Edge): string[] {
  const from = partOf(edge.from);
  if (from === null) return [];
  const allowed = MAY_IMPORT[from];
  if (!allowed) return [`${edge.from} is in part '${from}', which has no row in MAY_IMPORT: place it in the layering`];
  const isPath = edge.to.includes('/') && !edge.to.startsWith('@');
  const to = isPath ? partOf(edge.to) : null;
  const broken: string[] = [];
  if (!isPath) {
    const owner = PACKAGE_OWNERS[edge.to];
    if (owner !== undefined && owner !== from) broken.push(`package '${edge.to}' belongs to ${owner}/`);
  } else if (to !== null && to !== from && !allowed.includes(to)) {
    broken.push(`'${from}' may import only ${allowed.length ? allowed.join(', ') : 'nothing of the project'}, not '${to}'`);
  }
  for (const n of NARROWINGS) if (n.forbids(edge, from, to)) broken.push(n.rule);
  return broken;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return p.endsWith('.ts') ? [path.relative(ROOT, p).split(path.sep).join('/')] : [];
  });
}

function report(edges: Edge[]): string[] {
  return edges.flatMap((e) => violations(e).map((rule) => `${e.from} → ${e.to}: ${rule}`));
}

test('every import in src/ keeps the module rules', () => {
  const files = sourceFiles(SRC);
  assert.ok(files.length > 100, `found only ${files.length} source files`);
  const edges = files.flatMap((f) => importsOf(f, fs.readFileSync(path.join(ROOT, f), 'utf8')));
  assert.ok(edges.length > 300, `found only ${edges.length} imports`);
  const broken = report(edges);
  assert.equal(broken, [], `module rules broken:\n  ${broken.join('\n  ')}`);
});

test('the checker catches deliberate forbidden imports', () => {
  const cases: Array<[file: string, source: string, rule: RegExp]> = [
    ['src/core/log.ts', "import { loadConfig } from '../config.js';", /'core' may import only nothing of the project, not 'config'/],
    ['src/realtime/session-engine.ts', "import type { MediaSession } from '../media/media-session.js';", /'realtime' may import only .*not 'media'/],
    ['src/realtime/response.ts', "const peer = await import('../transport/call-peer.js');", /not 'transport'/],
    ['src/realtime/response.ts', "import { WebSocket } from 'ws';", /package 'ws' belongs to signaling/],
    ['src/providers/asr/base.ts', "import { ProviderError } from '../llm/base.js';", /'providers\/asr' may import only .*not 'providers\/llm'/],
    ['src/providers/llm/index.ts', "import { modelPath } from '../../cli/fetch-models.js';", /not 'cli'/],
    ['src/signaling/realtime-connection.ts', "import { createSpeechService } from '../providers/tts/index.js';", /only through its seam/],
    ['src/media/opus-decoder.ts', "import type * as B from '../../native/media-node/index.js';", /only src\/media\/native\.ts loads the native addon/],
    ['src/media/avatar-output.ts', "import { RealtimeSessionEngine } from '../realtime/session-engine.js';", /only through its AvatarOutput and InputImages interfaces/],
    ['src/providers/tts/piper.ts', "import { MediaSession } from '../../media/media-session.js';", /speech doors/],
    ['src/realtime/response.ts', "import type { UsageDelta } from './session-engine.js';", /constructed by the connection alone/],
    ['src/server/realtime-runtime.ts', "import { replyRequest } from '../realtime/session-engine.js';", /constructed by the connection alone/],
    ['src/assets/catalog.ts', "import { startServer } from '../server/server.js';", /'assets' may import only core, store, not 'server'/],
    ['src/newpart/thing.ts', "import { x } from '../core/ids.js';", /no row in MAY_IMPORT/],
  ];
  for (const [file, source, rule] of cases) {
    const broken = report(importsOf(file, source));
    assert.ok(broken.some((b) => rule.test(b)), `${file}: ${source} should break ${rule}, got ${JSON.stringify(broken)}`);
  }
  // The same imports in their allowed form pass.
  const allowed: Array<[string, string]> = [
    ['src/realtime/response.ts', "import type { AvatarOutput } from './avatar-output.js';"],
    ['src/signaling/realtime-connection.ts', "import type { SpeechService } from '../providers/tts/base.js';"],
    ['src/providers/asr/base.ts', "import { ProviderError } from '../provider-error.js';"],
    ['src/server/realtime-runtime.ts', "const tts = await import('../providers/tts/index.js');"],
    ['src/cli/render-clip.ts', "import { EspeakVoice } from '../providers/tts/espeak.js';"],
    ['src/media/avatar-output.ts', "import type { AvatarOutput } from '../realtime/avatar-output.js';"],
    ['src/media/input-images.ts', "import type { InputImages } from '../realtime/input-images.js';"],
    ['src/realtime/response.ts', "import type { UsageDelta } from './engine-ports.js';"],
  ];
  for (const [file, source] of allowed) assert.equal(report(importsOf(file, source)), [], `${file}: ${source}`);
});

/**
 * Seams that an import edge cannot show: a few things are written once, in one room, and a name
 * used anywhere else means a second copy has begun. Each rule: the text that marks the thing, and
 * the files allowed to hold it (src/ and the native crates' sources are scanned).
 */
const WRITTEN_ONCE: Array<{ rule: string; marks: RegExp; in: string[] }> = [
  {
    rule: 'a socket is relayed to a worker in one place: ClientConnection.relayTo (signaling/client-connection.ts)',
    marks: /\brelaySocket\(/,
    in: ['src/signaling/worker-relay.ts', 'src/signaling/client-connection.ts'],
  },
  {
    rule: "held client events are handed on in one place: EventGate.open (signaling/pending-events.ts); every holder is an EventGate",
    marks: /\bnew PendingEvents\(|\bpending\w*\.drain\(/i,
    in: ['src/signaling/pending-events.ts'],
  },
  {
    rule: 'where a session runs is decided in one place: runHereOrRelay (signaling/placement.ts)',
    marks: /\.remoteWorkerOf\(/,
    in: ['src/signaling/placement.ts'],
  },
  {
    rule: "a session's avatar is started by the process's MediaEngine (media/media-engine.ts), on the renderer its media options name",
    marks: /MediaAvatarOutput\.start\(/,
    in: ['src/media/media-engine.ts'],
  },
  {
    rule: 'the CPU renderer is named only by the process\'s renderer registry (native/media-core/src/frames/renderers.rs)',
    marks: /\bCpuFactory\b/,
    in: ['native/media-core/src/frames/cpu.rs', 'native/media-core/src/frames/renderers.rs'],
  },
];

function writtenTwice(files: Array<[file: string, source: string]>): string[] {
  return WRITTEN_ONCE.flatMap((r) => files.filter(([file, source]) => !r.in.includes(file) && r.marks.test(source)).map(([file]) => `${file}: ${r.rule}`));
}

function nativeSources(): string[] {
  const native = path.join(ROOT, 'native');
  return fs
    .readdirSync(native, { withFileTypes: true })
    .filter((e) => e.isDirectory() && fs.existsSync(path.join(native, e.name, 'src')))
    .flatMap((e) => rustFiles(path.join(native, e.name, 'src')));
}

function rustFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return rustFiles(p);
    return p.endsWith('.rs') ? [path.relative(ROOT, p).split(path.sep).join('/')] : [];
  });
}

test('what is written once stays written once (relaying, holding events, placement, starting avatars, naming the CPU renderer)', () => {
  const files = [...sourceFiles(SRC), ...nativeSources()].map((f): [string, string] => [f, fs.readFileSync(path.join(ROOT, f), 'utf8')]);
  assert.ok(files.some(([f]) => f.endsWith('.rs')), 'the native sources were scanned');
  assert.equal(writtenTwice(files), []);
  // Deliberate second copies are caught.
  const breaks: Array<[string, string, RegExp]> = [
    ['src/signaling/realtime-sideband.ts', 'const relay = relaySocket(ws, worker, token, run, handlers, log);', /relayed to a worker in one place/],
    ['src/signaling/realtime-calls.ts', 'for (const text of pending.drain()) connection.receive(text);', /handed on in one place/],
    ['src/signaling/realtime-ws.ts', 'const remote = await this.deps.routing.remoteWorkerOf(session.id);', /decided in one place/],
    ['src/server/realtime-runtime.ts', 'await MediaAvatarOutput.start({ ...o, assets });', /started by the process's MediaEngine/],
    ['native/media-node/src/face.rs', 'CpuFactory.prepare_face(asset)', /named only by the process's renderer registry/],
  ];
  for (const [file, source, rule] of breaks) {
    const found = writtenTwice([[file, source]]);
    assert.ok(found.some((b) => rule.test(b)), `${file}: ${source} should break ${rule}, got ${JSON.stringify(found)}`);
  }
});

/** Files of a top-level folder (harness/, benchmarks/) as repository paths. */
function tsFilesUnder(dir: string): string[] {
  const abs = path.join(ROOT, dir);
  return fs.existsSync(abs) ? sourceFiles(abs) : [];
}

/** What an import of a shared-layer file may not name: the harness sees src/ and packages; benchmarks do not reach into the tests. */
function layerBreaks(edges: Edge[]): string[] {
  return edges.flatMap((e) => {
    if (e.from.startsWith('harness/') && (e.to.startsWith('test/') || e.to.startsWith('benchmarks/'))) return [`${e.from} → ${e.to}: harness/ imports src/ and packages only (harness/README.md)`];
    if (e.from.startsWith('benchmarks/') && e.to.startsWith('test/')) return [`${e.from} → ${e.to}: benchmarks import the shared clients and measures from harness/, not test/`];
    return [];
  });
}

test('the shared clients and measures (harness/) import no test or benchmark code, and benchmarks none of the tests', () => {
  const files = [...tsFilesUnder('harness'), ...tsFilesUnder('benchmarks')];
  assert.ok(files.some((f) => f.startsWith('harness/')) && files.some((f) => f.startsWith('benchmarks/')), 'both folders were read');
  const edges = files.flatMap((f) => importsOf(f, fs.readFileSync(path.join(ROOT, f), 'utf8')));
  assert.equal(layerBreaks(edges), []);
  const caught = layerBreaks([
    ...importsOf('harness/clients/browser.ts', "import { skipUnless } from '../../test/helpers/skip.js';"),
    ...importsOf('benchmarks/realtime.bench.ts', "import { startServer } from '../test/helpers/server.js';"),
  ]);
  assert.is(caught.length, 2, `deliberate breaks are caught: ${JSON.stringify(caught)}`);
});

test('docs/development.md names every part of src/ in its layout table', () => {
  const page = fs.readFileSync(path.join(ROOT, 'docs/development.md'), 'utf8');
  for (const part of Object.keys(MAY_IMPORT)) {
    const shown = part === 'main' || part === 'config' ? `src/${part}.ts` : `src/${part}/`;
    assert.ok(page.includes(`| \`${shown}\``), `docs/development.md's layout table ("Where things live") lacks ${shown}`);
  }
});

test.run();
