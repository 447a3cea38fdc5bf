/**
 * The endpoint benchmark's four lip-sync faces, shown on both transports (benchmarks/lib/endpoint/
 * lip-faces.ts showFaces, benchmarks/endpoint.bench.ts lipFaceTransports):
 *  - the standard faces keep their ids and are not uploaded; the two photos are uploaded once,
 *    each by its own name, and named by the id the target answers;
 *  - an upload the target refuses leaves that face without an id, saying why, and the others shown;
 *  - ENDPOINT_LIP_FACES picks the transports: both by default, neither, or one; anything else is refused;
 *  - the turns are rounds of the faces in turn, each round asking another question (cycling).
 * The target is a loopback HTTP server that records the uploads.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { lipFaceTransports } from '../../benchmarks/endpoint.bench.js';
import { LIP_SYNC_QUESTIONS, lipTurns, showFaces } from '../../benchmarks/lib/endpoint/lip-faces.js';

interface Ctx {
  server: http.Server;
  url: string;
  uploads: Array<{ name: string | null; auth: string | undefined; bytes: number }>;
  /** The names the target refuses (415). */
  refuse: Set<string>;
}

const Faces = suite<Ctx>('showFaces', { server: null!, url: '', uploads: [], refuse: new Set() });

Faces.before.each(async (ctx) => {
  ctx.uploads = [];
  ctx.refuse = new Set();
  ctx.server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const name = new URL(req.url!, 'http://x').searchParams.get('name');
      ctx.uploads.push({ name, auth: req.headers.authorization, bytes: Buffer.concat(chunks).length });
      const refused = name !== null && ctx.refuse.has(name);
      res.writeHead(refused ? 415 : 201, { 'content-type': 'application/json' });
      res.end(JSON.stringify(refused ? { error: { code: 'UNSUPPORTED_MEDIA', message: 'not a face' } } : { id: `face_${name}` }));
    });
  });
  await new Promise<void>((r) => ctx.server.listen(0, '127.0.0.1', r));
  ctx.url = `http://127.0.0.1:${(ctx.server.address() as AddressInfo).port}`;
});

Faces.after.each(async (ctx) => {
  await new Promise<void>((r) => ctx.server.close(() => r()));
});

Faces('the standard faces keep their ids; the two photos are uploaded once each and named by the answered id', async (ctx) => {
  const faces = await showFaces({ url: ctx.url, key: 'k1', model: 'm' }, 'run');
  assert.equal(
    faces.map((f) => f.id),
    ['default', 'face1', 'face_run-2', 'face_run-3'],
  );
  assert.ok(faces.every((f) => f.missing === null));
  assert.equal(
    ctx.uploads.map((u) => u.name),
    ['run-2', 'run-3'],
  );
  assert.ok(ctx.uploads.every((u) => u.auth === 'Bearer k1' && u.bytes > 1000));
  assert.match(faces[2]!.label, /^upload: smiling/);
  assert.match(faces[3]!.label, /^upload: neutral/);
});

Faces('an upload the target refuses leaves that face without an id, saying why; the others are shown', async (ctx) => {
  ctx.refuse.add('run-2');
  const faces = await showFaces({ url: ctx.url, key: 'k', model: 'm' }, 'run');
  assert.is(faces[2]!.id, null);
  assert.match(faces[2]!.missing!, /not uploaded: POST \/v1\/faces answered 415 \(UNSUPPORTED_MEDIA: not a face\)/);
  assert.equal(
    faces.filter((f) => f.id !== null).map((f) => f.id),
    ['default', 'face1', 'face_run-3'],
  );
});

Faces.run();

const Transports = suite('lipFaceTransports');

Transports('ENDPOINT_LIP_FACES: unset or 1 both transports, 0 neither, websocket or webrtc that one; anything else refused', () => {
  assert.equal(lipFaceTransports(undefined), { websocket: true, webrtc: true });
  assert.equal(lipFaceTransports('1'), { websocket: true, webrtc: true });
  assert.equal(lipFaceTransports('0'), { websocket: false, webrtc: false });
  assert.equal(lipFaceTransports('webrtc'), { websocket: false, webrtc: true });
  assert.equal(lipFaceTransports('websocket'), { websocket: true, webrtc: false });
  assert.throws(() => lipFaceTransports('rtc'), /ENDPOINT_LIP_FACES: 'rtc' is not 1, 0, websocket or webrtc/);
});

Transports.run();

const Turns = suite('lipTurns');

Turns('rounds of the faces in turn, round k asking the k-th question, cycling; a face not shown stays so', () => {
  const faces = [
    { label: 'a', id: 'default', missing: null },
    { label: 'b', id: null, missing: 'refused' },
  ];
  const rounds = LIP_SYNC_QUESTIONS.length + 1;
  const turns = lipTurns(faces, rounds);
  assert.is(turns.length, 2 * rounds);
  assert.equal(turns.slice(0, 4).map((t) => [t.label, t.question]), [
    ['a', LIP_SYNC_QUESTIONS[0]],
    ['b', LIP_SYNC_QUESTIONS[0]],
    ['a', LIP_SYNC_QUESTIONS[1]],
    ['b', LIP_SYNC_QUESTIONS[1]],
  ]);
  assert.is(turns.at(-1)!.question, LIP_SYNC_QUESTIONS[0], 'past the last question, the first again');
  assert.equal(new Set(LIP_SYNC_QUESTIONS).size, LIP_SYNC_QUESTIONS.length, 'each round another question');
  assert.equal(turns[1], { ...faces[1], question: LIP_SYNC_QUESTIONS[0] });
});

Turns.run();
