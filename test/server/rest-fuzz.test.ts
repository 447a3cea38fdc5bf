/**
 * REST fuzz: a seeded stream of hostile requests against the real server running in its own
 * process (so a crash is seen as an exit, not as a dead test runner). Every route, method and
 * content type is tried with valid requests turned slightly wrong, odd JSON (deep, huge, unicode),
 * broken and truncated multipart bodies, random bytes, bad credentials, lying Content-Lengths and
 * malformed request lines. Asserts: no 5xx (503 only as no_worker_available), every error body has
 * the {"error":{message,type,code,param}} shape, /healthz keeps answering while it runs, and the
 * process is alive and serving at the end.
 *
 * FUZZ_SEED replays a run; FUZZ_CASES and FUZZ_TIME_BUDGET_MS change its size.
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Rng, deepJsonText, fuzzSeed, mutateObject, oddJson, oddString } from '../helpers/fuzz.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { REPO_ROOT, request, tempDir } from '../../harness/servers/server.js';

const CASES = Number(process.env.FUZZ_CASES) || 2500;
/** Cases stop being issued after this long, so a loaded machine bounds the suite's time, not its coverage. */
const TIME_BUDGET_MS = Number(process.env.FUZZ_TIME_BUDGET_MS) || 50_000;
/** A run on a very loaded machine must still have tried this many cases to count. */
const MIN_CASES = 300;
const CONCURRENCY = 6;
/** A request that gets no answer in this long is abandoned (lying Content-Length cases wait for bytes that never come). */
const CASE_TIMEOUT_MS = 20_000;
/** /healthz is asked this often while the fuzz runs. */
const HEALTH_INTERVAL_MS = 100;
/** /healthz must answer within this long: a request that blocks the event loop for seconds shows; load noise does not. */
const HEALTH_DEADLINE_MS = 2_000;

const ASSETS = path.join(REPO_ROOT, 'models/assets');
const FILES = {
  face: fs.readFileSync(path.join(ASSETS, 'faces/default.jpg')),
  voice: fs.readFileSync(path.join(ASSETS, 'voices/default.wav')),
  driving: fs.readFileSync(path.join(ASSETS, 'driving/idle.pkl')),
};
type Kind = keyof typeof FILES;
const UPLOAD_ROUTES: Array<[string, Kind]> = [
  ['/v1/faces', 'face'],
  ['/faces', 'face'],
  ['/v1/voices', 'voice'],
  ['/voices', 'voice'],
  ['/v1/driving', 'driving'],
  ['/driving', 'driving'],
];
const JSON_ROUTES = ['/v1/sessions', '/sessions', '/v1/realtime/client_secrets'];
const VALID_BODIES: Record<string, Record<string, unknown>> = {
  '/v1/sessions': { model: 'gpt-5.2', voice: 'alice', face: 'face1', driving: 'idle', instructions: 'Be brief.', target_fps: 25, upsample_factor: 2, tts_source: 'flite', video_codec: 'vp8' },
  '/sessions': { model: 'gpt-5.2', voice: 'default', video: true, face_id: 'default' },
  '/v1/realtime/client_secrets': { expires_after: { anchor: 'created_at', seconds: 60 }, session: { type: 'realtime', model: 'gpt-realtime', audio: { output: { voice: 'alice' } } } },
};
const GET_ROUTES = ['/healthz', '/readyz', '/metrics', '/v1/openapi.json', '/v1/faces', '/v1/voices', '/v1/driving', '/v1/usage', '/v1/sessions'];
const ID_ROUTES = ['/v1/sessions/{id}', '/v1/sessions/{id}/chat', '/sessions/{id}', '/sessions/{id}/end', '/v1/faces/{id}', '/v1/voices/{id}', '/v1/driving/{id}'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'];
const QUERY_KEYS = ['limit', 'status', 'before', 'start_time', 'end_time', 'start', 'end', 'name', 'description', 'filename', 'model', 'session_id'];
const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-16',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
  'multipart/form-data; boundary=',
  'multipart/form-data; boundary=zz',
  'application/sdp',
  'application/octet-stream',
  'image/png',
  'image/jpeg',
  'audio/wav',
  'audio/mpeg',
  'application/x-pickle',
  'application/merge-patch+json',
  'x/\u00e9',
];

interface Case {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | null;
  /** For the failure report. */
  describe: string;
}

interface Outcome {
  status: number;
  contentType: string;
  body: Buffer;
}

interface Keys {
  api: string;
  ephemeral: string;
  sessionId: string;
  assetId: string;
}

function buildCase(rng: Rng, keys: Keys): Case {
  const roll = rng.next();
  let method: string;
  let route: string;
  let body: Buffer | null = null;
  let contentType: string | null = null;
  let what: string;
  if (roll < 0.35) {
    route = rng.pick(JSON_ROUTES);
    method = 'POST';
    ({ body, contentType, what } = jsonBody(rng, VALID_BODIES[route] ?? {}));
  } else if (roll < 0.6) {
    const [r, kind] = rng.pick(UPLOAD_ROUTES);
    route = r;
    method = 'POST';
    ({ body, contentType, what } = uploadBody(rng, kind));
  } else if (roll < 0.8) {
    route = rng.pick(ID_ROUTES).replace('{id}', uriEncode(pickId(rng, keys)));
    method = route.endsWith('/end') ? 'POST' : rng.pick(['GET', 'GET', 'DELETE']);
    what = 'id route';
  } else if (roll < 0.95) {
    route = rng.pick(GET_ROUTES);
    method = 'GET';
    what = 'list route';
  } else {
    route = '/' + uriEncode(oddString(rng, 100)).slice(0, 500) + rng.pick(['', '%ff%fe', '%', '%2e%2e/']);
    method = rng.pick(METHODS);
    what = 'random path';
  }
  if (rng.chance(0.1)) method = rng.pick(METHODS);
  if (rng.chance(0.3)) route += '?' + queryString(rng, keys);
  if (rng.chance(0.1) && contentType !== null) contentType = rng.pick(CONTENT_TYPES);
  const headers: Record<string, string> = {};
  const auth = authHeader(rng, keys);
  if (auth !== null) headers.authorization = auth;
  if (contentType !== null) headers['content-type'] = contentType;
  if (body !== null && method === 'GET') body = null;
  return { method, path: route, headers, body, describe: `${method} ${route.slice(0, 120)} [${what}; ${contentType ?? 'no type'}; ${body?.length ?? 0} B]` };
}

function jsonBody(rng: Rng, valid: Record<string, unknown>): { body: Buffer; contentType: string | null; what: string } {
  const r = rng.next();
  if (r < 0.45) return { body: Buffer.from(JSON.stringify(mutateObject(rng, valid))), contentType: 'application/json', what: 'mutated body' };
  if (r < 0.6) return { body: Buffer.from(JSON.stringify(oddJson(rng)) ?? 'null'), contentType: 'application/json', what: 'odd json' };
  if (r < 0.64) {
    const inner = deepJsonText(rng.pick([100, 5000, 100_000]), rng);
    return { body: Buffer.from(rng.chance(0.5) ? inner : `{"session":${inner},"metadata":${inner}}`), contentType: 'application/json', what: 'deeply nested json' };
  }
  if (r < 0.7) {
    const text = JSON.stringify(valid);
    return { body: Buffer.from(text.slice(0, rng.int(0, text.length - 1))), contentType: 'application/json', what: 'truncated json' };
  }
  if (r < 0.78) return { body: Buffer.alloc(0), contentType: rng.pick(['application/json', 'text/plain']), what: 'empty' };
  if (r < 0.88) return { body: rng.bytes(rng.int(1, 4096)), contentType: rng.pick(CONTENT_TYPES), what: 'random bytes' };
  if (r < 0.93) return { body: Buffer.from(JSON.stringify({ ...valid, instructions: 'z'.repeat(1_200_000) })), contentType: 'application/json', what: 'over the JSON limit' };
  return { body: Buffer.from(JSON.stringify(valid)), contentType: null, what: 'valid, no content type' };
}

function uploadBody(rng: Rng, kind: Kind): { body: Buffer; contentType: string; what: string } {
  // A real face photo costs a face-model run; keep those few.
  const realFile = kind === 'face' ? (rng.chance(0.05) ? FILES.face : rng.bytes(rng.int(3, 2048))) : FILES[kind];
  const file = rng.chance(0.5) ? realFile : realFile.subarray(0, rng.int(0, realFile.length));
  const r = rng.next();
  if (r < 0.25) {
    const type = rng.pick(CONTENT_TYPES);
    return { body: rng.chance(0.3) ? rng.bytes(rng.int(0, 4096)) : file, contentType: type, what: 'raw body' };
  }
  // Odd boundaries stay printable ASCII: an HTTP client will not even send other bytes in a header.
  const boundary = rng.chance(0.9) ? `----fuzz${rng.int(0, 1e9)}` : oddString(rng, 80).replace(/[^\x21-\x7e]|"/g, '') || 'b';
  const field = rng.pick(['file', 'image', 'audio', 'voice', 'driving', 'motion', 'other', '', oddString(rng, 20).replace(/[\r\n"]/g, '')]);
  const partType = rng.pick(['', 'application/octet-stream', 'image/jpeg', 'audio/wav', 'application/x-pickle', 'text/plain', 'x']);
  const parts: Buffer[] = [];
  if (rng.chance(0.3)) {
    const value = rng.chance(0.2) ? 'n'.repeat(rng.int(4000, 9000)) : oddString(rng, 300);
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${rng.pick(['name', 'description', 'x'])}"\r\n\r\n${value}\r\n`));
  }
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${rng.pick(['a.jpg', 'v.wav', 'm.pkl', '../../x', ''])}"\r\n${partType ? `Content-Type: ${partType}\r\n` : ''}\r\n`;
  parts.push(Buffer.from(head), file);
  const end = rng.next();
  let what = 'multipart';
  if (end < 0.6) parts.push(Buffer.from(`\r\n--${boundary}--\r\n`));
  else if (end < 0.8) what = 'multipart cut inside the file part';
  else if (end < 0.9) parts.push(Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-da`)), (what = 'multipart cut inside a header');
  else parts.push(Buffer.from(`\r\n--${boundary}\r\n`)), (what = 'multipart without a closing boundary');
  let body = Buffer.concat(parts);
  if (rng.chance(0.1)) body = body.subarray(0, rng.int(0, body.length));
  const type = rng.chance(0.9) ? `multipart/form-data; boundary=${boundary}` : rng.pick(['multipart/form-data', 'multipart/mixed; boundary=x', `multipart/form-data; boundary="${boundary}"`]);
  return { body, contentType: type, what };
}

/** Percent-encodes any string (lone surrogates become U+FFFD), sometimes with raw invalid UTF-8 escapes added. */
function uriEncode(text: string): string {
  return encodeURIComponent(text.replace(/[\ud800-\udfff]/gu, '\ufffd'));
}

function pickId(rng: Rng, keys: Keys): string {
  return rng.pick([keys.sessionId, keys.assetId, 'sess_' + rng.bytes(8).toString('hex'), '00000000-0000-4000-8000-000000000000', 'default', oddString(rng, 300)]);
}

function queryString(rng: Rng, keys: Keys): string {
  const n = rng.int(1, 4);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = rng.chance(0.8) ? rng.pick(QUERY_KEYS) : oddString(rng, 20);
    const value = rng.chance(0.3) ? rng.pick(['1', '0', '-1', '100', '1001', 'active', keys.sessionId, '2026-01-01T00:00:00', '1e10']) : oddString(rng, 200);
    parts.push(`${uriEncode(key)}=${uriEncode(value)}`);
  }
  return parts.join('&');
}

function authHeader(rng: Rng, keys: Keys): string | null {
  const r = rng.next();
  if (r < 0.72) return `Bearer ${keys.api}`;
  if (r < 0.8) return null;
  if (r < 0.85) return `Bearer ${keys.ephemeral}`;
  return rng.pick(['Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', `Bearer avs_${'0'.repeat(40)}`, `Bearer ek_${'x'.repeat(40)}`, `bearer ${keys.api}`, `Bearer ${keys.api}x`, 'Bearer ' + 'k'.repeat(8000)]);
}

function send(base: URL, agent: http.Agent, c: Case): Promise<Outcome | null> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...c.headers };
    if (c.body !== null) headers['content-length'] = c.body.length;
    const req = http.request({ host: base.hostname, port: base.port, method: c.method, path: c.path, headers, agent, timeout: CASE_TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${CASE_TIMEOUT_MS} ms`)));
    // The server may answer (413, 415, 401) and close before the whole body is sent: that is an answer.
    req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? resolve(null) : reject(err)));
    if (c.body !== null) req.write(c.body);
    req.end();
  });
}

/** Raw-socket cases: malformed request lines, lying Content-Lengths, headers that never end. */
function rawCase(base: URL, rng: Rng, key: string): Promise<string> {
  const payloads = [
    `GARBAGE\r\n\r\n`,
    `POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":"x"}`,
    `POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{"model":"x"}`,
    `POST /v1/faces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 99999999\r\n\r\n--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\n\r\nabc`,
    `POST /v1/voices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nTransfer-Encoding: chunked\r\nContent-Type: audio/wav\r\n\r\nfffffff\r\nRIFF`,
    `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: ${'a'.repeat(20_000)}\r\n\r\n`,
    `GET /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n`,
  ];
  const payload = rng.pick(payloads);
  return new Promise((resolve) => {
    const socket = net.connect(Number(base.port), base.hostname);
    let got = '';
    socket.setTimeout(1500, () => socket.destroy());
    socket.on('data', (d) => (got += d.toString('latin1')));
    socket.on('error', () => undefined); // a reset is one of the server's legitimate answers here
    socket.on('close', () => resolve(got.split('\r\n')[0] ?? ''));
    socket.write(payload);
  });
}

function checkOutcome(c: Case, o: Outcome): string | null {
  if (o.status >= 500 && !(o.status === 503 && o.body.toString().includes('no_worker_available'))) {
    return `${o.status} for ${c.describe}: ${o.body.toString().slice(0, 300)}`;
  }
  if (o.status >= 400 && c.method !== 'HEAD') {
    let parsed: { error?: Record<string, unknown> } | null = null;
    try {
      parsed = JSON.parse(o.body.toString()) as { error?: Record<string, unknown> };
    } catch {
      return `${o.status} without a JSON error body for ${c.describe}: ${o.body.toString().slice(0, 200)}`;
    }
    const e = parsed?.error;
    const shaped = e && typeof e.message === 'string' && typeof e.type === 'string' && typeof e.code === 'string' && (e.param === null || typeof e.param === 'string');
    if (!shaped) return `${o.status} with a malformed error body for ${c.describe}: ${o.body.toString().slice(0, 200)}`;
  }
  return null;
}

const Fuzz = suite<{ proc: ServerProcess; dataDir: string }>('REST fuzz', {} as { proc: ServerProcess; dataDir: string });

Fuzz.before(async (ctx) => {
  ctx.dataDir = tempDir('avatar-fuzz-');
  ctx.proc = await spawnServer({ DATA_DIR: ctx.dataDir, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: '0', AUTH_FAILURES_PER_MINUTE: '0', WORKER_CAPACITY: '4', MAX_UPLOAD_BYTES: '4194304' });
});

Fuzz.after(async (ctx) => {
  if (ctx.proc.child.exitCode === null) {
    ctx.proc.child.kill('SIGTERM');
    await ctx.proc.exited;
  }
  fs.rmSync(ctx.dataDir, { recursive: true, force: true });
});

Fuzz('thousands of hostile requests: no 5xx, error bodies well formed, /healthz responsive, process alive', async ({ proc }) => {
  const seed = fuzzSeed();
  console.log(`  REST fuzz seed ${seed} (replay: FUZZ_SEED=${seed})`);
  const rng = new Rng(seed);
  const api = proc.bootstrapKey;
  assert.ok(api, 'the server printed its first key');
  const session = await request(proc.url, 'POST', '/v1/sessions', { key: api, json: {} });
  assert.is(session.status, 200, session.text);
  const secret = await request(proc.url, 'POST', '/v1/realtime/client_secrets', { key: api, json: {} });
  assert.is(secret.status, 200, secret.text);
  const voice = await request(proc.url, 'POST', '/v1/voices', { key: api, body: FILES.voice, headers: { 'content-type': 'audio/wav' } });
  assert.is(voice.status, 201, voice.text);
  const keys: Keys = { api, ephemeral: secret.body.value, sessionId: session.body.id, assetId: voice.body.id };

  const base = new URL(proc.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const health = { asked: 0, worstMs: 0, failed: [] as string[] };
  let running = true;
  const healthLoop = (async () => {
    const healthAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    while (running) {
      const started = performance.now();
      const o = await send(base, healthAgent, { method: 'GET', path: '/healthz', headers: {}, body: null, describe: 'GET /healthz' }).catch((err: Error) => ({ status: 0, contentType: '', body: Buffer.from(err.message) }));
      const ms = performance.now() - started;
      health.asked++;
      health.worstMs = Math.max(health.worstMs, ms);
      if (o?.status !== 200 || ms > HEALTH_DEADLINE_MS) health.failed.push(`/healthz ${o?.status} after ${Math.round(ms)} ms`);
      await new Promise((r) => setTimeout(r, HEALTH_INTERVAL_MS));
    }
    healthAgent.destroy();
  })();

  const started = performance.now();
  let issued = 0;
  const worker = async () => {
    while (issued < CASES && performance.now() - started < TIME_BUDGET_MS && proc.child.exitCode === null) {
      issued++;
      if (rng.chance(0.03)) {
        await rawCase(base, rng, api);
        continue;
      }
      const c = buildCase(rng, keys);
      let o: Outcome | null;
      try {
        o = await send(base, agent, c);
      } catch (err) {
        failures.push(`no answer to ${c.describe}: ${(err as Error).message}`);
        continue;
      }
      if (o === null) continue;
      statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
      const problem = checkOutcome(c, o);
      if (problem) failures.push(problem);
      // Keep slots free so session creation keeps being exercised past capacity.
      if (o.status === 200 && c.path.startsWith('/v1/sessions') && c.method === 'POST') {
        const id = (JSON.parse(o.body.toString()) as { id?: string }).id;
        if (id && rng.chance(0.7)) await request(proc.url, 'DELETE', `/v1/sessions/${id}`, { key: api });
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  running = false;
  await healthLoop;
  agent.destroy();
  const seconds = (performance.now() - started) / 1000;
  console.log(`  ${issued} cases in ${seconds.toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}; /healthz asked ${health.asked} times, worst ${Math.round(health.worstMs)} ms`);

  assert.is(proc.child.exitCode, null, `the server exited:\n${proc.stdout().slice(-3000)}`);
  assert.ok(issued >= MIN_CASES, `only ${issued} cases ran`);
  assert.equal(failures.slice(0, 10), [], `${failures.length} bad answers (seed ${seed})`);
  assert.equal(health.failed.slice(0, 10), [], `/healthz was not responsive (seed ${seed})`);
  const after = await request(proc.url, 'GET', `/v1/sessions/${keys.sessionId}`, { key: api });
  assert.is(after.status, 200, 'the server still serves after the fuzz');
  // The process safety net keeps the server up when something escapes; the fuzz must see none.
  const metrics = await request(proc.url, 'GET', '/metrics');
  const escaped = [...metrics.text.matchAll(/^avatar_process_escaped_errors\{kind="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]);
  assert.equal(escaped, [['uncaught_exception', 0], ['unhandled_rejection', 0]], `errors escaped their handlers:\n${proc.stdout().slice(-3000)}`);
});

Fuzz.run();
