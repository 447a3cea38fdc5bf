/**
 * `npm run render:strip [-- FACE]`: what the avatar looks like, as rows of rendered states
 * (silence, open vowel, rounded vowel, closed lips, wide, blink, head turn, listening nod) written
 * to `strips/`:
 *
 *   strips/<face>-photo.png        the whole photo at 512x512, as the renderer showed it before framing
 *   strips/<face>-<WxH>.png        framed head and shoulders at each output size, as the server shows it
 *   strips/<face>-<WxH>-framed.jpg the framed picture it was rendered from, with its landmarks in
 *                                  ...-framed.json (face-render's `bench` example renders them too)
 *
 * The face (a standard id, default `default`) is framed exactly as a session frames it
 * (faceInputFromImage with the output size), written as a JPEG and landmarks beside it, and
 * rendered by face-render's `strip` example (a release build of the Rust example, run by cargo).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { OUTPUT_SIZES, outputDimensions } from '../core/video-size.js';
import { faceInputFromImage } from '../media/face-input.js';
import type { FaceLandmarks } from '../media/face-registration.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

function strip(out: string, args: string[]): void {
  execFileSync('cargo', ['run', '-q', '-p', 'face-render', '--release', '--example', 'strip', '--', out, ...args], { cwd: ROOT, stdio: 'inherit' });
}

async function main(): Promise<void> {
  const face = process.argv[2] ?? 'default';
  const landmarksFile = path.join(ROOT, `test/fixtures/faces/${face}.landmarks.json`);
  if (!fs.existsSync(landmarksFile)) throw new Error(`no landmark fixture for face '${face}' (test/fixtures/faces/)`);
  const landmarks = JSON.parse(fs.readFileSync(landmarksFile, 'utf8')) as FaceLandmarks;
  const photo = fs.readFileSync(path.join(ROOT, `models/assets/faces/${face}.jpg`));
  const outDir = path.join(ROOT, 'strips');
  fs.mkdirSync(outDir, { recursive: true });
  strip(path.join(outDir, `${face}-photo.png`), [face]);
  for (const size of OUTPUT_SIZES) {
    const { width, height } = outputDimensions(size);
    const input = await faceInputFromImage(photo, landmarks, { width, height });
    const framedPhoto = path.join(outDir, `${face}-${size}-framed.jpg`);
    const framedLandmarks = path.join(outDir, `${face}-${size}-framed.json`);
    await sharp(input.rgb, { raw: { width, height, channels: 3 } }).jpeg({ quality: 97 }).toFile(framedPhoto);
    const points: number[][] = [];
    for (let i = 0; i < input.landmarks.length; i += 3) points.push([input.landmarks[i]!, input.landmarks[i + 1]!, input.landmarks[i + 2]!]);
    fs.writeFileSync(framedLandmarks, JSON.stringify({ landmarks: points }));
    strip(path.join(outDir, `${face}-${size}.png`), ['--framed', framedPhoto, framedLandmarks]);
  }
}

main().catch((err: Error) => {
  console.error(`render:strip: ${err.message}`);
  process.exit(1);
});
