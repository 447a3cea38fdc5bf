/**
 * Turn-taking (issue 12): semantic_vad's rules in the segmenter with a scripted end-of-turn model
 * (complete, incomplete → ceiling, resumed, stale answers, failures, no model), the words check of
 * turn-judge.ts, the engine's speculative transcription (used when the turn ends in its pause,
 * aborted without a single event when the user speaks on) and its early reply (the same, for the
 * model's reply; never with a remote model; not taken when the session changed), and Smart Turn itself on Silero turns
 * of flite speech.
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
  JUDGEMENTS,
  SpeechSegmenter,
  type SegmenterConfig,
  type SpeechPausedEvent,
  type SpeechStoppedEvent,
  PAUSE_MS,
} from '../../src/realtime/speech-segmenter.js';
import { soundsFinished, soundsUnfinished, judgedWithWords, combine, spokenWords } from '../../src/realtime/turn-judge.js';
import { engineHarness, type Harness, type SeenEvent } from '../helpers/engine-harness.js';
import { FakeLanguageModels } from '../../src/providers/llm/fake-llm.js';
import { concatSamples, silence, toPcm16, tone } from '../helpers/speech.js';
import { FliteVoice } from '../../src/providers/tts/flite.js';
import { fliteSpeech, pausedSpeech } from '../helpers/voices.js';

const IN_HZ = 24000;
const SAMPLES_PER_MS = IN_HZ / 1000;
const FRAME_MS = 32;

const SEMANTIC: SegmenterConfig = {
  threshold: 0.5,
  prefixPaddingMs: 300,
  silenceDurationMs: 4000,
  endOfTurn: { candidateSilenceMs: 200, fallbackSilenceMs: 700 },
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

const Rules = suite('semantic_vad rules (fake detector, scripted model)');

Rules('"complete" after the candidate silence ends the turn at once, not at the ceiling', async () => {
  const model = new FakeTurnModel({ script: () => 0.9 });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), SEMANTIC, model);
  const seen = record(seg);
  await feedPaced(seg, frames(80));
  const [stop, ...more] = stops(seen);
  assert.ok(stop && more.length === 0, JSON.stringify(seen.map((e) => e.type)));
  assert.is(stop.endedBy, 'model');
  assert.is(stop.lastSpeechEndMs, 40 * FRAME_MS);
  // Silence from 1280 ms; the model is asked at the first frame end ≥ 200 ms later (1504) and its
  // answer ends the turn at the frame scored when it arrives.
  assert.is(model.judged.length, 1);
  // The pause (for the transcript the judge reads) comes at half the candidate silence.
  assert.is(seen.find((e): e is Extract<Seen, { type: 'paused' }> => e.type === 'paused')?.pausedAtMs, 1280 + 128);
  assert.ok(stop.audioEndMs >= 1504 && stop.audioEndMs <= 1504 + 2 * FRAME_MS, String(stop.audioEndMs));
  assert.ok(stop.endOfTurnProbability !== null && stop.endOfTurnProbability > 0.5);
  assert.is(stop.audio.length, (stop.audioEndMs - stop.audioStartMs) * SAMPLES_PER_MS);
  // The model heard the turn from its start (with padding) to the candidate point, at 16 kHz.
  assert.is(model.judged[0], Math.round(((1504 - stop.audioStartMs) * 16000) / 1000));
  await seg.close();
});

Rules('a "complete" verdict that comes while frames wait to be scored (a busy machine) decides only once they are: speech in them keeps the turn', async () => {
  const model = new FakeTurnModel({ script: () => 0.9, delayMs: 30 });
  // Speech in frames 20–39, a pause, speech again from frame 48.
  const vad = new HeldVad({ script: speechAt([[20, 40], [48, 70]]) });
  const seg = new SpeechSegmenter(vad, SEMANTIC, model);
  const seen = record(seg);
  const pcm = toPcm16(frames(110));
  const chunk = FRAME_MS * SAMPLES_PER_MS;
  const push = async (from: number, to: number) => {
    for (let i = from; i < to; i++) seg.push(pcm.subarray(i * chunk, (i + 1) * chunk));
  };
  await push(0, 47); // the model is asked at frame 46 (224 ms of silence)
  await seg.idle();
  assert.is(model.judged.length, 1);
  // The detector falls behind: the frames with the speaker's next words are received, not scored.
  const release = vad.hold();
  await push(47, 60);
  await new Promise((r) => setTimeout(r, 80)); // the verdict ("complete") arrives meanwhile
  assert.is(stops(seen).length, 0, 'no decision on frames not yet heard');
  release();
  await seg.idle();
  await new Promise((r) => setTimeout(r, 10));
  assert.is(stops(seen).length, 0, 'the speaker went on: the verdict was stale');
  await push(60, 110);
  await seg.idle();
  await new Promise((r) => setTimeout(r, 80));
  await seg.idle();
  const all = stops(seen);
  assert.is(all.length, 1, 'one turn, ended after the second part');
  assert.is(all[0]!.lastSpeechEndMs, 70 * FRAME_MS);
  await seg.close();
});

Rules('"incomplete" waits: held to a lower bar at 4× the candidate silence, then the turn ends at the ceiling (silenceDurationMs)', async () => {
  const model = new FakeTurnModel({ script: () => 0.1 });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), { ...SEMANTIC, silenceDurationMs: 1000 }, model);
  const seen = record(seg);
  await feedPaced(seg, frames(90));
  const [stop] = stops(seen);
  assert.ok(stop);
  assert.is(stop.endedBy, 'silence');
  assert.is(stop.audioEndMs, 1280 + 1024); // the first frame end ≥ 1000 ms of silence
  assert.is(stop.endOfTurnProbability, 0.1);
  assert.is(model.judged.length, 1, 'asked once, at 224 ms of silence: the 800 ms judgement holds that verdict to its bar, and 8× would be past the ceiling');
  await seg.close();
});

Rules('a pause judged incomplete, then more speech: one turn; the next pause is judged again and ends it', async () => {
  const model = new FakeTurnModel({ script: (_audio, call) => (call === 0 ? 0.1 : 0.9) });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40], [52, 70]]) }), SEMANTIC, model);
  const seen = record(seg);
  await feedPaced(seg, frames(110));
  assert.equal(
    seen.map((e) => e.type),
    ['started', 'paused', 'resumed', 'paused', 'stopped'],
  );
  const [stop] = stops(seen);
  assert.is(stop!.endedBy, 'model');
  assert.is(stop!.lastSpeechEndMs, 70 * FRAME_MS);
  assert.is(stop!.pause, 2, 'names the pause it ended in');
  assert.is(model.judged.length, 2);
  await seg.close();
});

Rules('an answer that arrives after the speaker went on is dropped (the turn is not cut)', async () => {
  // "Complete", but slow: 300 ms, while speech resumes 96 ms after the question was asked.
  const model = new FakeTurnModel({ script: () => 0.9, delayMs: 300 });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40], [50, 70]]) }), SEMANTIC, model);
  const seen = record(seg);
  await feedPaced(seg, frames(56)); // asked at frame 46; speech again from frame 50
  await new Promise((r) => setTimeout(r, 350)); // the stale answer arrives during the second stretch
  assert.is(model.judged.length, 1);
  await feedPaced(seg, frames(54));
  await new Promise((r) => setTimeout(r, 350)); // the answer about the second pause
  const [stop, ...more] = stops(seen);
  assert.ok(stop && more.length === 0, JSON.stringify(seen.map((e) => e.type)));
  assert.ok(stop.lastSpeechEndMs === 70 * FRAME_MS, 'the turn covers the speech after the pause');
  await seg.close();
});

Rules('the bar falls as the silence grows: 0.4 does not end a turn at 200 ms of silence but does at 800', async () => {
  const model = new FakeTurnModel({ script: () => 0.4 });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), SEMANTIC, model);
  const seen = record(seg);
  await feedPaced(seg, frames(80));
  const [stop] = stops(seen);
  assert.is(stop!.endedBy, 'model');
  assert.ok(stop!.audioEndMs >= 1280 + 800 && stop!.audioEndMs <= 1280 + 800 + 2 * FRAME_MS, String(stop!.audioEndMs));
  assert.is(model.judged.length, 1, 'the verdict at 224 ms, held to the lower bar');
  await seg.close();
});

Rules('a model that hears long silence as an end does not cut a long pause: the 4× judgement holds the candidate verdict; only the 8× one hears the whole silence', async () => {
  // Like Smart Turn: "complete" once it hears 400 ms or more of silence after the speech, whatever
  // was said. The audio starts at 340 ms (speech from frame 20, 300 ms of padding); speech in
  // frames 20–39 (to 1280 ms), a pause of 896 ms, speech again in frames 68–84 (2176–2720 ms).
  const heardSilenceMs = (audio: Float32Array) => {
    const atMs = 340 + audio.length / 16;
    return atMs - (atMs >= 2176 ? 2720 : 1280);
  };
  const model = new FakeTurnModel({ script: (audio) => (heardSilenceMs(audio) >= 400 ? 0.9 : 0.05) });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40], [68, 85]]) }), SEMANTIC, model);
  const seen = record(seg);
  await feedPaced(seg, frames(150));
  const turns = stops(seen);
  assert.is(turns.length, 1, turns.map((t) => `${t.endedBy} p=${t.endOfTurnProbability} at ${t.audioEndMs}`).join('; '));
  assert.is(turns[0]!.lastSpeechEndMs, 85 * FRAME_MS, 'the pause was not the end');
  assert.is(turns[0]!.endedBy, 'model');
  // After the second stretch: 0.05 at 224 ms, held to 0.3 at 800 ms; at 1600 ms (8×) the model
  // hears the whole silence and says "complete" (before the 4 s ceiling).
  assert.ok(turns[0]!.audioEndMs >= 2720 + 1600 && turns[0]!.audioEndMs <= 2720 + 1600 + 2 * FRAME_MS, String(turns[0]!.audioEndMs));
  // Asked at the first pause's candidate point, then the second's, then once over its whole silence.
  assert.equal(model.judged.map((n) => heardSilenceMs(new Float32Array(n))), [224, 224, 1600]);
  await seg.close();
});

Rules('a failing model is reported and the turn falls back to the ceiling', async () => {
  const model = new FakeTurnModel({ script: () => { throw new Error('model broke'); } });
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), { ...SEMANTIC, silenceDurationMs: 800 }, model);
  const seen = record(seg);
  const errors: Error[] = [];
  seg.on('error', (e) => errors.push(e));
  await feedPaced(seg, frames(80));
  assert.is(errors.length, 2);
  assert.is(seg.failedJudgements, 2);
  const [stop] = stops(seen);
  assert.is(stop!.endedBy, 'silence');
  assert.is(stop!.audioEndMs, 1280 + 800);
  await seg.close();
});

Rules('without a model, semantic_vad ends turns on its fallback silence; server_vad never asks a model', async () => {
  const seg = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), SEMANTIC, null);
  const seen = record(seg);
  await feedPaced(seg, frames(80));
  assert.is(stops(seen)[0]!.audioEndMs, 1280 + 704);
  await seg.close();
  const model = new FakeTurnModel();
  const server = new SpeechSegmenter(new FakeVad({ script: speechAt([[20, 40]]) }), { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, endOfTurn: null }, model);
  const seen2 = record(server);
  await feedPaced(server, frames(80));
  assert.is(stops(seen2)[0]!.audioEndMs, 1280 + 512);
  assert.is(stops(seen2)[0]!.endedBy, 'silence');
  assert.is(model.judged.length, 0);
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

// ---- the words check ----

const Words = suite('turn-judge: a melody that ends is checked against the words');

Words('soundsUnfinished() knows fragments from sentences', () => {
  for (const t of ['I would like to book a table for', 'I would like to book a table for.', 'Can you tell me about the', 'and', 'So, um', 'My favourite colour is', 'I was thinking...']) {
    assert.ok(soundsUnfinished(t), t);
  }
  for (const t of ['What time is it?', 'What is the weather like?', 'Where are you from?', 'Tell me a joke.', 'Hello', '', 'Thank you so much!']) {
    assert.not.ok(soundsUnfinished(t), t);
  }
});

Words('soundsFinished() wants closing punctuation and nothing dangling', () => {
  for (const t of ['What time is it?', 'I would like a table for two people tonight.', 'Thanks!']) assert.ok(soundsFinished(t), t);
  for (const t of ['I would like a table for.', 'What time is it', 'I was thinking...', '', 'Can you tell me about?']) assert.not.ok(soundsFinished(t), t);
});

Words('the words and the melody combine: a language model sure of a fragment holds a confident "complete" past every bar but the ceiling; sure of a sentence, it ends a doubtful one at the first', () => {
  const fragment = { text: 'What time zone.', endProbability: 1e-5 };
  const sentence = { text: 'Where are you from?', endProbability: 0.3 };
  const lastBar = JUDGEMENTS.at(-1)!.threshold;
  assert.ok(combine(0.95, fragment) < lastBar, `fragment: ${combine(0.95, fragment)}`);
  assert.ok(combine(0.99, fragment) < JUDGEMENTS[1]!.threshold, 'not before the whole silence is heard');
  assert.ok(combine(0.1, sentence) >= 0.5, `sentence: ${combine(0.1, sentence)}`);
  assert.ok(combine(0.001, sentence) >= JUDGEMENTS[1]!.threshold, 'a sentence never waits for the whole silence, whatever the melody');
  assert.ok(combine(0.001, sentence) < 0.5, 'but a melody sure it goes on holds it at the first bar');
  assert.is(combine(0.7, null), 0.7, 'no transcript: the melody decides');
  assert.is(combine(0.7, { text: '', endProbability: null }), 0.7);
});

Words('without a language model the rules read the words: a dangling article holds, a finished sentence lifts a doubtful melody', () => {
  assert.ok(combine(0.95, { text: 'a table for the', endProbability: null }) < 0.15);
  assert.ok(combine(0.95, { text: 'a table for', endProbability: null }) < 0.5, 'a preposition is doubtful');
  assert.ok(combine(0.3, { text: 'Tell me a joke.', endProbability: null }) >= 0.5);
  assert.is(combine(0.2, { text: 'Tell me a joke', endProbability: null }), 0.2, 'no punctuation: the melody decides');
});

Words('judgedWithWords() asks the model, then combines its verdict with the words of the pause', async () => {
  const complete = new FakeTurnModel({ script: () => 0.95 });
  const audio = new Float32Array(1600);
  assert.ok((await judgedWithWords(complete, async () => ({ text: 'a table for', endProbability: 1e-4 })).completeProbability(audio)) < 0.15);
  assert.ok((await judgedWithWords(complete, async () => null).completeProbability(audio)) > 0.9);
  assert.is(complete.judged.length, 2);
});

Words('spokenWords() removes the punctuation Whisper closes a transcript with', () => {
  assert.is(spokenWords(' What time zone. '), 'What time zone');
  assert.is(spokenWords('Where are you from?!'), 'Where are you from');
  assert.is(spokenWords('I was thinking...'), 'I was thinking');
  assert.is(spokenWords('U.S.'), 'U.S');
  assert.is(spokenWords(' ?. '), null);
});

Words.run();

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
    assert.ok((stopped.audio_end_ms as number) - speechEndMs < 400, `ended ${(stopped.audio_end_ms as number) - speechEndMs} ms after the speech`);
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
    assert.ok(afterSpeechMs < 400, `ended ${afterSpeechMs} ms after the speech (the first judgement comes at 160 ms of silence; the ceiling is 4 s)`);
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

Engine('early reply: never with a remote model (it would bill for replies thrown away)', async () => {
  const llm = new FakeLanguageModels({ reply: 'It is noon.', local: false });
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
  Real('a finished question ends by the model within a few hundred ms; a sentence paused mid-way is one turn', async () => {
    const model = (await SmartTurn.load(REPO_MODELS_DIR))!;
    try {
      for (const voice of ['slt', 'rms'] as const) {
        const question = await fliteSpeech('What is the capital of France?', voice, IN_HZ);
        const seg = new SpeechSegmenter(await SileroVad.create(), SEMANTIC, model);
        const seen = record(seg);
        await feedPaced(seg, concatSamples([silence(500, IN_HZ), question, silence(1500, IN_HZ)]));
        await seg.close();
        const [stop] = stops(seen);
        assert.ok(stop, voice);
        assert.is(stop.endedBy, 'model', `${voice}: p=${stop.endOfTurnProbability}`);
        assert.ok(stop.audioEndMs - stop.lastSpeechEndMs < 600, `${voice}: ended ${stop.audioEndMs - stop.lastSpeechEndMs} ms after the speech`);

        const { audio: paused } = await pausedSpeech(new FliteVoice(voice, { voice }), 'So what I was thinking is that', 'So what I was thinking is that we could go to the park.', 500, IN_HZ);
        const seg2 = new SpeechSegmenter(await SileroVad.create(), SEMANTIC, model);
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
