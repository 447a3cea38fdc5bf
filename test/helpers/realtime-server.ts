/**
 * A test server for realtime tests: the real server, store and media plane (avatar rendering,
 * JPEG, played PCM), with the providers replaced by deterministic ones so that conversations are
 * repeatable: a scripted language model, a tone "voice" whose length follows the text, and a
 * recogniser that returns a set transcript. The VAD stays the real Silero model unless a test
 * replaces it.
 */
import type { LanguageModel, LanguageModels, GenerateChunk, GenerateRequest } from '../../src/providers/llm/base.js';
import type { SpeechService, Voice, SpeechChunk } from '../../src/providers/tts/base.js';
import type { SpeechRecognizers, Transcriber, TranscriptionRequest, TranscriptionResult } from '../../src/providers/asr/base.js';
import type { RealtimeRuntime } from '../../src/signaling/realtime-connection.js';
import { startTestServer, type TestServer, type TestServerOptions } from './server.js';

export interface ScriptOptions {
  /** The reply for a request (default: a fixed two-sentence answer). */
  reply?: (request: GenerateRequest) => string;
  /** Delay between streamed words, ms. */
  wordDelayMs?: number;
  /** Throw this instead of answering. */
  fail?: Error | null;
}

export class ScriptedModels implements LanguageModels {
  readonly requests: GenerateRequest[] = [];
  constructor(public options: ScriptOptions = {}) {}

  forModel(model: string): LanguageModel {
    const self = this;
    return {
      id: `scripted:${model}`,
      async *generate(request: GenerateRequest): AsyncIterable<GenerateChunk> {
        self.requests.push(request);
        if (self.options.fail) throw self.options.fail;
        const reply = self.options.reply?.(request) ?? 'Hello from the avatar. It is a fine day to talk.';
        const words = reply.split(/(?<= )/);
        let out = 0;
        for (const word of words) {
          if (request.signal.aborted) {
            yield { type: 'done', finishReason: 'aborted', usage: { inputTokens: 10, outputTokens: out } };
            return;
          }
          await new Promise((r) => setTimeout(r, self.options.wordDelayMs ?? 2));
          out++;
          yield { type: 'text', text: word };
        }
        yield { type: 'done', finishReason: 'stop', usage: { inputTokens: 10, outputTokens: out } };
      },
      async close() {},
    };
  }

  async close(): Promise<void> {}
}

/** Speech as a 180 Hz buzz, `msPerChar` long per character, with one phoneme per word. */
export class ToneSpeech implements SpeechService {
  readonly spoken: string[] = [];
  constructor(private readonly msPerChar = 25) {}

  async voice(request: { voiceId: string }): Promise<Voice> {
    const self = this;
    return {
      id: request.voiceId,
      engine: 'fake',
      async *speak(text: string): AsyncIterable<SpeechChunk> {
        self.spoken.push(text);
        const rate = 24000;
        const samples = Math.round((text.length * self.msPerChar * rate) / 1000);
        const pcm = new Int16Array(samples);
        for (let i = 0; i < samples; i++) pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * 180 * i) / rate) * (0.6 + 0.4 * Math.sin((2 * Math.PI * 4 * i) / rate)));
        const durNs = (samples / rate) * 1e9;
        const words = text.split(/\s+/);
        const phonemes = words.map((_, i) => ({ phoneme: i % 2 ? 'm' : 'a', startNs: Math.round((i * durNs) / words.length), endNs: Math.round(((i + 1) * durNs) / words.length) }));
        yield { pcm, sampleRateHz: rate, phonemes };
      },
    };
  }

  async close(): Promise<void> {}
}

export class SetTranscript implements SpeechRecognizers {
  readonly heard: TranscriptionRequest[] = [];
  constructor(public transcript = 'What is the weather like today?') {}

  forModel(): Transcriber {
    const self = this;
    return {
      id: 'fake',
      async transcribe(request: TranscriptionRequest, onDelta?: (d: string) => void): Promise<TranscriptionResult> {
        self.heard.push(request);
        onDelta?.(self.transcript);
        return { text: self.transcript, language: 'en', audioSeconds: request.pcm.length / 24000 };
      },
      async close() {},
    };
  }

  async close(): Promise<void> {}
}

export interface RealtimeTestServer extends TestServer {
  llm: ScriptedModels;
  tts: ToneSpeech;
  asr: SetTranscript;
}

export async function startRealtimeTestServer(options: TestServerOptions & { runtime?: Partial<RealtimeRuntime> } = {}): Promise<RealtimeTestServer> {
  const llm = new ScriptedModels();
  const tts = new ToneSpeech();
  const asr = new SetTranscript();
  const server = await startTestServer({ ...options, runtime: { llm, tts, asr, ...options.runtime } });
  return Object.assign(server, { llm, tts, asr });
}
