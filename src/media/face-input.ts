/**
 * A face photo plus its registered landmarks (face-registration.ts) → the native addon's
 * `FaceInput`: the photo decoded to packed RGB8 (EXIF orientation applied, alpha dropped, sRGB)
 * and the landmarks flattened to a Float32Array of x, y, z triples in that photo's pixels.
 * Refuses a photo whose decoded size is not the one the landmarks were measured on.
 */
import sharp from 'sharp';
import { NativeError } from '../core/errors.js';
import type { FaceLandmarks } from './face-registration.js';
import type { FaceInput } from './native.js';

export async function faceInputFromImage(image: Uint8Array, face: Pick<FaceLandmarks, 'width' | 'height' | 'landmarks'>): Promise<FaceInput> {
  const { data, info } = await sharp(image).rotate().removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  if (info.width !== face.width || info.height !== face.height || info.channels !== 3) {
    throw new NativeError(
      'invalid_argument',
      `face photo is ${info.width}x${info.height} (${info.channels} channels) but its landmarks were measured on ${face.width}x${face.height}`,
    );
  }
  return { width: info.width, height: info.height, rgb: data, landmarks: Float32Array.from(face.landmarks.flat()) };
}
