/**
 * A deterministic transcriber for engine tests: answers every request with a configured transcript
 * (or one computed from the request), delivered as the configured deltas, and can be told to fail
 * or to wait until released, so tests can abort or overlap transcriptions on purpose. It records
 * every request it saw. FakeSpeechRecognizers is the router a server is built with.
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

  constructor(public options: FakeTranscriberOptions = {}) {}

  forModel(): Transcriber {
    return {
      id: 'fake',
      local: true,
      transcribe: async (request, onDelta) => {
        this.requests.push(request);
        return new FakeTranscriber(this.options).transcribe(request, onDelta);
      },
      close: async () => {},
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
