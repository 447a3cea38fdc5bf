/**
 * The recorded speech every target hears (endpoint.bench.ts): the 'quick' speakers of
 * lib/voice-turns.ts asking its complete questions (one each), spoken once by this repo's voices
 * and kept as files, so that every target, in this run and in later ones, hears the same bytes.
 *
 * Files (in `dir`, default benchmarks/results/endpoint-speech/): one raw PCM16 mono little-endian
 * 24 kHz file per sample (the lead of silence included, exactly what is streamed on a silent line)
 * and manifest.json naming each file's speaker, text, sha256, and where its speech starts and ends.
 * A manifest whose files are all present with their recorded sha256 is reused as it is; otherwise
 * the speech is generated again (Piper's timing varies a little run to run, so a new recording can
 * differ: the sha256 in the results says which one a run heard).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { toPcm16 } from '../../../harness/measures/speech.js';
import { RATE_HZ, makeSamples, testSpeakers, type Sample } from '../voice-turns.js';

export interface SpeechFile {
  file: string;
  speaker: string;
  text: string;
  sha256: string;
  /** Where the speech starts and ends in the file (ms; what is before it is the lead of silence). */
  speech_start_ms: number;
  speech_end_ms: number;
}

export interface EndpointSpeech {
  dir: string;
  /** Whether the files were generated in this run (else reused). */
  generated: boolean;
  files: SpeechFile[];
  /** The files as voice-turn samples (silent line, no pause). */
  samples: Sample[];
}

const MANIFEST = 'manifest.json';
/** A sample louder than this (of full scale) is speech: where the speech starts. */
const AUDIBLE = 0.01;

/** The speech in `dir`: reused when its manifest and files agree, else generated and written there. */
export async function endpointSpeech(dir: string, log: (line: string) => void): Promise<EndpointSpeech> {
  const kept = readKept(dir);
  if (kept) {
    log(`speech: reusing the ${kept.length} recorded samples in ${dir}`);
    return { dir, generated: false, files: kept, samples: kept.map((f) => sampleOf(dir, f)) };
  }
  log('speech: generating the quick speakers\' questions (once; later runs reuse the files)');
  const speakers = await testSpeakers('quick');
  const samples = (await makeSamples(speakers, 'quick')).filter((s) => s.kind === 'complete');
  fs.mkdirSync(dir, { recursive: true });
  const files: SpeechFile[] = samples.map((s, i) => {
    const pcm = toPcm16(s.audio);
    const bytes = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
    const file = `${String(i + 1).padStart(2, '0')}-${s.speaker.replace(/[^\w.+-]+/g, '_')}.pcm`;
    fs.writeFileSync(path.join(dir, file), bytes);
    return {
      file,
      speaker: s.speaker,
      text: s.label.slice(s.label.indexOf(': ') + 2),
      sha256: sha256(bytes),
      speech_start_ms: Math.round((speechStart(s.audio) / RATE_HZ) * 1000),
      speech_end_ms: Math.round((s.speechEnd / RATE_HZ) * 1000),
    };
  });
  fs.writeFileSync(path.join(dir, MANIFEST), JSON.stringify({ rate_hz: RATE_HZ, format: 'PCM16 mono little-endian', files }, null, 2) + '\n');
  return { dir, generated: true, files, samples: files.map((f) => sampleOf(dir, f)) };
}

/** The manifest's files when every one is present with its recorded sha256; null otherwise. */
function readKept(dir: string): SpeechFile[] | null {
  try {
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, MANIFEST), 'utf8')) as { rate_hz: number; files: SpeechFile[] };
    if (manifest.rate_hz !== RATE_HZ || !Array.isArray(manifest.files) || manifest.files.length === 0) return null;
    for (const f of manifest.files) if (sha256(fs.readFileSync(path.join(dir, f.file))) !== f.sha256) return null;
    return manifest.files;
  } catch {
    return null;
  }
}

/** A recorded file as a voice-turn sample: read back so that streaming it sends the file's bytes exactly. */
function sampleOf(dir: string, f: SpeechFile): Sample {
  const bytes = fs.readFileSync(path.join(dir, f.file));
  const pcm = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  // toPcm16 scales by 32767 and rounds: dividing by the same gives back each value exactly.
  const audio = Float32Array.from(pcm, (v) => v / 32767);
  return {
    kind: 'complete',
    label: `${f.speaker}: ${f.text}`,
    speaker: f.speaker,
    audio,
    speechEnd: Math.min(audio.length, Math.round((f.speech_end_ms / 1000) * RATE_HZ)),
    pause: null,
    noiseDbfs: -60,
    seed: 1,
  };
}

/** The first audible sample of `audio` (its length when none is). */
export function speechStart(audio: Float32Array): number {
  const i = audio.findIndex((x) => Math.abs(x) > AUDIBLE);
  return i < 0 ? audio.length : i;
}

export function sha256(bytes: Uint8Array): string {
  return crypto.createHash('sha256').update(bytes).digest('hex');
}
