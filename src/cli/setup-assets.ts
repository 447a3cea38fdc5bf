/**
 * Makes the standard asset files the catalog lists but git does not carry: voice samples (spoken by
 * the offline engine each voice names, flite or espeak-ng) and driving motions (LivePortrait-layout
 * .pkl files from the motion generator). Idempotent: existing files are kept. Run by
 * `npm run setup:assets`, which `npm start` and `npm test` call (the README's Quick start).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StandardAssets, type CatalogEntry, type VoiceEngineSettings } from '../assets/catalog.js';
import { generateStandardMotion, encodeMotionTemplate } from '../assets/motion-template.js';

/** A pangram-rich sample: enough phonetic variety to analyse pitch and rate from. */
const SAMPLE_TEXT =
  'Hello, thanks for calling. The quick brown fox jumps over the lazy dog, and I am happy to help you today.';
const STANDARD_MOTIONS = ['default', 'idle', 'AgreeYesTotaly'] as const;

export function setupAssets(modelsDir: string, log: (line: string) => void): { made: string[]; kept: string[] } {
  const standard = StandardAssets.load(modelsDir);
  const made: string[] = [];
  const kept: string[] = [];
  for (const entry of standard.entries('voice')) {
    const file = standard.filePath('voice', entry);
    if (fs.existsSync(file)) {
      kept.push(file);
      continue;
    }
    if (!entry.voice) throw new Error(`voice '${entry.id}' has no engine settings in catalog.json`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    synthesize(entry.voice, SAMPLE_TEXT, file);
    made.push(file);
  }
  for (const entry of standard.entries('driving')) {
    const file = standard.filePath('driving', entry);
    if (fs.existsSync(file)) {
      kept.push(file);
      continue;
    }
    const id = motionId(entry);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, encodeMotionTemplate(generateStandardMotion(id)));
    made.push(file);
  }
  for (const file of made) log(`made ${path.relative(process.cwd(), file)}`);
  return { made, kept };
}

function motionId(entry: CatalogEntry): (typeof STANDARD_MOTIONS)[number] {
  const id = STANDARD_MOTIONS.find((m) => m === entry.id);
  if (!id) throw new Error(`driving '${entry.id}' has no generator; add one to generateStandardMotion`);
  return id;
}

/** Writes a WAV via a temp file, so an interrupted run never leaves a half-written sample. */
function synthesize(settings: VoiceEngineSettings, text: string, file: string): void {
  const tmp = path.join(os.tmpdir(), `voice-${process.pid}-${path.basename(file)}`);
  const rate = settings.rate ?? 1;
  if (settings.engine === 'flite') {
    const args = ['-voice', settings.voice, '-t', text, '-o', tmp, '--setf', `duration_stretch=${(1 / rate).toFixed(3)}`];
    if (settings.pitch !== undefined) args.push('--setf', `int_f0_target_mean=${settings.pitch}`);
    execFileSync('flite', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } else {
    const wordsPerMinute = Math.round(175 * rate);
    const args = ['-v', settings.voice, '-s', String(wordsPerMinute), '-w', tmp];
    if (settings.pitch !== undefined) args.push('-p', String(settings.pitch));
    execFileSync('espeak-ng', [...args, text], { stdio: ['ignore', 'ignore', 'pipe'] });
  }
  fs.copyFileSync(tmp, file);
  fs.rmSync(tmp, { force: true });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const modelsDir = path.resolve(import.meta.dirname, '../../models');
  const { made, kept } = setupAssets(modelsDir, (line) => process.stdout.write(line + '\n'));
  process.stdout.write(`standard assets: ${made.length} made, ${kept.length} already present\n`);
}
