/** Test images: the standard portrait in other sizes and formats, and images with no face. */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { REPO_ROOT } from '../../harness/servers/server.js';

export const PORTRAIT_JPG = fs.readFileSync(path.join(REPO_ROOT, 'models/assets/faces/default.jpg'));

/** The astronaut portrait as a PNG of `size` x `size` (or `size` x `height`, cropped to fill): a real, usable face. */
export function portraitPng(size = 384, height = size): Promise<Buffer> {
  return sharp(PORTRAIT_JPG).resize(size, height).png().toBuffer();
}

export function portraitJpeg(size = 256, quality = 85): Promise<Buffer> {
  return sharp(PORTRAIT_JPG).resize(size, size).jpeg({ quality }).toBuffer();
}

/** A flat-coloured PNG: decodes fine, shows no face. */
export function plainPng(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 200, g: 150, b: 120 } } }).png().toBuffer();
}

/**
 * Mean absolute difference of two packed RGB images `width` x `height` over a box [x0, y0, x1,
 * y1) in pixels (fractional edges widen to whole pixels; clipped to the image), levels per channel.
 */
export function meanAbsDiff(a: Uint8Array, b: Uint8Array, width: number, height: number, [x0, y0, x1, y1]: readonly [number, number, number, number]): number {
  const [left, top, right, bottom] = [Math.max(0, Math.floor(x0)), Math.max(0, Math.floor(y0)), Math.min(width, Math.ceil(x1)), Math.min(height, Math.ceil(y1))];
  let sum = 0;
  for (let y = top; y < bottom; y++) {
    for (let i = (y * width + left) * 3; i < (y * width + right) * 3; i++) sum += Math.abs(a[i]! - b[i]!);
  }
  return sum / ((right - left) * (bottom - top) * 3);
}
