import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { encodeWav16 } from '../../src/assets/audio-file.js';
import { encodeMotionTemplate, generateStandardMotion } from '../../src/assets/motion-template.js';
import { assertError } from '../helpers/assert-error.js';
import { PORTRAIT_JPG, plainPng, portraitJpeg, portraitPng } from '../helpers/images.js';
import { startTestServer, type TestResponse, type TestServer } from '../../harness/servers/server.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TIMESTAMP_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}$/;
const ASSET_FIELDS = (idField: string) =>
  ['bytes', 'content_type', 'created_at', 'description', 'filename', 'id', idField, 'metadata', 'name', 'object', 'sha256'].sort();
const STANDARD_IDS = {
  faces: ['default', 'face1'],
  voices: ['default', 'alice', 'anthony'],
  driving: ['default', 'idle', 'AgreeYesTotaly'],
} as const;
const DEFAULT_FACE_JPG = PORTRAIT_JPG;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

// ── Test files ──────────────────────────────────────────────────────────────

/** `seconds` of a 220 Hz tone with two harmonics, -1..1. */
function tone(seconds: number, sampleRate: number, amplitude = 0.4): Float32Array {
  const out = new Float32Array(Math.round(seconds * sampleRate));
  for (let i = 0; i < out.length; i++) {
    const t = i / sampleRate;
    const v = Math.sin(2 * Math.PI * 220 * t) + 0.5 * Math.sin(2 * Math.PI * 440 * t) + 0.25 * Math.sin(2 * Math.PI * 660 * t);
    out[i] = (amplitude * v) / 1.75;
  }
  return out;
}

const toneWav = (seconds = 2): Buffer => encodeWav16(tone(seconds, 16000), 16000);

async function toneMp3(seconds = 2, sampleRate = 16000): Promise<Buffer> {
  // A dynamic import: the package's CommonJS entry (used when uvu loads tests with require) exports nothing.
  const { Mp3Encoder } = await import('@breezystack/lamejs');
  const samples = tone(seconds, sampleRate);
  const pcm = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) pcm[i] = Math.round((samples[i] ?? 0) * 32767);
  const encoder = new Mp3Encoder(1, sampleRate, 64);
  const parts: Uint8Array[] = [];
  for (let i = 0; i < pcm.length; i += 1152) parts.push(encoder.encodeBuffer(pcm.subarray(i, i + 1152)));
  parts.push(encoder.flush());
  return Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength)));
}

const motionPkl = (): Buffer => Buffer.from(encodeMotionTemplate(generateStandardMotion('idle')));
/** Protocol-2 pickle of {'a': 1}. */
const DICT_PICKLE = Buffer.from('\x80\x02}q\x00X\x01\x00\x00\x00aq\x01K\x01s.', 'latin1');
/** Protocol-2 pickle of os.system('ls'): would run a command if loaded with pickle.load. */
const OS_SYSTEM_PICKLE = Buffer.from('\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.', 'latin1');

function form(file: Buffer | null, type: string, filename: string, fields: Record<string, string> = {}): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  if (file) f.append('file', new Blob([new Uint8Array(file)], { type }), filename);
  return f;
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

async function uploadRaw(t: TestServer, urlPath: string, data: Buffer, type: string, key?: string): Promise<TestResponse> {
  return t.request('POST', urlPath, { body: new Uint8Array(data), headers: { 'content-type': type }, ...(key ? { key } : {}) });
}

async function uploadForm(t: TestServer, urlPath: string, body: FormData, key?: string): Promise<TestResponse> {
  return t.request('POST', urlPath, { body, ...(key ? { key } : {}) });
}

/** Uploads a valid asset of each kind and returns the ids. */
async function uploadOneOfEach(t: TestServer, key?: string): Promise<{ face: string; voice: string; driving: string }> {
  const face = await uploadRaw(t, '/v1/faces', await portraitPng(), 'image/png', key);
  const voice = await uploadRaw(t, '/v1/voices', toneWav(), 'audio/wav', key);
  const driving = await uploadRaw(t, '/v1/driving', motionPkl(), 'application/octet-stream', key);
  for (const res of [face, voice, driving]) assert.is(res.status, 201, res.text);
  return { face: face.body.id, voice: voice.body.id, driving: driving.body.id };
}

async function storedFile(t: TestServer, id: string): Promise<string> {
  const record = await t.server.services.store.getAsset(id);
  assert.ok(record, `asset ${id} is not in the store`);
  return path.join(t.dataDir, record.storagePath);
}

/** Files under dataDir/assets (uploads), relative, sorted. */
function uploadedFiles(t: TestServer): string[] {
  const dir = path.join(t.dataDir, 'assets');
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[])
    .filter((p) => fs.statSync(path.join(dir, p)).isFile())
    .sort();
}

async function assertNothingStored(t: TestServer): Promise<void> {
  assert.equal(uploadedFiles(t), [], 'a rejected upload must leave no file');
  for (const kind of ['face', 'voice', 'driving'] as const) {
    assert.equal(await t.server.services.store.listAssets('default', kind), [], `a rejected upload must leave no ${kind} record`);
  }
}

// ── Lists ───────────────────────────────────────────────────────────────────

const Assets = suite<{ t: TestServer }>('assets', {} as { t: TestServer });

Assets.before.each(async (ctx) => {
  ctx.t = await startTestServer();
});
Assets.after.each(async (ctx) => {
  await ctx.t.close();
});

Assets('GET /v1/faces, /v1/voices and /v1/driving need no key and list exactly the standard assets', async ({ t }) => {
  for (const [plural, ids] of Object.entries(STANDARD_IDS)) {
    const res = await t.request('GET', `/v1/${plural}`, { key: null });
    assert.is(res.status, 200, res.text);
    assert.equal(Object.keys(res.body), [plural]);
    const entries = res.body[plural] as Record<string, unknown>[];
    assert.equal(entries.map((e) => e.id), [...ids]);
    for (const entry of entries) {
      assert.equal(Object.keys(entry).sort(), ['description', 'filename', 'id']);
      assert.type(entry.filename, 'string');
      assert.ok((entry.filename as string).length > 0);
      assert.type(entry.description, 'string');
      assert.ok((entry.description as string).length > 0);
    }
  }
});

Assets("with a valid key the lists append the caller's own uploads, never another user's", async ({ t }) => {
  const mine = await uploadOneOfEach(t);
  const other = await t.keyFor('mallory');
  const theirs = await uploadOneOfEach(t, other);
  for (const [plural, kind] of [['faces', 'face'], ['voices', 'voice'], ['driving', 'driving']] as const) {
    const ids = async (key: string | null) => {
      const res = await t.request('GET', `/v1/${plural}`, { key });
      assert.is(res.status, 200, res.text);
      return (res.body[plural] as { id: string }[]).map((e) => e.id);
    };
    assert.equal(await ids(null), [...STANDARD_IDS[plural]]);
    assert.equal(await ids(t.key), [...STANDARD_IDS[plural], mine[kind]]);
    assert.equal(await ids(other), [...STANDARD_IDS[plural], theirs[kind]]);
  }
  const faces = await t.request('GET', '/v1/faces');
  const own = faces.body.faces.at(-1);
  assert.equal(Object.keys(own).sort(), ['description', 'filename', 'id']);
});

Assets('an invalid key on a public list is a 401', async ({ t }) => {
  for (const plural of Object.keys(STANDARD_IDS)) {
    assertError(await t.request('GET', `/v1/${plural}`, { key: 'avs_not_a_real_key' }), 401, 'invalid_api_key');
    assertError(await t.request('GET', `/v1/${plural}`, { key: 'garbage' }), 401, 'invalid_api_key');
  }
});

// ── Face uploads ────────────────────────────────────────────────────────────

Assets('POST /v1/faces with a multipart form stores the image and returns 201 with the asset view', async ({ t }) => {
  const png = await portraitPng();
  const res = await uploadForm(t, '/v1/faces', form(png, 'image/png', 'me.png', { name: 'Me', description: 'My face' }));
  assert.is(res.status, 201, res.text);
  assert.equal(Object.keys(res.body).sort(), ASSET_FIELDS('face_id'));
  assert.match(res.body.id, UUID_RE);
  assert.is(res.body.face_id, res.body.id);
  assert.is(res.body.object, 'face');
  assert.is(res.body.name, 'Me');
  assert.is(res.body.description, 'My face');
  assert.is(res.body.filename, 'me.png');
  assert.is(res.body.content_type, 'image/png');
  assert.is(res.body.bytes, png.length);
  assert.is(res.body.sha256, sha256(png));
  assert.is(res.body.metadata.width, 384);
  assert.is(res.body.metadata.height, 384);
  assert.match(res.body.created_at, TIMESTAMP_RE);

  const file = await storedFile(t, res.body.id);
  assert.ok(file.startsWith(t.dataDir + path.sep));
  assert.ok(fs.readFileSync(file).equals(png), 'the stored file holds the uploaded bytes');

  const got = await t.request('GET', `/v1/faces/${res.body.id}`);
  assert.is(got.status, 200, got.text);
  assert.equal(got.body, res.body);
});

Assets("GET /v1/faces/{id}/content: a standard face's picture for anyone; an upload's only with its owner's key", async ({ t }) => {
  const standard = await fetch(`${t.url}/v1/faces/default/content`);
  assert.is(standard.status, 200);
  assert.is(standard.headers.get('content-type'), 'image/jpeg');
  assert.ok(Buffer.from(await standard.arrayBuffer()).equals(DEFAULT_FACE_JPG), 'the catalog file, as it is');
  const voice = await fetch(`${t.url}/v1/voices/default/content`);
  assert.is(voice.status, 200);
  assert.is(voice.headers.get('content-type'), 'audio/wav');

  const png = await portraitPng();
  const up = await uploadForm(t, '/v1/faces', form(png, 'image/png', 'me.png', {}));
  assert.is(up.status, 201, up.text);
  const own = await fetch(`${t.url}/v1/faces/${up.body.id}/content`, { headers: { Authorization: `Bearer ${t.key}` } });
  assert.is(own.status, 200);
  assert.is(own.headers.get('content-type'), 'image/png');
  assert.ok(Buffer.from(await own.arrayBuffer()).equals(png));
  const anonymous = await fetch(`${t.url}/v1/faces/${up.body.id}/content`);
  assert.is(anonymous.status, 404, 'no key: only standard faces');
  const other = await fetch(`${t.url}/v1/faces/${up.body.id}/content`, { headers: { Authorization: `Bearer ${await t.keyFor('someone-else')}` } });
  assert.is(other.status, 404, "another user's upload is not found");
  assertError(await t.request('GET', '/v1/faces/nope/content', { key: null }), 404, 'face_not_found');
});

Assets('POST /faces (older form) with a multipart form returns 201 with the asset view', async ({ t }) => {
  const res = await uploadForm(t, '/faces', form(DEFAULT_FACE_JPG, 'image/jpeg', 'astronaut.jpg'));
  assert.is(res.status, 201, res.text);
  assert.match(res.body.face_id, UUID_RE);
  assert.is(res.body.object, 'face');
  assert.is(res.body.content_type, 'image/jpeg');
  assert.is(res.body.filename, 'astronaut.jpg');
  assert.is(res.body.name, 'astronaut', 'the name defaults to the file name without extension');
  assert.is(res.body.metadata.width, 512);
  assert.is(res.body.metadata.height, 512);
  assert.is(res.body.sha256, sha256(DEFAULT_FACE_JPG));
});

Assets('POST /faces and POST /v1/faces accept the raw image as the body with ?name=', async ({ t }) => {
  const png = await portraitPng(480, 400);
  const res = await t.request('POST', '/faces?name=Raw%20face&description=sent%20raw', {
    body: new Uint8Array(png),
    headers: { 'content-type': 'image/png' },
  });
  assert.is(res.status, 201, res.text);
  assert.match(res.body.id, UUID_RE);
  assert.is(res.body.face_id, res.body.id);
  assert.is(res.body.object, 'face');
  assert.is(res.body.name, 'Raw face');
  assert.is(res.body.description, 'sent raw');
  assert.is(res.body.metadata.width, 480);
  assert.is(res.body.metadata.height, 400);
  assert.is(res.body.bytes, png.length);
  assert.is(res.body.sha256, sha256(png));

  const jpeg = await uploadRaw(t, '/v1/faces?name=jpeg', DEFAULT_FACE_JPG, 'image/jpeg');
  assert.is(jpeg.status, 201, jpeg.text);
  assert.is(jpeg.body.name, 'jpeg');
  assert.is(jpeg.body.content_type, 'image/jpeg');
  assert.is(jpeg.body.metadata.width, 512);
  assert.is(jpeg.body.bytes, DEFAULT_FACE_JPG.length);
});

Assets('an uploaded face id works as face in POST /v1/sessions and as face_id in POST /sessions', async ({ t }) => {
  const upload = await uploadRaw(t, '/v1/faces', await portraitPng(), 'image/png');
  const id = upload.body.id as string;

  const current = await t.request('POST', '/v1/sessions', { json: { face: id } });
  assert.is(current.status, 200, current.text);
  assert.is((await t.server.services.store.getSession(current.body.id))?.face, id);

  const legacy = await t.request('POST', '/sessions', { json: { model: 'gpt-5.2', face_id: id } });
  assert.is(legacy.status, 200, legacy.text);
  assert.is(legacy.body.face_id, id);
});

Assets("another user cannot use, read or delete someone's face", async ({ t }) => {
  const upload = await uploadRaw(t, '/v1/faces', await portraitPng(), 'image/png');
  const id = upload.body.id as string;
  const other = await t.keyFor('mallory');

  assertError(await t.request('POST', '/v1/sessions', { key: other, json: { face: id } }), 400, 'unknown_face', 'face');
  assertError(
    await t.request('POST', '/sessions', { key: other, json: { model: 'gpt-5.2', face_id: id } }),
    400,
    'unknown_face',
    'face_id',
  );
  assertError(await t.request('GET', `/v1/faces/${id}`, { key: other }), 404, 'face_not_found');
  assertError(await t.request('DELETE', `/v1/faces/${id}`, { key: other }), 404, 'face_not_found');
  assert.is((await t.server.services.pool.usage()).used, 0, 'rejected sessions hold no worker');

  const mine = await t.request('GET', `/v1/faces/${id}`);
  assert.is(mine.status, 200, 'the owner still has it');
  assert.ok(fs.existsSync(await storedFile(t, id)));
});

Assets('an asset id of one kind is not found under another kind', async ({ t }) => {
  const upload = await uploadRaw(t, '/v1/faces', await portraitPng(), 'image/png');
  assertError(await t.request('GET', `/v1/voices/${upload.body.id}`), 404, 'voice_not_found');
  assertError(await t.request('POST', '/v1/sessions', { json: { voice: upload.body.id } }), 400, 'unknown_voice', 'voice');
});

// ── Face rejections ─────────────────────────────────────────────────────────

Assets('a text file declared text/plain is a 415 unsupported_media_type', async ({ t }) => {
  const text = Buffer.from('hello, this is not a face\n'.repeat(20));
  assertError(await uploadForm(t, '/v1/faces', form(text, 'text/plain', 'notes.txt')), 415, 'unsupported_media_type', 'file');
  assertError(await uploadRaw(t, '/v1/faces', text, 'text/plain'), 415, 'unsupported_media_type', 'file');
  // Even a real image is refused when declared as text: the declared type is checked first.
  assertError(await uploadRaw(t, '/faces', await portraitPng(), 'text/plain'), 415, 'unsupported_media_type', 'file');
  await assertNothingStored(t);
});

Assets('bytes that are not an image sent as application/octet-stream are a 415', async ({ t }) => {
  const bytes = Buffer.concat([Buffer.from('GIF89a'), randomBytes(4000)]);
  assertError(await uploadRaw(t, '/v1/faces', bytes, 'application/octet-stream'), 415, 'unsupported_media_type', 'file');
  assertError(
    await uploadForm(t, '/faces', form(bytes, 'application/octet-stream', 'blob.bin')),
    415,
    'unsupported_media_type',
    'file',
  );
  await assertNothingStored(t);
});

Assets('a PNG header followed by garbage, or a truncated PNG, is a 400 invalid_file', async ({ t }) => {
  const garbage = Buffer.concat([PNG_SIGNATURE, Buffer.alloc(2000, 0x5a)]);
  assertError(await uploadRaw(t, '/v1/faces', garbage, 'image/png'), 400, 'invalid_file', 'file');

  const png = await portraitPng();
  const truncated = png.subarray(0, Math.floor(png.length / 2));
  assertError(await uploadRaw(t, '/v1/faces', truncated, 'image/png'), 400, 'invalid_file', 'file');

  const jpegHalf = DEFAULT_FACE_JPG.subarray(0, Math.floor(DEFAULT_FACE_JPG.length / 2));
  assertError(await uploadForm(t, '/faces', form(jpegHalf, 'image/jpeg', 'half.jpg')), 400, 'invalid_file', 'file');
  await assertNothingStored(t);
});

Assets('a JPEG whose image data is corrupt is a 400 invalid_file', async ({ t }) => {
  // Valid headers and the first part of the scan, then noise: libjpeg decodes this with warnings
  // ("Corrupt JPEG data") into a garbled picture, which is not a usable face.
  const noise = Buffer.alloc(2000);
  for (let i = 0, x = 12345; i < noise.length; i++) noise[i] = (x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 24;
  const corrupt = Buffer.concat([DEFAULT_FACE_JPG.subarray(0, 20000), noise]);
  assertError(await uploadForm(t, '/faces', form(corrupt, 'image/jpeg', 'broken.jpg')), 400, 'invalid_file', 'file');
  await assertNothingStored(t);
});

Assets('a 16x16 image is a 400 invalid_image_size', async ({ t }) => {
  const res = await uploadRaw(t, '/v1/faces', await plainPng(16, 16), 'image/png');
  assertError(res, 400, 'invalid_image_size', 'file');
  assert.match(res.body.error.message, /16x16/);
  assertError(await uploadRaw(t, '/v1/faces', await plainPng(300, 20), 'image/png'), 400, 'invalid_image_size', 'file');
  const tiny = await uploadRaw(t, '/v1/faces', await portraitPng(64), 'image/png');
  assert.is(tiny.status, 422, `64x64 passes the size check but holds no usable face: ${tiny.text}`);
  const ok = await uploadRaw(t, '/v1/faces', await portraitPng(384), 'image/png');
  assert.is(ok.status, 201, ok.text);
});

Assets('a photo without a usable face is a 422 naming the file, and nothing is stored', async ({ t }) => {
  const res = await uploadRaw(t, '/v1/faces', await plainPng(256, 256), 'image/png');
  assertError(res, 422, 'no_face_detected', 'file');
  assert.match(res.body.error.message, /face/i);
  await assertNothingStored(t);
});

Assets('an uploaded face carries what registration found: box, pose, 478 landmarks and the head-and-shoulders frame', async ({ t }) => {
  const res = await uploadRaw(t, '/v1/faces', PORTRAIT_JPG, 'image/jpeg');
  assert.is(res.status, 201, res.text);
  const m = res.body.metadata;
  assert.is(m.landmarks, 478);
  assert.is(m.face_box.length, 4);
  assert.type(m.face_pose.yawDeg, 'number');
  // The frame: square, inside the photo, around the face, the face about 40 % of its width.
  const f = m.face_frame;
  assert.ok(Math.abs(f.width - f.height) < 0.02, `square frame ${JSON.stringify(f)}`);
  assert.ok(f.x >= 0 && f.y >= 0 && f.x + f.width <= m.width + 0.01 && f.y + f.height <= m.height + 0.01, `inside the ${m.width}x${m.height} photo`);
  assert.ok(f.x <= m.face_box[0] && f.x + f.width >= m.face_box[0] + m.face_box[2], 'the face is inside the frame');
  assert.ok(m.face_box[2] / f.width >= 0.35, `the face fills ${(100 * m.face_box[2] / f.width).toFixed(0)} % of the frame width`);
  const got = await t.request('GET', `/v1/faces/${res.body.id}`);
  assert.equal(got.body.metadata.face_frame, f, 'GET shows the frame');
});

Assets('GET /v1/{kind}/{standard id} needs no key and describes the standard asset as an upload is: a face with its frame', async ({ t }) => {
  const face = await t.request('GET', '/v1/faces/default', { key: null });
  assert.is(face.status, 200, face.text);
  assert.is(face.body.id, 'default');
  assert.is(face.body.face_id, 'default');
  assert.is(face.body.object, 'face');
  assert.is(face.body.standard, true);
  assert.is(face.body.created_at, null);
  assert.is(face.body.content_type, 'image/jpeg');
  assert.is(face.body.bytes, DEFAULT_FACE_JPG.length);
  assert.is(face.body.sha256, sha256(DEFAULT_FACE_JPG));
  const m = face.body.metadata;
  assert.is(m.landmarks, 478);
  const f = m.face_frame;
  assert.ok(f.x >= 0 && f.y >= 0 && f.x + f.width <= m.width + 0.01 && f.y + f.height <= m.height + 0.01, `inside the ${m.width}x${m.height} photo: ${JSON.stringify(f)}`);
  assert.ok(f.x <= m.face_box[0] && f.x + f.width >= m.face_box[0] + m.face_box[2], 'the face is inside the frame');
  const share = m.face_box[2] / f.width;
  assert.ok(share > 0.35 && share < 0.45, `the face fills ${(100 * share).toFixed(0)} % of the frame width`);
  // With a key, the same; a second read is the same description.
  assert.equal((await t.request('GET', '/v1/faces/default')).body, face.body);

  const voice = await t.request('GET', '/v1/voices/default', { key: null });
  assert.is(voice.status, 200, voice.text);
  assert.is(voice.body.voice_id, 'default');
  assert.ok(voice.body.metadata.duration_seconds > 0.5, JSON.stringify(voice.body.metadata));
  const driving = await t.request('GET', '/v1/driving/idle', { key: null });
  assert.is(driving.status, 200, driving.text);
  assert.is(driving.body.driving_id, 'idle');
  assert.ok(driving.body.metadata.n_frames > 0, JSON.stringify(driving.body.metadata));

  // Anything else is still an upload's id: a key is needed, and an unknown id is a 404.
  assertError(await t.request('GET', '/v1/faces/nope', { key: null }), 401, 'missing_api_key');
  assertError(await t.request('GET', '/v1/faces/nope'), 404, 'face_not_found');
  assertError(await t.request('GET', '/v1/voices/default2', { key: null }), 401, 'missing_api_key');
});

Assets('an empty file is a 400 empty_file', async ({ t }) => {
  assertError(await uploadRaw(t, '/v1/faces', Buffer.alloc(0), 'image/png'), 400, 'empty_file', 'file');
  assertError(await uploadForm(t, '/v1/faces', form(Buffer.alloc(0), 'image/png', 'empty.png')), 400, 'empty_file', 'file');
  await assertNothingStored(t);
});

Assets('a multipart form without a file part is a 400 missing_file', async ({ t }) => {
  const res = await uploadForm(t, '/v1/faces', form(null, '', '', { name: 'no file', description: 'forgot it' }));
  assertError(res, 400, 'missing_file', 'file');
  await assertNothingStored(t);
});

Assets('uploads need an API key', async ({ t }) => {
  assertError(await t.request('POST', '/v1/faces', { key: null, body: new Uint8Array(await portraitPng()), headers: { 'content-type': 'image/png' } }), 401, 'missing_api_key');
  await assertNothingStored(t);
});

// ── Voice uploads ───────────────────────────────────────────────────────────

Assets('POST /v1/voices with a WAV returns 201 with its format, sample rate and duration', async ({ t }) => {
  const wav = toneWav(2);
  const res = await uploadForm(t, '/v1/voices', form(wav, 'audio/wav', 'tone.wav', { name: 'Tone' }));
  assert.is(res.status, 201, res.text);
  assert.equal(Object.keys(res.body).sort(), ASSET_FIELDS('voice_id'));
  assert.match(res.body.id, UUID_RE);
  assert.is(res.body.voice_id, res.body.id);
  assert.is(res.body.object, 'voice');
  assert.is(res.body.name, 'Tone');
  assert.is(res.body.content_type, 'audio/wav');
  assert.is(res.body.bytes, wav.length);
  assert.is(res.body.sha256, sha256(wav));
  assert.is(res.body.metadata.format, 'wav');
  assert.is(res.body.metadata.sample_rate, 16000);
  assert.ok(Math.abs(res.body.metadata.duration_seconds - 2) < 0.01, `duration ${res.body.metadata.duration_seconds}`);
  assert.ok(fs.readFileSync(await storedFile(t, res.body.id)).equals(wav));
});

Assets('POST /voices (older form) with an MP3 returns 201 with format mp3', async ({ t }) => {
  const mp3 = await toneMp3(2);
  const res = await uploadRaw(t, '/voices?name=mp3%20tone', mp3, 'audio/mpeg');
  assert.is(res.status, 201, res.text);
  assert.is(res.body.object, 'voice');
  assert.is(res.body.voice_id, res.body.id);
  assert.is(res.body.content_type, 'audio/mpeg');
  assert.is(res.body.name, 'mp3 tone');
  assert.is(res.body.metadata.format, 'mp3');
  assert.is(res.body.metadata.sample_rate, 16000);
  assert.ok(Math.abs(res.body.metadata.duration_seconds - 2) < 0.2, `duration ${res.body.metadata.duration_seconds}`);

  const multipart = await uploadForm(t, '/voices', form(mp3, 'audio/mpeg', 'tone.mp3'));
  assert.is(multipart.status, 201, multipart.text);
  assert.is(multipart.body.metadata.format, 'mp3');
});

Assets('a silent WAV is a 400 silent_audio', async ({ t }) => {
  const silent = encodeWav16(new Float32Array(16000 * 2), 16000);
  assertError(await uploadRaw(t, '/v1/voices', silent, 'audio/wav'), 400, 'silent_audio', 'file');
  await assertNothingStored(t);
});

Assets('a 0.3 s WAV is a 400 invalid_audio_duration', async ({ t }) => {
  const res = await uploadRaw(t, '/v1/voices', toneWav(0.3), 'audio/wav');
  assertError(res, 400, 'invalid_audio_duration', 'file');
  assert.match(res.body.error.message, /0\.3/);
  await assertNothingStored(t);
});

Assets('a WAV with a broken fmt chunk is a 400 invalid_file', async ({ t }) => {
  const shortFmt = toneWav();
  shortFmt.writeUInt32LE(8, 16); // fmt chunk claims 8 bytes, less than the 16 every WAV needs
  assertError(await uploadRaw(t, '/v1/voices', shortFmt, 'audio/wav'), 400, 'invalid_file', 'file');

  const badAlign = toneWav();
  badAlign.writeUInt16LE(7, 32); // block align that does not match 16-bit mono
  assertError(await uploadRaw(t, '/v1/voices', badAlign, 'audio/wav'), 400, 'invalid_file', 'file');

  const badFormat = toneWav();
  badFormat.writeUInt16LE(0x55, 20); // format code of MP3-in-WAV
  assertError(await uploadForm(t, '/voices', form(badFormat, 'audio/wav', 'odd.wav')), 400, 'invalid_file', 'file');
  await assertNothingStored(t);
});

Assets('an image sent to /voices is a 415', async ({ t }) => {
  const png = await portraitPng();
  assertError(await uploadRaw(t, '/voices', png, 'image/png'), 415, 'unsupported_media_type', 'file');
  assertError(await uploadRaw(t, '/v1/voices', png, 'application/octet-stream'), 415, 'unsupported_media_type', 'file');
  await assertNothingStored(t);
});

Assets('an uploaded voice id works as voice in a session', async ({ t }) => {
  const upload = await uploadRaw(t, '/v1/voices', toneWav(), 'audio/wav');
  const id = upload.body.id as string;
  const current = await t.request('POST', '/v1/sessions', { json: { voice: id } });
  assert.is(current.status, 200, current.text);
  assert.is(current.body.voice, id);
  const legacy = await t.request('POST', '/sessions', { json: { model: 'gpt-5.2', voice: id } });
  assert.is(legacy.status, 200, legacy.text);
  assert.is(legacy.body.voice, id);
  const other = await t.keyFor('mallory');
  assertError(await t.request('POST', '/v1/sessions', { key: other, json: { voice: id } }), 400, 'unknown_voice', 'voice');
});

// ── Driving uploads ─────────────────────────────────────────────────────────

Assets('POST /v1/driving and POST /driving with a motion template return 201 with frames and fps', async ({ t }) => {
  const pkl = motionPkl();
  const res = await uploadForm(t, '/v1/driving', form(pkl, 'application/octet-stream', 'idle.pkl', { name: 'Idle copy' }));
  assert.is(res.status, 201, res.text);
  assert.equal(Object.keys(res.body).sort(), ASSET_FIELDS('driving_id'));
  assert.match(res.body.id, UUID_RE);
  assert.is(res.body.driving_id, res.body.id);
  assert.is(res.body.object, 'driving');
  assert.is(res.body.name, 'Idle copy');
  assert.is(res.body.content_type, 'application/x-pickle');
  assert.is(res.body.bytes, pkl.length);
  assert.is(res.body.sha256, sha256(pkl));
  assert.is(res.body.metadata.n_frames, 200);
  assert.is(res.body.metadata.output_fps, 25);
  assert.is(res.body.metadata.duration_seconds, 8);

  const legacy = await uploadRaw(t, '/driving', pkl, 'application/x-pickle');
  assert.is(legacy.status, 201, legacy.text);
  assert.is(legacy.body.object, 'driving');
  assert.is(legacy.body.metadata.n_frames, 200);
  assert.is.not(legacy.body.id, res.body.id);
});

Assets('a valid pickle that is not a motion template is a 400 invalid_file saying what is missing', async ({ t }) => {
  const res = await uploadRaw(t, '/v1/driving', DICT_PICKLE, 'application/octet-stream');
  assertError(res, 400, 'invalid_file', 'file');
  assert.match(res.body.error.message, /n_frames/);
  await assertNothingStored(t);
});

Assets('a pickle that references os.system is a 400 invalid_file', async ({ t }) => {
  const res = await uploadRaw(t, '/v1/driving', OS_SYSTEM_PICKLE, 'application/x-pickle');
  assertError(res, 400, 'invalid_file', 'file');
  assert.match(res.body.error.message, /os\.system/);
  await assertNothingStored(t);
});

Assets('random bytes sent as a driving motion are a 415', async ({ t }) => {
  const bytes = randomBytes(4096);
  bytes[0] = 0x00; // not a pickle opcode a motion file can start with
  assertError(await uploadRaw(t, '/v1/driving', bytes, 'application/octet-stream'), 415, 'unsupported_media_type', 'file');
  assertError(await uploadForm(t, '/driving', form(bytes, 'application/octet-stream', 'x.pkl')), 415, 'unsupported_media_type', 'file');
  await assertNothingStored(t);
});

Assets('an uploaded driving id works as driving in a session', async ({ t }) => {
  const upload = await uploadRaw(t, '/v1/driving', motionPkl(), 'application/octet-stream');
  const id = upload.body.id as string;
  const res = await t.request('POST', '/v1/sessions', { json: { driving: id } });
  assert.is(res.status, 200, res.text);
  assert.is((await t.server.services.store.getSession(res.body.id))?.driving, id);
  const other = await t.keyFor('mallory');
  assertError(await t.request('POST', '/v1/sessions', { key: other, json: { driving: id } }), 400, 'unknown_driving', 'driving');
});

// ── Delete ──────────────────────────────────────────────────────────────────

Assets('DELETE /v1/faces/{id} removes the record and the file, and the id stops working', async ({ t }) => {
  const upload = await uploadRaw(t, '/v1/faces', await portraitPng(), 'image/png');
  const id = upload.body.id as string;
  const file = await storedFile(t, id);
  assert.ok(fs.existsSync(file));

  const res = await t.request('DELETE', `/v1/faces/${id}`);
  assert.is(res.status, 200, res.text);
  assert.equal(res.body, { id, object: 'face', deleted: true });

  assertError(await t.request('GET', `/v1/faces/${id}`), 404, 'face_not_found');
  assert.not.ok(fs.existsSync(file), 'the file under the data directory is gone');
  assert.equal(uploadedFiles(t), []);
  assertError(await t.request('POST', '/v1/sessions', { json: { face: id } }), 400, 'unknown_face', 'face');
  const list = await t.request('GET', '/v1/faces');
  assert.equal(list.body.faces.map((e: { id: string }) => e.id), [...STANDARD_IDS.faces]);
  assertError(await t.request('DELETE', `/v1/faces/${id}`), 404, 'face_not_found');
});

Assets('DELETE works for voices and driving motions too', async ({ t }) => {
  const ids = await uploadOneOfEach(t);
  for (const [plural, kind] of [['voices', 'voice'], ['driving', 'driving']] as const) {
    const file = await storedFile(t, ids[kind]);
    const res = await t.request('DELETE', `/v1/${plural}/${ids[kind]}`);
    assert.is(res.status, 200, res.text);
    assert.equal(res.body, { id: ids[kind], object: kind, deleted: true });
    assert.not.ok(fs.existsSync(file));
    assertError(await t.request('GET', `/v1/${plural}/${ids[kind]}`), 404, `${kind}_not_found`);
  }
});

Assets('deleting a standard asset is a 400 standard_asset_immutable', async ({ t }) => {
  assertError(await t.request('DELETE', '/v1/faces/default'), 400, 'standard_asset_immutable', 'id');
  assertError(await t.request('DELETE', '/v1/voices/alice'), 400, 'standard_asset_immutable', 'id');
  assertError(await t.request('DELETE', '/v1/driving/idle'), 400, 'standard_asset_immutable', 'id');
  const list = await t.request('GET', '/v1/faces', { key: null });
  assert.equal(list.body.faces.map((e: { id: string }) => e.id), [...STANDARD_IDS.faces]);
  const session = await t.request('POST', '/v1/sessions', { json: { face: 'default' } });
  assert.is(session.status, 200, session.text);
});

Assets("deleting another user's asset is a 404 and leaves it in place", async ({ t }) => {
  const ids = await uploadOneOfEach(t);
  const other = await t.keyFor('mallory');
  assertError(await t.request('DELETE', `/v1/faces/${ids.face}`, { key: other }), 404, 'face_not_found');
  assertError(await t.request('DELETE', `/v1/voices/${ids.voice}`, { key: other }), 404, 'voice_not_found');
  assertError(await t.request('DELETE', `/v1/driving/${ids.driving}`, { key: other }), 404, 'driving_not_found');
  for (const kind of ['face', 'voice', 'driving'] as const) assert.ok(fs.existsSync(await storedFile(t, ids[kind])));
  assert.is((await t.request('GET', `/v1/faces/${ids.face}`)).status, 200);
});

// ── Restart ─────────────────────────────────────────────────────────────────

Assets('uploaded assets survive a restart', async ({ t }) => {
  const ids = await uploadOneOfEach(t);
  const before = await t.request('GET', `/v1/faces/${ids.face}`);
  await t.restart();
  const after = await t.request('GET', `/v1/faces/${ids.face}`);
  assert.is(after.status, 200, after.text);
  assert.equal(after.body, before.body);
  assert.is((await t.request('GET', `/v1/voices/${ids.voice}`)).status, 200);
  assert.is((await t.request('GET', `/v1/driving/${ids.driving}`)).status, 200);
  const list = await t.request('GET', '/v1/faces');
  assert.equal(list.body.faces.map((e: { id: string }) => e.id), [...STANDARD_IDS.faces, ids.face]);
  const session = await t.request('POST', '/v1/sessions', { json: { face: ids.face, voice: ids.voice, driving: ids.driving } });
  assert.is(session.status, 200, session.text);
  assert.ok(fs.existsSync(await storedFile(t, ids.face)));
});

Assets.run();

// ── Size limit ──────────────────────────────────────────────────────────────

const LIMIT = 65536;
const Limits = suite<{ t: TestServer }>('asset upload size limit', {} as { t: TestServer });

Limits.before.each(async (ctx) => {
  ctx.t = await startTestServer({ env: { MAX_UPLOAD_BYTES: String(LIMIT) } });
});
Limits.after.each(async (ctx) => {
  await ctx.t.close();
});

/** A valid PNG larger than `bytes` (noise does not compress). */
async function noisyPng(minBytes: number): Promise<Buffer> {
  const side = Math.ceil(Math.sqrt(minBytes / 3)) + 8;
  const png = await sharp(randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } }).png().toBuffer();
  assert.ok(png.length > minBytes);
  return png;
}

async function assertStillServing(t: TestServer): Promise<void> {
  const list = await t.request('GET', '/v1/faces');
  assert.is(list.status, 200, list.text);
  const small = await uploadRaw(t, '/v1/faces', await portraitJpeg(352, 80), 'image/jpeg');
  assert.is(small.status, 201, `a small upload after a 413 still works: ${small.text}`);
}

Limits('a multipart upload over MAX_UPLOAD_BYTES is a 413 request_too_large, and the server goes on', async ({ t }) => {
  const justOver = await noisyPng(LIMIT + 1000);
  assertError(await uploadForm(t, '/v1/faces', form(justOver, 'image/png', 'big.png')), 413, 'request_too_large');
  await assertStillServing(t);
  const farOver = await noisyPng(LIMIT * 4);
  assertError(await uploadForm(t, '/faces', form(farOver, 'image/png', 'huge.png')), 413, 'request_too_large');
  await assertStillServing(t);
  assert.equal(await t.server.services.store.listAssets('default', 'face').then((a) => a.length), 2, 'only the small uploads stored');
});

Limits('a raw upload just over MAX_UPLOAD_BYTES is a 413 request_too_large, and the server goes on', async ({ t }) => {
  const justOver = await noisyPng(LIMIT + 1000);
  assert.ok(justOver.length < LIMIT * 2, 'under the early Content-Length cut-off: the limit applies while streaming');
  assertError(await uploadRaw(t, '/v1/faces', justOver, 'image/png'), 413, 'request_too_large');
  await assertStillServing(t);
});

Limits('a raw upload far over MAX_UPLOAD_BYTES is a 413 request_too_large, and the server goes on', async ({ t }) => {
  const farOver = await noisyPng(LIMIT * 4);
  assertError(await uploadRaw(t, '/faces', farOver, 'image/png'), 413, 'request_too_large');
  await assertStillServing(t);
});

Limits('an upload within MAX_UPLOAD_BYTES is accepted', async ({ t }) => {
  const jpeg = await portraitJpeg(352, 95);
  assert.ok(jpeg.length <= LIMIT && jpeg.length > LIMIT / 2, `fixture size ${jpeg.length}`);
  const res = await uploadRaw(t, '/v1/faces', jpeg, 'image/jpeg');
  assert.is(res.status, 201, res.text);
  assert.is(res.body.bytes, jpeg.length);
});

Limits.run();
