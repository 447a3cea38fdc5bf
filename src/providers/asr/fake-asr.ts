/**
 * A deterministic transcriber for engine tests: answers every request with a configured transcript
 * (or one computed from the request), delivered as the configured deltas, and can be told to fail
 * or to wait until released, so tests can abort or overlap transcriptions on purpose. It records
 * every request it saw. With `streaming` it also offers Transcriber.stream: each stream answers
 * its transcript() with the configured transcript of everything pushed to it (as a request whose
 * pcm is that audio), and is recorded in `streams`. FakeSpeechRecognizers is the router a server
 * is built with.
 */
import {
  abortReason,
  asrFailed,
  audioSeconds,
  checkRequest,
  throwIfAborted,
  type SpeechRecognizers,
  type TranscriptionRequest,
  type TranscriptionResult,
  type TranscriptionStream,
  type Transcriber,
} from './base.js';
import type { ProviderError } from '../provider-error.js';

export interface FakeTranscriberOptions {
  /** The transcript, or a function of the request (default ''). */
  transcript?: string | ((request: TranscriptionRequest) => string);
  /** How the transcript is cut into deltas: a number of pieces (split at spaces; default 1). */
  deltas?: number;
  /** The language reported (default: the request's). */
  language?: string | null;
  /** Every call rejects with this error. */
  fail?: ProviderError;
  /** Calls wait until release() (default false). */
  hold?: boolean;
  /** Offer Transcriber.stream (default false: batch only). */
  streaming?: boolean;
}

/** What one fake stream was given. */
export interface FakeStreamRecord {
  language: string | null;
  prompt: string | null;
  /** Samples pushed, in order of the pushes. */
  pushes: number[];
  /** transcript() calls, with the samples pushed by then. */
  transcripts: number[];
  closed: boolean;
}

export class FakeTranscriber implements Transcriber {
  readonly local = true;
  readonly id = 'fake';
  readonly requests: TranscriptionRequest[] = [];
  private readonly held: Array<() => void> = [];

  constructor(private readonly options: FakeTranscriberOptions = {}) {}

  /** Lets every held call go on. */
  release(): void {
    for (const go of this.held.splice(0)) go();
  }

  /** Calls waiting in hold mode. */
  get waiting(): number {
    return this.held.length;
  }

  async transcribe(request: TranscriptionRequest, onDelta?: (delta: string) => void): Promise<TranscriptionResult> {
    checkRequest(request);
    const { signal } = request;
    throwIfAborted(signal);
    this.requests.push(request);
    if (this.options.hold) {
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => {
          const at = this.held.indexOf(go);
          if (at >= 0) this.held.splice(at, 1);
          reject(abortReason(signal as AbortSignal));
        };
        const go = (): void => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        this.held.push(go);
      });
    }
    if (this.options.fail) throw this.options.fail;
    const t = this.options.transcript ?? '';
    const text = typeof t === 'function' ? t(request) : t;
    if (onDelta) for (const piece of splitDeltas(text, this.options.deltas ?? 1)) onDelta(piece);
    return { text, language: this.options.language !== undefined ? this.options.language : request.language, audioSeconds: audioSeconds(request.pcm) };
  }

  async close(): Promise<void> {
    this.release();
  }
}

/** The SpeechRecognizers router over FakeTranscriber: every model gets one with the current
 * `options` (read at each call, so a test may change the transcript between turns). */
export class FakeSpeechRecognizers implements SpeechRecognizers {
  /** Every request any of its transcribers received, in order. */
  readonly requests: TranscriptionRequest[] = [];
  /** Every stream opened (with `streaming`), in order. */
  readonly streams: FakeStreamRecord[] = [];

  constructor(public options: FakeTranscriberOptions = {}) {}

  forModel(): Transcriber {
    return {
      id: 'fake',
      local: true,
      transcribe: async (request, onDelta) => {
        this.requests.push(request);
        return new FakeTranscriber(this.options).transcribe(request, onDelta);
      },
      ...(this.options.streaming ? { stream: (r: { language: string | null; prompt: string | null }) => this.openStream(r) } : {}),
      close: async () => {},
    };
  }

  private openStream(request: { language: string | null; prompt: string | null }): TranscriptionStream {
    const record: FakeStreamRecord = { ...request, pushes: [], transcripts: [], closed: false };
    this.streams.push(record);
    const heard: Int16Array[] = [];
    return {
      push: (pcm) => {
        if (record.closed) throw new Error('FakeSpeechRecognizers: push() on a closed stream');
        heard.push(pcm.slice());
        record.pushes.push(pcm.length);
      },
      transcript: (onDelta, signal) => {
        const pcm = new Int16Array(heard.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of heard) pcm.set(c, (at += c.length) - c.length);
        record.transcripts.push(pcm.length);
        return new FakeTranscriber(this.options).transcribe({ pcm, language: request.language, prompt: request.prompt, ...(signal ? { signal } : {}) }, onDelta);
      },
      close: () => {
        record.closed = true;
      },
    };
  }

  async close(): Promise<void> {}
}

/** `text` in about `n` pieces cut after spaces; their concatenation is `text`. */
export function splitDeltas(text: string, n: number): string[] {
  if (!text) return [];
  const words = text.split(/(?<= )/);
  const per = Math.max(1, Math.ceil(words.length / Math.max(1, n)));
  const out: string[] = [];
  for (let i = 0; i < words.length; i += per) out.push(words.slice(i, i + per).join(''));
  return out;
}

/** A ProviderError for `fail`, as a real provider would throw. */
export function fakeAsrFailure(message = 'fake transcription failure'): ProviderError {
  return asrFailed(message, {});
}
