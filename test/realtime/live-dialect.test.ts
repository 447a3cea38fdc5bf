/**
 * The GPT-Live dialect's observer rules, on the translation alone (live-dialect.ts): a WebRTC
 * primary's microphone reflected in 100 ms chunks before muting while the model hears silence,
 * a G.711 session's audio reflected as PCM16 24 kHz, reflected output ranges as long as their
 * audio and never overlapping, the primary's output audio only on a WebSocket primary, and the
 * commands an observer may not send. The sockets around it are in live-sessions.test.ts.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { encodeUlaw } from '../../src/audio/g711.js';
import { LiveDialect, REFLECT_CHUNK_SAMPLES } from '../../src/realtime/live-dialect.js';

function started(transport: 'websocket' | 'webrtc', format?: Record<string, unknown>): LiveDialect {
  const dialect = new LiveDialect({ id: 'sess_x', expiresAt: 0, transport });
  dialect.clientEvent(JSON.stringify({ type: 'session.start', session: { model: 'gpt-live-1', ...(format ? { audio: { format } } : {}) } }));
  dialect.serverEvent({ type: 'session.updated', session: {} } as never);
  assert.ok(dialect.isStarted);
  return dialect;
}

const tone = (n: number) => Int16Array.from({ length: n }, (_, i) => Math.round(8000 * Math.sin(i / 5)));

test('a WebRTC microphone: reflected in 100 ms chunks, muted or not; the model hears silence while muted; nothing gathered unobserved', () => {
  const dialect = started('webrtc');
  const frame = tone(480); // 20 ms
  const reflected: Int16Array[] = [];
  dialect.clientEvent(JSON.stringify({ type: 'session.input_audio.mute' }));
  for (let i = 0; i < 10; i++) {
    const { engine, reflect } = dialect.microphoneAudio(frame, true);
    assert.ok(engine.every((s) => s === 0), 'silence to the model while muted');
    if (reflect) {
      assert.equal([reflect.to, reflect.bare, reflect.event.type], ['observers', true, 'session.input_audio.append']);
      const b = Buffer.from(reflect.event.audio as string, 'base64');
      reflected.push(new Int16Array(b.buffer, b.byteOffset, b.length / 2));
    }
  }
  assert.equal(reflected.map((r) => r.length), [REFLECT_CHUNK_SAMPLES, REFLECT_CHUNK_SAMPLES]);
  assert.equal(Array.from(reflected[0]!.subarray(0, 480)), Array.from(frame), 'the audio as the microphone gave it');
  dialect.clientEvent(JSON.stringify({ type: 'session.input_audio.unmute' }));
  assert.is(dialect.microphoneAudio(frame, false).engine, frame, 'unmuted, the model hears the microphone');
  assert.is(dialect.microphoneAudio(frame, false).reflect, null);
});

test('a G.711 WebSocket session: its appends and output reflected as PCM16 24 kHz, the model gets its own format (silence while muted)', () => {
  const dialect = started('websocket', { type: 'audio/pcmu' });
  const ulaw = Buffer.from(encodeUlaw(tone(800))); // 100 ms at 8 kHz
  const { engine, send } = dialect.clientEvent(JSON.stringify({ type: 'session.input_audio.append', audio: ulaw.toString('base64') }));
  assert.is(engine[0]!.audio, ulaw.toString('base64'));
  const reflected = send.find((o) => o.to === 'observers')!;
  assert.ok(Math.abs(Buffer.from(reflected.event.audio as string, 'base64').length / 2 - 2400) < 40, 'three samples per byte, 24 kHz');
  dialect.clientEvent(JSON.stringify({ type: 'session.input_audio.mute' }));
  const muted = dialect.clientEvent(JSON.stringify({ type: 'session.input_audio.append', audio: ulaw.toString('base64') }));
  assert.ok(Buffer.from(muted.engine[0]!.audio as string, 'base64').every((b) => b === 0xff), 'µ-law silence, as long as the append');
  const out = dialect.serverEvent({ type: 'response.output_audio.delta', delta: ulaw.toString('base64') } as never);
  assert.equal(out.map((o) => o.to), ['primary', 'observers']);
  assert.is(out[0]!.event.delta, ulaw.toString('base64'), 'the primary hears its own format');
  assert.ok(Buffer.from(out[1]!.event.delta as string, 'base64').length > 4000, 'observers hear PCM16 24 kHz');
});

test('reflected output audio: ranges as long as the audio, in order; a WebRTC primary hears it on its track only', () => {
  const dialect = started('webrtc');
  const chunk = Buffer.from(tone(2400).buffer).toString('base64'); // 100 ms
  const ranges: [number, number][] = [];
  for (let i = 0; i < 5; i++) {
    const out = dialect.serverEvent({ type: 'response.output_audio.delta', delta: chunk } as never);
    assert.equal(out.map((o) => o.to), ['observers']);
    ranges.push([out[0]!.event.start_ms as number, out[0]!.event.end_ms as number]);
  }
  for (const [i, [a, b]] of ranges.entries()) {
    assert.is(b - a, 100);
    if (i > 0) assert.ok(a >= ranges[i - 1]![1]);
  }
});

test('an observer may not start the session, append audio or send SIP commands; a primary may not send SIP commands either', () => {
  const dialect = started('websocket');
  const codeOf = (event: Record<string, unknown>, from: 'primary' | 'observer') => dialect.clientEvent(JSON.stringify({ ...event, event_id: 'e' }), from).send.map((o) => o.event.type === 'error' && (o.event.error as { code: string }).code);
  assert.equal(codeOf({ type: 'session.start', session: { model: 'm' } }, 'observer'), ['session_already_started']);
  assert.equal(codeOf({ type: 'session.input_audio.append', audio: 'AAAA' }, 'observer'), ['unsupported_event']);
  assert.equal(codeOf({ type: 'transport.dtmf.send', event: '1' }, 'observer'), ['unsupported_event']);
  assert.equal(codeOf({ type: 'transport.dtmf.send', event: '1' }, 'primary'), ['unsupported_event']);
  assert.equal(codeOf({ type: 'session.thinking.append', content: 'x' }, 'observer'), [false]);
});

test.run();
