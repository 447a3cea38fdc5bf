/**
 * Worker thread entry (core/off-thread.ts): decodes an uploaded voice sample and analyses it
 * (pitch, syllable rate), off the event loop: a long sample takes hundreds of ms of decoding and
 * YIN pitch tracking.
 */
import fs from 'node:fs/promises';
import { decodeAudio } from '../../assets/audio-file.js';
import { serveJobs } from '../../core/off-thread.js';
import { analyseVoice, type VoiceAnalysis } from './voice-analysis.js';

/** Longest sample decoded for analysis (the analysis itself reads 30 s); uploads are 20 MiB by default. */
const MAX_SAMPLE_BYTES = 64 * 1024 * 1024;

async function analyseFile(file: string): Promise<VoiceAnalysis> {
  const stat = await fs.stat(file);
  if (stat.size > MAX_SAMPLE_BYTES) throw new Error(`sample file is ${stat.size} bytes, more than ${MAX_SAMPLE_BYTES}`);
  const decoded = await decodeAudio(await fs.readFile(file));
  const analysis = analyseVoice(decoded.samples, decoded.sampleRate);
  if (analysis.pitchHz <= 0) throw new Error('no voiced speech found in the sample');
  return analysis;
}

serveJobs({ analyse: analyseFile });
