/**
 * A test server for realtime tests: the real server, store and media plane (avatar rendering,
 * JPEG, played PCM), with the providers replaced by the fakes in src/providers so that
 * conversations are repeatable: a scripted language model (a fixed two-sentence answer unless a
 * test sets `llm.options`), fake voices whose speech lasts SPEECH_MS_PER_CHAR per character with
 * one phoneme per letter, and a recogniser that returns a set transcript (`asr.options`). The VAD
 * stays the real Silero model unless a test replaces it.
 */
import { FakeLanguageModels } from '../../src/providers/llm/fake-llm.js';
import { FakeSpeechService } from '../../src/providers/tts/fake-tts.js';
import { FakeSpeechRecognizers } from '../../src/providers/asr/fake-asr.js';
import type { RealtimeRuntime } from '../../src/signaling/realtime-connection.js';
import { startTestServer, type TestServer, type TestServerOptions } from './server.js';

/** The model's answer when a test sets none. */
export const DEFAULT_REPLY = 'Hello from the avatar. It is a fine day to talk.';
/** What the recogniser hears when a test sets nothing else. */
export const DEFAULT_TRANSCRIPT = 'What is the weather like today?';
/** How long the fake voices take per character of text, spaces and punctuation included. */
export const SPEECH_MS_PER_CHAR = 25;
/** The model streams a word every few ms, like a fast local model. */
const WORD_DELAY_MS = 2;

export interface RealtimeTestServer extends TestServer {
  llm: FakeLanguageModels;
  tts: FakeSpeechService;
  asr: FakeSpeechRecognizers;
  /** Puts the providers' options back to the defaults above (between tests on one server). */
  resetProviders(): void;
}

export async function startRealtimeTestServer(options: TestServerOptions & { runtime?: Partial<RealtimeRuntime> } = {}): Promise<RealtimeTestServer> {
  const llm = new FakeLanguageModels();
  // One chunk per sentence or clause, as the offline voices give it.
  const tts = new FakeSpeechService('any', { phonemeMs: SPEECH_MS_PER_CHAR, wordsPerChunk: 1000 });
  const asr = new FakeSpeechRecognizers();
  const resetProviders = (): void => {
    llm.options = { reply: DEFAULT_REPLY, chunkDelayMs: WORD_DELAY_MS };
    asr.options = { transcript: DEFAULT_TRANSCRIPT, language: 'en' };
  };
  resetProviders();
  const server = await startTestServer({ ...options, runtime: { llm, tts, asr, ...options.runtime } });
  return Object.assign(server, { llm, tts, asr, resetProviders });
}
