/**
 * Judges replayed on the turn-end benchmark's measured signals (signals.ts): where each would have
 * ended each utterance's turn, and the curve of false cut-offs against decision latency that
 * eot-bench draws.
 *
 * Time runs on the stream's frames, as in the server: the segmenter scores 32 ms frames, and a
 * silence's frames end at its start + 32 ms × k. A judge decides at a frame's end, or the moment
 * evidence it was waiting for arrives (speech-segmenter.ts: requestEnd). Evidence arrives after
 * the measured compute time from when the server would ask for it: the audio model at the first
 * frame with AUDIO_ASKED_AT_MS of silence, the transcript at the pause (the first frame with the
 * pause's silence), the language model's reading after the transcript.
 *
 * The judges:
 *  - `server_vad` (a silence of `ms` ends the turn);
 *  - `smart-turn` alone, as pipecat runs it: asked after 200 ms of silence (its VAD's stop
 *    time), the turn ends when it says complete with at least `threshold`, otherwise after 3 s;
 *  - `default`: this server's judge (turn-judge.ts TurnPolicy over the evidence), at a
 *    `confidence`, with the language model's reading or without it (no local weights), with a
 *    given recogniser for the pause's transcript.
 *
 * Outcomes per utterance (`Outcome`): cut (the turn ended in a silence before the speech's end:
 * a false cut-off, unless that silence is a goes-on gap after a finished sentence, which counts as
 * `answeredInGap`), or ended after the speech, `latencyMs` from its last sample to the decision.
 * A turn no judge ends within the recorded tail ends at the ceiling (CEILING_MS of silence).
 */
import { AUDIO_ASKED_AT_MS, TurnPolicy, type TurnEvidence } from '../../../src/realtime/turn-judge.js';
import { percentile } from '../harness.js';
import type { RecogniserName, SilenceSignals, UtteranceSignals } from './signals.js';
import type { UtteranceKind } from './corpus.js';

export const FRAME_MS = 32;
/** semantic_vad auto's ceiling: the longest any judge here lets a silence last. */
export const CEILING_MS = 4000;
/** pipecat's Smart Turn: asked after this much silence, and the turn ends after STOP_MS when it says incomplete. */
const SMART_TURN_ASKED_MS = 224;
const SMART_TURN_STOP_MS = 3000;

/** Decides one silence: the stream ms at which the turn ends in it, or null (not within `limitMs` of silence). */
export type Judge = (s: SilenceSignals, limitMs: number) => number | null;

export interface Outcome {
  id: string;
  kind: string;
  voice: string;
  /** The turn ended in a silence before the speech's end that was not a sentence's end. */
  cut: boolean;
  /** The turn ended in a goes-on gap (after a finished sentence, before the rest). */
  answeredInGap: boolean;
  /** From the speech's last sample to the end of the turn after it (null when cut or answered in a gap). */
  latencyMs: number | null;
  /** The words said before the silence it was cut in (for the report), or null. */
  cutAfter: string | null;
}

/** Replays `judge` on one utterance (see the header). */
export function replay(u: UtteranceSignals, judge: Judge): Outcome {
  const base = { id: u.id, kind: u.kind, voice: u.voice };
  for (const s of u.silences) {
    const last = s.label === 'end';
    const t = judge(s, last ? CEILING_MS : s.endMs - s.startMs);
    if (last) return { ...base, cut: false, answeredInGap: false, latencyMs: (t ?? s.startMs + CEILING_MS) - u.speechEndMs, cutAfter: null };
    if (t === null || t >= s.endMs) continue;
    const inGap = s.label === 'sentence-end';
    return { ...base, cut: !inGap, answeredInGap: inGap, latencyMs: null, cutAfter: inGap ? null : wordsBefore(u, s) };
  }
  return { ...base, cut: false, answeredInGap: false, latencyMs: null, cutAfter: null };
}

function wordsBefore(u: UtteranceSignals, s: SilenceSignals): string {
  return Object.values(s.transcripts)[0]?.text ?? `${s.startMs} ms into "${u.text}"`;
}

/** The end of the first frame whose silence reaches `ms`. */
function frameAt(s: SilenceSignals, ms: number): number {
  return s.startMs + Math.max(1, Math.ceil(ms / FRAME_MS)) * FRAME_MS;
}

export function serverVad(ms: number): Judge {
  return (s, limitMs) => (ms <= limitMs ? frameAt(s, ms) : null);
}

function audioAt(s: SilenceSignals, heardMs: number): { p: number; ms: number } | null {
  return s.audio.find((a) => a.heardMs === heardMs) ?? null;
}

export function smartTurnAlone(threshold: number): Judge {
  return (s, limitMs) => {
    const a = audioAt(s, SMART_TURN_ASKED_MS);
    if (a && a.p >= threshold) {
      const t = frameAt(s, SMART_TURN_ASKED_MS) + a.ms;
      if (t - s.startMs <= limitMs) return t;
    }
    return SMART_TURN_STOP_MS <= limitMs ? frameAt(s, SMART_TURN_STOP_MS) : null;
  };
}

export interface DefaultJudgeOptions {
  confidence: number;
  /** The pause's silence, at which its transcription starts. */
  pauseMs: number;
  recogniser: RecogniserName | null;
  /** Whether the local language model reads the words (its weights are present). */
  languageModel: boolean;
  /** Whether the audio model is there. */
  audioModel: boolean;
  /** The silence it is asked at (one of signals.ts AUDIO_PROBES_MS; default the judge's). */
  audioAskedAtMs?: number;
  policy?: TurnPolicy;
}

/** This server's judge (see the header). */
export function defaultJudge(o: DefaultJudgeOptions): Judge {
  const policy = o.policy ?? new TurnPolicy();
  return (s, limitMs) => {
    // Evidence and when it arrives, in stream ms.
    const arrivals: Array<{ at: number; add: Partial<TurnEvidence> }> = [];
    const askedAt = o.audioAskedAtMs ?? AUDIO_ASKED_AT_MS;
    const a = o.audioModel ? audioAt(s, askedAt) : null;
    if (a) arrivals.push({ at: frameAt(s, askedAt) + a.ms, add: { audio: a.p } });
    const t = o.recogniser ? s.transcripts[o.recogniser] : undefined;
    if (t) {
      const heard = frameAt(s, o.pauseMs) + t.ms;
      if (t.text !== '') arrivals.push({ at: heard, add: { words: t.text } });
      if (o.languageModel && t.wordsEnd !== null && t.wordsEndMs !== null) arrivals.push({ at: heard + t.wordsEndMs, add: { wordsEnd: t.wordsEnd } });
    }
    arrivals.sort((x, y) => x.at - y.at);
    const evidence: TurnEvidence = { audio: null, words: null, wordsEnd: null };
    const end = s.startMs + Math.min(limitMs, CEILING_MS);
    let next = 0;
    for (let frame = s.startMs + FRAME_MS; frame <= end + FRAME_MS; frame += FRAME_MS) {
      // Evidence arriving before this frame's end is decided on when it arrives, at the last frame's silence.
      while (next < arrivals.length && arrivals[next]!.at <= frame) {
        const { at, add } = arrivals[next++]!;
        Object.assign(evidence, add);
        if (at > end) return null;
        if (policy.decide(evidence, frame - FRAME_MS - s.startMs, o.confidence) !== null) return Math.max(at, s.startMs + FRAME_MS);
      }
      if (frame > end) return null;
      if (policy.decide(evidence, frame - s.startMs, o.confidence) !== null) return frame;
    }
    return null;
  };
}

/** One judge setting's outcomes, summarised (see the header). */
export interface Point {
  judge: string;
  setting: string;
  /** The knob's value (ms for server_vad, a probability otherwise). */
  knob: number;
  utterances: number;
  falseCutPercent: number;
  /** Over utterances with a pause inside a sentence (list, hesitation, mid-clause, trailing-conjunction). */
  pausedCutPercent: number;
  answeredInGapPercent: number;
  latencyP50: number | null;
  latencyP95: number | null;
  cuts: Array<{ id: string; after: string }>;
}

/** The kinds with a pause inside a sentence (corpus.ts). */
const PAUSED_KINDS: ReadonlySet<string> = new Set<UtteranceKind>(['list', 'hesitation', 'mid-clause', 'trailing-conjunction']);

export function summarise(judge: string, setting: string, knob: number, outcomes: Outcome[]): Point {
  const pct = (n: number, d: number) => (d === 0 ? 0 : Math.round((1000 * n) / d) / 10);
  const paused = outcomes.filter((o) => PAUSED_KINDS.has(o.kind));
  const goesOn = outcomes.filter((o) => o.kind === 'goes-on');
  const latencies = outcomes.map((o) => o.latencyMs).filter((x): x is number => x !== null).sort((a, b) => a - b);
  return {
    judge,
    setting,
    knob,
    utterances: outcomes.length,
    falseCutPercent: pct(outcomes.filter((o) => o.cut).length, outcomes.length),
    pausedCutPercent: pct(paused.filter((o) => o.cut).length, paused.length),
    answeredInGapPercent: pct(goesOn.filter((o) => o.answeredInGap).length, goesOn.length),
    latencyP50: latencies.length > 0 ? Math.round(percentile(latencies, 50)) : null,
    latencyP95: latencies.length > 0 ? Math.round(percentile(latencies, 95)) : null,
    cuts: outcomes.filter((o) => o.cut).map((o) => ({ id: o.id, after: o.cutAfter ?? '' })),
  };
}
