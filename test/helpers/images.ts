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
