/**
 * Tests for the server-VAD turn logic (src/realtime/speech-segmenter.ts): with Silero on espeak-ng
 * speech pushed as 24 kHz PCM16 in 20 ms chunks (the realtime input), and with the fake detector
 * for exact, deterministic timings (hysteresis, prefix clamps, run-time config, clear(), ordering
 * under a slow async detector, detector errors).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { VoiceActivityDetector } from '../../src/providers/vad/base.js';
import { FakeVad } from '../../src/providers/vad/fake-vad.js';
import {
  SpeechSegmenter,
  type SegmenterConfig,
  type SpeechPausedEvent,
  type SpeechStartedEvent,
  type SpeechStoppedEvent,
} from '../../src/realtime/speech-segmenter.js';
import { SileroVad } from '../../src/providers/vad/silero.js';
import { toWhisperInput } from '../../src/providers/asr/whisper-cpp.js';
import { concatSamples as concat, silence, speak, speechEdges, toPcm16, tone } from '../../harness/measures/speech.js';

const IN_HZ = 24000;
const SAMPLES_PER_MS = IN_HZ / 1000;
/** The realtime client's usual append size. */
const CHUNK_MS = 20;
/** One Silero / fake frame: 512 samples at 16 kHz. */
const FRAME_MS = 32;

type Event = ({ type: 'started' } & SpeechStartedEvent) | ({ type: 'stopped' } & SpeechStoppedEvent);

function record(seg: SpeechSegmenter): Event[] {
  const events: Event[] = [];
  seg.on('speech_started', (e) => events.push({ type: 'started', ...e }));
  seg.on('speech_stopped', (e) => events.push({ type: 'stopped', ...e }));
  return events;
}

async function feed(seg: SpeechSegmenter, x: Float32Array, chunkMs = CHUNK_MS): Promise<void> {
  const pcm = toPcm16(x);
  const chunk = chunkMs * SAMPLES_PER_MS;
  for (let i = 0; i < pcm.length; i += chunk) seg.push(pcm.subarray(i, i + chunk));
  await seg.idle();
}

/** Speech trimmed to its audible edges, so the silences a test adds are the only ones. */
function utterance(text: string): Float32Array {
  const x = speak(text, IN_HZ);
  const { first, last } = speechEdges(x);
  return x.slice(first, last + 1);
}

const SENTENCE_A = 'Please book a table for two people tonight.';
const SENTENCE_B = 'I would also like a window seat near the garden.';

function brief(events: Event[]): string {
  return events.map((e) => (e.type === 'started' ? `+${e.audioStartMs}` : `-${e.audioEndMs}`)).join(' ');
}

// ---- Silero on synthesised speech ----

test('SpeechSegmenter with Silero finds two turns in [1 s silence, sentence, 1.2 s silence, sentence, 1 s silence]', async () => {
  const a = utterance(SENTENCE_A);
  const b = utterance(SENTENCE_B);
  const config: SegmenterConfig = { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, endOfTurn: null };
  const seg = new SpeechSegmenter(await SileroVad.create(), config);
  const events = record(seg);
  await feed(seg, concat([silence(1000, IN_HZ), a, silence(1200, IN_HZ), b, silence(1000, IN_HZ)]));
  await seg.close();

  const aStart = 1000;
  const aEnd = aStart + a.length / SAMPLES_PER_MS;
  const bStart = aEnd + 1200;
  const bEnd = bStart + b.length / SAMPLES_PER_MS;
  assert.equal(
    events.map((e) => e.type),
    ['started', 'stopped', 'started', 'stopped'],
    brief(events),
  );
  const [s1, e1, s2, e2] = events as [Event, Event, Event, Event];
  const near = (got: number, want: number, tol: number, what: string) =>
    assert.ok(Math.abs(got - want) <= tol, `${what}: ${got} ms, expected ${want.toFixed(0)} ± ${tol} (${brief(events)})`);
  near(s1.type === 'started' ? s1.audioStartMs : NaN, aStart - config.prefixPaddingMs, 100, 'turn 1 start');
  near(e1.type === 'stopped' ? e1.audioEndMs : NaN, aEnd + config.silenceDurationMs, 150, 'turn 1 end');
  near(s2.type === 'started' ? s2.audioStartMs : NaN, bStart - config.prefixPaddingMs, 100, 'turn 2 start');
  near(e2.type === 'stopped' ? e2.audioEndMs : NaN, bEnd + config.silenceDurationMs, 150, 'turn 2 end');
  for (const e of [e1, e2]) {
    if (e.type !== 'stopped') continue;
    assert.is(e.audio.length, (e.audioEndMs - e.audioStartMs) * SAMPLES_PER_MS);
    assert.ok(e.lastSpeechEndMs <= e.audioEndMs - config.silenceDurationMs);
  }
  console.log(`    silero turns: ${brief(events)} (true speech ${aStart}–${aEnd.toFixed(0)}, ${bStart.toFixed(0)}–${bEnd.toFixed(0)} ms)`);
});

test('SpeechSegmenter with Silero does not split a sentence at a pause shorter than silenceDurationMs; update() can', async () => {
  const a = utterance('Let me think about it');
  const b = utterance('yes that works for me.');
  const audio = concat([silence(500, IN_HZ), a, silence(250, IN_HZ), b, silence(1000, IN_HZ)]);

  const seg = new SpeechSegmenter(await SileroVad.create(), { silenceDurationMs: 500 });
  const events = record(seg);
  await feed(seg, audio);
  assert.equal(events.map((e) => e.type), ['started', 'stopped'], brief(events));

  seg.clear();
  events.length = 0;
  seg.update({ silenceDurationMs: 100 });
  await feed(seg, audio);
  assert.equal(events.map((e) => e.type), ['started', 'stopped', 'started', 'stopped'], brief(events));
  await seg.close();
});

test('SpeechSegmenter.clear() with Silero abandons the turn in progress and starts clean', async () => {
  const a = utterance(SENTENCE_A);
  const seg = new SpeechSegmenter(await SileroVad.create());
  const events = record(seg);
  await feed(seg, concat([silence(500, IN_HZ), a.subarray(0, a.length >> 1)]));
  assert.equal(events.map((e) => e.type), ['started']);
  seg.clear();
  assert.is(seg.isSpeaking, false);
  const clearedAt = seg.inputMs;
  await feed(seg, concat([silence(1000, IN_HZ), a, silence(1000, IN_HZ)]));
  assert.equal(events.map((e) => e.type), ['started', 'started', 'stopped'], brief(events));
  const second = events[1] as Event;
  // The stream clock runs on across clear(): the new turn is timed from the session start.
  assert.ok(second.audioStartMs >= clearedAt + 1000 - 300 - 100, brief(events));
  await seg.close();
});

// ---- Fake detector: exact timings ----

/** A stream of `frames` whole frames (32 ms each at 24 kHz) of low tone: content is irrelevant to scripts. */
function frames(n: number): Float32Array {
  return tone(200, n * FRAME_MS, IN_HZ, 0.001);
}

const speechAt = (ranges: Array<[number, number, number]>) => (i: number) => {
  for (const [from, to, p] of ranges) if (i >= from && i < to) return p;
  return 0;
};

test('SpeechSegmenter (fake) times a turn from frame counts: start − prefix, end = first silent frame + silence duration', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40, 0.9]]) }), { prefixPaddingMs: 300, silenceDurationMs: 500 });
  const events = record(seg);
  await feed(seg, frames(100), 7); // odd chunking on purpose
  assert.equal(brief(events), '+340 -1792');
  const stop = events[1] as Extract<Event, { type: 'stopped' }>;
  assert.is(stop.lastSpeechEndMs, 40 * FRAME_MS);
  assert.is(stop.audio.length, (1792 - 340) * SAMPLES_PER_MS);
  assert.is(seg.framesProcessed, 100);
});

test('SpeechSegmenter (fake) committed audio is exactly the input span [start, end)', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40, 0.9]]) }));
  const events = record(seg);
  const input = toPcm16(tone(300, 100 * FRAME_MS, IN_HZ, 0.5));
  for (let i = 0; i < input.length; i += 480) seg.push(input.subarray(i, i + 480));
  await seg.idle();
  const stop = events[1] as Extract<Event, { type: 'stopped' }>;
  assert.equal(Array.from(stop.audio), Array.from(input.subarray(340 * SAMPLES_PER_MS, 1792 * SAMPLES_PER_MS)));
});

test('SpeechSegmenter (fake) uses hysteresis: frames between threshold − 0.15 and threshold neither start nor end a turn', async () => {
  // 0.4 is below the 0.5 entry threshold and above the 0.35 exit threshold.
  const script = speechAt([
    [0, 10, 0.4],
    [10, 20, 0.9],
    [20, 50, 0.4],
  ]);
  const seg = new SpeechSegmenter(new FakeVad({ script }));
  const events = record(seg);
  await feed(seg, frames(120));
  // Starts at frame 10 (320 ms − 300), silence counts from frame 50 (1600 ms), ends at ≥ 2100 → 2112.
  assert.equal(brief(events), '+20 -2112');
});

test('SpeechSegmenter (fake) clamps the prefix padding at 0 and at the end of the previous turn', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[2, 10, 0.9], [37, 45, 0.9]]) }));
  const events = record(seg);
  await feed(seg, frames(100));
  // Turn 1: start 64 − 300 → 0; silence from 320, ends at 832. Turn 2: 1184 − 300 = 884 ≥ 832.
  assert.equal(brief(events), '+0 -832 +884 -1952');

  const seg2 = new SpeechSegmenter(new FakeVad({ script: speechAt([[2, 10, 0.9], [28, 35, 0.9]]) }));
  const events2 = record(seg2);
  await feed(seg2, frames(100));
  // Turn 2 speech at 896 ms: 896 − 300 = 596 < 832, so it starts where turn 1 ended.
  assert.equal(brief(events2), '+0 -832 +832 -1632');
});

test('SpeechSegmenter.update() changes threshold, padding and silence at run time', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[10, 20, 0.6], [60, 70, 0.6]]) }));
  const events = record(seg);
  await feed(seg, frames(40));
  assert.equal(brief(events), '+20 -1152');
  seg.update({ threshold: 0.7, prefixPaddingMs: 100 });
  assert.equal(seg.currentConfig, { threshold: 0.7, prefixPaddingMs: 100, silenceDurationMs: 500, endOfTurn: null });
  await feed(seg, frames(60));
  assert.equal(brief(events), '+20 -1152', 'probability 0.6 is below the new threshold');
  seg.update({ threshold: 0.5, silenceDurationMs: 200 });
  seg.clear();
  events.length = 0;
  const fake = new FakeVad({ script: speechAt([[5, 10, 0.6]]) });
  const seg2 = new SpeechSegmenter(fake, { prefixPaddingMs: 100, silenceDurationMs: 200 });
  const events2 = record(seg2);
  await feed(seg2, frames(30));
  assert.equal(brief(events2), '+60 -544');
  assert.throws(() => seg2.update({ threshold: 1.5 }), /threshold/);
  assert.throws(() => seg2.update({ silenceDurationMs: -1 }), /silenceDurationMs/);
});

test('SpeechSegmenter.clear() drops queued frames, resets the detector and keeps the stream clock', async () => {
  const fake = new FakeVad({ script: speechAt([[5, 1000, 0.9]]) });
  const seg = new SpeechSegmenter(fake);
  const events = record(seg);
  await feed(seg, frames(10));
  assert.equal(brief(events), '+0');
  seg.push(toPcm16(frames(10))); // queued, not yet scored
  seg.clear();
  await seg.idle();
  assert.is(seg.isSpeaking, false);
  assert.is(fake.resets, 1);
  assert.is(seg.processedUpToMs, 20 * FRAME_MS);
  await feed(seg, frames(10));
  // The fake's index restarted at 0 → speech again from its frame 5, i.e. 640 + 160 ms of stream.
  assert.equal(brief(events), '+0 +640');
});

test('SpeechSegmenter (fake, energy) turns a tone burst between silences into one turn', async () => {
  const seg = new SpeechSegmenter(new FakeVad());
  const events = record(seg);
  await feed(seg, concat([silence(1000, IN_HZ), tone(300, 1000, IN_HZ, 0.3), silence(1000, IN_HZ)]));
  // The tone starts inside frame 31 (992–1024 ms) and ends inside frame 62 (1984–2016 ms).
  assert.equal(brief(events), '+692 -2528');
});

/** Resolves each probability a macrotask later and records how many calls overlap. */
class SlowVad implements VoiceActivityDetector {
  readonly frameSamples = 512;
  readonly sampleRateHz = 16000;
  inFlight = 0;
  maxInFlight = 0;
  constructor(
    private readonly inner: FakeVad,
    private readonly failAt = -1,
  ) {}
  private calls = 0;
  async probability(frame: Float32Array): Promise<number> {
    const call = this.calls++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    await new Promise((resolve) => setImmediate(resolve));
    this.inFlight--;
    if (call === this.failAt) throw new Error('model exploded');
    return this.inner.probability(frame);
  }
  reset(): void {
    this.inner.reset();
  }
  async close(): Promise<void> {
    await this.inner.close();
  }
}

test('SpeechSegmenter scores frames one at a time and in order with a slow async detector', async () => {
  const inner = new FakeVad({ script: speechAt([[20, 40, 0.9]]) });
  const slow = new SlowVad(inner);
  const seg = new SpeechSegmenter(slow);
  const events = record(seg);
  await feed(seg, frames(100), 3);
  assert.is(slow.maxInFlight, 1);
  assert.equal(inner.scored, Array.from({ length: 100 }, (_, i) => i));
  assert.equal(brief(events), '+340 -1792');
});

test('SpeechSegmenter.clear() while a frame is in flight discards its result', async () => {
  const inner = new FakeVad({ script: () => 0.9 });
  const seg = new SpeechSegmenter(new SlowVad(inner));
  const events = record(seg);
  seg.push(toPcm16(frames(3)));
  await new Promise((resolve) => setImmediate(resolve)); // frame 0 is now in flight
  seg.clear();
  await seg.idle();
  assert.equal(events, []);
  assert.is(seg.framesProcessed, 0);
});

test('SpeechSegmenter emits error for a frame the detector fails on and goes on with the next', async () => {
  const seg = new SpeechSegmenter(new SlowVad(new FakeVad({ script: speechAt([[20, 40, 0.9]]) }), 3));
  const events = record(seg);
  const errors: Error[] = [];
  seg.on('error', (err) => errors.push(err));
  await feed(seg, frames(100));
  assert.is(errors.length, 1);
  assert.match(errors[0]?.message ?? '', /frame 96–128 ms/);
  assert.is(seg.failedFrames, 1);
  assert.is(seg.framesProcessed, 99);
  // The failing call never reached the fake, so its indices run one behind from frame 3 on.
  assert.equal(brief(events), '+372 -1824');
});

test('SpeechSegmenter.close() closes the detector and refuses more audio', async () => {
  const fake = new FakeVad();
  const seg = new SpeechSegmenter(fake);
  await seg.close();
  assert.is(fake.closed, true);
  assert.throws(() => seg.push(new Int16Array(480)), /after close/);
});

// ---- a turn's 16 kHz audio, made once (the VAD's resampled stream, kept) ----

/** Normalised correlation of two signals over their common length. */
function correlation(a: Float32Array, b: Float32Array): number {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return ab / Math.sqrt(aa * bb);
}

/** The 16 kHz audio of an event against what resampling its 24 kHz audio once more gives (toWhisperInput, delay-compensated). */
function assertSame16k(e: { audio: Int16Array; audio16k: Float32Array | null }, what: string): void {
  assert.ok(e.audio16k, `${what} carries audio16k`);
  assert.is(e.audio16k.length, Math.floor((e.audio.length * 2) / 3), `${what}: ⅔ of the 24 kHz samples`);
  const c = correlation(e.audio16k, toWhisperInput(e.audio));
  // A 1 ms misalignment of the 300 Hz tone alone would give cos(2π·0.3) ≈ 0.81.
  assert.ok(c > 0.99, `${what}: correlation with toWhisperInput ${c.toFixed(4)}`);
}

/** Tone bursts (300 Hz, loud for the energy VAD) and silences, in ms. */
const bursts = (...ms: number[]) => concat(ms.map((d, i) => (i % 2 === 0 ? silence(d, IN_HZ) : tone(300, d, IN_HZ, 0.3))));

test('SpeechSegmenter (fake, energy): speech_paused and speech_stopped carry the span at 16 kHz, the same signal as toWhisperInput of their audio', async () => {
  const seg = new SpeechSegmenter(new FakeVad());
  const paused: SpeechPausedEvent[] = [];
  seg.on('speech_paused', (e) => paused.push(e));
  const events = record(seg);
  await feed(seg, bursts(1000, 600, 300, 600, 1000), 7);
  await seg.close();
  assert.is(paused.length, 2);
  const stopped = events.find((e) => e.type === 'stopped') as Extract<Event, { type: 'stopped' }>;
  assert.is(stopped.pause, 2);
  paused.forEach((e, i) => assertSame16k(e, `pause ${i + 1}`));
  assertSame16k(stopped, 'speech_stopped');
});

test('SpeechSegmenter (fake, energy): the 16 kHz spans stay aligned after clear() and over a second turn', async () => {
  const seg = new SpeechSegmenter(new FakeVad());
  const events = record(seg);
  await feed(seg, bursts(500, 400));
  seg.clear();
  await feed(seg, bursts(333, 700, 900, 500, 1000));
  await seg.close();
  const stops = events.filter((e) => e.type === 'stopped') as Array<Extract<Event, { type: 'stopped' }>>;
  assert.is(stops.length, 2, brief(events));
  stops.forEach((e, i) => assertSame16k(e, `turn ${i + 1}`));
});

test('SpeechSegmenter: no 16 kHz audio when the detector hears at another rate (8 kHz)', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ sampleRateHz: 8000, frameSamples: 256 }));
  const events = record(seg);
  await feed(seg, bursts(1000, 600, 1000));
  await seg.close();
  const stop = events.find((e) => e.type === 'stopped') as Extract<Event, { type: 'stopped' }>;
  assert.ok(stop.audio.length > 0);
  assert.is(stop.audio16k, null);
});

test.run();
