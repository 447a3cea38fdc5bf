/**
 * The speech service: resolves a session's voice under its `tts_source` to an engine voice.
 *
 * Which settings speak a voice:
 *  - a standard voice (default, alice, anthony): its `engines` list in models/assets/catalog.json;
 *  - an uploaded voice (UUID owned by the user): its sample is decoded and analysed once (median
 *    pitch, articulation rate; cached per file hash) and mapped to the closest offline settings:
 *    flite slt at the measured pitch for voices at or above 150 Hz, kal16 at the measured pitch
 *    from 112 Hz, rms (≈100 Hz, its pitch cannot be moved) below; espeak-ng en-us / en-us+f3
 *    with the pitch scale fitted to the measured Hz; Piper joe at the measured rate; OpenAI
 *    cedar (male range) or marin;
 *  - an OpenAI voice name: OPENAI_VOICE_MAP below picks a standard voice or flite voice of a
 *    fitting character; with tts_source `openai` the name is sent upstream as given.
 *
 * Which engine (`source`): `auto` takes the first entry whose engine is available (Piper only
 * when its model is fetched and loads; then OpenAI if configured and the native engines are
 * missing); `offline` the first flite/espeak-ng entry; `piper`, `flite`, `espeak-ng` that
 * engine's entry (Piper voices all use the one fetched model, at the entry's rate); `openai` the
 * entry's OpenAI voice, when TTS_OPENAI_* are configured. Failures are ProviderErrors:
 * `voice_not_found` (no such voice for this user) or `tts_unavailable` (engine not installed,
 * model not fetched, OpenAI not configured, unknown source).
 */
import type { AssetService } from '../../assets/asset-service.js';
import { isOpenAiVoiceName, type VoiceEngineSettings } from '../../assets/catalog.js';
import { modelPath } from '../../models/manifest.js';
import { AppError } from '../../core/errors.js';
import { OffThread } from '../../core/off-thread.js';
import type { Logger } from '../../core/log.js';
import { speechSynthAvailable } from '../../media/speech-synth.js';
import { TTS_SOURCES, ttsUnavailable, voiceNotFound, type SpeechService, type TtsSource, type Voice } from './base.js';
import type { TtsConfig } from './config.js';
import { EspeakVoice } from './espeak.js';
import { FliteVoice } from './flite.js';
import { OpenAiVoice } from './openai.js';
import { piperVoice, type PiperModelFiles } from './piper.js';
import type { VoiceAnalysis } from './voice-analysis.js';

export type { SpeechService, Voice, SpeechChunk, PhonemeTiming, SpeakOptions } from './base.js';
export { TTS_CONFIG_VARS, loadTtsConfig, type TtsConfig } from './config.js';

/** What the service knows about a voice: engine settings in preference order and an OpenAI name. */
export interface VoiceProfile {
  engines: VoiceEngineSettings[];
  openaiVoice: string;
}

/**
 * OpenAI voice names used with an offline source: a standard voice id, or flite settings where
 * the three standard voices have nothing of that character (echo, fable: awb; verse: kal16).
 */
export const OPENAI_VOICE_MAP: Record<string, string | VoiceEngineSettings> = {
  alloy: 'default',
  ash: 'anthony',
  ballad: 'anthony',
  cedar: 'anthony',
  onyx: 'anthony',
  coral: 'alice',
  shimmer: 'alice',
  nova: 'alice',
  sage: 'default',
  marin: 'default',
  echo: { engine: 'flite', voice: 'awb' },
  fable: { engine: 'flite', voice: 'awb', rate: 1.05 },
  verse: { engine: 'flite', voice: 'kal16', pitch: 120 },
};

/** Articulation rate (syllables per second, as voice-analysis.ts measures it) of the engines at
 * rate 1: espeak-ng at 175 wpm measured 4.0; flite slt 3.2-3.5, Piper joe 3.9. */
const REFERENCE_SYLLABLES_PER_SECOND = 4.0;
const MIN_MATCHED_RATE = 0.7;
const MAX_MATCHED_RATE = 1.4;
/** Voices at or above this median pitch get the female offline voices. */
const FEMALE_PITCH_HZ = 150;
/** Below this, flite's rms (natural ~100 Hz; its pitch does not follow int_f0_target_mean). */
const LOW_MALE_PITCH_HZ = 112;
/** espeak-ng pitch scale fitted on measured Hz: en-us 20/50/80 → 75/98/134 Hz; en-us+f3 50/60/80 → 202/221/269 Hz. */
const ESPEAK_MALE_HZ = { base: 55, perStep: 0.97 };
const ESPEAK_FEMALE_HZ = { base: 90, perStep: 2.23 };
/** An uploaded sample's analysis may take this long on its worker thread (seconds are typical for minutes of audio). */
const ANALYSIS_TIMEOUT_MS = 60_000;

export interface SpeechServiceDeps {
  modelsDir: string;
  assets: AssetService;
  log: Logger;
}

export function createSpeechService(config: TtsConfig, deps: SpeechServiceDeps): SpeechService {
  return new OfflineFirstSpeechService(config, deps);
}

class OfflineFirstSpeechService implements SpeechService {
  /** Analyses of uploaded samples by file hash: each sample is analysed once per process. */
  private readonly analyses = new Map<string, Promise<VoiceAnalysis>>();
  /** Decodes and analyses samples off the event loop (analysis-worker.ts). */
  private readonly analyser = new OffThread(new URL('./analysis-worker.ts', import.meta.url), 'voice analysis');
  private closed = false;

  constructor(
    private readonly config: TtsConfig,
    private readonly deps: SpeechServiceDeps,
  ) {}

  async voice(request: { voiceId: string; userId: string; source: string }): Promise<Voice> {
    if (this.closed) throw ttsUnavailable('The speech service is closed.');
    const { voiceId, source } = request;
    if (!(TTS_SOURCES as readonly string[]).includes(source)) {
      throw ttsUnavailable(`Unknown tts_source '${source}'; use one of ${TTS_SOURCES.join(', ')}.`);
    }
    if (source === 'openai' && isOpenAiVoiceName(voiceId)) return this.openai(voiceId, voiceId);
    const profile = await this.profile(voiceId, request.userId);
    if (source === 'openai') return this.openai(voiceId, profile.openaiVoice);
    return this.pick(voiceId, source as Exclude<TtsSource, 'openai'>, profile);
  }

  async close(): Promise<void> {
    this.closed = true;
    // Piper sessions are process-wide and shared (piper.ts); the analysis worker is this service's.
    await this.analyser.close();
  }

  /** The engine settings of a standard voice, an OpenAI voice name, or an uploaded voice. */
  async profile(voiceId: string, userId: string): Promise<VoiceProfile> {
    const standard = this.standardProfile(voiceId);
    if (standard) return standard;
    const mapped = OPENAI_VOICE_MAP[voiceId];
    if (typeof mapped === 'string') {
      const profile = this.standardProfile(mapped);
      if (profile) return { ...profile, openaiVoice: voiceId };
    } else if (mapped) {
      // These are all male voices: the other engines speak them as anthony does.
      const others = (this.standardProfile('anthony')?.engines ?? []).filter((e) => e.engine !== mapped.engine);
      return { engines: [mapped, ...others], openaiVoice: voiceId };
    }
    return profileFromAnalysis(await this.analyseUpload(voiceId, userId));
  }

  private standardProfile(id: string): VoiceProfile | null {
    const entry = this.deps.assets.standard.find('voice', id);
    if (!entry) return null;
    const engines = entry.engines ?? (entry.voice ? [entry.voice] : []);
    return { engines, openaiVoice: entry.openaiVoice ?? 'alloy' };
  }

  private async analyseUpload(voiceId: string, userId: string): Promise<VoiceAnalysis> {
    let asset;
    try {
      asset = await this.deps.assets.get('voice', voiceId, userId);
    } catch (err) {
      if (err instanceof AppError && err.status === 404) {
        throw voiceNotFound(`No voice '${voiceId}': use a standard voice (default, alice, anthony), an OpenAI voice name, or the id of a voice you uploaded.`, err);
      }
      throw err;
    }
    let analysis = this.analyses.get(asset.sha256);
    if (!analysis) {
      const file = this.deps.assets.storedFilePath(asset);
      analysis = this.analyser.run<VoiceAnalysis>('analyse', file, { timeoutMs: ANALYSIS_TIMEOUT_MS });
      this.analyses.set(asset.sha256, analysis);
      analysis.then(
        (a) => this.deps.log.info('voice sample analysed', { voiceId, pitchHz: Math.round(a.pitchHz), syllablesPerSecond: +a.syllablesPerSecond.toFixed(2) }),
        () => this.analyses.delete(asset.sha256),
      );
    }
    try {
      return await analysis;
    } catch (err) {
      throw ttsUnavailable(`The sample of voice '${voiceId}' could not be analysed: ${err instanceof Error ? err.message : String(err)}`, err);
    }
  }

  private async pick(voiceId: string, source: Exclude<TtsSource, 'openai'>, profile: VoiceProfile): Promise<Voice> {
    const candidates = profile.engines.filter((e) =>
      source === 'auto' ? true : source === 'offline' ? e.engine === 'flite' || e.engine === 'espeak-ng' : e.engine === source,
    );
    const nativeOk = speechSynthAvailable();
    const reasons: string[] = [];
    for (const settings of candidates) {
      if (!nativeOk) {
        // Piper needs espeak-ng for its phonemes, so every local engine needs the addon.
        reasons.push(`${settings.engine}: the native speech addon is not built (npm run build:native)`);
        continue;
      }
      if (settings.engine === 'flite') return new FliteVoice(voiceId, settings);
      if (settings.engine === 'espeak-ng') return new EspeakVoice(voiceId, settings);
      const files = this.piperFiles(settings.voice);
      if (!files) {
        reasons.push(`piper: model '${settings.voice}' is not fetched (npm run setup:models)`);
        continue;
      }
      try {
        const started = performance.now();
        const voice = await piperVoice(voiceId, files, this.config.piperThreads, { rate: settings.rate });
        const ms = Math.round(performance.now() - started);
        if (ms > 50) this.deps.log.info('piper model loaded', { model: settings.voice, ms });
        return voice;
      } catch (err) {
        if (source === 'piper') throw err;
        this.deps.log.warn('piper voice unavailable, falling back', { voiceId, err });
        reasons.push(`piper: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    if (source === 'auto' && this.config.openai) return this.openai(voiceId, profile.openaiVoice);
    if (candidates.length === 0) throw ttsUnavailable(`Voice '${voiceId}' has no ${source} settings.`);
    throw ttsUnavailable(`No ${source} engine can speak voice '${voiceId}' here: ${reasons.join('; ')}.`);
  }

  private openai(voiceId: string, openaiVoice: string): Voice {
    if (!this.config.openai) {
      throw ttsUnavailable('tts_source openai needs TTS_OPENAI_BASE_URL and TTS_OPENAI_API_KEY to be configured on this server.');
    }
    return new OpenAiVoice(voiceId, openaiVoice, this.config.openai);
  }

  /**
   * The files of the Piper model `name` and of its config (manifest entry `<name>-config`), when
   * both are fetched and verified (src/models/fetch.ts; `npm run setup:models`).
   */
  private piperFiles(name: string): PiperModelFiles | null {
    const model = modelPath(this.deps.modelsDir, name);
    const config = modelPath(this.deps.modelsDir, `${name}-config`);
    return model && config ? { model, config } : null;
  }
}

/** Offline settings closest to an analysed sample (see the module comment for the rules). */
export function profileFromAnalysis(a: VoiceAnalysis): VoiceProfile {
  const rate = +Math.min(MAX_MATCHED_RATE, Math.max(MIN_MATCHED_RATE, a.syllablesPerSecond / REFERENCE_SYLLABLES_PER_SECOND || 1)).toFixed(3);
  const pitch = Math.round(a.pitchHz);
  const female = a.pitchHz >= FEMALE_PITCH_HZ;
  const flite: VoiceEngineSettings = female
    ? { engine: 'flite', voice: 'slt', pitch, rate }
    : a.pitchHz >= LOW_MALE_PITCH_HZ
      ? { engine: 'flite', voice: 'kal16', pitch, rate }
      : { engine: 'flite', voice: 'rms', rate };
  const scale = female ? ESPEAK_FEMALE_HZ : ESPEAK_MALE_HZ;
  const espeakPitch = Math.round(Math.min(100, Math.max(0, (a.pitchHz - scale.base) / scale.perStep)));
  const espeak: VoiceEngineSettings = { engine: 'espeak-ng', voice: female ? 'en-us+f3' : 'en-us', pitch: espeakPitch, rate };
  const piper: VoiceEngineSettings = { engine: 'piper', voice: 'tts-piper-joe', rate };
  return { engines: [flite, espeak, piper], openaiVoice: female ? 'marin' : 'cedar' };
}
