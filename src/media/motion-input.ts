/**
 * LivePortrait motion templates (src/assets/motion-template.ts) → the native addon's
 * `MotionInput`: 8 float32 numbers per frame, in this order:
 *
 *   pitch, yaw, roll  degrees, relative to the template's first frame (LivePortrait's default
 *                     relative-motion mode: R_rel = R_i · R_0ᵀ, then the same Euler convention
 *                     as motion-template.ts, so +pitch nods down, +yaw turns toward the image's
 *                     left, +roll tilts the top of the head toward the image's right)
 *   tx, ty            head translation as a fraction of the face width, relative to the first
 *                     frame (x right, y down). LivePortrait's implicit-keypoint space spans
 *                     roughly [-1, 1] across the face crop, so one unit is about half a face
 *                     width: tx ≈ (t_i[0] − t_0[0]) / 2, same for y. z is always 0 there.
 *   scale             relative to the first frame (scale_i / scale_0), 1 = unchanged
 *   eyeL, eyeR        openness 0 (closed) .. 1 (open): LivePortrait's eye-open ratios are ≈0.35
 *                     for open eyes and ≈0 for closed ones, so ratio / 0.35 clamped to 0..1;
 *                     −1 when the template has no eye data (animal templates): the renderer then
 *                     leaves the eyes to its own blinking.
 *
 * Lip ratios and expression deltas are not carried: the mouth is driven by speech.
 */
import { eulerFromRotation, type Matrix3, type MotionTemplate } from '../assets/motion-template.js';
import type { MotionInput } from './native.js';

export const MOTION_VALUES_PER_FRAME = 8;
/** LivePortrait eye-open ratio of a normally open eye (closed ≈ 0). */
export const LIVEPORTRAIT_OPEN_EYE_RATIO = 0.35;
/** LivePortrait translation units per face width (keypoint space ≈ [-1, 1] across the face). */
export const LIVEPORTRAIT_UNITS_PER_FACE_WIDTH = 2;
/** Eye value meaning "no eye data for this frame". */
export const NO_EYE_DATA = -1;

export function motionInputFromTemplate(template: MotionTemplate): MotionInput {
  const first = template.frames[0];
  if (!first) throw new TypeError('motion template has no frames');
  const frames = new Float32Array(template.frames.length * MOTION_VALUES_PER_FRAME);
  const r0t = transpose(first.rotation);
  template.frames.forEach((f, i) => {
    const rel = eulerFromRotation(multiply(f.rotation, r0t));
    const eyes = f.eyeOpen;
    frames.set(
      [
        rel.pitchDeg,
        rel.yawDeg,
        rel.rollDeg,
        (f.translation[0] - first.translation[0]) / LIVEPORTRAIT_UNITS_PER_FACE_WIDTH,
        (f.translation[1] - first.translation[1]) / LIVEPORTRAIT_UNITS_PER_FACE_WIDTH,
        f.scale / first.scale,
        eyes ? eyeOpenness(eyes[0]) : NO_EYE_DATA,
        eyes ? eyeOpenness(eyes[1]) : NO_EYE_DATA,
      ],
      i * MOTION_VALUES_PER_FRAME,
    );
  });
  return { fps: template.outputFps, frames };
}

/** LivePortrait eye-open ratio → 0..1 openness. */
export function eyeOpenness(ratio: number): number {
  return Math.min(1, Math.max(0, ratio / LIVEPORTRAIT_OPEN_EYE_RATIO));
}

function transpose(m: Matrix3): Matrix3 {
  return [
    [m[0][0], m[1][0], m[2][0]],
    [m[0][1], m[1][1], m[2][1]],
    [m[0][2], m[1][2], m[2][2]],
  ];
}

function multiply(a: Matrix3, b: Matrix3): Matrix3 {
  const row = (r: Matrix3[number]): Matrix3[number] => [
    r[0] * b[0][0] + r[1] * b[1][0] + r[2] * b[2][0],
    r[0] * b[0][1] + r[1] * b[1][1] + r[2] * b[2][1],
    r[0] * b[0][2] + r[1] * b[1][2] + r[2] * b[2][2],
  ];
  return [row(a[0]), row(a[1]), row(a[2])];
}
