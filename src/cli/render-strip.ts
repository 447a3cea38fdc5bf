/**
 * `npm run render:strip [-- FACE] [--before REV]`: what the avatar looks like, as rows of rendered
 * states (silence, open vowel, rounded vowel, closed lips, a stressed question, listening: the
 * `strip` example's default row) written to `strips/`:
 *
 *   strips/<face>-photo.png              the whole photo at 512x512, as the renderer showed it before framing
 *   strips/<face>-<WxH>.png              framed head and shoulders at each output size, as the server shows it
 *   strips/<face>-<WxH>-framed.jpg       the framed picture it was rendered from, with its landmarks in
 *                                        ...-framed.json (face-render's `bench` example renders them too)
 *   strips/<face>-<WxH>-before-after.png with --before: the same states rendered by revision REV's
 *                                        renderer (top row) over this tree's (bottom row)
 *
 * The face (a standard id, default `default`) is framed exactly as a session frames it
 * (faceInputFromImage with the output size), written as a JPEG and landmarks beside it, and
 * rendered by face-render's `strip` example (a release build of the Rust example, run by cargo).
 *
 * Before and after: REV is checked out in a temporary git worktree and this tree's `strip` example
 * is copied into it, so both rows render the same states from the same framed pictures; a state's
 * keys that REV's renderer does not know (read from REV's `parse_state`) are dropped from its row
 * (it cannot draw them: that is the "before"). REV builds into target/strip-before, so this tree's
 * build stays warm; the worktree is removed afterwards.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { OUTPUT_SIZES, outputDimensions } from '../core/video-size.js';
import { faceInputFromImage } from '../media/face-input.js';
import type { FaceLandmarks } from '../media/face-registration.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const STRIP_EXAMPLE = 'native/face-render/examples/strip.rs';
const PARSE_STATE_FILE = 'native/face-render/tests/common/mod.rs';
/** Pixels between the before and after rows. */
const ROW_GAP_PX = 8;

function strip(cwd: string, out: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync('cargo', ['run', '-q', '-p', 'face-render', '--release', '--example', 'strip', '--', out, ...args], { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** The keys `parse_state` takes in `source` (its `"key" =>` match arms). */
export function stateKeys(source: string): Set<string> {
  const body = source.slice(source.indexOf('pub fn parse_state'));
  return new Set([...body.slice(0, body.indexOf('\n}\n')).matchAll(/"([a-z]+)" =>/g)].map((m) => m[1]!));
}

/** `state` without the keys a renderer does not know (`rest` stays `rest`; nothing left is `rest`). */
export function keepKnownKeys(state: string, known: Set<string>): string {
  if (state === 'rest') return state;
  const kept = state.split(',').filter((kv) => known.has(kv.split('=')[0]!));
  return kept.length > 0 ? kept.join(',') : 'rest';
}

/** A checkout of `rev` with this tree's strip example in it, and how to render a framed strip there. */
function beforeRenderer(rev: string): { render(out: string, photo: string, landmarks: string): void; close(): void } {
  const commit = execFileSync('git', ['rev-parse', '--verify', `${rev}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strip-before-'));
  execFileSync('git', ['worktree', 'add', '--detach', '--quiet', dir, commit], { cwd: ROOT, stdio: 'inherit' });
  fs.copyFileSync(path.join(ROOT, STRIP_EXAMPLE), path.join(dir, STRIP_EXAMPLE));
  const known = stateKeys(fs.readFileSync(path.join(dir, PARSE_STATE_FILE), 'utf8'));
  const listed = strip(ROOT, '--list-states', []).trim().split('\n').map((line) => line.split('\t')[1]!);
  const states = listed.map((s) => keepKnownKeys(s, known));
  const env = { ...process.env, CARGO_TARGET_DIR: path.join(ROOT, 'target/strip-before') };
  console.log(`before: ${rev} (${commit.slice(0, 10)}), states ${states.join(' | ')}`);
  return {
    render: (out, photo, landmarks) => void strip(dir, out, ['--framed', photo, landmarks, '--states', ...states], env),
    close: () => execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT, stdio: 'inherit' }),
  };
}

/** `top` over `bottom`, on white. */
async function stack(top: string, bottom: string, out: string): Promise<void> {
  const [a, b] = await Promise.all([sharp(top).metadata(), sharp(bottom).metadata()]);
  const width = Math.max(a.width!, b.width!);
  await sharp({ create: { width, height: a.height! + ROW_GAP_PX + b.height!, channels: 3, background: '#ffffff' } })
    .composite([{ input: top, top: 0, left: 0 }, { input: bottom, top: a.height! + ROW_GAP_PX, left: 0 }])
    .png()
    .toFile(out);
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { before: { type: 'string' } } });
  const face = positionals[0] ?? 'default';
  const landmarksFile = path.join(ROOT, `test/fixtures/faces/${face}.landmarks.json`);
  if (!fs.existsSync(landmarksFile)) throw new Error(`no landmark fixture for face '${face}' (test/fixtures/faces/)`);
  const landmarks = JSON.parse(fs.readFileSync(landmarksFile, 'utf8')) as FaceLandmarks;
  const photo = fs.readFileSync(path.join(ROOT, `models/assets/faces/${face}.jpg`));
  const outDir = path.join(ROOT, 'strips');
  fs.mkdirSync(outDir, { recursive: true });
  process.stdout.write(strip(ROOT, path.join(outDir, `${face}-photo.png`), [face]));
  const before = values.before ? beforeRenderer(values.before) : null;
  try {
    for (const size of OUTPUT_SIZES) {
      const { width, height } = outputDimensions(size);
      const input = await faceInputFromImage(photo, landmarks, { width, height });
      const framedPhoto = path.join(outDir, `${face}-${size}-framed.jpg`);
      const framedLandmarks = path.join(outDir, `${face}-${size}-framed.json`);
      await sharp(input.rgb, { raw: { width, height, channels: 3 } }).jpeg({ quality: 97 }).toFile(framedPhoto);
      const points: number[][] = [];
      for (let i = 0; i < input.landmarks.length; i += 3) points.push([input.landmarks[i]!, input.landmarks[i + 1]!, input.landmarks[i + 2]!]);
      fs.writeFileSync(framedLandmarks, JSON.stringify({ landmarks: points }));
      const after = path.join(outDir, `${face}-${size}.png`);
      process.stdout.write(strip(ROOT, after, ['--framed', framedPhoto, framedLandmarks]));
      if (before) {
        const old = path.join(outDir, `${face}-${size}-before.png`);
        before.render(old, framedPhoto, framedLandmarks);
        await stack(old, after, path.join(outDir, `${face}-${size}-before-after.png`));
        fs.rmSync(old);
        console.log(`wrote strips/${face}-${size}-before-after.png`);
      }
    }
  } finally {
    before?.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: Error) => {
    console.error(`render:strip: ${err.message}`);
    process.exit(1);
  });
}
