/**
 * Builds what realtime connections use besides the REST services: the language models, the
 * speech service, the recognisers, the VAD, and the avatar (a native media session per
 * connection). Tests replace any part through ServerOptions.runtime (e.g. a scripted LLM), never
 * the avatar's media plane, which is always the real one.
 */
import path from 'node:path';
import type { Config } from '../config.js';
import { StreamableHttpMcp } from '../providers/mcp/streamable-http.js';
import type { Logger } from '../core/log.js';
import { MEDIA_UNSET } from '../core/media-options.js';
import type { AssetService } from '../assets/asset-service.js';
import { AvatarAssets, DEFAULT_DRIVING_ID, DEFAULT_FACE_ID } from '../media/avatar-assets.js';
import { InputImageChecker } from '../media/input-images.js';
import { MediaEngine } from '../media/media-engine.js';
import type { FaceRegistry } from '../media/face-registration.js';
import { SileroVad } from '../providers/vad/silero.js';
import { SmartTurn } from '../providers/turn/smart-turn.js';
import type { EndOfTurnModel } from '../providers/turn/base.js';
import type { RealtimeRuntime } from '../signaling/realtime-connection.js';
import { replyRequest } from '../realtime/reply-request.js';
import { DEFAULT_INSTRUCTIONS } from '../sessions/session-config.js';

const STANDARD_VOICES = ['default', 'alice', 'anthony'];
const PIPELINES_DIR = path.resolve(import.meta.dirname, '../../pipelines');

export interface RuntimeDeps {
  config: Config;
  assets: AssetService;
  faces: FaceRegistry;
  log: Logger;
}

export interface RuntimeControl {
  /**
   * Loads the default models (language model, voices, recogniser) by one tiny request each, so
   * the first conversation does not wait seconds for them. Failures are logged, not thrown.
   */
  warmUp(): Promise<void>;
  close(): Promise<void>;
}

/** Providers are imported only when used, so a server whose tests replace them never loads their native code. */
export async function createRealtimeRuntime(deps: RuntimeDeps, overrides: Partial<RealtimeRuntime> = {}): Promise<RealtimeRuntime & RuntimeControl> {
  const { config, log } = deps;
  const avatarAssets = new AvatarAssets(deps.assets, deps.faces, config.dataDir);
  // A session that chose no output_size gets the server's; its renderer is the one it names.
  const media = new MediaEngine({ assets: avatarAssets, pipelinesDir: PIPELINES_DIR, mediaDefaults: { outputSize: config.avatarOutputSize }, log: log.child({ module: 'avatar' }) });
  const llm =
    overrides.llm ?? (await import('../providers/llm/index.js')).createLanguageModels(config.llm, config.modelsDir, log.child({ module: 'llm' }));
  const tts =
    overrides.tts ??
    (await import('../providers/tts/index.js')).createSpeechService(config.tts, { modelsDir: config.modelsDir, assets: deps.assets, log: log.child({ module: 'tts' }) });
  const asr =
    overrides.asr ?? (await import('../providers/asr/index.js')).createSpeechRecognizers(config.asr, config.modelsDir, log.child({ module: 'asr' }));
  // Loaded on first use and shared; a failed load is logged once and semantic_vad falls back to silence.
  let turnModel: Promise<EndOfTurnModel | null> | null = null;
  const endOfTurnModel =
    overrides.endOfTurnModel ??
    (() =>
      (turnModel ??= SmartTurn.load(config.modelsDir).catch((err: Error) => {
        log.warn('semantic_vad: the end-of-turn model cannot be loaded; turns end on silence', { err: err.message });
        return null;
      })));
  return {
    llm,
    tts,
    asr,
    images: new InputImageChecker(),
    mcp: overrides.mcp ?? new StreamableHttpMcp(config.mcp, log.child({ module: 'mcp' })),
    createVad: overrides.createVad ?? (() => SileroVad.create()),
    endOfTurnModel,
    startAvatar: overrides.startAvatar ?? ((o) => media.startAvatar(o)),
    async warmUp() {
      const started = performance.now();
      const tasks: Array<[string, () => Promise<unknown>]> = [
        ['language model', async () => {
          const model = llm.forModel(config.defaultModel);
          const abort = new AbortController();
          const stream = model.generate({ messages: [{ role: 'user', content: 'Hi' }], maxOutputTokens: 1, signal: abort.signal });
          for await (const chunk of stream) if (chunk.type === 'text') abort.abort();
          // The default session's instructions, evaluated once now rather than in the first reply
          // of every sequence (0.6-0.9 s of the 2-core machine's first turn).
          await model.prefill?.(replyRequest(DEFAULT_INSTRUCTIONS, ['audio'], [], 'inf').messages);
        }],
        // The local model that reads the pauses' words for semantic_vad when replies come from
        // elsewhere (a hosted model): loaded, and the readings' shared instructions evaluated.
        ['words reader', async () => {
          const reader = llm.wordsReader();
          if (reader === null || reader === llm.forModel(config.defaultModel)) return;
          await reader.prefill?.(replyRequest(DEFAULT_INSTRUCTIONS, ['audio'], [], 'inf').messages);
        }],
        ...STANDARD_VOICES.map((voiceId): [string, () => Promise<unknown>] => [`voice ${voiceId}`, async () => {
          const voice = await tts.voice({ voiceId, userId: config.bootstrapUserId, source: 'auto' });
          for await (const _ of voice.speak('Hello.', { speed: 1 })) void _;
        }]),
        ['recogniser', () => asr.forModel(null).transcribe({ pcm: new Int16Array(12_000), language: 'en', prompt: null })],
        ['end-of-turn model', async () => {
          const model = await endOfTurnModel();
          if (!model) throw new Error('not installed (semantic_vad ends turns on silence)');
          await model.completeProbability(new Float32Array(model.sampleRateHz));
        }],
        // The first media session loads GStreamer's plugins and the encoders (about 1 s on the
        // 2-core machine): without this the first call after start waits that long for its
        // first frame (npm run bench -- webrtc).
        ['media plane', async () => {
          const avatar = await media.startAvatar({
            userId: config.bootstrapUserId,
            faceId: DEFAULT_FACE_ID,
            drivingId: DEFAULT_DRIVING_ID,
            media: MEDIA_UNSET,
            jpeg: true,
            rtp: { video: 'h264', audio: true },
          });
          await avatar.close();
        }],
      ];
      // One at a time: on a small machine, loading all at once only makes each slower.
      for (const [what, task] of tasks) {
        try {
          await task();
        } catch (err) {
          log.warn(`warm-up: ${what} is not available`, { err: (err as Error).message });
        }
      }
      log.info('models warmed up', { ms: Math.round(performance.now() - started), renderers: media.renderers() });
    },
    async close() {
      await Promise.allSettled([llm.close(), tts.close(), asr.close(), turnModel?.then((m) => m?.close())]);
    },
  };
}
