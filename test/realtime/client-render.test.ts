/**
 * A face the client draws (issue 42; media option video_render: client), over WebSocket: the
 * face's parameters every frame as output_motion.delta (idle and speaking, numbered and timed on
 * the audio's clock, the mouth moving with the reply's audio), no frames drawn or sent even when
 * images are asked for, small enough for a motion stream; a bad value is refused naming the field.
 * An avatar-only session gets it too. The call form (the answer takes no video) is in
 * calls.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { MOTION_PARAMS } from '../../src/realtime/server-events.js';

const ClientRender = suite<{ t: RealtimeTestServer }>('a face drawn by the client: the motion stream over WebSocket', {} as { t: RealtimeTestServer });
ClientRender.before(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});
ClientRender.after(async (ctx) => {
  await ctx.t.close();
});

type Motion = { frame_index: number; pts_ms: number; params: number[]; listening: boolean; event_id: string };
const MOUTH_OPEN = MOTION_PARAMS.indexOf('mouth_open');
const schema = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../docs/realtime-events.schema.json'), 'utf8')) as { $id: string };
const ajv = new Ajv2020({ strict: true });
ajv.addSchema(schema);
const motionSchema = ajv.getSchema(`${schema.$id}#/$defs/output_motion.delta`)!;

ClientRender('video_render=client: every frame as output_motion.delta, idle and speaking; the mouth moves with the reply; no frames', async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'model=gpt-realtime&video_render=client' });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio', 'image'] } });
  // Idle: the face moves (sways, blinks) before anything is said.
  await c.waitFor((e) => e.type === 'output_motion.delta' && e.frame_index >= 10);
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there' }] } });
  c.send({ type: 'response.create' });
  const done = await c.waitFor('response.done', { timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
  const types = c.types();
  assert.not.ok(types.includes('response.output_image.delta'), 'no frames are drawn for a client-drawn face');
  const motion = c.events.filter((e) => e.type === 'output_motion.delta') as unknown as Motion[];
  // Numbered and timed per frame (25 fps), none missing.
  for (let i = 1; i < motion.length; i++) {
    assert.is(motion[i]!.frame_index, motion[i - 1]!.frame_index + 1);
    assert.is(motion[i]!.pts_ms - motion[i - 1]!.pts_ms, 40);
  }
  assert.ok(motion.every((m) => m.params.length === MOTION_PARAMS.length && m.params.every(Number.isInteger)), 'fourteen parameters in thousandths');
  const invalid = motion.find((m) => !motionSchema(m));
  assert.is(invalid, undefined, `as the event schema describes it: ${ajv.errorsText(motionSchema.errors)}`);
  // At rest the mouth is closed (the lips lead the sound a little: the last frames before it may open); while the reply plays it opens.
  const firstAudio = types.indexOf('response.output_audio.delta');
  const before = motion.filter((m) => c.events.indexOf(m as never) < firstAudio).slice(0, -5);
  const during = motion.filter((m) => c.events.indexOf(m as never) > firstAudio && c.events.indexOf(m as never) < types.indexOf('response.output_audio.done'));
  assert.ok(before.length > 3 && before.every((m) => m.params[MOUTH_OPEN]! < 50), `closed at rest: ${before.map((m) => m.params[MOUTH_OPEN]).join(',')}`);
  assert.ok(during.filter((m) => m.params[MOUTH_OPEN]! > 200).length > 3, `open while speaking: ${during.map((m) => m.params[MOUTH_OPEN]).join(',')}`);
  // A motion stream, not video: its events' bytes a frame.
  const bytes = motion.reduce((n, m) => n + JSON.stringify(m).length, 0) / motion.length;
  assert.ok(bytes < 200, `${bytes.toFixed(0)} bytes a frame`);
  await c.close();
});

ClientRender("an avatar-only session (an agent's own voice) gets the motion stream too, and no frames", async (ctx) => {
  const c = await RealtimeTestClient.connect(ctx.t.url, { key: ctx.t.key, query: 'intent=avatar&video_render=client' });
  await c.waitFor('session.created');
  const m = await c.waitFor((e) => e.type === 'output_motion.delta' && e.frame_index >= 5);
  assert.is(m.params.length, MOTION_PARAMS.length);
  assert.not.ok(c.types().includes('response.output_image.delta') || c.types().includes('output_image.delta'));
  await c.close();
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
  assert.not.ok(c.types().includes('output_motion.delta'));
  await c.close();
});

ClientRender.run();
