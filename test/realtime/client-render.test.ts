/**
 * A face the client draws (issue 42; media option video_render: client), over WebSocket: the
 * face once after session.created (output_motion.face with its mesh, the texture in
 * output_motion.face.delta parts, output_motion.face.done; again when the face changes), then
 * every frame in output_motion.delta events of two frames (idle and speaking, numbered and timed
 * on the audio's clock, the mouth moving with the reply's audio), no frames drawn or sent even
 * when images are asked for, under 30 kb/s; a bad value is refused naming the field.
 * An avatar-only session gets it too. The call form (the answer takes no video) is in
 * calls.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import sharp from 'sharp';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { motionFrames, RealtimeTestClient, type MotionEvent, type MotionFrame } from '../../harness/clients/realtime-client.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { MOTION_PARAMS } from '../../src/realtime/server-events.js';

const ClientRender = suite<{ t: RealtimeTestServer }>('a face drawn by the client: the motion stream over WebSocket', {} as { t: RealtimeTestServer });
ClientRender.before(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});
ClientRender.after(async (ctx) => {
  await ctx.t.close();
});

const MOUTH_OPEN = MOTION_PARAMS.indexOf('mouth_open');
const schema = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../docs/realtime-events.schema.json'), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true });
ajv.addSchema(schema);
const motionSchema = ajv.getSchema(`${schema.$id}#/$defs/output_motion.delta`)!;
const faceSchema = ajv.getSchema(`${schema.$id}#/$defs/output_motion.face`)!;

const floats = (b64: string): Float32Array => {
  const b = Buffer.from(b64, 'base64');
  return new Float32Array(b.buffer, b.byteOffset, b.length / 4);
};

/** The face events of one face (from its output_motion.face to its done) checked and decoded as a client would. */
async function decodedFace(events: Array<Record<string, any>>, from: number): Promise<{ face: Record<string, any>; end: number; texels: Buffer }> {
  const face = events[from]!;
  assert.is(face.type, 'output_motion.face');
  assert.ok(faceSchema(face), `as the event schema describes it: ${ajv.errorsText(faceSchema.errors)}`);
  let end = from + 1;
  const parts: string[] = [];
  for (; events[end]?.type !== 'output_motion.face.done'; end++) {
    const e = events[end]!;
    if (e.type !== 'output_motion.face.delta') continue; // motion frames may come between the parts
    assert.is(e.face_id, face.face_id);
    assert.ok(e.delta.length <= 48 * 1024, 'parts fit a data channel message');
    parts.push(e.delta);
  }
  assert.is(events[end]!.face_id, face.face_id);
  const file = Buffer.from(parts.join(''), 'base64');
  assert.is(file.length, face.texture.bytes);
  const { data, info } = await sharp(file).raw().toBuffer({ resolveWithObject: true });
  assert.equal([info.width, info.height, info.channels], [face.texture.width, face.texture.height, 3]);
  const n = face.mesh.vertex_count;
  assert.is(floats(face.mesh.rest).length, 2 * n);
  assert.is(floats(face.mesh.bases).length, 2 * n * face.mesh.base_order.length);
  assert.is(floats(face.mesh.depth).length, n);
  const tris = Buffer.from(face.mesh.triangles, 'base64');
  const ids = new Uint32Array(tris.buffer, tris.byteOffset, tris.length / 4);
  assert.ok(ids.length > 300 && ids.length % 3 === 0 && ids.every((v) => v < n), 'triangles over the vertices');
  for (const o of [...face.eyes, face.mouth.opening]) assert.ok(o.upper.length === o.lower.length && o.upper.every((v: number) => v < n));
  return { face, end, texels: data };
}

ClientRender('video_render=client: every frame as output_motion.delta, idle and speaking; the mouth moves with the reply; no frames', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime&video_render=client' });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio', 'image'] } });
  // The face first: right after session.created, before any frame.
  const done0 = await c.waitFor('output_motion.face.done');
  const first = c.events.findIndex((e) => e.type.startsWith('output_motion'));
  assert.is(c.events[first - 1]?.type, 'session.created');
  const { face } = await decodedFace(c.events, first);
  assert.is(done0.face_id, face.face_id);
  assert.equal([face.asset_id, face.width, face.height], ['default', 512, 512]);
  // Idle: the face moves (sways, blinks) before anything is said.
  await c.waitFor(() => c.types().filter((t) => t === 'output_motion.delta').length >= 6);
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there' }] } });
  c.send({ type: 'response.create' });
  const done = await c.waitFor('response.done', { timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
  const types = c.types();
  assert.not.ok(types.includes('response.output_image.delta'), 'no frames are drawn for a client-drawn face');
  const events = c.events.filter((e) => e.type === 'output_motion.delta') as unknown as MotionEvent[];
  const motion = motionFrames(events);
  // Numbered and timed per frame (25 fps), none missing; two frames an event.
  for (let i = 1; i < motion.length; i++) {
    assert.is(motion[i]!.frame_index, motion[i - 1]!.frame_index + 1);
    assert.is(motion[i]!.pts_ms - motion[i - 1]!.pts_ms, 40);
  }
  assert.ok(events.filter((e) => e.params.length === 2 * MOTION_PARAMS.length).length >= events.length - 1, 'two frames an event');
  assert.ok(motion.every((m) => m.params.length === MOTION_PARAMS.length && m.params.every(Number.isInteger)), 'fourteen parameters in thousandths a frame');
  const invalid = events.find((m) => !motionSchema(m));
  assert.is(invalid, undefined, `as the event schema describes it: ${ajv.errorsText(motionSchema.errors)}`);
  // At rest the mouth is closed (the lips lead the sound a little: the last frames before it may open); while the reply plays it opens.
  const firstAudio = types.indexOf('response.output_audio.delta');
  const at = (m: MotionFrame): number => c.events.indexOf(m.event as never);
  const before = motion.filter((m) => at(m) < firstAudio).slice(0, -5);
  const during = motion.filter((m) => at(m) > firstAudio && at(m) < types.indexOf('response.output_audio.done'));
  assert.ok(before.length > 3 && before.every((m) => m.params[MOUTH_OPEN]! < 50), `closed at rest: ${before.map((m) => m.params[MOUTH_OPEN]).join(',')}`);
  assert.ok(during.filter((m) => m.params[MOUTH_OPEN]! > 200).length > 3, `open while speaking: ${during.map((m) => m.params[MOUTH_OPEN]).join(',')}`);
  // The reply's audio carries its pts, on the frames' clock: gapless, and its first sound during a frame the stream sent.
  const audio = c.events.filter((e) => e.type === 'response.output_audio.delta');
  assert.ok(audio.length > 5 && audio.every((a) => Number.isInteger(a.pts_ms)), 'audio deltas stamped');
  for (let i = 1; i < audio.length; i++) {
    const ms = (Buffer.from(audio[i - 1]!.delta, 'base64').length / 2 / 24);
    assert.ok(Math.abs(audio[i]!.pts_ms - (audio[i - 1]!.pts_ms + ms)) <= 1, `gapless at ${i}`);
  }
  const start = audio[0]!.pts_ms;
  assert.ok(motion.some((m) => m.pts_ms <= start && start < m.pts_ms + 40), `the first sound (${start} ms) is inside a frame's tick`);
  // A motion stream, not video: under 30 kb/s at 25 fps is under 150 bytes a frame.
  const bytes = events.reduce((n, m) => n + JSON.stringify(m).length, 0) / motion.length;
  console.log(`  the motion stream: ${bytes.toFixed(0)} bytes a frame, ${((bytes * 8 * 25) / 1000).toFixed(1)} kb/s at 25 fps`);
  assert.ok(bytes < 150, `${bytes.toFixed(0)} bytes a frame`);
  await c.close();
});

ClientRender('a new face mid-session: its face events before the frames that show it, the texture the new photo', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime&video_render=client' });
  await c.waitFor('output_motion.face.done');
  const first = await decodedFace(c.events, c.events.findIndex((e) => e.type === 'output_motion.face'));
  c.send({ type: 'session.update', event_id: 'u1', session: { face: 'face1' } });
  await c.waitFor((e) => e.type === 'output_motion.face.done' && e.face_id !== first.face.face_id, { timeoutMs: 30_000 });
  const second = await decodedFace(c.events, c.events.findIndex((e) => e.type === 'output_motion.face' && e.face_id !== first.face.face_id));
  assert.is(second.face.asset_id, 'face1');
  assert.ok(!second.texels.equals(first.texels), 'another photo');
  // The frames go on, numbered without a gap, across the change.
  await c.waitFor((e) => e.type === 'output_motion.delta' && c.events.indexOf(e) > second.end);
  const frames = motionFrames(c.events.filter((e) => e.type === 'output_motion.delta') as unknown as MotionEvent[]);
  assert.ok(frames.every((m, i) => i === 0 || m.frame_index === frames[i - 1]!.frame_index + 1));
  assert.not.ok(c.events.some((e) => e.type === 'error'), JSON.stringify(c.events.find((e) => e.type === 'error')));
  await c.close();
});

ClientRender("an avatar-only session (an agent's own voice) gets the motion stream too, and no frames", async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'intent=avatar&video_render=client' });
  await c.waitFor('session.created');
  const m = await c.waitFor((e) => e.type === 'output_motion.delta' && e.frame_index >= 5);
  assert.is(m.params.length, 2 * MOTION_PARAMS.length);
  await decodedFace(c.events, c.events.findIndex((e) => e.type === 'output_motion.face'));
  assert.not.ok(c.types().includes('response.output_image.delta') || c.types().includes('output_image.delta'));
  await c.close();
});

ClientRender("an ephemeral key minted with video_render: client opens a client-drawn session; a bad value is refused at minting", async (ctx) => {
  const minted = await ctx.t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'realtime', video_render: 'client' } } });
  assert.is(minted.status, 200, minted.text);
  const { value } = minted.body as { value: string };
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: value, query: 'model=gpt-realtime' });
  await c.waitFor('output_motion.face.done');
  await c.waitFor('output_motion.delta');
  await c.close();
  const bad = await ctx.t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'realtime', video_render: 'browser' } } });
  assert.is(bad.status, 400);
  assert.is(bad.body.error.param, 'session.video_render');
});

ClientRender('a bad video_render is refused naming the field', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime&video_render=browser' });
  const error = await c.waitFor('error');
  assert.is(error.error.param, 'video_render');
  assert.is(await c.waitClose(), 4009);
});

ClientRender('a session without the option gets frames as today, and no motion events', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio', 'image'] } });
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  c.send({ type: 'response.create' });
  await c.waitFor('response.done', { timeoutMs: 60_000 });
  assert.ok(c.types().includes('response.output_image.delta'));
  assert.not.ok(c.types().some((t) => t.startsWith('output_motion')));
  assert.not.ok(c.events.some((e) => e.type === 'response.output_audio.delta' && 'pts_ms' in e), "OpenAI's audio deltas, unstamped");
  await c.close();
});

ClientRender.run();
