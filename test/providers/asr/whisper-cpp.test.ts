/**
 * The offline Whisper recogniser (src/providers/asr/whisper-cpp.ts) on real speech: espeak-ng
 * sentences at the realtime input format (PCM16, 24 kHz), word error rate, deltas, language
 * detection, the queue and abort, with Whisper base; Whisper tiny.en (ASR_WHISPER_MODEL=tiny.en)
 * word for word on short sentences, in English when no language is named, and refusing others.
 * Skipped, with the reason printed, when the converted model (models/weights/asr/ggml-base.bin or
 * ggml-tiny.en.bin, made by `npm run setup`) or the addon's Whisper functions are absent. The
 * resampling helper is tested without either.
 */
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { whisperModelPath, type WhisperModelName } from '../../../src/models/whisper-ggml.js';
import { memoryLogger } from '../../../src/core/log.js';
import { speechRecognitionAvailable } from '../../../src/media/speech-recognition.js';
import { ProviderError } from '../../../src/providers/asr/base.js';
import { Resampler } from '../../../src/audio/resample.js';
import { toWhisperInput, WhisperCppTranscriber } from '../../../src/providers/asr/whisper-cpp.js';
import { espeak, toPcm16 } from '../../../harness/measures/speech.js';
import { rejection } from '../../helpers/assert-error.js';
import { needs } from '../../helpers/skip.js';
import { wer, words } from '../../../harness/measures/word-errors.js';

const MODELS_DIR = path.resolve(import.meta.dirname, '../../../models');

/** Why the tests of `model` cannot run here, or null when they can. */
function skipReason(model: WhisperModelName): string | null {
  if (!whisperModelPath(MODELS_DIR, model)) return `the converted Whisper ${model} is not in models/weights/asr/ (npm run setup)`;
  if (!speechRecognitionAvailable()) return 'the native addon is not built with Whisper (npm run build:native)';
  return null;
}

/** `text` spoken by espeak-ng as the realtime input: PCM16 at 24 kHz. */
function speech24k(text: string): Int16Array {
  const { samples, rateHz } = espeak(text);
  return toPcm16(new Resampler(rateHz, 24000).push(samples));
}

interface Ctx {
  asr: WhisperCppTranscriber;
}

const Whisper = suite<Ctx>('WhisperCppTranscriber', {} as Ctx);
/** Registered as skipped (counted by uvu, the reason printed) when the model or the addon's Whisper is missing. */
const modelTest = needs(Whisper, 'WhisperCppTranscriber', skipReason('base'));
const tinyTest = needs(Whisper, 'WhisperCppTranscriber', skipReason('tiny.en'));

function transcriber(model: WhisperModelName): WhisperCppTranscriber {
  return new WhisperCppTranscriber({ modelPath: whisperModelPath(MODELS_DIR, model) ?? '/nonexistent', threads: 2, concurrency: 1, log: memoryLogger().logger, name: model });
}

Whisper.before.each((ctx) => {
  ctx.asr = transcriber('base');
});

Whisper.after.each(async (ctx) => {
  await ctx.asr.close();
});

Whisper('toWhisperInput() resamples 24 kHz PCM16 to 16 kHz floats, aligned and at the same level', () => {
  const pcm = Int16Array.from({ length: 24000 }, (_, i) => Math.round(16000 * Math.sin((2 * Math.PI * 440 * i) / 24000)));
  const out = toWhisperInput(pcm);
  assert.is(out.length, 16000);
  // Same phase: sample k at 16 kHz is time k/16000, to within the filter delay's rounding to a
  // whole output sample (0.17 samples: at most 0.015 on this tone's steepest slope).
  for (const k of [1000, 8000, 8011, 15000]) {
    const want = (16000 / 32768) * Math.sin((2 * Math.PI * 440 * k) / 16000);
    assert.ok(Math.abs((out[k] ?? 0) - want) < 0.02, `sample ${k}: ${out[k]} vs ${want}`);
  }
});

Whisper('transcribe() refuses a pcm16k that is not the same audio at 16 kHz (⅔ of the samples, floats)', async ({ asr }) => {
  const pcm = new Int16Array(2400);
  for (const pcm16k of [new Float32Array(1599), new Float32Array(2400), new Int16Array(1600) as unknown as Float32Array]) {
    const err = await rejection(asr.transcribe({ pcm, pcm16k, language: 'en', prompt: null }));
    assert.instance(err, TypeError);
  }
});

modelTest('transcribe() hears pcm16k when given (the VAD stream of a voice turn) instead of resampling pcm', async ({ asr }) => {
  const pcm = speech24k('What time is it in London?');
  const plain = await asr.transcribe({ pcm, language: 'en', prompt: null });
  const given = await asr.transcribe({ pcm, pcm16k: toWhisperInput(pcm), language: 'en', prompt: null });
  assert.is(given.text, plain.text);
  assert.ok(/london/i.test(given.text), given.text);
  // Silence as pcm16k: what is transcribed is pcm16k, not pcm.
  const silent = await asr.transcribe({ pcm, pcm16k: new Float32Array(toWhisperInput(pcm).length), language: 'en', prompt: null });
  assert.not.ok(/london/i.test(silent.text), silent.text);
});

modelTest('transcribe() recognises espeak-ng sentences with a low word error rate', async ({ asr }) => {
  const sentences = [
    'Please open the window.',
    'What time is it in London?',
    'Turn off the lights in the kitchen.',
    'Good morning, how are you today?',
  ];
  let errors = 0;
  let total = 0;
  for (const sentence of sentences) {
    const result = await asr.transcribe({ pcm: speech24k(sentence), language: 'en', prompt: null });
    errors += wer(sentence, result.text) * words(sentence).length;
    total += words(sentence).length;
    assert.is(result.language, 'en');
  }
  assert.ok(errors / total <= 0.1, `WER ${(errors / total).toFixed(2)}`);
});

modelTest('transcribe() delivers deltas that concatenate to the text, and detects the language when asked', async ({ asr }) => {
  const deltas: string[] = [];
  const pcm = speech24k('I would like to book a table for two.');
  const result = await asr.transcribe({ pcm, language: null, prompt: 'Restaurant booking.' }, (d) => deltas.push(d));
  assert.ok(deltas.length >= 1);
  assert.is(deltas.join(''), result.text);
  assert.is(result.text, result.text.trim());
  assert.is(result.language, 'en');
  assert.is(result.audioSeconds, pcm.length / 24000);
  assert.ok(wer('I would like to book a table for two', result.text) <= 0.25, result.text);
});

modelTest('transcribe() queues calls beyond its concurrency, and an abort while queued rejects only that call', async ({ asr }) => {
  const pcm = speech24k('What time is it in London?');
  const controller = new AbortController();
  const first = asr.transcribe({ pcm, language: 'en', prompt: null });
  const deltas: string[] = [];
  const second = asr.transcribe({ pcm, language: 'en', prompt: null, signal: controller.signal }, (d) => deltas.push(d));
  controller.abort();
  assert.is(((await rejection(second)) as Error).name, 'AbortError');
  assert.equal(deltas, []);
  assert.ok(wer('What time is it in London', (await first).text) <= 0.2);
});

modelTest('transcribe() serves a confirmed turn queued behind a speculative one first', async ({ asr }) => {
  const pcm = speech24k('What time is it in London?');
  const finished: string[] = [];
  const running = asr.transcribe({ pcm, language: 'en', prompt: null }).then(() => finished.push('running'));
  const speculative = asr.transcribe({ pcm, language: 'en', prompt: null, speculative: () => true }).then(() => finished.push('speculative'));
  const confirmed = asr.transcribe({ pcm, language: 'en', prompt: null, speculative: () => false }).then(() => finished.push('confirmed'));
  await Promise.all([running, speculative, confirmed]);
  assert.equal(finished, ['running', 'confirmed', 'speculative']);
});

modelTest('transcribe() aborted while whisper.cpp runs rejects with AbortError, and the next call still works', async ({ asr }) => {
  const pcm = speech24k('The weather is nice today, so let us go for a walk.');
  const controller = new AbortController();
  const running = asr.transcribe({ pcm, language: 'en', prompt: null, signal: controller.signal });
  // The call is on the thread pool (or about to be): either way the outcome is an AbortError.
  setImmediate(() => controller.abort());
  assert.is(((await rejection(running)) as Error).name, 'AbortError');
  const next = await asr.transcribe({ pcm, language: 'en', prompt: null });
  assert.ok(wer('The weather is nice today, so let us go for a walk', next.text) <= 0.2, next.text);
});

modelTest('transcribe() with an aborted signal rejects with AbortError before any work', async ({ asr }) => {
  const err = await rejection(asr.transcribe({ pcm: new Int16Array(24000), language: 'en', prompt: null, signal: AbortSignal.abort() }));
  assert.is((err as Error).name, 'AbortError');
});

modelTest('transcribe() returns an empty text for silence shorter than 100 ms', async ({ asr }) => {
  const result = await asr.transcribe({ pcm: new Int16Array(1200), language: 'en', prompt: null });
  assert.is(result.text, '');
});

modelTest('transcribe() turns a bad language code into asr_failed', async ({ asr }) => {
  const err = await rejection(asr.transcribe({ pcm: new Int16Array(24000), language: 'xx', prompt: null }));
  assert.instance(err, ProviderError);
  assert.is((err as ProviderError).code, 'asr_failed');
  assert.is((err as ProviderError).statusCode, null);
});

tinyTest('tiny.en recognises short espeak-ng sentences word for word, in English when no language is named', async () => {
  const asr = transcriber('tiny.en');
  try {
    assert.is(asr.id, 'whisper-cpp:tiny.en');
    const sentences = ['Please open the window.', 'What time is it in London?', 'Good morning, how are you today?', 'I would like to book a table for two.'];
    for (const [i, sentence] of sentences.entries()) {
      // Half without a language: an English-only model must not run whisper.cpp's detection,
      // which on it names a random language.
      const language = i % 2 === 0 ? 'en' : null;
      const result = await asr.transcribe({ pcm: speech24k(sentence), language, prompt: null });
      assert.equal(words(result.text), words(sentence), `${sentence} -> ${result.text}`);
      assert.is(result.language, 'en');
    }
  } finally {
    await asr.close();
  }
});

tinyTest('tiny.en refuses a language other than English with asr_failed', async () => {
  const asr = transcriber('tiny.en');
  try {
    const err = await rejection(asr.transcribe({ pcm: speech24k('Good morning.'), language: 'fr', prompt: null }));
    assert.instance(err, ProviderError);
    assert.is((err as ProviderError).code, 'asr_failed');
    assert.match((err as Error).message, 'English-only');
  } finally {
    await asr.close();
  }
});

Whisper('transcribe() with a model file that cannot be loaded fails with asr_unavailable', async () => {
  const asr = new WhisperCppTranscriber({ modelPath: '/nonexistent/ggml-base.bin', threads: 1, concurrency: 1, log: memoryLogger().logger, name: 'custom' });
  const err = await rejection(asr.transcribe({ pcm: new Int16Array(24000), language: 'en', prompt: null }));
  assert.instance(err, ProviderError);
  assert.is((err as ProviderError).code, 'asr_unavailable');
  assert.match((err as Error).message, '/nonexistent/ggml-base.bin');
  await asr.close();
});

Whisper.run();
