/** Shared checks for the TTS tests: collect a voice's chunks, check a chunk's phoneme timeline, measure pitch. */
import * as assert from 'uvu/assert';
import type { SpeakOptions, SpeechChunk, Voice } from '../../../src/providers/tts/base.js';
import { analyseVoice } from '../../../src/providers/tts/voice-analysis.js';

/** A typical sentence of a conversational reply (about 4 s of speech). */
export const TYPICAL_SENTENCE = 'Sure, I can help you with that, and it should only take a minute or two.';

export async function collect(voice: Voice, text: string, options: SpeakOptions = { speed: 1 }): Promise<SpeechChunk[]> {
  const chunks: SpeechChunk[] = [];
  for await (const chunk of voice.speak(text, options)) chunks.push(chunk);
  return chunks;
}

export function seconds(chunks: SpeechChunk[]): number {
  return chunks.reduce((s, c) => s + c.pcm.length / c.sampleRateHz, 0);
}

/** Phonemes ordered, gap-free, non-empty, covering the chunk from 0 to its end (±1 sample). */
export function assertTimeline(chunk: SpeechChunk, label = ''): void {
  const endNs = (chunk.pcm.length * 1e9) / chunk.sampleRateHz;
  const p = chunk.phonemes;
  assert.ok(p.length > 0, `${label}: no phonemes`);
  assert.is(p[0]?.startNs, 0, `${label}: first phoneme starts at ${p[0]?.startNs}`);
  assert.ok(Math.abs((p[p.length - 1]?.endNs ?? 0) - endNs) <= 1e9 / chunk.sampleRateHz, `${label}: last phoneme ends at ${p[p.length - 1]?.endNs}, audio at ${endNs}`);
  for (let i = 0; i < p.length; i++) {
    const cur = p[i]!;
    assert.ok(Number.isInteger(cur.startNs) && Number.isInteger(cur.endNs), `${label}: integer ns`);
    assert.ok(cur.endNs > cur.startNs, `${label}: phoneme ${i} '${cur.phoneme}' is empty`);
    if (i > 0) assert.is(cur.startNs, p[i - 1]!.endNs, `${label}: gap or overlap before phoneme ${i}`);
  }
}

/** Some spoken (non-silence) phonemes, not just `_`. */
export function spokenPhonemes(chunks: SpeechChunk[]): string[] {
  return chunks.flatMap((c) => c.phonemes.map((p) => p.phoneme)).filter((p) => p !== '_');
}

export function pitchOf(chunks: SpeechChunk[]): number {
  const rate = chunks[0]?.sampleRateHz ?? 16000;
  const total = chunks.reduce((n, c) => n + c.pcm.length, 0);
  const samples = new Float32Array(total);
  let at = 0;
  for (const c of chunks) {
    for (let i = 0; i < c.pcm.length; i++) samples[at + i] = (c.pcm[i] ?? 0) / 32768;
    at += c.pcm.length;
  }
  return analyseVoice(samples, rate).pitchHz;
}

/** Peak absolute sample (speech should be clearly audible, not clipped to silence). */
export function peak(chunks: SpeechChunk[]): number {
  let m = 0;
  for (const c of chunks) for (const v of c.pcm) m = Math.max(m, Math.abs(v));
  return m;
}
