/**
 * The turn-end benchmark's replay and fit (benchmarks/lib/turn-end/), on hand-made signals: where
 * each judge ends a turn on the stream's 32 ms frames, when measured evidence arrives and what it
 * decides, how outcomes are counted (a cut-off, a goes-on gap answered, the latency after the
 * speech), and that the fit recovers a known logistic model and leaves out what it should.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CEILING_MS, FRAME_MS, defaultJudge, replay, serverVad, smartTurnAlone, summarise } from '../../benchmarks/lib/turn-end/replay.js';
import { fitLogistic, rows, type Row } from '../../benchmarks/lib/turn-end/fit.js';
import type { SilenceSignals, UtteranceSignals } from '../../benchmarks/lib/turn-end/signals.js';
import { AUDIO_ASKED_AT_MS, TURN_FEATURES, TurnPolicy, turnFeatures } from '../../src/realtime/turn-judge.js';
import { seededRandom } from '../../benchmarks/lib/harness.js';

/** A silence with evidence: Smart Turn's p at every probe (`audioMs` each), a tiny.en transcript and its reading. */
function silence(startMs: number, endMs: number, label: SilenceSignals['label'], e: { p?: number; text?: string; asrMs?: number; wordsEnd?: number | null; lmMs?: number } = {}): SilenceSignals {
  return {
    startMs,
    endMs,
    turnStartMs: 200,
    label,
    audio: [96, 128, 160, 224, 320].map((heardMs) => ({ heardMs, p: e.p ?? 0.5, ms: 40 })),
    transcripts: e.text === undefined ? {} : { 'tiny.en': { text: e.text, ms: e.asrMs ?? 150, wordsEnd: e.wordsEnd ?? null, wordsEndMs: e.lmMs ?? 50 } },
  };
}

function utterance(kind: string, speechEndMs: number, silences: SilenceSignals[]): UtteranceSignals {
  return { id: `${kind}-${speechEndMs}`, kind: kind as UtteranceSignals['kind'], text: 'words', voice: 'v', speed: 1, noiseDbfs: null, speechStartMs: 500, speechEndMs, silences };
}

test('server_vad ends a turn at the first frame end with its silence; a shorter pause is not cut', () => {
  const u = utterance('mid-clause', 2000, [silence(1000, 1300, 'continue'), silence(2040, 5000, 'end')]);
  const o = replay(u, serverVad(300));
  assert.is(o.cut, false, 'the 300 ms pause ends at its 300th ms: the frame at 320 is past it');
  assert.is(o.latencyMs, 2040 + Math.ceil(300 / FRAME_MS) * FRAME_MS - 2000);
  const cut = replay(utterance('mid-clause', 2000, [silence(1000, 1400, 'continue'), silence(2040, 5000, 'end')]), serverVad(300));
  assert.is(cut.cut, true);
  assert.is(cut.latencyMs, null);
});

test('a goes-on gap ended in is answered, not a cut-off; a turn no judge ends waits for the ceiling', () => {
  const u = utterance('goes-on', 3000, [silence(1500, 2300, 'sentence-end'), silence(3050, 6000, 'end')]);
  const o = replay(u, serverVad(500));
  assert.equal([o.cut, o.answeredInGap, o.latencyMs], [false, true, null]);
  const never = replay(utterance('question', 2000, [silence(2040, 5000, 'end')]), () => null);
  assert.is(never.latencyMs, 2040 + CEILING_MS - 2000);
});

test('Smart Turn alone decides 224 ms into the silence plus its time when it says complete, else after 3 s', () => {
  const sure = replay(utterance('question', 2000, [silence(2000, 6000, 'end', { p: 0.9 })]), smartTurnAlone(0.5));
  assert.is(sure.latencyMs, 224 + 40);
  const unsure = replay(utterance('question', 2000, [silence(2000, 6000, 'end', { p: 0.1 })]), smartTurnAlone(0.5));
  assert.is(unsure.latencyMs, Math.ceil(3000 / FRAME_MS) * FRAME_MS);
});

test("the default judge decides when the evidence arrives, after its measured time: not within a pause the evidence outlasts", () => {
  const judge = defaultJudge({ confidence: 0.97, pauseMs: 32, recogniser: 'tiny.en', languageModel: true, audioModel: true, policy: new TurnPolicy() });
  const question = { p: 0.9, text: 'What is the capital of France?', wordsEnd: 0.6, asrMs: 150, lmMs: 50 };
  const at = (s: SilenceSignals) => judge(s, CEILING_MS);
  // The words arrive 32 + 150 ms into the silence, the reading 50 ms later: a finished question
  // the model reads as one ends the turn within a few frames of that.
  const t = at(silence(2000, 6000, 'end', question))!;
  assert.ok(t >= 2000 + 32 + 150 + 50 && t <= 2000 + 600, `decided at ${t - 2000} ms of silence`);
  // A pause over before the evidence is in cannot be cut, whatever the evidence.
  assert.is(judge(silence(1000, 1150, 'continue', question), 150), null);
  // Slower evidence, a later decision: no sooner than the reading arrives.
  const slow = at(silence(2000, 6000, 'end', { ...question, asrMs: 400 }))!;
  assert.ok(slow >= 2000 + 32 + 400 + 50 && slow > t, `${slow - 2000} vs ${t - 2000} ms`);
  // Without the language model the same words end the turn later; a fragment holds for seconds.
  const rulesOnly = defaultJudge({ confidence: 0.97, pauseMs: 32, recogniser: 'tiny.en', languageModel: false, audioModel: true, policy: new TurnPolicy() });
  assert.ok(rulesOnly(silence(2000, 6000, 'end', question), CEILING_MS)! > t);
  assert.ok(at(silence(2000, 6000, 'end', { p: 0.95, text: 'I would like to book a table for', wordsEnd: 1e-5 }))! - 2000 > 1500);
});

test('summarise counts cut-offs over every utterance and over those with a pause, and the latency of the rest', () => {
  const outcomes = [
    { id: 'a', kind: 'question', voice: 'v', cut: false, answeredInGap: false, latencyMs: 300, cutAfter: null },
    { id: 'b', kind: 'mid-clause', voice: 'v', cut: true, answeredInGap: false, latencyMs: null, cutAfter: 'a table for' },
    { id: 'c', kind: 'mid-clause', voice: 'v', cut: false, answeredInGap: false, latencyMs: 500, cutAfter: null },
    { id: 'd', kind: 'goes-on', voice: 'v', cut: false, answeredInGap: true, latencyMs: null, cutAfter: null },
  ];
  const p = summarise('j', 's', 1, outcomes);
  assert.equal([p.falseCutPercent, p.pausedCutPercent, p.answeredInGapPercent, p.latencyP50, p.latencyP95], [25, 50, 100, 300, 500]);
  assert.equal(p.cuts, [{ id: 'b', after: 'a table for' }]);
});

test('fitLogistic recovers a known logistic model, deterministically', () => {
  const random = seededRandom(7);
  const truth = TURN_FEATURES.map((_, i) => (i === 0 ? -0.5 : i % 3 === 0 ? 1.5 : i % 3 === 1 ? -1 : 0));
  const data: Row[] = [];
  for (let n = 0; n < 4000; n++) {
    const x: number[] = TURN_FEATURES.map((_, i) => (i === 0 ? 1 : random() < 0.5 ? 1 : 0));
    const z = x.reduce((s, xi, i) => s + xi * truth[i]!, 0);
    data.push({ x, y: random() < 1 / (1 + Math.exp(-z)) ? 1 : 0 });
  }
  const w = fitLogistic(data);
  for (let i = 0; i < truth.length; i++) assert.ok(Math.abs(w[i]! - truth[i]!) < 0.35, `${TURN_FEATURES[i]}: ${w[i]} vs ${truth[i]}`);
  assert.equal(fitLogistic(data), w);
});

test("rows: a goes-on gap and an unmeasured silence give none; each silence gives a row per stage of evidence it has", () => {
  const u = utterance('goes-on', 3000, [
    silence(1500, 2300, 'sentence-end', { text: 'Tell me a joke.', wordsEnd: 0.3 }),
    { ...silence(2400, 2450, 'gap'), audio: [] },
    silence(3050, 6000, 'end', { text: 'Make it about dogs.', wordsEnd: 0.5 }),
  ]);
  const r = rows([u], ['tiny.en']);
  // Nothing; the melody; the melody and the words; the three; the words; the words and the reading.
  assert.is(r.length, 6);
  assert.ok(r.every((x) => x.y === 1));
  const audio = u.silences[2]!.audio.find((a) => a.heardMs === AUDIO_ASKED_AT_MS)!.p;
  assert.equal(r[1]!.x, turnFeatures({ audio, words: null, wordsEnd: null }));
  assert.equal(r[0]!.x, turnFeatures({ audio: null, words: null, wordsEnd: null }));
});

test.run();
