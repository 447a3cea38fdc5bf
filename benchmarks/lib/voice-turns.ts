/**
 * The realtime benchmark's voice turns (realtime.bench.ts): who speaks, what they say, what the
 * line carries, and one turn streamed in real time and timed from the client's side.
 *
 * Speakers (testSpeakers): every Piper voice fetched, flite's four and four espeak-ng variants,
 * engines interleaved in a fixed order; speaker i speaks complete questions at SPEED_CYCLE[i % 4]
 * (and answers to be cut) and paused ones at SPEED_CYCLE[(i + 2) % 4], so half of them are heard
 * slowed (0.8) on one kind and hurried (1.25) on the other. 'quick' is the first QUICK_SPEAKERS of
 * that order.
 *
 * Samples (makeSamples), each with LEAD_MS of line before the speech, the same in every mode:
 *  - complete: a question without a pause, many ending in a preposition ("Where are you from?"),
 *    a word a turn detector may distrust as an ending;
 *  - paused: a sentence with a 300–800 ms pause at a word boundary mid-sentence (pausedSpeech);
 *  - then-more (answers to be cut): a complete question, a 700–900 ms gap (long enough for the
 *    server to answer), then more ("… France? | And what about Spain?"), two utterances each
 *    with its own final melody.
 * Speakers rotate over each kind's questions (question k by speaker k mod S), and each kind has
 * at least as many samples as there are speakers, so every speaker is heard on both kinds;
 * 'quick' takes one question of each kind per speaker.
 *
 * The line (streamTurn): 'silence' is digital zeros around the speech; 'noise' is a live
 * microphone, a pink noise floor at NOISE_DBFS (seeded per sample, so every mode hears the same
 * noise) under the speech, before it and after it. Either is streamed in 20 ms appends at real
 * time until the reply's first audio delta (or TAIL_MS past the speech), then AFTER_MS more while
 * the reply is cancelled, and the input buffer is cleared for the next turn. A session that does
 * not answer the clear within CLEAR_TIMEOUT_MS is wedged (its events are handled in order, so
 * something before the clear never finished): the turn says so, and the caller opens another.
 * Every turn keeps a trace of the server events it saw (ms from the end of the speech), which is
 * what explains a turn that waited or got no reply.
 */
import type { Voice } from '../../src/providers/tts/base.js';
import type { RealtimeTestClient, ServerEvent } from '../../harness/clients/realtime-client.js';
import { concatSamples, silence, toPcm16 } from '../../harness/measures/speech.js';
import { espeakTestVoices, pausedSpeech, piperTestVoices, voiceSpeech } from '../../harness/measures/voices.js';
import { FliteVoice } from '../../src/providers/tts/flite.js';

export const RATE_HZ = 24000;
const APPEND_MS = 20;
const LEAD_MS = 300;
/** The line streamed after the speech at most, waiting for the reply (past semantic_vad's 4 s ceiling). */
export const TAIL_MS = 5000;
/** The line streamed on after the reply's first audio, while it is cancelled: a microphone does not stop. */
const AFTER_MS = 300;
/** How long the server may take to answer input_audio_buffer.clear before its session counts as wedged. */
const CLEAR_TIMEOUT_MS = 10_000;
/** The live microphone's noise floor, dBFS RMS, by sample index in turn: quiet room to fan noise. */
export const NOISE_DBFS = [-60, -55, -50] as const;

export const LINES = ['silence', 'noise'] as const;
export type Line = (typeof LINES)[number];
export const SPEAKER_SETS = ['all', 'quick'] as const;
export type SpeakerSet = (typeof SPEAKER_SETS)[number];
const QUICK_SPEAKERS = 3;
/** Speaking rates in turn over the speakers (see the header). */
const SPEED_CYCLE = [1, 0.8, 1, 1.25] as const;

export const COMPLETE_QUESTIONS = [
  'Where are you from?',
  'What are you thinking of?',
  'Who did you go with?',
  'What is the capital of France?',
  'Which one are you talking about?',
  'Can you tell me a joke about cats?',
  'What is this made of?',
  'Where is the nearest train station?',
  'Who are you waiting for?',
];
/** [words before the pause, the whole sentence, pause ms]. */
export const PAUSED_QUESTIONS: Array<[string, string, number]> = [
  ['What time zone', 'What time zone are you in right now?', 450],
  ['I would like to book a table for', 'I would like to book a table for two people tonight.', 800],
  ['Can you tell me about the', 'Can you tell me about the history of Rome?', 600],
  ['So what I was thinking is that', 'So what I was thinking is that we could go to the park.', 300],
  ['My favourite colour is', 'My favourite colour is blue, what is yours?', 500],
  ['How far is it from', 'How far is it from London to Paris?', 800],
  ['Do you know where', 'Do you know where I left my keys?', 600],
  ['Is it going to', 'Is it going to rain tomorrow?', 300],
  ['I was wondering if', 'I was wondering if you could help me.', 450],
];
/** [a complete question, what the speaker adds after the gap, gap ms]. */
export const THEN_MORE: Array<[string, string, number]> = [
  ['What is the capital of France?', 'And what about Spain?', 800],
  ['Tell me a joke.', 'Make it about dogs.', 700],
  ['How tall is Mount Everest?', 'And how long does it take to climb it?', 900],
];

export type SampleKind = 'complete' | 'paused' | 'then-more';

export interface Speaker {
  voice: Voice;
  /** Speed of its complete questions (and additions) and of its paused ones. */
  speeds: { complete: number; paused: number };
}

export interface Sample {
  kind: SampleKind;
  label: string;
  /** The voice's id: turns are grouped by it per speaker. */
  speaker: string;
  /** Lead, speech and any pause, -1..1 at RATE_HZ (the line's noise is added as it streams). */
  audio: Float32Array;
  /** Where the speech ends in `audio` (samples). */
  speechEnd: number;
  /** The pause (paused) or the gap (then-more), [start, end) in samples; null: none. */
  pause: [number, number] | null;
  /** The noise floor on a live-microphone line, and its seed: fixed per sample, so every mode hears the same line. */
  noiseDbfs: number;
  seed: number;
}

/** The voices in their fixed order (see the header), with their speeds. */
export async function testSpeakers(set: SpeakerSet): Promise<Speaker[]> {
  const flite = (v: string): Voice => new FliteVoice(`flite-${v}`, { voice: v });
  const [us, usF3, gbM3, usM7] = espeakTestVoices() as [Voice, Voice, Voice, Voice];
  const voices = [flite('slt'), ...(await piperTestVoices()), us, flite('rms'), usF3, flite('awb'), gbM3, flite('kal16'), usM7];
  const speakers = voices.map((voice, i) => ({ voice, speeds: { complete: SPEED_CYCLE[i % 4]!, paused: SPEED_CYCLE[(i + 2) % 4]! } }));
  return set === 'quick' ? speakers.slice(0, QUICK_SPEAKERS) : speakers;
}

/** How a speaker is named in labels: its voice, and its speed where not 1. */
function speakerName(voice: Voice, speed: number): string {
  return speed === 1 ? voice.id : `${voice.id}@${speed}`;
}

/** Every sample of every kind, in a fixed order: complete, paused, then-more (see the header). */
export async function makeSamples(speakers: Speaker[], set: SpeakerSet): Promise<Sample[]> {
  const count = (questions: number) => (set === 'quick' ? speakers.length : Math.max(questions, speakers.length));
  const out: Sample[] = [];
  const push = (s: Omit<Sample, 'noiseDbfs' | 'seed'>) => out.push({ ...s, noiseDbfs: NOISE_DBFS[out.length % NOISE_DBFS.length]!, seed: 1 + out.length });
  for (let k = 0; k < count(COMPLETE_QUESTIONS.length); k++) {
    push(await completeSample(speakers[k % speakers.length]!, COMPLETE_QUESTIONS[k % COMPLETE_QUESTIONS.length]!));
  }
  for (let k = 0; k < count(PAUSED_QUESTIONS.length); k++) {
    push(await pausedSample(speakers[k % speakers.length]!, PAUSED_QUESTIONS[k % PAUSED_QUESTIONS.length]!));
  }
  for (const [k, parts] of THEN_MORE.entries()) push(await thenMoreSample(speakers[k % speakers.length]!, parts));
  return out;
}

const lead = () => silence(LEAD_MS, RATE_HZ);

async function completeSample({ voice, speeds }: Speaker, question: string): Promise<Omit<Sample, 'noiseDbfs' | 'seed'>> {
  const speech = await voiceSpeech(voice, question, RATE_HZ, speeds.complete);
  const name = speakerName(voice, speeds.complete);
  return { kind: 'complete', label: `${name}: ${question}`, speaker: voice.id, audio: concatSamples([lead(), speech]), speechEnd: lead().length + speech.length, pause: null };
}

async function pausedSample({ voice, speeds }: Speaker, [prefix, sentence, ms]: [string, string, number]): Promise<Omit<Sample, 'noiseDbfs' | 'seed'>> {
  const { audio, pauseAt } = await pausedSpeech(voice, prefix, sentence, ms, RATE_HZ, speeds.paused);
  const start = lead().length + pauseAt;
  return {
    kind: 'paused',
    label: `${speakerName(voice, speeds.paused)}: ${sentence} (${ms} ms pause)`,
    speaker: voice.id,
    audio: concatSamples([lead(), audio]),
    speechEnd: lead().length + audio.length,
    pause: [start, start + Math.round((ms * RATE_HZ) / 1000)],
  };
}

async function thenMoreSample({ voice, speeds }: Speaker, [first, then, ms]: [string, string, number]): Promise<Omit<Sample, 'noiseDbfs' | 'seed'>> {
  // Each part spoken alone: a finished question with its final melody, then a second thought.
  const a = await voiceSpeech(voice, first, RATE_HZ, speeds.complete);
  const b = await voiceSpeech(voice, then, RATE_HZ, speeds.complete);
  const gap = silence(ms, RATE_HZ);
  const start = lead().length + a.length;
  return {
    kind: 'then-more',
    label: `${speakerName(voice, speeds.complete)}: ${first} | ${then} (${ms} ms gap)`,
    speaker: voice.id,
    audio: concatSamples([lead(), a, gap, b]),
    speechEnd: start + gap.length + b.length,
    pause: [start, start + gap.length],
  };
}

/**
 * Pink noise (Paul Kellet's economy filter over seeded xorshift32 white noise) at a given RMS: a
 * microphone's floor has more energy low than high, unlike white noise. The level is calibrated
 * on the generator's own first second, so it holds for every seed.
 */
export class PinkNoise {
  private state: number;
  private readonly b = [0, 0, 0];
  private readonly scale: number;

  /** `rms` null: unscaled (the calibration probe). */
  constructor(seed: number, rms: number | null) {
    this.state = seed >>> 0 || 1;
    if (rms === null) this.scale = 1;
    else {
      const probe = new Float32Array(RATE_HZ);
      new PinkNoise(seed, null).addTo(probe);
      this.scale = rms / Math.sqrt(probe.reduce((sum, x) => sum + x * x, 0) / probe.length);
    }
  }

  /** Adds the next `out.length` samples of noise to `out`. */
  addTo(out: Float32Array): void {
    const b = this.b;
    for (let i = 0; i < out.length; i++) {
      let s = this.state;
      s ^= s << 13;
      s >>>= 0;
      s ^= s >>> 17;
      s ^= s << 5;
      this.state = s >>> 0;
      const white = (this.state / 0xffffffff) * 2 - 1;
      b[0] = 0.99765 * b[0]! + white * 0.099046;
      b[1] = 0.963 * b[1]! + white * 0.2965164;
      b[2] = 0.57 * b[2]! + white * 1.0526913;
      out[i] = (out[i] ?? 0) + (b[0] + b[1] + b[2] + white * 0.1848) * this.scale;
    }
  }
}

export function dbfsToRms(dbfs: number): number {
  return 10 ** (dbfs / 20);
}

/** A response the server started before the turn after the speech ended: a reply to part of it. */
export interface PartReply {
  id: string;
  /** ms from the end of the speech (negative: before it) to response.created and its first audio delta (null: none). */
  createdMs: number;
  firstAudioMs: number | null;
  /** Ended cancelled, or its audio buffer cleared: the server stopped it. */
  stopped: boolean;
}

export interface VoiceTurn {
  sample: Sample;
  /** The item of the turn that ended after the speech. */
  itemId: string | null;
  fromSpeechEndMs: number | null;
  /** speech_stopped before the end of the speech, ms from its end (negative): a cut-in, or for then-more the first part's end. */
  earlyStopsMs: number[];
  decisionMs: number | null;
  transcriptionTailMs: number | null;
  responseId: string | null;
  createdToDeltaMs: number | null;
  partReplies: PartReply[];
  /** The session did not answer the clear after this turn (see the header). */
  wedged: boolean;
  /** "ms event [response or item] [status]" for each server event of the turn (deltas: the first of each response only). */
  trace: string[];
}

/** Streams `sample` on `line` in real time until the reply's first audio (see the header) and times the turn. */
export async function streamTurn(c: RealtimeTestClient, sample: Sample, line: Line): Promise<VoiceTurn> {
  const step = (RATE_HZ * APPEND_MS) / 1000;
  const noise = line === 'noise' ? new PinkNoise(sample.seed, dbfsToRms(sample.noiseDbfs)) : null;
  const start = performance.now();
  const speechEnd = start + (sample.speechEnd / RATE_HZ) * 1000;
  const watch = watchTurn(c, speechEnd);
  const last = sample.audio.length + (TAIL_MS * RATE_HZ) / 1000;
  let stopAt = Infinity;
  for (let n = 0; performance.now() < stopAt; n++) {
    // The reply's first audio (or the tail's end) stops the reply, and the line a little later.
    if (stopAt === Infinity && (watch.firstAudio() !== null || n * step >= last)) {
      c.send({ type: 'response.cancel' });
      watch.mark('(client) response.cancel');
      stopAt = (watch.firstAudio() ?? performance.now()) + AFTER_MS;
    }
    // Real-time pacing: a microphone delivers each 20 ms once they have been heard.
    const wait = start + (n + 1) * APPEND_MS - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const part = lineChunk(sample.audio, n * step, step, noise);
    c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64') });
  }
  const turn = watch.end(sample);
  const from = c.events.length;
  c.send({ type: 'input_audio_buffer.clear' });
  try {
    await c.waitFor('input_audio_buffer.cleared', { from, timeoutMs: CLEAR_TIMEOUT_MS });
  } catch {
    turn.wedged = true;
    turn.trace.push(...c.events.slice(from).map((e) => `after the clear: ${e.type}`));
  }
  return turn;
}

/** `length` samples of the line from `at`: the speech (or nothing past it) plus the noise floor, as PCM16. */
function lineChunk(audio: Float32Array, at: number, length: number, noise: PinkNoise | null): Int16Array {
  const out = new Float32Array(length);
  if (at < audio.length) out.set(audio.subarray(at, Math.min(audio.length, at + length)));
  noise?.addTo(out);
  return toPcm16(out);
}

/**
 * Listens to a turn's server events: the turn that ends after the speech (speech_stopped at or
 * after `speechEnd`), its transcript, and the first audio of a response created after it (an
 * answer owed to a cut-in part may start first and give way to the turn's own, unheard); earlier
 * speech_stopped events, and responses started before that turn with their fate.
 */
function watchTurn(c: RealtimeTestClient, speechEnd: number) {
  let stoppedAt: number | null = null;
  let itemId: string | null = null;
  let transcribedAt: number | null = null;
  /** When each response created after that turn ended was created, by id. */
  const replies = new Map<string, number>();
  let createdAt: number | null = null;
  let responseId: string | null = null;
  let firstAudio: number | null = null;
  const earlyStops: number[] = [];
  const parts = new Map<string, { createdAt: number; firstAudio: number | null; stopped: boolean }>();
  const trace: string[] = [];
  const traced = new Set<string>();
  const listener = (data: Buffer) => {
    const now = performance.now();
    const e = JSON.parse(data.toString()) as ServerEvent;
    const id = (e.response_id ?? e.response?.id) as string | undefined;
    // A delta stream shows as its first delta: the trace is for reading.
    if (!e.type.endsWith('.delta') || !traced.has(`${e.type} ${id}`)) {
      traced.add(`${e.type} ${id}`);
      trace.push([Math.round(now - speechEnd), e.type, id ?? e.item_id ?? '', e.response?.status ?? '', e.transcript ? `"${e.transcript}"` : ''].join(' ').trim());
    }
    if (e.type === 'input_audio_buffer.speech_stopped') {
      if (now < speechEnd) earlyStops.push(now);
      else if (stoppedAt === null) {
        stoppedAt = now;
        itemId = (e.item_id as string | undefined) ?? null;
      }
    } else if (e.type === 'response.created' && id) {
      if (stoppedAt === null) parts.set(id, { createdAt: now, firstAudio: null, stopped: false });
      else replies.set(id, now);
    } else if (e.type === 'response.output_audio.delta' && id) {
      if (firstAudio === null && replies.has(id)) {
        firstAudio = now;
        createdAt = replies.get(id)!;
        responseId = id;
      }
      const part = parts.get(id);
      if (part) part.firstAudio ??= now;
    } else if ((e.type === 'response.done' && e.response?.status === 'cancelled') || e.type === 'output_audio_buffer.cleared') {
      const part = id ? parts.get(id) : undefined;
      if (part) part.stopped = true;
    } else if (e.type === 'conversation.item.input_audio_transcription.completed' && itemId !== null && e.item_id === itemId) {
      transcribedAt ??= now;
    }
  };
  c.ws.on('message', listener);
  const ms = (a: number | null, b: number | null) => (a !== null && b !== null ? Math.round(b - a) : null);
  return {
    firstAudio: () => firstAudio,
    mark: (what: string) => trace.push(`${Math.round(performance.now() - speechEnd)} ${what}`),
    end(sample: Sample): VoiceTurn {
      c.ws.off('message', listener);
      return {
        sample,
        itemId,
        fromSpeechEndMs: ms(speechEnd, firstAudio),
        earlyStopsMs: earlyStops.map((t) => Math.round(t - speechEnd)),
        decisionMs: ms(speechEnd, stoppedAt),
        transcriptionTailMs: ms(stoppedAt, transcribedAt),
        responseId,
        createdToDeltaMs: ms(createdAt, firstAudio),
        partReplies: [...parts].map(([id, p]) => ({ id, createdMs: Math.round(p.createdAt - speechEnd), firstAudioMs: ms(speechEnd, p.firstAudio), stopped: p.stopped })),
        wedged: false,
        trace,
      };
    },
  };
}
