/**
 * Framing: which part of a face photo the avatar's video shows. A portrait photo usually holds
 * far more than the face (the default one: a 98 px face in a 512 px photo); a viewer wants head
 * and shoulders, as a video call shows a person. From the registered landmarks this picks that
 * crop once per face and output shape; the face input is then cut and resampled to it
 * (face-input.ts), so the renderer draws the framed picture 1:1.
 *
 * The rule, for an output of aspect W:H:
 * - the crop's height is the square frame's side, `face width / FACE_WIDTH_FRACTION` (the face, as
 *   the landmarks' box, about 40 % of a square frame's width); a wider output widens the crop
 *   sideways, so 720x720 and 1280x720 frame the head the same way;
 * - the eyes (the two iris centres) sit EYE_LINE_FROM_TOP of the crop's height from its top, the
 *   face centred left to right; with the chin near 60 % the lower part shows neck and shoulders;
 * - the crop stays inside the photo: it is moved in where it would cross an edge, and where the
 *   photo is smaller than the crop (a face that already fills the picture), it shrinks, keeping
 *   its aspect, so the face is shown larger rather than with invented borders.
 *
 * Invariants: pure and deterministic; the crop lies inside the photo, has the output's aspect
 * (to rounding) and is never empty.
 */
import type { FaceLandmarks } from './face-registration.js';

/** The face's share of a square frame's width. */
export const FACE_WIDTH_FRACTION = 0.4;
/** Where the eye line sits, as a share of the frame's height from its top. */
export const EYE_LINE_FROM_TOP = 0.4;
/** MediaPipe FaceMesh iris centres (the subject's right eye, then left). */
const IRIS_CENTRES = [468, 473] as const;

/** A crop of the photo in its pixels (after EXIF rotation): left, top, width, height. */
export interface FaceFrame {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** The head-and-shoulders crop of `face` for an output of `outWidth` x `outHeight` pixels. */
export function chooseFrame(face: Pick<FaceLandmarks, 'width' | 'height' | 'box' | 'landmarks'>, outWidth: number, outHeight: number): FaceFrame {
  const aspect = outWidth / outHeight;
  const [bx, , bw] = face.box;
  const eyeY = IRIS_CENTRES.reduce((s, i) => s + face.landmarks[i]![1], 0) / IRIS_CENTRES.length;
  const centreX = bx + bw / 2;
  let height = bw / FACE_WIDTH_FRACTION;
  let width = height * aspect;
  const fit = Math.min(1, face.width / width, face.height / height);
  width *= fit;
  height *= fit;
  const x = clamp(centreX - width / 2, 0, face.width - width);
  const y = clamp(eyeY - EYE_LINE_FROM_TOP * height, 0, face.height - height);
  return { x: round2(x), y: round2(y), width: round2(width), height: round2(height) };
}

/** The crop in whole pixels, as an image library cuts it (inside the photo, at least 1x1). */
export function pixelFrame(frame: FaceFrame, photoWidth: number, photoHeight: number): FaceFrame {
  const x = clamp(Math.round(frame.x), 0, photoWidth - 1);
  const y = clamp(Math.round(frame.y), 0, photoHeight - 1);
  const width = clamp(Math.round(frame.width), 1, photoWidth - x);
  const height = clamp(Math.round(frame.height), 1, photoHeight - y);
  return { x, y, width, height };
}

/** Landmarks moved from photo pixels into an output of `outWidth` x `outHeight` showing `frame`. */
export function frameLandmarks(landmarks: [number, number, number][], frame: FaceFrame, outWidth: number, outHeight: number): [number, number, number][] {
  const sx = outWidth / frame.width;
  const sy = outHeight / frame.height;
  // Depth scales with the picture (the mean of the two, which agree to rounding).
  const sz = (sx + sy) / 2;
  return landmarks.map(([x, y, z]) => [(x - frame.x) * sx, (y - frame.y) * sy, z * sz]);
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(Math.max(v, lo), Math.max(lo, hi));
}

function round2(v: number): number {
  return Math.round(v * 100) / 100;
}
