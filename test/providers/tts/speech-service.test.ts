/**
 * The speech service (src/providers/tts/index.ts): standard voices under every tts_source, the
 * Piper fallback when its model is missing, OpenAI voice names, uploaded voices analysed once and
 * matched in pitch, and the errors voice_not_found / tts_unavailable; plus loadTtsConfig.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AssetService } from '../../../src/assets/asset-service.js';
import { encodeWav16 } from '../../../src/assets/audio-file.js';
import { StandardAssets } from '../../../src/assets/catalog.js';
import { systemClock } from '../../../src/core/clock.js';
import { memoryLogger } from '../../../src/core/log.js';
import { synthesizeEspeak } from '../../../src/media/speech-synth.js';
import { ConfigError } from '../../../src/config.js';
import { ProviderError, type SpeechService, type Voice } from '../../../src/providers/tts/base.js';
import { createSpeechService, loadTtsConfig, type TtsConfig } from '../../../src/providers/tts/index.js';
import { openStore } from '../../../src/store/open-store.js';
import type { Store } from '../../../src/store/store.js';
import { needs } from '../../helpers/skip.js';
import { collect, pitchOf, TYPICAL_SENTENCE } from './tts-helpers.js';

const REPO_MODELS = path.resolve(import.meta.dirname, '../../../models');
const HAVE_PIPER = fs.existsSync(path.join(REPO_MODELS, 'weights/tts/en_US-joe-medium.onnx'));
const OFFLINE: TtsConfig = { openai: null, piperThreads: 2 };
const WITH_OPENAI: TtsConfig = { openai: { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k', model: 'm', timeoutMs: 1000 }, piperThreads: 2 };

interface Ctx {
  dir: string;
  store: Store;
  assets: AssetService;
  records: Array<Record<string, unknown>>;
  service: (config?: TtsConfig, modelsDir?: string) => SpeechService;
}

const Service = suite<Ctx>('SpeechService', {} as Ctx);

Service.before.each(async (ctx) => {
  ctx.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'avatar-tts-'));
  ctx.store = openStore(`sqlite:${path.join(ctx.dir, 'test.db')}`);
  await ctx.store.migrate();
  const faces = { register: async () => { throw new Error('no faces in these tests'); } };
  ctx.assets = new AssetService(ctx.store, StandardAssets.load(REPO_MODELS), ctx.dir, systemClock, faces);
  const { logger, records } = memoryLogger('debug');
  ctx.records = records;
  ctx.service = (config = OFFLINE, modelsDir = REPO_MODELS) => createSpeechService(config, { modelsDir, assets: ctx.assets, log: logger });
});

Service.after.each(async (ctx) => {
  await ctx.store.close();
  fs.rmSync(ctx.dir, { recursive: true, force: true });
});

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<ProviderError> {
  try {
    await promise;
  } catch (err) {
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, code, (err as Error).message);
    return err as ProviderError;
  }
  assert.unreachable(`expected ProviderError ${code}`);
  throw new Error('unreachable');
}

async function uploadVoice(ctx: Ctx, userId: string, voice: string, pitch: number): Promise<string> {
  const text = 'Hello, thanks for calling. The quick brown fox jumps over the lazy dog, and I am happy to help you today.';
  const speech = await synthesizeEspeak(text, { voice, pitch });
  const record = await ctx.assets.upload({
    kind: 'voice', userId, data: encodeWav16(speech.pcm, speech.sampleRateHz), contentType: 'audio/wav', filename: 'me.wav', name: null, description: null,
  });
  return record.id;
}

Service('voice() resolves the standard voices offline to flite slt, espeak-ng and flite rms', async (ctx) => {
  const s = ctx.service();
  const engines = await Promise.all(['default', 'alice', 'anthony'].map((id) => s.voice({ voiceId: id, userId: 'u', source: 'offline' })));
  assert.equal(engines.map((v) => [v.id, v.engine]), [['default', 'flite'], ['alice', 'espeak-ng'], ['anthony', 'flite']]);
});

Service('the standard voices default, alice and anthony differ measurably in pitch', async (ctx) => {
  const s = ctx.service();
  const pitch: Record<string, number> = {};
  for (const id of ['default', 'alice', 'anthony']) {
    pitch[id] = pitchOf(await collect(await s.voice({ voiceId: id, userId: 'u', source: 'auto' }), TYPICAL_SENTENCE));
  }
  const { default: d = 0, alice: a = 0, anthony: n = 0 } = pitch;
  assert.ok(a > d * 1.15 && d > n * 1.3, `pitch Hz: ${JSON.stringify(pitch)}`);
});

Service('voice() with tts_source auto uses flite for anthony when the Piper model is not fetched', async (ctx) => {
  const missing = await ctx.service(OFFLINE, ctx.dir).voice({ voiceId: 'anthony', userId: 'u', source: 'auto' });
  assert.is(missing.engine, 'flite');
});

/** Registered as skipped (counted by uvu, the reason printed) without the fetched Piper model. */
const piperTest = needs(Service, 'SpeechService', HAVE_PIPER ? null : 'models/weights/tts/en_US-joe-medium.onnx is not fetched (npm run setup:models)');

piperTest('voice() with tts_source auto uses Piper for anthony when the model is fetched', async (ctx) => {
  const v = await ctx.service().voice({ voiceId: 'anthony', userId: 'u', source: 'auto' });
  assert.is(v.engine, 'piper');
});

Service('voice() with tts_source piper is tts_unavailable when the model is missing', async (ctx) => {
  const err = await rejectsWith(ctx.service(OFFLINE, ctx.dir).voice({ voiceId: 'default', userId: 'u', source: 'piper' }), 'tts_unavailable');
  assert.match(err.message, /not fetched/);
});

Service('voice() with tts_source flite or espeak-ng uses that engine for every standard voice', async (ctx) => {
  const s = ctx.service();
  for (const source of ['flite', 'espeak-ng']) {
    for (const id of ['default', 'alice', 'anthony']) {
      const v = await s.voice({ voiceId: id, userId: 'u', source });
      assert.is(v.engine, source, `${id} ${source}`);
    }
  }
});

Service('voice() with tts_source openai needs the OpenAI settings and maps standard voices to OpenAI names', async (ctx) => {
  await rejectsWith(ctx.service().voice({ voiceId: 'default', userId: 'u', source: 'openai' }), 'tts_unavailable');
  const s = ctx.service(WITH_OPENAI);
  const anthony = (await s.voice({ voiceId: 'anthony', userId: 'u', source: 'openai' })) as Voice & { openaiVoice: string };
  assert.is(anthony.engine, 'openai');
  assert.is(anthony.openaiVoice, 'cedar');
  const coral = (await s.voice({ voiceId: 'coral', userId: 'u', source: 'openai' })) as Voice & { openaiVoice: string };
  assert.is(coral.openaiVoice, 'coral');
});

Service('voice() maps OpenAI voice names to fitting offline voices', async (ctx) => {
  const s = ctx.service();
  const coral = await s.voice({ voiceId: 'coral', userId: 'u', source: 'offline' });
  assert.is(coral.engine, 'espeak-ng'); // as alice
  const echo = (await s.voice({ voiceId: 'echo', userId: 'u', source: 'offline' })) as Voice & { settings: { voice: string } };
  assert.is(echo.engine, 'flite');
  assert.is(echo.settings.voice, 'awb');
  assert.is(echo.id, 'echo');
});

Service('voice() of an unknown id, or of another user\'s upload, is voice_not_found', async (ctx) => {
  const s = ctx.service();
  await rejectsWith(s.voice({ voiceId: 'nobody', userId: 'u', source: 'auto' }), 'voice_not_found');
  const id = await uploadVoice(ctx, 'owner', 'en-us', 50);
  await rejectsWith(s.voice({ voiceId: id, userId: 'someone-else', source: 'auto' }), 'voice_not_found');
});

Service('voice() of an unknown tts_source is tts_unavailable', async (ctx) => {
  await rejectsWith(ctx.service().voice({ voiceId: 'default', userId: 'u', source: 'cloud' }), 'tts_unavailable');
});

Service('voice() of an uploaded voice matches its pitch with an offline voice, analysing the sample once', async (ctx) => {
  const s = ctx.service();
  const high = await uploadVoice(ctx, 'u', 'en-us+f3', 60); // about 220 Hz
  const low = await uploadVoice(ctx, 'u', 'en-us', 50); // about 100 Hz
  const female = (await s.voice({ voiceId: high, userId: 'u', source: 'auto' })) as Voice & { settings: { voice: string; pitch?: number } };
  assert.is(female.engine, 'flite');
  assert.is(female.settings.voice, 'slt');
  assert.ok(Math.abs((female.settings.pitch ?? 0) - 220) < 20, `pitch setting ${female.settings.pitch}`);
  const spoken = pitchOf(await collect(female, TYPICAL_SENTENCE));
  assert.ok(Math.abs(spoken - 220) / 220 < 0.15, `asked ~220 Hz, flite spoke at ${spoken} Hz`);
  const male = (await s.voice({ voiceId: low, userId: 'u', source: 'offline' })) as Voice & { settings: { voice: string } };
  assert.is(male.settings.voice, 'rms');
  const espeakMale = await s.voice({ voiceId: low, userId: 'u', source: 'espeak-ng' });
  const malePitch = pitchOf(await collect(espeakMale, TYPICAL_SENTENCE));
  assert.ok(Math.abs(malePitch - 100) < 15, `espeak-ng for a ~100 Hz sample spoke at ${malePitch} Hz`);
  await s.voice({ voiceId: high, userId: 'u', source: 'auto' });
  const analysed = ctx.records.filter((r) => r.msg === 'voice sample analysed');
  assert.is(analysed.length, 2); // one per sample, not per call
});

Service('voice() after close() is tts_unavailable', async (ctx) => {
  const s = ctx.service();
  await s.close();
  await rejectsWith(s.voice({ voiceId: 'default', userId: 'u', source: 'auto' }), 'tts_unavailable');
});

Service('loadTtsConfig() enables OpenAI only with both URL and key, and checks numbers', () => {
  assert.is(loadTtsConfig({}).openai, null);
  const c = loadTtsConfig({ TTS_OPENAI_BASE_URL: 'https://api.example.com/v1/', TTS_OPENAI_API_KEY: 'k', TTS_PIPER_THREADS: '3' });
  assert.equal(c.openai, { baseUrl: 'https://api.example.com/v1', apiKey: 'k', model: 'gpt-4o-mini-tts', timeoutMs: 15000 });
  assert.is(c.piperThreads, 3);
  assert.throws(() => loadTtsConfig({ TTS_OPENAI_BASE_URL: 'https://x' }), (e: unknown) => e instanceof ConfigError && e.variable === 'TTS_OPENAI_API_KEY');
  assert.throws(() => loadTtsConfig({ TTS_OPENAI_BASE_URL: 'ftp://x', TTS_OPENAI_API_KEY: 'k' }), (e: unknown) => e instanceof ConfigError);
  assert.throws(() => loadTtsConfig({ TTS_PIPER_THREADS: '0' }), (e: unknown) => e instanceof ConfigError && e.variable === 'TTS_PIPER_THREADS');
});

Service.run();
