/**
 * Voice analysis (src/providers/tts/voice-analysis.ts): pitch by YIN over voiced frames and the
 * articulation rate by syllable nuclei, on a synthetic voice (known pitch and syllable count) and
 * on espeak-ng speech at known settings.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { analyseVoice } from '../../../src/providers/tts/voice-analysis.js';
import { synthesizeEspeak } from '../../../src/media/speech-synth.js';
import { espeak } from '../../../harness/measures/speech.js';

/** `syllables` harmonic-rich bursts at `pitchHz` (a crude vowel), `rateHz` samples per second, with 80 ms gaps. */
function syntheticVoice(pitchHz: number, syllables: number, rateHz: number): Float32Array {
  const syllableS = 0.18;
  const gapS = 0.08;
  const out = new Float32Array(Math.round((syllableS + gapS) * syllables * rateHz) + rateHz / 2);
  for (let k = 0; k < syllables; k++) {
    const start = Math.round((k * (syllableS + gapS) + 0.25) * rateHz);
    const len = Math.round(syllableS * rateHz);
    for (let i = 0; i < len; i++) {
      const t = i / rateHz;
      const env = Math.sin((Math.PI * i) / len) ** 2;
      let v = 0;
      for (let h = 1; h <= 5; h++) v += Math.sin(2 * Math.PI * pitchHz * h * t) / h;
      out[start + i] = 0.3 * env * v;
    }
  }
  return out;
}

test('analyseVoice() recovers the pitch of a synthetic voice within 3 %', () => {
  for (const [pitch, rate] of [[110, 16000], [180, 24000], [240, 44100]] as const) {
    const a = analyseVoice(syntheticVoice(pitch, 12, rate), rate);
    assert.ok(Math.abs(a.pitchHz - pitch) / pitch < 0.03, `${pitch} Hz at ${rate} Hz: measured ${a.pitchHz}`);
  }
});

test('analyseVoice() counts the syllables of a synthetic voice', () => {
  const a = analyseVoice(syntheticVoice(150, 12, 16000), 16000);
  assert.ok(Math.abs(a.syllables - 12) <= 1, `counted ${a.syllables}`);
  assert.ok(a.syllablesPerSecond > 3 && a.syllablesPerSecond < 4.5, `${a.syllablesPerSecond}/s`);
});

test('analyseVoice() recovers the pitch of espeak-ng voices near their measured Hz', async () => {
  const text = 'Hello, thanks for calling. The quick brown fox jumps over the lazy dog, and I am happy to help you today.';
  // en-us at pitch 50 is a low male voice near 100 Hz, en-us+f3 a female voice near 200 Hz; the
  // ranges are narrow enough to catch the typical failure, an octave error (half or double).
  const male = espeak(text);
  const low = analyseVoice(male.samples, male.rateHz).pitchHz;
  assert.ok(low > 88 && low < 110, `en-us: ${low} Hz`);
  const female = await synthesizeEspeak(text, { voice: 'en-us+f3', pitch: 50 });
  const high = analyseVoice(Float32Array.from(female.pcm, (v) => v / 32768), female.sampleRateHz).pitchHz;
  assert.ok(high > 185 && high < 220, `en-us+f3: ${high} Hz`);
});

test('analyseVoice() finds a faster articulation rate in faster espeak-ng speech', () => {
  const text = 'The quick brown fox jumps over the lazy dog, and I am happy to help you today.';
  const slow = espeak(text, 120);
  const fast = espeak(text, 260);
  const a = analyseVoice(slow.samples, slow.rateHz);
  const b = analyseVoice(fast.samples, fast.rateHz);
  assert.ok(b.syllablesPerSecond > a.syllablesPerSecond * 1.5, `120 wpm: ${a.syllablesPerSecond}/s, 260 wpm: ${b.syllablesPerSecond}/s`);
  // The sentence has 21 syllables; the count should not depend much on the rate.
  assert.ok(Math.abs(a.syllables - 21) <= 4 && Math.abs(b.syllables - 21) <= 5, `${a.syllables}, ${b.syllables}`);
});

test('analyseVoice() of silence finds no pitch and no syllables', () => {
  const a = analyseVoice(new Float32Array(16000), 16000);
  assert.is(a.pitchHz, 0);
  assert.is(a.syllables, 0);
});

test.run();
