/**
 * Drives a RealtimeSessionEngine directly (no socket) with the providers' fakes and an avatar
 * whose clock the test advances: `tick()` plays the next 40 ms of queued speech (silence when
 * idle) and emits it as the real avatar does, so responses progress, finish and can be cut
 * exactly where a test wants. Server events are collected in order.
 */
import { EventEmitter } from 'node:events';
import { Logger } from '../../src/core/log.js';
import { FakeLanguageModels, type FakeLlmOptions } from '../../src/providers/llm/fake-llm.js';
import { FakeSpeechService } from '../../src/providers/tts/fake-tts.js';
import { FakeVad } from '../../src/providers/vad/fake-vad.js';
import { FakeSpeechRecognizers } from '../../src/providers/asr/fake-asr.js';
import { type AvatarOutput, type AvatarOutputEvents, type SpeechPlacement } from '../../src/realtime/avatar-output.js';
import type { Json } from '../../src/realtime/protocol.js';
import type { EngineDeps, EngineOptions } from '../../src/realtime/engine-ports.js';
import { RealtimeSessionEngine } from '../../src/realtime/session-engine.js';
import { PCM_RATE_HZ } from '../../src/audio/pcm.js';
import { StreamableHttpMcp } from '../../src/providers/mcp/streamable-http.js';
import { InputImageChecker } from '../../src/media/input-images.js';

const TICK_SAMPLES = PCM_RATE_HZ / 25;
const NS_PER_SAMPLE = 1e9 / PCM_RATE_HZ;

/** An AvatarOutput on a manual clock: speech queues at 24 kHz; tick() plays 40 ms of it. */
export class TickingAvatar extends EventEmitter<AvatarOutputEvents> implements AvatarOutput {
  readonly fps = 25;
  readonly size = { width: 512, height: 512 };
  readonly clientFace = null;
  private queue = new Int16Array(0);
  /** Session time of the next tick, ns. */
  private nowNs = 0;
  interrupts = 0;
  /** Every listen() call, in order. */
  readonly listening: boolean[] = [];

  pushSpeech(pcm: Int16Array, sampleRateHz: number): SpeechPlacement {
    if (sampleRateHz !== PCM_RATE_HZ) throw new Error('TickingAvatar takes 24 kHz speech');
    const startPtsNs = this.nowNs + this.queue.length * NS_PER_SAMPLE;
    const next = new Int16Array(this.queue.length + pcm.length);
    next.set(this.queue);
    next.set(pcm, this.queue.length);
    this.queue = next;
    return { startPtsNs, endPtsNs: startPtsNs + pcm.length * NS_PER_SAMPLE };
  }

  interrupt(): { ptsNs: number } {
    this.interrupts++;
    this.queue = new Int16Array(0);
    return { ptsNs: this.nowNs };
  }

  /** Plays one tick: emits its audio (and a 1-byte frame). Returns how much speech it played. */
  tick(): number {
    const played = this.queue.subarray(0, TICK_SAMPLES);
    const pcm = new Int16Array(TICK_SAMPLES);
    pcm.set(played);
    const speech = played.length;
    this.queue = this.queue.slice(speech);
    const ptsNs = this.nowNs;
    this.nowNs += TICK_SAMPLES * NS_PER_SAMPLE;
    this.emit('audio', { data: Buffer.from(pcm.buffer), ptsNs });
    this.emit('frame', { data: Buffer.from([0xff]), ptsNs });
    return speech;
  }

  get queuedSamples(): number {
    return this.queue.length;
  }

  async setFace(): Promise<void> {}
  async setDriving(): Promise<void> {}
  listen(on: boolean): void {
    this.listening.push(on);
  }
  async close(): Promise<void> {}
}

/**
 * An event as a test reads it: any field may be looked at, as a client reading the JSON would
 * (the engine's typed `SeenEvent` is narrowed by `type`, which assertions do not need).
 */
export type SeenEvent = { type: string; [field: string]: unknown };

export interface Harness {
  engine: RealtimeSessionEngine;
  avatar: TickingAvatar;
  events: SeenEvent[];
  vad: FakeVad;
  send(event: Json): void;
  /** The first event from index `from` matching, letting the engine run (and ticking the avatar when `tick`). */
  waitFor(pred: (e: SeenEvent) => boolean, options?: { from?: number; tick?: boolean }): Promise<SeenEvent>;
  close(): Promise<void>;
}

export interface HarnessOptions extends Partial<EngineOptions> {
  reply?: FakeLlmOptions;
  transcript?: string;
  /** Called with every server event before it is collected; throwing makes the send fail. */
  beforeSend?: (event: SeenEvent) => void;
  /** Dependencies to use instead of the fakes (a voice service or asset check that fails, a logger). */
  deps?: Partial<Omit<EngineDeps, 'send'>>;
}

export async function engineHarness(options: HarnessOptions = {}): Promise<Harness> {
  const { reply, transcript, beforeSend, deps, ...engineOptions } = options;
  const events: SeenEvent[] = [];
  const avatar = new TickingAvatar();
  const vad = new FakeVad();
  const engine = new RealtimeSessionEngine(
    {
      sessionId: 'sess_test',
      userId: 'u1',
      dialect: 'ga',
      defaultModel: 'm',
      expiresAt: 0,
      ttsSource: 'auto',
      legacyVideo: false,
      initial: {},
      ...engineOptions,
    },
    {
      send: (event) => {
        beforeSend?.(event);
        events.push(event);
      },
      avatar,
      llm: new FakeLanguageModels(reply ?? { reply: 'Hello there. It is a fine day to talk.' }),
      tts: new FakeSpeechService(),
      asr: new FakeSpeechRecognizers({ transcript: transcript ?? 'What time is it?' }),
      createVad: async () => vad,
      endOfTurnModel: async () => null,
      images: new InputImageChecker(),
      // The server's default policy: no MCP server allowed (a test that needs one passes its own).
      mcp: new StreamableHttpMcp({ allowedHosts: [], allowPrivateAddresses: false, listTimeoutMs: 5000, callTimeoutMs: 5000 }, new Logger('silent')),
      assets: { require: async () => undefined },
      recorder: { appendTurn: async () => undefined, setCurrentTranscript: async () => undefined, addUsage: async () => undefined },
      log: new Logger('silent'),
      ...deps,
    },
  );
  await engine.start();
  return {
    engine,
    avatar,
    events,
    vad,
    send: (event) => engine.receive(JSON.stringify(event)),
    async waitFor(pred, { from = 0, tick = false } = {}) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        await engine.idle();
        const found = events.slice(from).find(pred);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`timed out; got ${events.slice(from).map((e) => e.type).join(', ')}`);
        if (tick) avatar.tick();
        await new Promise((r) => setImmediate(r));
      }
    },
    close: () => engine.close(),
  };
}
