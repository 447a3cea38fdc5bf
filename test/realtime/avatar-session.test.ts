/**
 * Avatar-only sessions end to end (docs/avatar-mode.md) over real WebSockets on loopback, with the
 * real store and media plane: the client streams an agent's speech at its own rate, the server
 * plays it with the face and sends back the played audio and the frames (JPEG events, or raw I420
 * binary messages) on one clock; segments start and finish once; a clear cuts the speech at the
 * next frame; ephemeral keys open them; a client that leaves mid-segment ends the session and is
 * billed what it heard. Timings here are behaviour bounds loose enough for a loaded machine; the
 * latency figures are `npm run bench -- avatar`'s.
 */
import sharp from 'sharp';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { RealtimeTestClient, type ServerEvent } from '../../harness/clients/realtime-client.js';
import { speak, toPcm16 } from '../../harness/measures/speech.js';

let t: RealtimeTestServer;

test.before(async () => {
  t = await startRealtimeTestServer();
});

test.after(async () => {
  await t?.close();
});

const AGENT_RATE = 16_000;
const CHUNK_MS = 20;

async function connectAvatar(query = 'intent=avatar', key = t.key): Promise<RealtimeTestClient> {
  const c = await RealtimeTestClient.connect(t.url, { key, query });
  await c.waitFor('session.created');
  return c;
}

/** Appends `pcm` (at `rate`) in CHUNK_MS pieces at once, as a TTS faster than real time does. */
function appendSpeech(c: RealtimeTestClient, pcm: Int16Array, rate = AGENT_RATE): void {
  const step = (rate * CHUNK_MS) / 1000;
  for (let i = 0; i < pcm.length; i += step) {
    const part = pcm.subarray(i, Math.min(pcm.length, i + step));
    c.send({ type: 'output_audio_buffer.append', audio: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64') });
  }
}

const durationMs = (pcm: Int16Array, rate = AGENT_RATE) => (pcm.length / rate) * 1000;
const isSilent = (delta: ServerEvent) => Buffer.from(delta.delta as string, 'base64').every((b) => b === 0);

async function usageOf(sessionId: string): Promise<{ audio_seconds_out: number; frames_out: number }> {
  let session: any = null;
  for (let i = 0; i < 100 && session?.status !== 'ended'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    session = (await t.request('GET', `/v1/sessions/${sessionId}`)).body;
  }
  assert.is(session.status, 'ended', JSON.stringify(session));
  const usage = await t.request('GET', '/v1/usage');
  return usage.body.data.find((u: { session_id: string }) => u.session_id === sessionId);
}

test('speech streamed at 16 kHz plays out with the face: continuous audio and frames on one clock, the segment started and stopped once', async () => {
  const c = await connectAvatar();
  const session = c.events[0]!.session;
  assert.is(session.type, 'avatar');
  // The face idles before any speech: frames and silent audio from the start.
  await c.waitFor('response.output_image.delta');
  c.send({ type: 'session.update', session: { audio: { input: { format: { type: 'audio/pcm', rate: AGENT_RATE } } } } });
  await c.waitFor('session.updated');
  const pcm = toPcm16(speak('Hello, I am the face of your agent.', AGENT_RATE));
  appendSpeech(c, pcm);
  c.send({ type: 'output_audio_buffer.commit' });
  const committed = await c.waitFor('output_audio_buffer.committed');
  assert.ok(Math.abs(committed.audio_ms - durationMs(pcm)) <= 1, `${committed.audio_ms} vs ${durationMs(pcm)}`);
  const stopped = await c.waitFor('output_audio_buffer.stopped', { timeoutMs: 30_000 });
  const started = c.ofType('output_audio_buffer.started');
  assert.equal(started.map((e) => e.segment_id), [committed.segment_id]);
  assert.is(stopped.segment_id, committed.segment_id);
  assert.is(stopped.interrupted, false);
  assert.ok(Math.abs(stopped.played_ms - durationMs(pcm)) <= 2, `${stopped.played_ms} vs ${durationMs(pcm)}`);

  const deltas = c.ofType('response.output_audio.delta');
  const pts = deltas.map((d) => d.pts_ms as number);
  for (let i = 1; i < pts.length; i++) assert.is(pts[i]! - pts[i - 1]!, 40, 'one 40 ms delta per frame, no gap');
  const spoken = deltas.filter((d) => d.segment_id === committed.segment_id);
  assert.ok(spoken.length * 40 >= durationMs(pcm) - 40, `${spoken.length} deltas of the segment`);
  assert.ok(spoken.some((d) => !isSilent(d)), 'the played audio is the speech');
  assert.is(spoken[0]!.pts_ms, started[0]!.pts_ms);
  const frames = c.ofType('response.output_image.delta');
  assert.ok(frames.some((f) => f.segment_id === committed.segment_id));
  assert.ok(frames.every((f, i) => i === 0 || f.pts_ms > frames[i - 1]!.pts_ms));
  const meta = await sharp(Buffer.from(frames.at(-1)!.delta as string, 'base64')).metadata();
  assert.is(`${meta.width}x${meta.height}`, '512x512');
  await c.close();
});

test('a clear mid-segment stops the audio at the next frame and reports the played position once; the next segment plays', async () => {
  const c = await connectAvatar();
  const pcm = toPcm16(speak('This is a long sentence that the user will interrupt before it is over, surely.', AGENT_RATE));
  appendSpeech(c, pcm);
  c.send({ type: 'output_audio_buffer.commit' });
  const started = await c.waitFor('output_audio_buffer.started');
  await c.waitFor((e) => e.type === 'response.output_audio.delta' && e.pts_ms >= started.pts_ms + 600);
  const seenPts = c.ofType('response.output_audio.delta').at(-1)!.pts_ms as number;
  c.send({ type: 'output_audio_buffer.clear' });
  const cleared = await c.waitFor('output_audio_buffer.cleared');
  const stopped = c.ofType('output_audio_buffer.stopped');
  assert.is(stopped.length, 1);
  assert.is(stopped[0]!.interrupted, true);
  assert.is(stopped[0]!.played_ms, cleared.played_ms);
  assert.ok(stopped[0]!.played_ms >= 600 && stopped[0]!.played_ms < durationMs(pcm), `${stopped[0]!.played_ms}`);
  const cutPts = started.pts_ms + stopped[0]!.played_ms;
  // The cut is the frame after the playout position the server had when the clear arrived: on an
  // idle machine within 40 ms of what the client had seen (bench: avatar); bounded loosely here.
  assert.ok(cutPts - seenPts <= 1000, `cut ${cutPts - seenPts} ms after the last delta the client had seen`);
  await c.waitFor((e) => e.type === 'response.output_audio.delta' && e.pts_ms >= cutPts + 200);
  const after = c.ofType('response.output_audio.delta').filter((d) => d.pts_ms >= cutPts);
  assert.ok(after.length >= 5);
  assert.ok(after.every(isSilent), 'silent from the cut on');
  assert.ok(after.every((d) => d.segment_id === null));

  const second = toPcm16(speak('Sure.', AGENT_RATE));
  appendSpeech(c, second);
  c.send({ type: 'output_audio_buffer.commit' });
  const next = await c.waitFor((e) => e.type === 'output_audio_buffer.stopped' && e.segment_id !== stopped[0]!.segment_id);
  assert.is(next.interrupted, false);
  assert.is(c.ofType('output_audio_buffer.stopped').length, 2);
  await c.close();
});

test('raw frames (video_format=i420) arrive as binary messages of the documented layout, in step with the audio', async () => {
  const c = await connectAvatar('intent=avatar&video_format=i420');
  assert.equal(c.events[0]!.session.video, { format: 'i420', width: 512, height: 512, fps: 25 });
  await c.waitFor((e) => e.type === 'response.output_audio.delta' && c.binary.length >= 5);
  assert.is(c.ofType('response.output_image.delta').length, 0);
  const frames = c.binary.map(({ data }) => ({
    magic: data.subarray(0, 4).toString('ascii'),
    index: data.readUInt32LE(4),
    width: data.readUInt16LE(8),
    height: data.readUInt16LE(10),
    ptsNs: Number(data.readBigUInt64LE(16)),
    bytes: data.length - 24,
  }));
  for (const [i, f] of frames.entries()) {
    assert.is(f.magic, 'I420');
    assert.is(`${f.width}x${f.height}`, '512x512');
    assert.is(f.bytes, (512 * 512 * 3) / 2);
    if (i > 0) {
      assert.is(f.index, frames[i - 1]!.index + 1);
      assert.is(f.ptsNs - frames[i - 1]!.ptsNs, 40_000_000);
    }
  }
  const audioPts = new Set(c.ofType('response.output_audio.delta').map((d) => d.pts_ms));
  assert.ok(frames.some((f) => audioPts.has(f.ptsNs / 1e6)), 'frames and audio share the clock');
  await c.close();
});

test('an ephemeral key minted for an avatar session opens one; bad avatar configs are refused before a session exists', async () => {
  const minted = await t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'avatar', face: 'default', output_modalities: ['audio'] } } });
  assert.is(minted.status, 200, minted.text);
  assert.is(minted.body.session.type, 'avatar');
  assert.equal(minted.body.session.video, { format: 'jpeg', width: 512, height: 512, fps: 25 }, 'the frames a session of this key gets');
  const c = await connectAvatar('', minted.body.value);
  assert.is(c.events[0]!.session.type, 'avatar');
  assert.equal(c.events[0]!.session.output_modalities, ['audio']);
  await c.close();

  const bad = await t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'avatar', instructions: 'Be kind.' } } });
  assert.is(bad.status, 400);
  assert.is(bad.body.error.param, 'session.instructions');
  const realtimeKey = await t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'realtime' } } });
  const refused = await RealtimeTestClient.connect(t.url, { key: realtimeKey.body.value, query: 'intent=avatar' });
  assert.is((await refused.waitFor('error')).error.param, 'intent');
  assert.is(await refused.waitClose(), 4009);
  const badFormat = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'intent=avatar&video_format=png' });
  assert.is((await badFormat.waitFor('error')).error.param, 'session.video.format');
  await badFormat.waitClose();
});

test("a REST session's output_size, face and driving carry into an avatar-only session opened on it (?intent=avatar&session_id=); its slot is counted like any session's", async () => {
  const made = await t.request('POST', '/v1/sessions', { json: { model: 'gpt-realtime', output_size: '1280x720', face: 'default', driving: 'default' } });
  assert.is(made.status, 200, made.text);
  const c = await connectAvatar(`intent=avatar&session_id=${made.body.id}`);
  const session = c.events[0]!.session;
  assert.is(session.type, 'avatar');
  assert.is(session.id, made.body.id);
  assert.equal(session.video, { format: 'jpeg', width: 1280, height: 720, fps: 25 });
  const frame = await c.waitFor('response.output_image.delta');
  const meta = await sharp(Buffer.from(frame.delta as string, 'base64')).metadata();
  assert.is(`${meta.width}x${meta.height}`, '1280x720');
  assert.ok((await t.server.services.pool.usage()).used >= 1, 'the session holds a worker slot');
  c.send({ type: 'session.update', event_id: 'f', session: { face: 'no-such-face' } });
  assert.is((await c.waitFor((e) => e.type === 'error' && e.error.event_id === 'f')).error.param, 'session.face');
  await c.close();
  await t.request('DELETE', `/v1/sessions/${made.body.id}`);
});

test('a client that disconnects mid-segment ends its session; usage holds the speech it heard and the frames it got', async () => {
  const c = await connectAvatar();
  const id = c.events[0]!.session.id as string;
  const pcm = toPcm16(speak('A sentence that will never be heard to its end, because the client leaves.', AGENT_RATE));
  appendSpeech(c, pcm);
  const started = await c.waitFor('output_audio_buffer.started');
  await c.waitFor((e) => e.type === 'response.output_audio.delta' && e.pts_ms >= started.pts_ms + 400);
  const framesSeen = c.ofType('response.output_image.delta').length;
  await c.close();
  const usage = await usageOf(id);
  assert.ok(usage.audio_seconds_out >= 0.4 && usage.audio_seconds_out < durationMs(pcm) / 1000, JSON.stringify(usage));
  assert.ok(usage.frames_out >= framesSeen, JSON.stringify(usage));
});

test.run();
