/**
 * A deterministic voice and speech service for engine tests: each letter of the text becomes a
 * fixed-length phoneme (a harmonic tone for vowels, shaped noise for consonants, silence for
 * spaces and punctuation), so the same text always gives the same samples, durations and
 * timings. Scripted timing and failures: `chunkDelayMs` waits before each chunk (abortable),
 * `failAfterChunks` throws a ProviderError after that many chunks, and `spoken` records every
 * text asked for. One chunk per word group of `wordsPerChunk` words.
 */
import { checkSpeed, ttsFailed, voiceNotFound, type SpeakOptions, type SpeechChunk, type SpeechService, type Voice } from './base.js';

export const FAKE_RATE_HZ = 24000;
/** Each letter lasts this long at speed 1. */
export const FAKE_PHONEME_MS = 60;
const FAKE_PITCH_HZ = 140;

export interface FakeVoiceOptions {
  /** How long each letter lasts at speed 1 (default FAKE_PHONEME_MS). */
  phonemeMs?: number;
  chunkDelayMs?: number;
  failAfterChunks?: number;
  wordsPerChunk?: number;
  /** Base tone, Hz (distinct fake voices differ in pitch). */
  pitchHz?: number;
}

export class FakeVoice implements Voice {
  readonly engine = 'fake';
  /** Every text speak() was called with, in order. */
  readonly spoken: string[] = [];

  constructor(
    readonly id: string,
    private readonly options: FakeVoiceOptions = {},
  ) {}

  async *speak(text: string, options: SpeakOptions): AsyncGenerator<SpeechChunk> {
    const speed = checkSpeed(options.speed);
    this.spoken.push(text);
    const words = text.split(/\s+/).filter(Boolean);
    const per = Math.max(1, this.options.wordsPerChunk ?? 3);
    let sent = 0;
    for (let i = 0; i < words.length; i += per) {
      if (options.signal?.aborted) return;
      if (this.options.chunkDelayMs) {
        const aborted = await delay(this.options.chunkDelayMs, options.signal);
        if (aborted) return;
      }
      if (this.options.failAfterChunks !== undefined && sent >= this.options.failAfterChunks) {
        throw ttsFailed(`fake voice '${this.id}' failed after ${sent} chunks (scripted)`);
      }
      const text = words.slice(i, i + per).join(' ') + (i + per < words.length ? ' ' : '');
      yield fakeChunk(text, speed, this.options.pitchHz ?? FAKE_PITCH_HZ, this.options.phonemeMs ?? FAKE_PHONEME_MS);
      sent++;
    }
  }
}

/** The chunk FakeVoice makes for `text`: one phoneme per character, phonemeMs / speed each. */
export function fakeChunk(text: string, speed = 1, pitchHz = FAKE_PITCH_HZ, phonemeMs = FAKE_PHONEME_MS): SpeechChunk {
  const per = Math.round((FAKE_RATE_HZ * phonemeMs) / 1000 / speed);
  const chars = [...text];
  const pcm = new Int16Array(per * chars.length);
  const phonemes = chars.map((ch, k) => {
    const lower = ch.toLowerCase();
    const vowel = 'aeiouy'.includes(lower);
    const letter = /\p{L}|\p{N}/u.test(ch);
    let seed = (k + 1) * 2654435761;
    for (let i = 0; i < per; i++) {
      const n = k * per + i;
      const envelope = Math.sin((Math.PI * i) / per);
      let v = 0;
      if (vowel) v = 0.4 * Math.sin((2 * Math.PI * pitchHz * n) / FAKE_RATE_HZ) + 0.2 * Math.sin((4 * Math.PI * pitchHz * n) / FAKE_RATE_HZ);
      else if (letter) {
        seed = (seed * 1103515245 + 12345) >>> 0; // deterministic noise
        v = 0.15 * ((seed / 0xffffffff) * 2 - 1);
      }
      pcm[n] = Math.round(v * envelope * 32767);
    }
    const startNs = Math.round((k * per * 1e9) / FAKE_RATE_HZ);
    const endNs = Math.round(((k + 1) * per * 1e9) / FAKE_RATE_HZ);
    return { phoneme: letter ? lower : '_', startNs, endNs };
  });
  return { pcm, sampleRateHz: FAKE_RATE_HZ, phonemes };
}

/** Resolves true if aborted first. */
function delay(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(true);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(false);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A SpeechService of fake voices: any id in `ids` (default: the standard ids) resolves, or any id
 * at all with 'any' (for a server whose own catalog has already checked the id).
 */
export class FakeSpeechService implements SpeechService {
  readonly requests: Array<{ voiceId: string; userId: string; source: string }> = [];
  private readonly voices = new Map<string, FakeVoice>();

  constructor(
    private readonly ids: string[] | 'any' = ['default', 'alice', 'anthony'],
    private readonly options: FakeVoiceOptions = {},
  ) {
    if (ids !== 'any') ids.forEach((id) => this.add(id));
  }

  async voice(request: { voiceId: string; userId: string; source: string }): Promise<Voice> {
    this.requests.push(request);
    const voice = this.voices.get(request.voiceId) ?? (this.ids === 'any' ? this.add(request.voiceId) : undefined);
    if (!voice) throw voiceNotFound(`No voice '${request.voiceId}' (fake speech service).`);
    return voice;
  }

  /** Distinct voices differ in pitch, in the order they were made. */
  private add(id: string): FakeVoice {
    const voice = new FakeVoice(id, { pitchHz: FAKE_PITCH_HZ + 40 * this.voices.size, ...this.options });
    this.voices.set(id, voice);
    return voice;
  }

  /** The fake voice for `id`, to inspect what it spoke. */
  get(id: string): FakeVoice | undefined {
    return this.voices.get(id);
  }

  async close(): Promise<void> {}
}
