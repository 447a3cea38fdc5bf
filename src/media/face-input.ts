/**
 * A face photo plus its registered landmarks (face-registration.ts) → the native addon's
 * `FaceInput`: the photo decoded to packed RGB8 (EXIF orientation applied, alpha dropped, sRGB)
 * and the landmarks flattened to a Float32Array of x, y, z triples in that photo's pixels.
 *
 * With `output` the input is the framed picture instead (framing.ts): the head-and-shoulders crop
 * cut from the photo and resampled to exactly the output size with a Lanczos filter (a small face
 * is upscaled sharply rather than stretched by the renderer's bilinear sampler), the landmarks
 * moved with it. The renderer then draws it 1:1.
 *
 * Refuses a photo whose decoded size is not the one the landmarks were measured on.
 */
import sharp from 'sharp';
import { NativeError } from '../core/errors.js';
import type { FaceLandmarks } from './face-registration.js';
import { chooseFrame, frameLandmarks, pixelFrame, type FaceFrame } from './framing.js';
import type { FaceInput } from './native.js';

export interface FramedOutput {
  width: number;
  height: number;
  /** The crop to show; default: chooseFrame's head-and-shoulders crop for this output. */
  frame?: FaceFrame;
}

export async function faceInputFromImage(
  image: Uint8Array,
  face: Pick<FaceLandmarks, 'width' | 'height' | 'landmarks' | 'box'>,
  output?: FramedOutput,
): Promise<FaceInput> {
  const { data, info } = await sharp(image).rotate().removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  if (info.width !== face.width || info.height !== face.height || info.channels !== 3) {
    throw new NativeError(
      'invalid_argument',
      `face photo is ${info.width}x${info.height} (${info.channels} channels) but its landmarks were measured on ${face.width}x${face.height}`,
    );
  }
  if (!output) return { width: info.width, height: info.height, rgb: data, landmarks: Float32Array.from(face.landmarks.flat()) };
  const crop = pixelFrame(output.frame ?? chooseFrame(face, output.width, output.height), info.width, info.height);
  const framed = await sharp(data, { raw: { width: info.width, height: info.height, channels: 3 } })
    .extract({ left: crop.x, top: crop.y, width: crop.width, height: crop.height })
    .resize(output.width, output.height, { fit: 'fill', kernel: 'lanczos3' })
    .raw()
    .toBuffer();
  return {
    width: output.width,
    height: output.height,
    rgb: framed,
    landmarks: Float32Array.from(frameLandmarks(face.landmarks, crop, output.width, output.height).flat()),
  };
}
