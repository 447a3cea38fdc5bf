/**
 * Turn-taking: semantic_vad in the segmenter with a scripted judge (an end at a frame, an end asked
 * for later and made stale by speech in frames not yet scored, the ceiling, no judge), the judge
 * itself (turn-judge.ts: when it asks the audio model, how it takes the pause's words, what its
 * fitted policy decides on the evidence a finished sentence and a fragment give), the rules'
 * reading of a transcript, the engine's pause transcription (used when the turn ends in its pause,
 * aborted without a single event when the user speaks on) and its early reply (the same, for the
 * model's reply; also with a remote model unless LLM_EARLY_REPLY keeps it local; not taken when the
 * session changed), the words read by the local model when the reply model is remote, and Smart
 * Turn itself on Silero turns of flite speech.
 */
import fs from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { FakeVad } from '../../src/providers/vad/fake-vad.js';
import { FakeTurnModel } from '../../src/providers/turn/fake-turn.js';
import { FakeSpeechRecognizers } from '../../src/providers/asr/fake-asr.js';
import { SileroVad } from '../../src/providers/vad/silero.js';
import { SmartTurn } from '../../src/providers/turn/smart-turn.js';
import { modelPath, REPO_MODELS_DIR } from '../../src/models/manifest.js';
import {
  SpeechSegmenter,
  type SegmenterConfig,
  type SilenceFrame,
  type SpeechPausedEvent,
  type SpeechStoppedEvent,
  type TurnEndJudge,
  PAUSE_MS,
} from '../../src/realtime/speech-segmenter.js';
import { AUDIO_ASKED_AT_MS, TurnEndDetector, TurnPolicy, endProbability, spokenWords, wordClasses, type PauseWords, type TurnEvidence } from '../../src/realtime/turn-judge.js';
import { DEFAULT_SEMANTIC_EAGERNESS } from '../../src/realtime/session-update.js';
import { engineHarness, type Harness, type SeenEvent } from '../helpers/engine-harness.js';
import { FakeLanguageModels } from '../../src/providers/llm/fake-llm.js';
import { OpenAiModel } from '../../src/providers/llm/openai.js';
import type { LanguageModels } from '../../src/providers/llm/base.js';
import { startChatCompletionsServer } from '../../harness/servers/chat-completions-server.js';
import { concatSamples, silence, toPcm16, tone } from '../../harness/measures/speech.js';
import { FliteVoice } from '../../src/providers/tts/flite.js';
import { fliteSpeech, pausedSpeech } from '../../harness/measures/voices.js';
import { startMcpServer } from '../../harness/servers/mcp-server.js';
import { StreamableHttpMcp } from '../../src/providers/mcp/streamable-http.js';
import { Logger } from '../../src/core/log.js';

const IN_HZ = 24000;
const SAMPLES_PER_MS = IN_HZ / 1000;
const FRAME_MS = 32;

const SEMANTIC: SegmenterConfig = {
  threshold: 0.5,
  prefixPaddingMs: 300,
  silenceDurationMs: 4000,
  endOfTurn: { pauseMs: 64, confidence: 0.85, fallbackSilenceMs: 700 },
};

type Seen =
  | { type: 'started'; audioStartMs: number }
  | ({ type: 'paused' } & SpeechPausedEvent)
  | { type: 'resumed'; pause: number }
  | ({ type: 'stopped' } & SpeechStoppedEvent);

function record(seg: SpeechSegmenter): Seen[] {
  const seen: Seen[] = [];
  seg.on('speech_started', (e) => seen.push({ type: 'started', ...e }));
  seg.on('speech_paused', (e) => seen.push({ type: 'paused', ...e }));
  seg.on('speech_resumed', (e) => seen.push({ type: 'resumed', ...e }));
  seg.on('speech_stopped', (e) => seen.push({ type: 'stopped', ...e }));
  return seen;
}

/**
 * Pushes `x` in 32 ms chunks as a microphone would, letting timers run between chunks (a model's
 * answer arrives while later audio is still coming, as in life).
 */
async function feedPaced(seg: SpeechSegmenter, x: Float32Array): Promise<void> {
  const pcm = toPcm16(x);
  const chunk = FRAME_MS * SAMPLES_PER_MS;
  for (let i = 0; i < pcm.length; i += chunk) {
    seg.push(pcm.subarray(i, i + chunk));
    await seg.idle();
    await new Promise((r) => setTimeout(r, 2));
  }
  await seg.idle();
}

/** `n` frames of quiet tone: the scripts decide what is speech. */
function frames(n: number): Float32Array {
  return tone(200, n * FRAME_MS, IN_HZ, 0.001);
}

/** A FakeVad whose scoring a test can hold back, as a busy machine does: hold() returns the release. */
class HeldVad extends FakeVad {
  private gate: Promise<void> | null = null;
  hold(): () => void {
    let release!: () => void;
    this.gate = new Promise<void>((r) => (release = r));
    return () => {
      this.gate = null;
      release();
    };
  }
  override async probability(frame: Float32Array): Promise<number> {
    if (this.gate) await this.gate;
    return super.probability(frame);
  }
}

const speechAt = (ranges: Array<[number, number]>) => (i: number) => (ranges.some(([a, b]) => i >= a && i < b) ? 0.9 : 0.02);
const stops = (seen: Seen[]) => seen.filter((e): e is Extract<Seen, { type: 'stopped' }> => e.type === 'stopped');

// ---- the segmenter's semantic_vad rules ----

const Rules = suite('semantic_vad in the segmenter (fake detector, scripted judge)');

/**
 * A judge whose verdict on a frame is `decide(frame)`: a probability ends the turn there, 'later'
 * asks for the end `delayMs` after the frame (as evidence that arrives later does), null waits.
 * It records the frames it was shown and the silences it was told are over.
 */
class ScriptedJudge implements TurnEndJudge {
  readonly frames: SilenceFrame[] = [];
  readonly ended: number[] = [];
  constructor(
    private readonly decide: (frame: SilenceFrame) => number | 'later' | null,
    private readonly delayMs = 30,
  ) {}
  onSilence(frame: SilenceFrame): number | null {
    this.frames.push(frame);
    const d = this.decide(frame);
    if (d === 'later') {
      setTimeout(() => frame.requestEnd(0.9), this.delayMs);
      return null;
    }
    return d;
  }
  onSilenceEnd(run: number): void {
    this.ended.push(run);
  }
}

Rules('a judge sure at a frame ends the turn there, with its probability; the pause comes first, at endOfTurn.pauseMs', async () => {
  const judge = new ScriptedJudge((f) => (f.silentMs >= 192 ? 0.93 : null));
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), SEMANTIC, judge);
  const seen = record(seg);
  await feedPaced(seg, frames(80));
  const [stop, ...more] = stops(seen);
  assert.ok(stop && more.length === 0, JSON.stringify(seen.map((e) => e.type)));
  assert.is(stop.endedBy, 'model');
  assert.is(stop.endOfTurnProbability, 0.93);
  // Silence from 1280 ms (frame 40); the first frame end with 192 ms of silence is 1472.
  assert.is(stop.audioEndMs, 1280 + 192);
  assert.is(stop.lastSpeechEndMs, 40 * FRAME_MS);
  assert.is(stop.audio.length, (stop.audioEndMs - stop.audioStartMs) * SAMPLES_PER_MS);
  const paused = seen.find((e): e is Extract<Seen, { type: 'paused' }> => e.type === 'paused');
  assert.is(paused?.pausedAtMs, 1280 + Math.ceil(SEMANTIC.endOfTurn!.pauseMs / FRAME_MS) * FRAME_MS);
  assert.is(stop.pause, paused!.pause);
  // Every frame of the silence was shown, in order, with the pause once it came.
  assert.equal(judge.frames.map((f) => f.silentMs), [32, 64, 96, 128, 160, 192]);
  assert.ok(judge.frames.every((f) => f.run === judge.frames[0]!.run && f.silenceStartMs === 1280 && f.turnStartMs === stop.audioStartMs));
  assert.equal(judge.frames.map((f) => f.pause !== null), [false, true, true, true, true, true]);
  assert.equal(judge.ended, [judge.frames[0]!.run], 'told the silence is over when the turn ended');
  await seg.close();
});

Rules('the frame hears the turn up to its end at the rate asked for, the kept 16 kHz stream at most windowMs of it', async () => {
  const heard: Float32Array[] = [];
  const judge = new ScriptedJudge((f) => {
    if (f.silentMs === 160) heard.push(f.audio(8000, 16000), f.audio(500, 16000));
    return null;
  });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), { ...SEMANTIC, silenceDurationMs: 400 }, judge);
  const seen = record(seg);
  await feedPaced(seg, frames(60));
  const [stop] = stops(seen);
  const [whole, window] = heard as [Float32Array, Float32Array];
  assert.is(whole.length, ((1280 + 160 - stop!.audioStartMs) * 16000) / 1000);
  assert.is(window.length, 8000);
  assert.equal(Array.from(whole.subarray(0, 1000)), Array.from(stop!.audio16k!.subarray(0, 1000)), 'the same samples as the turn\'s audio16k');
  await seg.close();
});

Rules('an end asked for while frames wait to be scored (a busy machine) decides only once they are: speech in them keeps the turn', async () => {
  // Speech in frames 20–39, a pause, speech again from frame 48.
  const vad = new HeldVad({ script: speechAt([[20, 40], [48, 70]]) });
  const judge = new ScriptedJudge((f) => (f.silentMs === 192 ? 'later' : null));
  const seg = new SpeechSegmenter(vad, SEMANTIC, judge);
  const seen = record(seg);
  const pcm = toPcm16(frames(110));
  const chunk = FRAME_MS * SAMPLES_PER_MS;
  const push = (from: number, to: number) => {
    for (let i = from; i < to; i++) seg.push(pcm.subarray(i * chunk, (i + 1) * chunk));
  };
  push(0, 47); // the judge asks for the end at frame 45 (192 ms of silence)
  await seg.idle();
  // The detector falls behind: the frames with the speaker's next words are received, not scored.
  const release = vad.hold();
  push(47, 60);
  await new Promise((r) => setTimeout(r, 60)); // the request arrives meanwhile
  assert.is(stops(seen).length, 0, 'no decision on frames not yet heard');
  release();
  await seg.idle();
  await new Promise((r) => setTimeout(r, 10));
  assert.is(stops(seen).length, 0, 'the speaker went on: the request was stale');
  push(60, 110);
  await seg.idle();
  await new Promise((r) => setTimeout(r, 60));
  await seg.idle();
  const all = stops(seen);
  assert.is(all.length, 1, 'one turn, ended after the second part');
  assert.is(all[0]!.lastSpeechEndMs, 70 * FRAME_MS);
  assert.is(all[0]!.endedBy, 'model');
  await seg.close();
});

Rules('an end asked for after the speaker went on is dropped; the silence was told over when the speech came', async () => {
  // The request comes 300 ms after the frame; speech resumes 96 ms after it.
  const judge = new ScriptedJudge((f) => (f.silentMs === 224 ? 'later' : null), 300);
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40], [50, 70]]) }), SEMANTIC, judge);
  const seen = record(seg);
  await feedPaced(seg, frames(56));
  const firstRun = judge.frames[0]!.run;
  assert.equal(judge.ended, [firstRun], 'speech broke the first silence');
  await new Promise((r) => setTimeout(r, 350)); // the stale request arrives during the second stretch
  await feedPaced(seg, frames(54));
  await new Promise((r) => setTimeout(r, 350)); // the request about the second silence
  const [stop, ...more] = stops(seen);
  assert.ok(stop && more.length === 0, JSON.stringify(seen.map((e) => e.type)));
  assert.is(stop.lastSpeechEndMs, 70 * FRAME_MS, 'the turn covers the speech after the pause');
  await seg.close();
});

Rules('a judge never sure: the turn ends at the ceiling (silenceDurationMs); clear() tells it the silence is over', async () => {
  const judge = new ScriptedJudge(() => null);
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40], [100, 120]]) }), { ...SEMANTIC, silenceDurationMs: 1000 }, judge);
  const seen = record(seg);
  // The first turn ends at the ceiling; the second is 10 frames into its silence when cleared.
  await feedPaced(seg, frames(130));
  const [stop, ...more] = stops(seen);
  assert.is(more.length, 0);
  assert.is(stop!.endedBy, 'silence');
  assert.is(stop!.audioEndMs, 1280 + 1024); // the first frame end ≥ 1000 ms of silence
  assert.is(stop!.endOfTurnProbability, null);
  const open = judge.frames.at(-1)!;
  assert.ok(open.silenceStartMs === 120 * FRAME_MS && open.run !== judge.frames[0]!.run, 'the second turn\'s silence is shown');
  assert.is.not(judge.ended.at(-1), open.run);
  seg.clear();
  assert.is(judge.ended.at(-1), open.run, 'clear() ends the open silence');
  await seg.close();
});

Rules('without a judge, semantic_vad ends turns on its fallback silence; server_vad never shows a judge a frame', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), SEMANTIC, null);
  const seen = record(seg);
  await feedPaced(seg, frames(80));
  assert.is(stops(seen)[0]!.audioEndMs, 1280 + 704);
  await seg.close();
  const judge = new ScriptedJudge(() => 0.99);
  const server = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, endOfTurn: null }, judge);
  const seen2 = record(server);
  await feedPaced(server, frames(80));
  assert.is(stops(seen2)[0]!.audioEndMs, 1280 + 512);
  assert.is(stops(seen2)[0]!.endedBy, 'silence');
  assert.is(judge.frames.length, 0);
  await server.close();
});

Rules('speech_paused reports the turn so far once per pause, and the turn names the pause it ended in', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, endOfTurn: null });
  const seen = record(seg);
  await feedPaced(seg, frames(80));
  const paused = seen.filter((e): e is Extract<Seen, { type: 'paused' }> => e.type === 'paused');
  assert.is(paused.length, 1);
  const pausedAt = 1280 + Math.ceil(PAUSE_MS / 32) * 32; // the first 32 ms frame at which the silence reaches PAUSE_MS
  assert.is(paused[0]!.pausedAtMs, pausedAt);
  assert.is(paused[0]!.audio.length, (pausedAt - paused[0]!.audioStartMs) * SAMPLES_PER_MS);
  assert.is(stops(seen)[0]!.pause, paused[0]!.pause);
  await seg.close();
});

Rules.run();

// ---- the judge ----

const Judge = suite('turn-judge: the evidence, the policy, the detector');

const AUTO = DEFAULT_SEMANTIC_EAGERNESS.confidence;
const policy = new TurnPolicy();
/** The first silence (ms, on 32 ms frames, up to 4 s) at which the policy ends a turn with evidence `e`, or null. */
function endsAt(e: TurnEvidence, confidence = AUTO): number | null {
  for (let ms = 32; ms <= 4000; ms += 32) if (policy.decide(e, ms, confidence) !== null) return ms;
  return null;
}

Judge('a finished sentence ends the turn within 800 ms of silence whatever the melody, with or without the language model', () => {
  // The fitted judge is never sure enough at once: on the benchmark, half the pauses inside a
  // sentence come after words that could end one. It waits until such a pause would be over.
  for (const e of [
    { audio: 0.9, words: 'Where is the nearest train station?', wordsEnd: 0.4 },
    { audio: 0.9, words: 'Where is the nearest train station?', wordsEnd: null },
    { audio: 0.6, words: 'Tell me a joke.', wordsEnd: 0.2 },
    { audio: 0.2, words: 'Where are you from?', wordsEnd: 0.5 },
    { audio: 0.1, words: 'What is the capital of France?', wordsEnd: 0.6 },
  ]) {
    assert.ok((endsAt(e) ?? Infinity) <= 800, `${JSON.stringify(e)}: ends at ${endsAt(e)} ms`);
  }
});

Judge('a clause that trails off holds past a second of silence though the melody says complete; a dangling article or conjunction holds without the language model too', () => {
  for (const e of [
    { audio: 0.95, words: 'I would like to book a table for', wordsEnd: 1e-5 },
    { audio: 0.95, words: 'What time zone.', wordsEnd: 1e-4 },
    { audio: 0.95, words: 'Can you tell me about the', wordsEnd: null },
    { audio: 0.9, words: 'I went to the shop and', wordsEnd: null },
    { audio: 0.9, words: 'I would like, um,', wordsEnd: null },
  ]) {
    assert.ok((endsAt(e) ?? Infinity) > 1100, `${JSON.stringify(e)}: ends at ${endsAt(e)} ms`);
  }
});

Judge('with no evidence at all the turn ends after about a second of silence; the longer the silence, the likelier the end', () => {
  const none = { audio: null, words: null, wordsEnd: null };
  const at = endsAt(none);
  assert.ok(at !== null && at >= 700 && at <= 1500, `ends at ${at} ms`);
  let last = 0;
  for (let ms = 0; ms <= 3000; ms += 100) {
    const p = policy.probability({ audio: 0.5, words: 'So what I was thinking is that', wordsEnd: null }, ms);
    assert.ok(p >= last, `not monotonic at ${ms} ms`);
    last = p;
  }
  assert.ok(endProbability({ audio: 0.5, words: 'Tell me a joke.', wordsEnd: 0.3 }) > endProbability({ audio: 0.5, words: 'Tell me a joke.', wordsEnd: 1e-5 }), "the model's reading counts");
  assert.ok(endProbability({ audio: 0.5, words: 'Tell me a joke.', wordsEnd: null }) > endProbability({ audio: 0.5, words: 'Tell me a joke and', wordsEnd: null }), 'the rules count');
  // A reading the model calls an ending outright counts for more after a question mark.
  const question = endProbability({ audio: 0.5, words: 'Where is it?', wordsEnd: 0.3 }) - endProbability({ audio: 0.5, words: 'Where is it?', wordsEnd: 0.05 });
  const statement = endProbability({ audio: 0.5, words: 'Here it is.', wordsEnd: 0.3 }) - endProbability({ audio: 0.5, words: 'Here it is.', wordsEnd: 0.05 });
  assert.ok(question > 0 && statement > 0, `${question} ${statement}`);
  assert.ok(endProbability({ audio: 0.5, words: 'Where is it?', wordsEnd: 0.3 }) > endProbability({ audio: 0.5, words: 'Here it is.', wordsEnd: 0.3 }), 'a question the model calls finished ends likelier than a statement');
});

Judge('eagerness: a lower confidence ends a doubtful turn sooner', () => {
  const doubtful = { audio: 0.5, words: 'My favourite colour is blue.', wordsEnd: 0.02 };
  const eager = endsAt(doubtful, 0.6) ?? Infinity;
  const patient = endsAt(doubtful, 0.95) ?? Infinity;
  assert.ok(eager < patient, `${eager} vs ${patient}`);
});

Judge('the rules read a transcript\'s ending', () => {
  for (const t of ['Can you tell me about the', 'and', 'So, um', 'I was thinking...']) assert.ok(wordClasses(t).neverLast, t);
  for (const t of ['I would like to book a table for', 'I would like to book a table for.', 'My favourite colour is']) assert.ok(wordClasses(t).rarelyLast, t);
  for (const t of ['Where are you from?', 'What is it like?']) assert.not.ok(wordClasses(t).rarelyLast, t);
  for (const t of ['What time is it?', 'I would like a table for two people tonight.', 'Thanks!']) assert.ok(wordClasses(t).finished, t);
  for (const t of ['I would like a table for.', 'What time is it', 'I was thinking...', 'Can you tell me about?']) assert.not.ok(wordClasses(t).finished, t);
  assert.ok(wordClasses('Where are you from?').questionMark);
  assert.not.ok(wordClasses('What time zone.').questionMark);
});

Judge('spokenWords() removes the punctuation Whisper closes a transcript with', () => {
  assert.is(spokenWords(' What time zone. '), 'What time zone');
  assert.is(spokenWords('Where are you from?!'), 'Where are you from');
  assert.is(spokenWords('I was thinking...'), 'I was thinking');
  assert.is(spokenWords('U.S.'), 'U.S');
  assert.is(spokenWords(' ?. '), null);
});

/** A silence's frames for the detector, as the segmenter makes them (run 1, from 1000 ms), with what it asks recorded. */
function silenceFrames(requested: number[], heard: number[]): (silentMs: number, pause: number | null) => SilenceFrame {
  return (silentMs, pause) => ({
    run: 1,
    turnStartMs: 0,
    silenceStartMs: 1000,
    endMs: 1000 + silentMs,
    silentMs,
    pause,
    endOfTurn: { pauseMs: 64, confidence: AUTO, fallbackSilenceMs: 700 },
    audio: (windowMs, rateHz) => {
      heard.push(silentMs);
      return new Float32Array(Math.round((Math.min(windowMs, 1000 + silentMs) * rateHz) / 1000));
    },
    requestEnd: (p) => requested.push(p),
  });
}

Judge('the detector asks the audio model once per silence, at AUDIO_ASKED_AT_MS, and decides when the words arrive, between frames', async () => {
  const model = new FakeTurnModel({ script: () => 0.9 });
  let resolveWords!: (t: string | null) => void;
  const transcript = new Promise<string | null>((r) => (resolveWords = r));
  const words: PauseWords = { transcript, endProbability: transcript.then(() => 0.6) };
  const asked: number[] = [];
  const detector = new TurnEndDetector(model, (pause) => (asked.push(pause), words), (err) => assert.unreachable(String(err)));
  const requested: number[] = [];
  const heard: number[] = [];
  const frame = silenceFrames(requested, heard);
  for (let ms = 32; ms <= 640; ms += 32) {
    assert.is(detector.onSilence(frame(ms, ms >= 64 ? 7 : null)), null);
    if (ms === AUDIO_ASKED_AT_MS) await new Promise((r) => setTimeout(r, 5)); // the model answers
  }
  assert.equal(heard, [AUDIO_ASKED_AT_MS], 'asked once, hearing the turn up to then');
  assert.equal(asked, [7], 'the words of the silence\'s pause');
  assert.equal(requested, [], 'the melody alone is not enough at 640 ms');
  resolveWords('What is the capital of France?');
  await new Promise((r) => setTimeout(r, 5));
  assert.is(requested.length, 1, 'the words decide when they arrive, before the next frame');
  assert.ok(requested[0]! >= AUTO);
  // A new silence starts afresh: the model is asked again.
  detector.onSilenceEnd(1);
  const next = (ms: number) => ({ ...frame(ms, null), run: 2 });
  for (let ms = 32; ms <= AUDIO_ASKED_AT_MS; ms += 32) detector.onSilence(next(ms));
  assert.is(model.judged.length, 2);
});

Judge('a failing audio model is reported and the words still decide', async () => {
  const model = new FakeTurnModel({ script: () => { throw new Error('model broke'); } });
  const errors: unknown[] = [];
  const words: PauseWords = { transcript: Promise.resolve('Where is the nearest train station?'), endProbability: Promise.resolve(0.4) };
  const detector = new TurnEndDetector(model, () => words, (err) => errors.push(err));
  const requested: number[] = [];
  const frame = silenceFrames(requested, []);
  let decided: number | null = null;
  for (let ms = 32; ms <= 1200 && decided === null && requested.length === 0; ms += 32) {
    decided = detector.onSilence(frame(ms, 1));
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.is(errors.length, 1);
  assert.ok(decided !== null || requested.length === 1, 'the words ended the turn');
});

Judge.run();

// ---- the engine: speculative transcription and semantic turns ----

const Engine = suite('engine: speculative transcription and semantic_vad');

const LOUD = 0.3;
/** Realtime input: `ms` of loud tone (speech for the energy VAD) or silence, as PCM16 24 kHz. */
const loud = (ms: number) => tone(220, ms, IN_HZ, LOUD);

async function speak(h: Harness, parts: Float32Array[]): Promise<void> {
  const pcm = toPcm16(concatSamples(parts));
  const chunk = 20 * SAMPLES_PER_MS;
  for (let i = 0; i < pcm.length; i += chunk) {
    const part = pcm.subarray(i, i + chunk);
    h.send({ type: 'input_audio_buffer.append', audio: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64') });
    await new Promise((r) => setTimeout(r, 2));
  }
}

const VAD_UPDATE = (turnDetection: unknown) => ({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: turnDetection } } } });

Engine('server_vad: the transcript is the one started in the pause; its deltas come after the commit', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: 'What time is it?', deltas: 2 });
  const h = await engineHarness({ deps: { asr } });
  try {
    h.send(VAD_UPDATE({ type: 'server_vad', silence_duration_ms: 500, create_response: false }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(900, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.is(done.transcript, 'What time is it?');
    assert.is(asr.requests.length, 1, 'transcribed once: in the pause');
    const committed = h.events.find((e) => e.type === 'input_audio_buffer.committed')!;
    const stopped = h.events.find((e) => e.type === 'input_audio_buffer.speech_stopped')!;
    const started = h.events.find((e) => e.type === 'input_audio_buffer.speech_started')!;
    // The speculation heard the turn up to the pause (≈200 ms of silence), not to the commit (500).
    const heardMs = asr.requests[0]!.pcm.length / SAMPLES_PER_MS;
    const turnMs = (stopped.audio_end_ms as number) - (started.audio_start_ms as number);
    assert.ok(turnMs - heardMs >= 250, `speculation ${heardMs} ms of a ${turnMs} ms turn`);
    const t = h.events.map((e) => e.type);
    assert.ok(t.indexOf('conversation.item.input_audio_transcription.delta') > h.events.indexOf(committed), t.join(', '));
    assert.is(t.filter((x) => x === 'conversation.item.input_audio_transcription.delta').length, 2);
  } finally {
    await h.close();
  }
});

Engine('a recogniser that streams hears each turn from its start, as it is spoken, and answers the pause: no batch transcription', async () => {
  const asr = new FakeSpeechRecognizers({ streaming: true, transcript: (r) => `heard ${Math.round(r.pcm.length / SAMPLES_PER_MS)} ms` });
  const h = await engineHarness({ deps: { asr } });
  try {
    h.send(VAD_UPDATE({ type: 'server_vad', silence_duration_ms: 500, create_response: false }));
    // A 300 ms pause the user speaks on after, then the end; then a second turn.
    await speak(h, [silence(200, IN_HZ), loud(800), silence(300, IN_HZ), loud(800), silence(900, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.is(asr.requests.length, 0, 'no batch transcription');
    const [turn] = asr.streams;
    assert.ok(turn && asr.streams.length === 1, `${asr.streams.length} streams`);
    assert.is(turn.transcripts.length, 2, 'asked at each pause');
    assert.ok(turn.transcripts[1]! > turn.transcripts[0]!, 'the second pause hears more of the same turn');
    const started = h.events.find((e) => e.type === 'input_audio_buffer.speech_started')!;
    const stopped = h.events.find((e) => e.type === 'input_audio_buffer.speech_stopped')!;
    // Its first push is the turn so far, from its start with the prefix padding (the speech begins 200 ms in).
    assert.ok(turn.pushes[0]! >= (200 - (started.audio_start_ms as number)) * SAMPLES_PER_MS, `first push ${turn.pushes[0]} samples`);
    const heardMs = Math.round(turn.transcripts[1]! / SAMPLES_PER_MS);
    assert.is(done.transcript, `heard ${heardMs} ms`, 'the transcript is the second pause\'s, from the stream');
    assert.ok(heardMs > (stopped.audio_end_ms as number) - (started.audio_start_ms as number) - 500, `${heardMs} ms heard`);
    assert.ok(turn.closed, 'closed with its turn');
    await speak(h, [loud(600), silence(900, IN_HZ)]);
    await h.waitFor(() => asr.streams.length === 2 && asr.streams[1]!.closed);
    assert.is(asr.requests.length, 0);
  } finally {
    await h.close();
  }
});

Engine('a voice turn is resampled to 16 kHz once: the pause\'s and the turn\'s transcriptions get the VAD\'s 16 kHz audio; a manual commit\'s does not', async () => {
  let calls = 0;
  // The pause's transcription fails, so the turn is transcribed afresh at its end.
  const asr = new FakeSpeechRecognizers({
    transcript: () => {
      if (calls++ === 0) throw new Error('speculation failed');
      return 'What time is it?';
    },
  });
  const h = await engineHarness({ deps: { asr } });
  try {
    h.send(VAD_UPDATE({ type: 'server_vad', silence_duration_ms: 500, create_response: false }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(900, IN_HZ)]);
    await h.waitFor((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.is(asr.requests.length, 2, 'the pause, then the turn');
    for (const r of asr.requests) {
      assert.instance(r.pcm16k, Float32Array);
      assert.is(r.pcm16k!.length, Math.floor((r.pcm.length * 2) / 3));
    }
    assert.ok(asr.requests[1]!.pcm.length > asr.requests[0]!.pcm.length, 'the turn is longer than the pause');
    const from = h.events.length;
    h.send(VAD_UPDATE(null));
    await speak(h, [loud(500)]);
    h.send({ type: 'input_audio_buffer.commit' });
    await h.waitFor((e) => e.type === 'conversation.item.input_audio_transcription.completed', { from });
    assert.is(asr.requests.length, 3);
    assert.is(asr.requests[2]!.pcm16k, undefined, 'a commit has no VAD stream: the recogniser resamples it');
  } finally {
    await h.close();
  }
});

Engine('server_vad: a pause the user speaks on after is thrown away: aborted, and not one event of it is sent', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: (r) => `heard ${Math.round(r.pcm.length / SAMPLES_PER_MS)} ms` });
  const h = await engineHarness({ deps: { asr } });
  try {
    h.send(VAD_UPDATE({ type: 'server_vad', silence_duration_ms: 500, create_response: false }));
    // A 300 ms pause (a pause, not the end: < 500 ms), then more speech, then the end.
    await speak(h, [silence(200, IN_HZ), loud(800), silence(300, IN_HZ), loud(800), silence(900, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.is(asr.requests.length, 2, 'one speculation per pause');
    assert.is(asr.requests[0]!.signal?.aborted, true, 'the first pause’s work is aborted');
    assert.is(asr.requests[1]!.signal?.aborted, false);
    assert.is(done.transcript, `heard ${Math.round(asr.requests[1]!.pcm.length / SAMPLES_PER_MS)} ms`);
    const transcripts = h.events.filter((e) => e.type.startsWith('conversation.item.input_audio_transcription'));
    assert.is(transcripts.length, 2, 'one delta and one completed, of the second pause only');
    for (const e of transcripts) assert.not.match(JSON.stringify(e), `heard ${Math.round(asr.requests[0]!.pcm.length / SAMPLES_PER_MS)} ms`);
    assert.is(h.events.filter((e) => e.type === 'input_audio_buffer.speech_stopped').length, 1);
  } finally {
    await h.close();
  }
});

Engine('semantic_vad: a complete-sounding question is answered after a short pause, not the silence window', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: 'What time is it?' });
  const model = new FakeTurnModel({ script: () => 0.9 });
  const h = await engineHarness({ deps: { asr, endOfTurnModel: async () => model } });
  try {
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'auto', create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(1200, IN_HZ)]);
    const stopped = await h.waitFor((e) => e.type === 'input_audio_buffer.speech_stopped');
    const speechEndMs = 200 + 1200; // on the stream's clock
    assert.ok((stopped.audio_end_ms as number) - speechEndMs < 900, `ended ${(stopped.audio_end_ms as number) - speechEndMs} ms after the speech (the ceiling is 4 s)`);
    await h.waitFor((e) => e.type === 'response.created');
    assert.is(asr.requests.length, 1);
    const updated = h.events.find((e) => e.type === 'session.updated') as { session: { audio: { input: { turn_detection: { type: string } } } } } | undefined;
    assert.is(updated?.session.audio.input.turn_detection.type, 'semantic_vad');
  } finally {
    await h.close();
  }
});

Engine('semantic_vad: a pause after "a table for" is not the end, though the melody says so; the turn goes on', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: (r) => (r.pcm.length / SAMPLES_PER_MS < 1600 ? 'I would like a table for' : 'I would like a table for two.') });
  const model = new FakeTurnModel({ script: () => 0.9 });
  const h = await engineHarness({ deps: { asr, endOfTurnModel: async () => model } });
  try {
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'high', create_response: false }));
    await speak(h, [silence(200, IN_HZ), loud(1000), silence(500, IN_HZ), loud(600), silence(1200, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.is(done.transcript, 'I would like a table for two.');
    assert.is(h.events.filter((e) => e.type === 'input_audio_buffer.speech_stopped').length, 1, 'one turn');
    assert.ok(model.judged.length >= 2, 'both pauses judged');
  } finally {
    await h.close();
  }
});

Engine('semantic_vad: a finished question the melody calls unfinished is answered at the first judgement, not the ceiling: the language model reads the words', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: 'Where are you from?' });
  const model = new FakeTurnModel({ script: () => 0.1 });
  const asked: string[] = [];
  const llm = new FakeLanguageModels({ reply: 'From the cloud.', endOfTurn: (words) => (asked.push(words), words === 'Where are you from' ? 0.5 : 1e-5) });
  const h = await engineHarness({ deps: { asr, llm, endOfTurnModel: async () => model } });
  try {
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'auto', create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(1500, IN_HZ)]);
    const stopped = await h.waitFor((e) => e.type === 'input_audio_buffer.speech_stopped');
    const afterSpeechMs = (stopped.audio_end_ms as number) - (200 + 1200);
    assert.ok(afterSpeechMs < 900, `ended ${afterSpeechMs} ms after the speech (the ceiling is 4 s)`);
    assert.equal(asked, ['Where are you from'], 'asked once, about the words without the punctuation');
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    assert.is(replyTranscript(done), 'From the cloud.');
    assert.is(llm.requests.length, 1, 'the early reply started after the words were read is the response');
  } finally {
    await h.close();
  }
});

Engine('semantic_vad: a clause that trails off is not cut though the melody says "complete"; what was started on it is thrown away without an event', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: (r) => (r.pcm.length / SAMPLES_PER_MS < 1600 ? 'I would like a table for.' : 'I would like a table for two.') });
  const model = new FakeTurnModel({ script: () => 0.95 });
  const llm = new FakeLanguageModels({ reply: (r) => `Reply to ${r.messages.at(-1)!.content}`, chunkDelayMs: 20, endOfTurn: (words) => (words.endsWith('for') ? 1e-5 : 0.4) });
  const h = await engineHarness({ deps: { asr, llm, endOfTurnModel: async () => model } });
  try {
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'auto', create_response: true }));
    // A second's pause: past the first two judgements (160 and 640 ms of silence), short of the whole-silence one (1,280 ms).
    await speak(h, [silence(200, IN_HZ), loud(1000), silence(1000, IN_HZ), loud(600), silence(1200, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    assert.is(h.events.filter((e) => e.type === 'input_audio_buffer.speech_stopped').length, 1, 'one turn');
    assert.is(replyTranscript(done), 'Reply to I would like a table for two.');
    assert.is(llm.requests.length, 2, 'a reply was started in the pause, and another for the whole turn');
    assert.is(llm.requests[0]!.signal.aborted, true, 'the pause’s reply is aborted');
    for (const e of h.events) assert.not.ok(JSON.stringify(e).includes('table for.'), `${e.type} shows the abandoned pause`);
  } finally {
    await h.close();
  }
});

// ---- the engine: the early reply ----

/** The assistant transcript a response.done carries. */
const replyTranscript = (done: SeenEvent) =>
  ((done.response as { output: Array<{ content: Array<{ transcript?: string }> }> }).output[0]?.content[0]?.transcript ?? null);

/**
 * "What time is it?" spoken on semantic_vad (the judge says "complete" 150 ms after it is asked),
 * answered by `llm`: the response.done, every event sent, and how many model requests had been
 * made when speech_stopped was sent.
 */
async function spokenQuestion(llm: FakeLanguageModels): Promise<{ done: SeenEvent; events: SeenEvent[]; requestsAtStop: number }> {
  const asr = new FakeSpeechRecognizers({ transcript: 'What time is it?' });
  const model = new FakeTurnModel({ script: () => 0.9, delayMs: 150 });
  let requestsAtStop = -1;
  const h = await engineHarness({
    deps: { asr, llm, endOfTurnModel: async () => model },
    beforeSend: (e) => {
      if (e.type === 'input_audio_buffer.speech_stopped') requestsAtStop = llm.requests.length;
    },
  });
  try {
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'auto', create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(1200, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    return { done, events: h.events, requestsAtStop };
  } finally {
    await h.close();
  }
}

Engine('early reply: the model starts on the pause’s transcript before the turn is decided, and that generation is the response', async () => {
  const llm = new FakeLanguageModels({ reply: (r) => `You asked: ${r.messages.at(-1)!.content}` });
  const { done, events, requestsAtStop } = await spokenQuestion(llm);
  assert.is(requestsAtStop, 1, 'the model was asked before speech_stopped');
  assert.is(llm.requests.length, 1, 'and not asked again for the response');
  assert.is(llm.requests[0]!.signal.aborted, false);
  assert.is((done.response as { status: string }).status, 'completed');
  assert.is(replyTranscript(done), 'You asked: What time is it?');
  const t = events.map((e) => e.type);
  assert.ok(t.indexOf('response.created') > t.indexOf('conversation.item.input_audio_transcription.completed'), 'events in the usual order');
});

Engine('early reply in a session with an MCP tool: it is offered the MCP tools the response offers, so it is taken; the step after the call is asked of the model', async () => {
  const server = await startMcpServer();
  const llm = new FakeLanguageModels({
    reply: (r) => (r.messages.at(-1)!.role === 'tool' ? `It is ${r.messages.at(-1)!.content}` : ''),
    toolCalls: (r) => (r.messages.at(-1)!.role === 'user' ? [{ name: 'get_weather', arguments: '{"city":"Oslo"}' }] : []),
  });
  const asr = new FakeSpeechRecognizers({ transcript: 'What is the weather in Oslo?' });
  const mcp = new StreamableHttpMcp({ allowedHosts: [{ host: '127.0.0.1', port: null }], allowPrivateAddresses: true, listTimeoutMs: 3000, callTimeoutMs: 3000 }, new Logger('silent'));
  const h = await engineHarness({ deps: { asr, llm, mcp, endOfTurnModel: async () => new FakeTurnModel({ script: () => 0.9, delayMs: 150 }) } });
  try {
    h.send({ type: 'session.update', session: { type: 'realtime', tools: [{ type: 'mcp', server_label: 'w', server_url: server.url, require_approval: 'never' }] } });
    await h.waitFor((e) => e.type === 'mcp_list_tools.completed');
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'auto', create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(1200, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    const output = (done.response as { output: Array<{ type: string }> }).output;
    assert.equal(output.map((o) => o.type), ['mcp_call', 'message']);
    assert.is(llm.requests.length, 2, 'the early reply, then the step after the call');
    assert.ok(llm.requests[0]!.speculation && !llm.requests[0]!.speculation.isSpeculative(), 'the first request was the early reply, taken');
    assert.equal(llm.requests[0]!.tools?.map((t) => t.name), ['get_weather', 'send_email', 'fail', 'slow']);
    assert.is(llm.requests[1]!.speculation, undefined);
    assert.equal(server.calls, [{ name: 'get_weather', arguments: { city: 'Oslo' } }]);
  } finally {
    await h.close();
    await server.close();
  }
});

Engine('a turn that ends while the local model still reads its words has its response wait for that reading (it holds the conversation\'s sequence)', async () => {
  let readDoneAt = 0;
  let generatedAt = 0;
  const llm = new FakeLanguageModels({
    // Slower than the judge, which decides on the melody and the rules first.
    endOfTurnDelayMs: 3000,
    endOfTurn: () => ((readDoneAt = performance.now()), 0.4),
    reply: () => ((generatedAt = performance.now()), 'It is noon.'),
  });
  const asr = new FakeSpeechRecognizers({ transcript: 'What time is it?' });
  const model = new FakeTurnModel({ script: () => 0.9 });
  let stoppedAt = 0;
  let readAtStop = -1;
  const h = await engineHarness({
    deps: { asr, llm, endOfTurnModel: async () => model },
    beforeSend: (e) => {
      if (e.type === 'input_audio_buffer.speech_stopped') [stoppedAt, readAtStop] = [performance.now(), readDoneAt];
    },
  });
  try {
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'auto', create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(1200, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    assert.is(readAtStop, 0, 'the turn ended before the reading was done');
    assert.is(replyTranscript(done), 'It is noon.');
    assert.ok(readDoneAt > stoppedAt && generatedAt >= readDoneAt, `the reply was asked for ${Math.round(generatedAt - readDoneAt)} ms after the reading ended`);
    assert.is(llm.requests.length, 1, 'no early reply: the reading was not done before the turn ended');
  } finally {
    await h.close();
  }
});

Engine('early reply: the user speaks on after a pause; that reply is aborted and not one event of it is sent', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: (r) => `heard ${Math.round(r.pcm.length / SAMPLES_PER_MS)} ms` });
  const llm = new FakeLanguageModels({ reply: (r) => `Reply to ${r.messages.at(-1)!.content}`, chunkDelayMs: 20 });
  const h = await engineHarness({ deps: { asr, llm } });
  try {
    h.send(VAD_UPDATE({ type: 'server_vad', silence_duration_ms: 500, create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(800), silence(300, IN_HZ), loud(800), silence(900, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    assert.is(llm.requests.length, 2, 'one early reply per pause');
    assert.is(llm.requests[0]!.signal.aborted, true, 'the first pause’s reply is aborted');
    assert.is(llm.requests[1]!.signal.aborted, false);
    const firstHeard = llm.requests[0]!.messages.at(-1)!.content;
    const secondHeard = llm.requests[1]!.messages.at(-1)!.content;
    assert.is.not(firstHeard, secondHeard);
    assert.is(replyTranscript(done), `Reply to ${secondHeard}`);
    for (const e of h.events) assert.not.ok(JSON.stringify(e).includes(firstHeard), `${e.type} mentions the abandoned pause`);
    assert.is(h.events.filter((e) => e.type === 'response.created').length, 1);
  } finally {
    await h.close();
  }
});

Engine('early reply: a remote model starts on the pause\'s transcript too, and its words are read by the local model', async () => {
  const asked: string[] = [];
  const llm = new FakeLanguageModels({ reply: 'It is noon.', local: false, endOfTurn: (words) => (asked.push(words), 0.4) });
  const { done, requestsAtStop } = await spokenQuestion(llm);
  assert.is(requestsAtStop, 1, 'the remote model was asked before speech_stopped');
  assert.is(llm.requests.length, 1, 'and that request is the response');
  assert.is(replyTranscript(done), 'It is noon.');
  assert.equal(asked, ['What time is it'], 'the words reader read the pause\'s words');
});

Engine('early reply: a hosted model\'s request started in a pause the user speaks on after is aborted on the wire, and not one event of it is sent', async () => {
  // A real OpenAI-compatible server on 127.0.0.1, paced like a hosted model.
  const server = await startChatCompletionsServer((body) => ({ text: `Reply to ${String(body.messages.at(-1)?.content)}`, firstDelayMs: 200, delayMs: 15 }));
  const asr = new FakeSpeechRecognizers({ transcript: (r) => `heard ${Math.round(r.pcm.length / SAMPLES_PER_MS)} ms` });
  const hosted = new OpenAiModel({ baseUrl: server.baseUrl, apiKey: null, model: 'hosted', maxOutputTokens: 100, contextTokens: 4096, firstTokenTimeoutMs: 5000, tokenGapTimeoutMs: 5000, speculative: true });
  const llm: LanguageModels = { forModel: () => hosted, wordsReader: () => null, fallbackLine: null, upstream: () => null, close: async () => {} };
  const h = await engineHarness({ deps: { asr, llm } });
  try {
    h.send(VAD_UPDATE({ type: 'server_vad', silence_duration_ms: 500, create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(800), silence(300, IN_HZ), loud(800), silence(900, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    assert.is(server.requests.length, 2, 'one request per pause');
    await server.whenIdle();
    assert.equal(server.aborts.map((a) => a.request), [0], 'the first pause\'s request was abandoned');
    const firstHeard = String(server.requests[0]!.messages.at(-1)?.content);
    assert.is(replyTranscript(done), `Reply to ${String(server.requests[1]!.messages.at(-1)?.content)}`);
    for (const e of h.events) assert.not.ok(JSON.stringify(e).includes(firstHeard), `${e.type} mentions the abandoned pause`);
  } finally {
    await h.close();
    await server.close();
  }
});

Engine('early reply: not with a remote model that does not allow it (LLM_EARLY_REPLY=local)', async () => {
  const llm = new FakeLanguageModels({ reply: 'It is noon.', local: false, speculative: false });
  const { done, requestsAtStop } = await spokenQuestion(llm);
  assert.is(requestsAtStop, 0);
  assert.is(llm.requests.length, 1);
  assert.is(replyTranscript(done), 'It is noon.');
});

Engine('early reply: not taken when the session changed before the response (a new request is made)', async () => {
  const asr = new FakeSpeechRecognizers({ transcript: 'What time is it?' });
  // The judge answers late, so the session.update lands between the early reply and the turn's end.
  const model = new FakeTurnModel({ script: () => 0.9, delayMs: 400 });
  const llm = new FakeLanguageModels({ reply: (r) => `${r.messages[0]!.content.split('\n')[0]} Noon.` });
  const h = await engineHarness({ deps: { asr, llm, endOfTurnModel: async () => model } });
  try {
    h.send(VAD_UPDATE({ type: 'semantic_vad', eagerness: 'auto', create_response: true }));
    await speak(h, [silence(200, IN_HZ), loud(1200), silence(300, IN_HZ)]);
    await h.waitFor(() => llm.requests.length === 1);
    h.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Speak like a pirate.' } });
    await speak(h, [silence(900, IN_HZ)]);
    const done = await h.waitFor((e) => e.type === 'response.done', { tick: true });
    assert.is(llm.requests.length, 2);
    assert.is(llm.requests[0]!.signal.aborted, true, 'the stale early reply is discarded');
    assert.is(replyTranscript(done), 'Speak like a pirate. Noon.');
  } finally {
    await h.close();
  }
});

Engine.run();

// ---- Smart Turn on real speech ----

const Real = suite('Smart Turn v3 with Silero on flite speech');
const haveModel = modelPath(REPO_MODELS_DIR, 'turn-smart-turn-v3') !== null;

if (!haveModel) {
  console.log('turn-taking.test.ts: skipping the Smart Turn tests: turn-smart-turn-v3 is not fetched (npm run setup:models)');
  Real.skip('Smart Turn (model not fetched)', () => undefined);
} else {
  Real('a finished question ends by the judge on the melody alone within about a second; a sentence paused mid-way is one turn', async () => {
    const model = (await SmartTurn.load(REPO_MODELS_DIR))!;
    try {
      for (const voice of ['slt', 'rms'] as const) {
        const question = await fliteSpeech('What is the capital of France?', voice, IN_HZ);
        const seg = new SpeechSegmenter(await SileroVad.create(), SEMANTIC, new TurnEndDetector(model, () => null, (err) => assert.unreachable(String(err))));
        const seen = record(seg);
        await feedPaced(seg, concatSamples([silence(500, IN_HZ), question, silence(1500, IN_HZ)]));
        await seg.close();
        const [stop] = stops(seen);
        assert.ok(stop, voice);
        assert.is(stop.endedBy, 'model', `${voice}: p=${stop.endOfTurnProbability}`);
        // The melody alone (no transcript here) is weak evidence: the judge waits about a second, not the 4 s ceiling.
        assert.ok(stop.audioEndMs - stop.lastSpeechEndMs < 1300, `${voice}: ended ${stop.audioEndMs - stop.lastSpeechEndMs} ms after the speech`);

        const { audio: paused } = await pausedSpeech(new FliteVoice(voice, { voice }), 'So what I was thinking is that', 'So what I was thinking is that we could go to the park.', 500, IN_HZ);
        const seg2 = new SpeechSegmenter(await SileroVad.create(), SEMANTIC, new TurnEndDetector(model, () => null, (err) => assert.unreachable(String(err))));
        const seen2 = record(seg2);
        // Trailing silence past the ceiling: the end of the sentence ends the turn either way.
        await feedPaced(seg2, concatSamples([silence(500, IN_HZ), paused, silence(4500, IN_HZ)]));
        await seg2.close();
        const turns = stops(seen2);
        assert.is(turns.length, 1, `${voice}: ${turns.map((t) => `${t.endedBy} p=${t.endOfTurnProbability} at ${t.audioEndMs}`).join('; ')}`);
        assert.ok(seen2.some((e) => e.type === 'resumed'), `${voice}: the pause was heard as a pause`);
      }
    } finally {
      await model.close();
    }
  });
  Real('the model file is the one the manifest names', () => {
    assert.ok(fs.statSync(modelPath(REPO_MODELS_DIR, 'turn-smart-turn-v3')!).size === 8679182);
  });
}

Real.run();
