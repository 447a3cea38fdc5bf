/**
 * Natural-sounding test speech for turn-taking tests and benchmarks: the server's own offline
 * voices (flite's four speakers, deterministic; Piper's joe when its model is fetched, whose
 * timing varies a little run to run) speaking a text, resampled to the rate a caller needs and
 * trimmed to its audible edges. pausedSpeech() makes a person who stops mid-sentence: the whole
 * sentence is spoken (so the words before the pause carry a mid-sentence melody, not a final
 * one) and silence is put in at the word boundary after `prefix`. For speakers beyond those
 * (benchmarks of voices the turn-taking was not tuned to): every Piper voice whose model lies in
 * the weights folder (piperTestVoices) and espeak-ng's variants (espeakTestVoices, formant
 * speech with other pitches and timbres); any of them at another speaking rate through `speed`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { EspeakVoice } from '../../src/providers/tts/espeak.js';
import { FliteVoice } from '../../src/providers/tts/flite.js';
import { piperVoice } from '../../src/providers/tts/piper.js';
import type { Voice } from '../../src/providers/tts/base.js';
import { Resampler } from '../../src/audio/resample.js';
import { REPO_MODELS_DIR, weightsDir } from '../../src/models/manifest.js';
import { concatSamples, silence, speechEdges } from './speech.js';

export const FLITE_SPEAKERS = ['slt', 'rms', 'awb', 'kal16'] as const;

/** The offline speakers: flite's four, and Piper's joe when it is fetched. */
export async function testVoices(): Promise<Voice[]> {
  const voices: Voice[] = FLITE_SPEAKERS.map((v) => new FliteVoice(`flite-${v}`, { voice: v }));
  const model = path.join(weightsDir(REPO_MODELS_DIR), 'tts/en_US-joe-medium.onnx');
  if (fs.existsSync(model) && fs.existsSync(`${model}.json`)) voices.unshift(await piperVoice('piper-joe', { model, config: `${model}.json` }, 1));
  return voices;
}

/**
 * espeak-ng voices and variants for test speakers: US male, US female (+f3), British male (+m3),
 * US male (+m7). British English is the voice named 'en' (espeak-ng's gmw/en): the addon selects
 * voices by name, and 'en-gb' is only that voice's language tag.
 */
export const ESPEAK_TEST_VARIANTS = ['en-us', 'en-us+f3', 'en+m3', 'en-us+m7'] as const;

/** espeak-ng speaking each of ESPEAK_TEST_VARIANTS (ids 'espeak-en-us+f3' and so on). */
export function espeakTestVoices(): Voice[] {
  return ESPEAK_TEST_VARIANTS.map((v) => new EspeakVoice(`espeak-${v}`, { voice: v }));
}

/**
 * Every Piper voice fetched into the weights folder (tts/*.onnx with its .onnx.json config), ids
 * 'piper-<speaker>' from Piper's '<lang>-<speaker>-<quality>' file names: none when none is fetched.
 */
export async function piperTestVoices(): Promise<Voice[]> {
  const dir = path.join(weightsDir(REPO_MODELS_DIR), 'tts');
  const models = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.onnx') && fs.existsSync(path.join(dir, `${f}.json`))).sort() : [];
  const voices: Voice[] = [];
  for (const file of models) {
    const model = path.join(dir, file);
    const speaker = file.replace(/\.onnx$/, '').split('-')[1] ?? file;
    voices.push(await piperVoice(`piper-${speaker}`, { model, config: `${model}.json` }, 1));
  }
  return voices;
}

/** `text` spoken by `voice` at `speed` (1: its normal rate), as mono floats at `rateHz`, trimmed to its audible edges. */
export async function voiceSpeech(voice: Voice, text: string, rateHz: number, speed = 1): Promise<Float32Array> {
  const parts: Float32Array[] = [];
  for await (const chunk of voice.speak(text, { speed })) {
    const floats = Float32Array.from(chunk.pcm, (s) => s / 32768);
    if (chunk.sampleRateHz === rateHz) parts.push(floats);
    else {
      const r = new Resampler(chunk.sampleRateHz, rateHz);
      parts.push(r.push(floats), r.push(new Float32Array(Math.ceil(chunk.sampleRateHz / 100))));
    }
  }
  const x = concatSamples(parts);
  const { first, last } = speechEdges(x);
  return x.slice(first, last + 1);
}

/** `text` spoken by one of flite's speakers. */
export function fliteSpeech(text: string, speaker: (typeof FLITE_SPEAKERS)[number], rateHz: number): Promise<Float32Array> {
  return voiceSpeech(new FliteVoice(`flite-${speaker}`, { voice: speaker }), text, rateHz);
}

/**
 * `sentence` spoken by `voice` (at `speed`) with `pauseMs` of silence after the words of `prefix`
 * (which must begin the sentence). The cut is the quietest 20 ms within the stretch where the
 * prefix, spoken alone, ends (a word boundary: the prefix alone is drawn out at its end, so the
 * stretch reaches back to 60 % of its length). Returns the audio and where the pause begins
 * (sample index).
 */
export async function pausedSpeech(
  voice: Voice,
  prefix: string,
  sentence: string,
  pauseMs: number,
  rateHz: number,
  speed = 1,
): Promise<{ audio: Float32Array; pauseAt: number }> {
  if (!sentence.startsWith(prefix)) throw new Error(`pausedSpeech: '${sentence}' does not begin with '${prefix}'`);
  const whole = await voiceSpeech(voice, sentence, rateHz, speed);
  const alone = (await voiceSpeech(voice, prefix, rateHz, speed)).length;
  const window = Math.round(rateHz * 0.02);
  let pauseAt = -1;
  let quietest = Infinity;
  for (let at = Math.floor(alone * 0.6); at + window < Math.min(whole.length, alone * 1.05); at += Math.round(window / 4)) {
    let energy = 0;
    for (let i = at; i < at + window; i++) energy += (whole[i] ?? 0) ** 2;
    if (energy < quietest) {
      quietest = energy;
      pauseAt = at + Math.round(window / 2);
    }
  }
  if (pauseAt < 0) throw new Error(`pausedSpeech: no cut found for '${prefix}'`);
  return { audio: concatSamples([whole.subarray(0, pauseAt), silence(pauseMs, rateHz), whole.subarray(pauseAt)]), pauseAt };
}
