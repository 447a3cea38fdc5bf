/**
 * The avatar-only engine (src/realtime/avatar-engine.ts) on an avatar whose clock the test
 * advances (TickingAvatar: 40 ms a tick): segments start, play out and finish once; a clear cuts
 * them where the playout was; bad input is refused by name and the session goes on; usage holds
 * exactly what played.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Logger } from '../../src/core/log.js';
import { AvatarSessionEngine, MAX_QUEUED_AHEAD_NS, RAW_FRAME_HEADER_BYTES } from '../../src/realtime/avatar-engine.js';
import { SEGMENT_IDLE_END_NS } from '../../src/realtime/avatar-segments.js';
import type { Json } from '../../src/realtime/protocol.js';
import { TickingAvatar, type SeenEvent } from '../helpers/engine-harness.js';

const RATE = 24_000;
const TICK_MS = 40;

interface Rig {
  engine: AvatarSessionEngine;
  avatar: TickingAvatar;
  events: SeenEvent[];
  binary: Buffer[];
  usage: Array<{ audioSecondsOut?: number; framesOut?: number }>;
  backlog: { bytes: number };
  send(event: Json): void;
  /** Lets queued client events run. */
  settle(): Promise<void>;
  of(type: string): SeenEvent[];
}

async function rig(initial: Json = { type: 'avatar' }, transport: 'websocket' | 'webrtc' = 'websocket'): Promise<Rig> {
  const events: SeenEvent[] = [];
  const binary: Buffer[] = [];
  const usage: Rig['usage'] = [];
  const backlog = { bytes: 0 };
  const avatar = new TickingAvatar();
  const engine = new AvatarSessionEngine(
    { sessionId: 'sess_a', userId: 'u1', transport, expiresAt: 0, initial, frames: { width: 512, height: 512, fps: 25 } },
    {
      send: (event) => events.push(event as SeenEvent),
      sendBinary: (data) => binary.push(data),
      backlogBytes: () => backlog.bytes,
      avatar,
      assets: { require: async () => undefined },
      recorder: { addUsage: async (delta) => void usage.push(delta) },
      log: new Logger('silent'),
    },
  );
  await engine.start();
  return {
    engine,
    avatar,
    events,
    binary,
    usage,
    backlog,
    send: (event) => engine.receive(JSON.stringify(event)),
    settle: () => engine.idle(),
    of: (type) => events.filter((e) => e.type === type),
  };
}

/** `ms` of a 200 Hz tone at `rate`, as base64 PCM16. */
function tone(ms: number, rate = RATE): string {
  const pcm = new Int16Array(Math.round((rate * ms) / 1000));
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * 200 * i) / rate));
  return Buffer.from(pcm.buffer).toString('base64');
}

function ticks(r: Rig, n: number): void {
  for (let i = 0; i < n; i++) r.avatar.tick();
}

const totalUsage = (r: Rig) => ({
  audio: r.usage.reduce((s, u) => s + (u.audioSecondsOut ?? 0), 0),
  frames: r.usage.reduce((s, u) => s + (u.framesOut ?? 0), 0),
});

const Engine = suite('avatar-only engine');

Engine('session.created describes an avatar session; session.update changes what it may and refuses model fields by name', async () => {
  const r = await rig();
  const created = r.of('session.created')[0]!;
  const session = created.session as Json;
  assert.is(session.type, 'avatar');
  assert.equal(session.output_modalities, ['audio', 'image']);
  assert.equal(session.video, { format: 'jpeg', width: 512, height: 512, fps: 25 });
  assert.equal((session.audio as Json).input, { format: { type: 'audio/pcm', rate: 24000 } });

  r.send({ type: 'session.update', event_id: 'e1', session: { face: 'f2', audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } } });
  r.send({ type: 'session.update', event_id: 'e2', session: { instructions: 'be nice' } });
  r.send({ type: 'session.update', event_id: 'e3', session: { type: 'realtime' } });
  r.send({ type: 'session.update', event_id: 'e4', session: { video: { format: 'i420' } } });
  r.send({ type: 'session.update', event_id: 'e5', session: { audio: { input: { format: { type: 'audio/pcm', rate: 96000 } } } } });
  await r.settle();
  const updated = r.of('session.updated');
  assert.is(updated.length, 1);
  assert.is((updated[0]!.session as Json).face, 'f2');
  assert.equal(((updated[0]!.session as Json).audio as Json).input, { format: { type: 'audio/pcm', rate: 16000 } });
  const errors = r.of('error').map((e) => e.error as Json);
  assert.equal(errors.map((e) => [e.event_id, e.code, e.param]), [
    ['e2', 'unsupported_in_avatar_session', 'session.instructions'],
    ['e3', 'invalid_value', 'session.type'],
    ['e4', 'invalid_value', 'session.video.format'],
    ['e5', 'invalid_value', 'session.audio.input.format.rate'],
  ]);
});

Engine('a segment starts with its first sample, plays out after its commit and finishes once, with the played audio as deltas', async () => {
  const r = await rig();
  ticks(r, 2); // idle: silent deltas without a segment
  r.send({ type: 'output_audio_buffer.append', audio: tone(200) });
  r.send({ type: 'output_audio_buffer.append', audio: tone(200) });
  r.send({ type: 'output_audio_buffer.commit', event_id: 'c1' });
  await r.settle();
  const committed = r.of('output_audio_buffer.committed');
  assert.is(committed.length, 1);
  assert.is(committed[0]!.audio_ms, 400);
  const id = committed[0]!.segment_id as string;
  assert.match(id, /^seg_/);
  ticks(r, 15);
  const started = r.of('output_audio_buffer.started');
  const stopped = r.of('output_audio_buffer.stopped');
  assert.equal(started.map((e) => e.segment_id), [id]);
  assert.equal(stopped.map((e) => [e.segment_id, e.played_ms, e.interrupted]), [[id, 400, false]]);
  const deltas = r.of('response.output_audio.delta');
  assert.is(deltas.length, 17, 'one audio delta per tick, silence included');
  assert.equal(deltas.map((d) => d.segment_id).filter((s) => s === id).length, 10, '400 ms = 10 ticks of the segment');
  assert.is(deltas[0]!.segment_id, null);
  // The order a client relies on: started before the segment's first delta, stopped after its last.
  const order = r.events.map((e) => (e.type === 'response.output_audio.delta' ? (e.segment_id ? 'D' : 'd') : e.type === 'output_audio_buffer.started' ? 'S' : e.type === 'output_audio_buffer.stopped' ? 'E' : ''));
  assert.match(order.join(''), /^d+SD{10}Ed+$/);
  // Frames go out as image events with pts and the segment they show.
  const frames = r.of('response.output_image.delta');
  assert.is(frames.length, 17);
  assert.equal(frames.slice(0, 3).map((f) => f.frame_index), [0, 1, 2]);
  assert.is(frames[2]!.pts_ms, 2 * TICK_MS);
  await r.engine.close();
  const usage = totalUsage(r);
  assert.ok(Math.abs(usage.audio - 0.4) < 1e-9, `usage holds the 400 ms played, counted tick by tick (${usage.audio})`);
  assert.is(usage.frames, 17);
});

Engine('a clear cuts the segment in play where the playout is: stopped (interrupted, played so far) once, then cleared; the next tick is silent', async () => {
  const r = await rig();
  r.send({ type: 'output_audio_buffer.append', audio: tone(1000) });
  r.send({ type: 'output_audio_buffer.commit' });
  r.send({ type: 'output_audio_buffer.append', audio: tone(500) }); // a second segment, queued behind
  await r.settle();
  ticks(r, 5); // 200 ms played
  r.send({ type: 'output_audio_buffer.clear', event_id: 'x' });
  await r.settle();
  const stopped = r.of('output_audio_buffer.stopped');
  assert.equal(stopped.map((e) => [e.played_ms, e.interrupted]), [[200, true], [0, true]]);
  assert.equal(r.of('output_audio_buffer.cleared').map((e) => e.played_ms), [200]);
  assert.is(r.of('output_audio_buffer.started').length, 1, 'the queued segment never started');
  const before = r.of('response.output_audio.delta').length;
  ticks(r, 3);
  const after = r.of('response.output_audio.delta').slice(before);
  for (const d of after) {
    assert.is(d.segment_id, null);
    assert.ok(Buffer.from(d.delta as string, 'base64').every((b) => b === 0), 'silent after the clear');
  }
  ticks(r, 30);
  assert.is(r.of('output_audio_buffer.stopped').length, 2, 'no second finish');
  await r.engine.close();
  assert.ok(Math.abs(totalUsage(r).audio - 0.2) < 1e-9, 'usage holds the 200 ms heard, nothing queued');
});

Engine("a client may name the segment an append opens (segment_id); the name of one still unfinished is refused", async () => {
  const r = await rig();
  r.send({ type: 'output_audio_buffer.append', audio: tone(80), segment_id: 'tts-1' });
  r.send({ type: 'output_audio_buffer.append', audio: tone(80), segment_id: 'ignored: joins tts-1' });
  r.send({ type: 'output_audio_buffer.commit' });
  r.send({ type: 'output_audio_buffer.append', event_id: 'dup', audio: tone(80), segment_id: 'tts-1' });
  r.send({ type: 'output_audio_buffer.append', event_id: 'long', audio: tone(80), segment_id: 'x'.repeat(129) });
  r.send({ type: 'output_audio_buffer.append', audio: tone(40) });
  r.send({ type: 'output_audio_buffer.commit' });
  await r.settle();
  ticks(r, 10);
  assert.equal(r.of('error').map((e) => [(e.error as Json).event_id, (e.error as Json).code]), [['dup', 'duplicate_segment_id'], ['long', 'invalid_value']]);
  const stopped = r.of('output_audio_buffer.stopped');
  assert.is(stopped[0]!.segment_id, 'tts-1');
  assert.is(stopped[0]!.played_ms, 160);
  assert.match(stopped[1]!.segment_id as string, /^seg_/);
  // Once finished, the name may be used again.
  r.send({ type: 'output_audio_buffer.append', audio: tone(40), segment_id: 'tts-1' });
  await r.settle();
  assert.is(r.of('error').length, 2);
});

Engine('bad input is refused by name and the session goes on', async () => {
  const r = await rig();
  r.send({ type: 'output_audio_buffer.commit', event_id: 'empty' });
  r.send({ type: 'output_audio_buffer.clear', event_id: 'nothing' });
  r.send({ type: 'output_audio_buffer.append', event_id: 'odd', audio: Buffer.from([1, 2, 3]).toString('base64') });
  r.send({ type: 'output_audio_buffer.append', event_id: 'b64', audio: '!!!' });
  r.send({ type: 'output_audio_buffer.append', event_id: 'noaudio' });
  r.send({ type: 'response.create', event_id: 'model' });
  r.send({ type: 'input_audio_buffer.append', event_id: 'mic', audio: tone(20) });
  r.send({ type: 'avatar.listen', event_id: 'listen', listening: 'yes' });
  r.send({ type: 'what.ever', event_id: 'unknown' });
  r.send({ type: 'avatar.listen', listening: true });
  await r.settle();
  const errors = r.of('error').map((e) => e.error as Json);
  // Unreadable events are refused on arrival (as in realtime sessions); the rest in order.
  assert.equal(errors.map((e) => [e.event_id, e.code]), [
    ['unknown', 'invalid_event'],
    ['empty', 'output_audio_buffer_commit_empty'],
    ['odd', 'invalid_audio'],
    ['b64', 'invalid_value'],
    ['noaudio', 'invalid_type'],
    ['model', 'unsupported_in_avatar_session'],
    ['mic', 'unsupported_in_avatar_session'],
    ['listen', 'invalid_type'],
  ]);
  assert.equal(r.of('output_audio_buffer.cleared').map((e) => e.played_ms), [0], 'a clear without audio is answered');
  assert.equal(r.avatar.listening, [true]);
  // Still working.
  r.send({ type: 'output_audio_buffer.append', audio: tone(80) });
  r.send({ type: 'output_audio_buffer.commit' });
  await r.settle();
  ticks(r, 4);
  assert.is(r.of('output_audio_buffer.stopped').length, 1);
});

Engine('a flood faster than real time is bounded: appends beyond two minutes ahead are refused (output_audio_buffer_full) and not queued', async () => {
  const r = await rig();
  const tenSeconds = tone(10_000);
  const fits = MAX_QUEUED_AHEAD_NS / 10e9;
  for (let i = 0; i < fits + 3; i++) r.send({ type: 'output_audio_buffer.append', event_id: `a${i}`, audio: tenSeconds });
  await r.settle();
  const refused = r.of('error').map((e) => (e.error as Json).event_id);
  assert.equal(refused, [`a${fits}`, `a${fits + 1}`, `a${fits + 2}`]);
  assert.is(r.avatar.queuedSamples, fits * 10 * RATE);
  // Once some has played, there is room again.
  ticks(r, 250); // 10 s
  r.send({ type: 'output_audio_buffer.append', event_id: 'later', audio: tenSeconds });
  await r.settle();
  assert.is(r.of('error').length, 3);
});

Engine('a segment that is never committed ends by itself once its audio has run out for 10 s; the next append opens a new one', async () => {
  const r = await rig();
  r.send({ type: 'output_audio_buffer.append', audio: tone(120) });
  await r.settle();
  ticks(r, 3);
  assert.is(r.of('output_audio_buffer.stopped').length, 0, 'open: more audio may come');
  ticks(r, Math.ceil(SEGMENT_IDLE_END_NS / 1e6 / TICK_MS));
  assert.equal(r.of('output_audio_buffer.stopped').map((e) => [e.played_ms, e.interrupted]), [[120, false]]);
  r.send({ type: 'output_audio_buffer.append', audio: tone(40) });
  r.send({ type: 'output_audio_buffer.commit' });
  await r.settle();
  const ids = new Set([...r.of('output_audio_buffer.stopped'), ...r.of('output_audio_buffer.committed')].map((e) => e.segment_id));
  assert.is(ids.size, 2);
});

Engine('an append while the client fell behind the playout joins the open segment after a gap; played_ms counts audio, not the gap', async () => {
  const r = await rig();
  r.send({ type: 'output_audio_buffer.append', audio: tone(80) });
  await r.settle();
  ticks(r, 5); // 80 ms played, then 120 ms of silence
  r.send({ type: 'output_audio_buffer.append', audio: tone(80) });
  r.send({ type: 'output_audio_buffer.commit' });
  await r.settle();
  ticks(r, 3);
  assert.equal(r.of('output_audio_buffer.started').length, 1);
  assert.equal(r.of('output_audio_buffer.stopped').map((e) => [e.played_ms, e.interrupted]), [[160, false]]);
});

Engine('G.711 μ-law input is decoded; G.711 output is encoded; closing mid-segment bills what had played', async () => {
  const r = await rig({ type: 'avatar', audio: { input: { format: { type: 'audio/pcmu' } }, output: { format: { type: 'audio/pcmu' } } } });
  const ulaw = Buffer.alloc(8000, 0x80); // 1 s at 8 kHz (a quiet signal)
  r.send({ type: 'output_audio_buffer.append', audio: ulaw.toString('base64') });
  await r.settle();
  assert.ok(Math.abs(r.avatar.queuedSamples - RATE) < 100, `1 s at 24 kHz queued (${r.avatar.queuedSamples})`);
  ticks(r, 10);
  const delta = Buffer.from(r.of('response.output_audio.delta')[0]!.delta as string, 'base64');
  assert.is(delta.length, 320, '40 ms of μ-law at 8 kHz');
  await r.engine.close();
  assert.ok(Math.abs(totalUsage(r).audio - 0.4) < 0.001, `${totalUsage(r).audio}`);
});

Engine('output_modalities and transport decide what goes back: audio only, or nothing but events on a call', async () => {
  const audioOnly = await rig({ type: 'avatar', output_modalities: ['audio'] });
  ticks(audioOnly, 3);
  assert.is(audioOnly.of('response.output_image.delta').length, 0);
  assert.is(audioOnly.of('response.output_audio.delta').length, 3);
  const call = await rig({ type: 'avatar' }, 'webrtc');
  call.send({ type: 'output_audio_buffer.append', audio: tone(40) });
  call.send({ type: 'output_audio_buffer.commit' });
  await call.settle();
  ticks(call, 3);
  assert.is(call.of('response.output_audio.delta').length + call.of('response.output_image.delta').length, 0, 'a call has RTP for that');
  assert.is(call.of('output_audio_buffer.stopped').length, 1);
});

Engine('raw frames go out as binary messages with the documented header; a slow client gets frames skipped, never audio', async () => {
  const r = await rig({ type: 'avatar', video: { format: 'i420' } });
  const i420 = Buffer.alloc(16 * 16 * 1.5, 7);
  r.avatar.emit('raw', { data: i420, ptsNs: 80_000_000, frameIndex: 2, width: 16, height: 16 });
  const [msg] = r.binary;
  assert.ok(msg);
  assert.is(msg.length, RAW_FRAME_HEADER_BYTES + i420.length);
  assert.is(msg.subarray(0, 4).toString('ascii'), 'I420');
  assert.is(msg.readUInt32LE(4), 2);
  assert.is(msg.readUInt16LE(8), 16);
  assert.is(msg.readUInt16LE(10), 16);
  assert.is(msg.readBigUInt64LE(16), 80_000_000n);
  assert.is(r.of('response.output_image.delta').length, 0, 'no JPEG events in i420 mode');
  r.backlog.bytes = 64 * 1024 * 1024;
  r.avatar.emit('raw', { data: i420, ptsNs: 120_000_000, frameIndex: 3, width: 16, height: 16 });
  ticks(r, 1);
  assert.is(r.binary.length, 1, 'skipped while the socket is backed up');
  assert.is(r.of('response.output_audio.delta').length, 1, 'audio still goes');
  await r.engine.close();
  assert.is(totalUsage(r).frames, 1, 'only frames sent are billed');
});

Engine.run();
