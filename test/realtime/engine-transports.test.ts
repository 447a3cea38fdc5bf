/**
 * The engine on each transport (issue 9): on WebRTC the audio goes as RTP, so no
 * output_audio.delta, and output_audio_buffer.started/stopped/cleared mark its playout; the
 * input audio buffer is WebSocket-only; a call's microphone feeds server VAD; a truncate of the
 * item being spoken (how the openai-agents SDK interrupts) stops it and ends the response.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { engineHarness, type Harness, type SeenEvent } from '../helpers/engine-harness.js';

const types = (events: SeenEvent[]) => events.map((e) => e.type);
const userText = { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } };

/** Plays the avatar until response.done; returns the response's events. */
async function playResponse(h: Harness): Promise<SeenEvent[]> {
  const from = h.events.length;
  h.send(userText);
  h.send({ type: 'response.create' });
  await h.waitFor((e) => e.type === 'response.done', { from, tick: true });
  return h.events.slice(from);
}

const WebRtc = suite('engine on a WebRTC call');

WebRtc('a spoken response sends no audio deltas; output_audio_buffer.started and .stopped frame its playout', async () => {
  const h = await engineHarness({ transport: 'webrtc' });
  try {
    const events = await playResponse(h);
    const t = types(events);
    assert.not.ok(t.includes('response.output_audio.delta'), 'audio travels as RTP');
    assert.ok(t.includes('response.output_audio_transcript.delta'));
    const started = t.indexOf('output_audio_buffer.started');
    const stopped = t.indexOf('output_audio_buffer.stopped');
    assert.ok(started > t.indexOf('response.created') && started < t.indexOf('response.output_audio_transcript.delta'), t.join(', '));
    assert.ok(stopped > started && stopped < t.indexOf('response.output_audio.done'), t.join(', '));
    const done = events.at(-1)!;
    assert.is(done.type, 'response.done');
    assert.is((done.response as { status: string }).status, 'completed');
    assert.is(events[started]!.response_id, (done.response as { id: string }).id);
  } finally {
    await h.close();
  }
});

WebRtc('the same response over WebSocket has audio deltas and no output_audio_buffer events', async () => {
  const h = await engineHarness();
  try {
    const t = types(await playResponse(h));
    assert.ok(t.includes('response.output_audio.delta'));
    assert.not.ok(t.some((x) => x.startsWith('output_audio_buffer.')));
  } finally {
    await h.close();
  }
});

WebRtc('input_audio_buffer events are refused on a call, naming the event (spec 4.5 rule 4)', async () => {
  const h = await engineHarness({ transport: 'webrtc' });
  try {
    h.send({ type: 'input_audio_buffer.append', event_id: 'ev_a', audio: Buffer.alloc(4800).toString('base64') });
    h.send({ type: 'input_audio_buffer.commit', event_id: 'ev_c' });
    h.send({ type: 'input_audio_buffer.clear', event_id: 'ev_x' });
    await h.engine.idle();
    const errors = h.events.filter((e) => e.type === 'error').map((e) => e.error as { code: string; event_id: string });
    assert.equal(errors.map((e) => [e.code, e.event_id]), [['unsupported_on_webrtc', 'ev_a'], ['unsupported_on_webrtc', 'ev_c'], ['unsupported_on_webrtc', 'ev_x']]);
  } finally {
    await h.close();
  }
});

WebRtc('output_audio_buffer.clear stops the avatar mid-reply: .cleared, then response.done cancelled', async () => {
  const h = await engineHarness({ transport: 'webrtc' });
  try {
    const from = h.events.length;
    h.send(userText);
    h.send({ type: 'response.create' });
    await h.waitFor((e) => e.type === 'output_audio_buffer.started', { from, tick: true });
    h.send({ type: 'output_audio_buffer.clear' });
    const done = await h.waitFor((e) => e.type === 'response.done', { from });
    assert.is((done.response as { status: string }).status, 'cancelled');
    const t = types(h.events.slice(from));
    assert.ok(t.indexOf('output_audio_buffer.cleared') < t.indexOf('response.done'));
    assert.not.ok(t.includes('output_audio_buffer.stopped'));
    assert.ok(h.avatar.interrupts >= 1, 'the avatar stopped speaking');
  } finally {
    await h.close();
  }
});

WebRtc('output_audio_buffer.clear is a WebSocket error (there, audio is the client’s own buffer)', async () => {
  const h = await engineHarness();
  try {
    h.send({ type: 'output_audio_buffer.clear', event_id: 'ev_1' });
    const err = await h.waitFor((e) => e.type === 'error');
    assert.equal([(err.error as { code: string }).code, (err.error as { event_id: string }).event_id], ['unsupported_on_websocket', 'ev_1']);
  } finally {
    await h.close();
  }
});

WebRtc('the call’s microphone feeds server VAD: speech makes a user turn and a response', async () => {
  const h = await engineHarness({ transport: 'webrtc', transcript: 'Tell me a joke.' });
  try {
    const tone = new Int16Array(480).map((_, i) => Math.round(8000 * Math.sin(i / 3)));
    const silence = new Int16Array(480);
    for (let i = 0; i < 50; i++) h.engine.pushMicrophone(tone); // 1 s of "speech" in 20 ms packets
    for (let i = 0; i < 50; i++) h.engine.pushMicrophone(silence); // then 1 s of silence (> 500 ms window)
    await h.waitFor((e) => e.type === 'input_audio_buffer.speech_stopped');
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    const t = types(h.events);
    for (const step of ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'conversation.item.input_audio_transcription.completed', 'response.created']) {
      assert.ok(t.includes(step), `${step} in ${t.join(', ')}`);
    }
    assert.is((done.response as { status: string }).status, 'completed');
    assert.equal(h.avatar.listening, [true, false], 'the face listened from speech_started to speech_stopped');
  } finally {
    await h.close();
  }
});

WebRtc('with turn detection off, microphone audio is dropped: nothing buffers, nothing is committed', async () => {
  const h = await engineHarness({ transport: 'webrtc', initial: { audio: { input: { turn_detection: null } } } });
  try {
    const tone = new Int16Array(480).map((_, i) => Math.round(8000 * Math.sin(i / 3)));
    for (let i = 0; i < 100; i++) h.engine.pushMicrophone(tone);
    await h.engine.idle();
    assert.equal(types(h.events), ['session.created']);
    assert.is(h.vad.scored.length, 0);
  } finally {
    await h.close();
  }
});

const Truncate = suite('conversation.item.truncate of the item being spoken');

for (const transport of ['webrtc', 'websocket'] as const) {
  Truncate(`${transport}: stops the audio, keeps the transcript heard, ends the response cancelled, then conversation.item.truncated`, async () => {
    const h = await engineHarness({ transport, reply: { reply: 'One two three four five. Six seven eight nine ten. Eleven twelve thirteen.' } });
    try {
      const from = h.events.length;
      h.send(userText);
      h.send({ type: 'response.create' });
      const created = await h.waitFor((e) => e.type === 'response.created', { from });
      const itemId = ((await h.waitFor((e) => e.type === 'response.output_item.added', { from })).item as { id: string }).id;
      // Play about 1.2 s of it, then interrupt at 1 s as the agents SDK does (its own playback position).
      await h.waitFor((e) => e.type === 'response.output_audio_transcript.delta', { from, tick: true });
      for (let i = 0; i < 30; i++) h.avatar.tick();
      h.send({ type: 'conversation.item.truncate', event_id: 'ev_t', item_id: itemId, content_index: 0, audio_end_ms: 1000 });
      const truncated = await h.waitFor((e) => e.type === 'conversation.item.truncated', { from });
      const done = h.events.find((e) => e.type === 'response.done' && (e.response as { id: string }).id === (created.response as { id: string }).id)!;
      assert.ok(done, 'the response ended');
      assert.ok(h.events.indexOf(done) < h.events.indexOf(truncated), 'response.done first');
      assert.is((done.response as { status: string }).status, 'cancelled');
      assert.is(truncated.audio_end_ms, 1000);
      assert.not.ok(h.events.some((e) => e.type === 'error'), 'no error: a running item can be truncated');
      assert.ok(h.avatar.interrupts >= 1 && h.avatar.queuedSamples === 0, 'the avatar stopped speaking');
      const item = (done.response as { output: Array<{ content: Array<{ transcript: string }> }> }).output[0]!;
      const heard = item.content[0]!.transcript;
      assert.ok(heard.length > 0 && 'One two three four five. Six seven eight nine ten. Eleven twelve thirteen.'.startsWith(heard), `heard: '${heard}'`);
      assert.ok(heard.length < 40, `only what was heard by 1 s: '${heard}'`);
      if (transport === 'webrtc') assert.ok(types(h.events).includes('output_audio_buffer.cleared'));
      // The session goes on.
      const next = await playResponse(h);
      assert.is((next.at(-1)!.response as { status: string }).status, 'completed');
    } finally {
      await h.close();
    }
  });
}

Truncate('audio_end_ms beyond what was played is clamped for the running item (a client clock a little ahead)', async () => {
  const h = await engineHarness({ transport: 'webrtc', reply: { reply: 'One two three four five. Six seven eight nine ten.' } });
  try {
    h.send(userText);
    h.send({ type: 'response.create' });
    await h.waitFor((e) => e.type === 'output_audio_buffer.started', { tick: true });
    for (let i = 0; i < 5; i++) h.avatar.tick();
    const itemId = (h.events.find((e) => e.type === 'response.output_item.added')!.item as { id: string }).id;
    h.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: 60_000 });
    const truncated = await h.waitFor((e) => e.type === 'conversation.item.truncated');
    assert.ok((truncated.audio_end_ms as number) < 60_000 && (truncated.audio_end_ms as number) > 0, String(truncated.audio_end_ms));
  } finally {
    await h.close();
  }
});

WebRtc.run();
Truncate.run();
