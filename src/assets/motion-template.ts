/**
 * LivePortrait motion templates (driving `.pkl` files): parse and validate uploaded ones, write
 * new ones, and generate the project's standard procedural driving motions.
 *
 * Layout, as written by LivePortrait (KwaiVGI/LivePortrait `src/live_portrait_pipeline.py`,
 * `make_motion_template`, saved with plain `pickle.dump` by `dump` in `src/utils/io.py`, so
 * protocol 4 with numpy 1.x `numpy.core.multiarray._reconstruct` arrays):
 *   {
 *     'n_frames':   int,
 *     'output_fps': int (25 when made from images; read with a fallback to the configured fps),
 *     'motion': [ per frame {                        all float32
 *        'scale': (1, 1),
 *        'R':     (1, 3, 3)   rotation; called 'R_d' in templates from before Aug 2024,
 *        'exp':   (1, 21, 3)  expression deltas of the 21 implicit keypoints,
 *        't':     (1, 3)      translation (z is always 0),
 *        'kp', 'x_s': (1, 21, 3)  only in newer templates; not needed for driving } ],
 *     'c_eyes_lst': [ (1, 2) float32 per frame ]  eyes-open ratios (left, right); 'c_d_eyes_lst' before Aug 2024,
 *     'c_lip_lst':  [ (1, 1) float32 per frame ]  lip-open ratio; 'c_d_lip_lst' before Aug 2024,
 *   }
 * The eye/lip lists are missing from templates made by the animal pipeline
 * (`live_portrait_pipeline_animal.py`); the human pipeline requires them, so
 * `encodeMotionTemplate` always writes them. Ratios are LivePortrait's landmark distance ratios
 * (`src/utils/retargeting_utils.py`): eyes ≈ 0.3–0.4 open and ≈ 0 closed, lips ≈ 0 closed.
 *
 * Rotation convention (`get_rotation_matrix` in `src/utils/camera.py`): angles in degrees,
 * R = (Rz(roll) · Ry(yaw) · Rx(pitch))ᵀ, applied to row vectors (x' = x · R), with the usual
 * right-handed Rx/Ry/Rz. So R[0][2] = −sin(yaw), pitch = atan2(R[1][2], R[2][2]),
 * roll = atan2(R[0][1], R[0][0]). Signs (LivePortrait documents none): +pitch tilts the head down
 * (a nod), +yaw turns the face toward the image's left, +roll tilts the top of the head toward
 * the image's right. Inferred from its example templates ('shy' raises pitch, 'laugh' lowers it,
 * and t_y rises with pitch like a neck pivot) and from the yaw −25° pose-editing screenshot in
 * its docs; roll follows from the same axes (x right, y down, face toward −z).
 *
 * Invariants: a parsed or generated template has nFrames === frames.length ≥ 1,
 * 0 < outputFps ≤ MAX_OUTPUT_FPS, finite values, proper rotation matrices, and pitch/yaw/roll that
 * are derived from `rotation` (never stored separately). Generated motions are deterministic (a
 * seeded PRNG, no Math.random) and hold float32-representable values, so encode → parse gives
 * them back identically.
 *
 * Not done here: rendering, retargeting, smoothing, or reading `kp`/`x_s` (source-only data).
 */

import {
  NdArray,
  PickleError,
  PickleTuple,
  describePickleValue,
  pyFloat,
  readPickle,
  writePickle,
  type PickleDict,
  type PickleValue,
  type PickleWritable,
} from './pickle/index.js';

export type Vec3 = [number, number, number];
export type Matrix3 = [Vec3, Vec3, Vec3];

export interface MotionFrame {
  /** LivePortrait's R for this frame (row-vector convention, see the module comment). */
  rotation: Matrix3;
  /** Derived from `rotation`, degrees. */
  pitchDeg: number;
  yawDeg: number;
  rollDeg: number;
  translation: Vec3;
  scale: number;
  /** Eyes-open ratios [left, right] (≈0.35 open, ≈0 closed); absent in animal templates. */
  eyeOpen?: [number, number] | undefined;
  /** Lip-open ratio (≈0 closed); absent in animal templates. */
  lipOpen?: number | undefined;
  /** Expression deltas, 21 keypoints × (x, y, z) flattened (EXPRESSION_LENGTH numbers). */
  expression?: number[] | undefined;
}

export interface MotionTemplate {
  nFrames: number;
  outputFps: number;
  frames: MotionFrame[];
}

export type StandardMotionId = 'default' | 'idle' | 'AgreeYesTotaly';
export const STANDARD_MOTION_IDS: readonly StandardMotionId[] = ['default', 'idle', 'AgreeYesTotaly'];

/** Thrown for driving files that are not usable LivePortrait motion templates; `message` is end-user facing. */
export class MotionTemplateError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MotionTemplateError';
  }
}

export const KEYPOINT_COUNT = 21;
export const EXPRESSION_LENGTH = KEYPOINT_COUNT * 3;
export const MAX_OUTPUT_FPS = 240;
/** LivePortrait's default `output_fps`, used when a template has none. */
export const DEFAULT_OUTPUT_FPS = 25;
export const STANDARD_MOTION_FPS = 25;
/** Upper bound on frames per template (over 40 minutes at 25 fps). */
export const MAX_TEMPLATE_FRAMES = 65_536;
/** Ratios above this are not landmark distance ratios (LivePortrait's own stay below 1). */
const MAX_RATIO = 4;
/** Allowed deviation of R·Rᵀ from identity (float32 templates are within ~1e-6). */
const ROTATION_TOLERANCE = 1e-3;

const NOT_A_TEMPLATE = 'driving file is not a LivePortrait motion template';

// ---------------------------------------------------------------------------------------------
// Rotation helpers

const DEG_PER_RAD = 180 / Math.PI;

/** LivePortrait's `get_rotation_matrix(pitch, yaw, roll)` for one frame (degrees in). */
export function rotationFromEuler(pitchDeg: number, yawDeg: number, rollDeg: number): Matrix3 {
  const x = pitchDeg / DEG_PER_RAD;
  const y = yawDeg / DEG_PER_RAD;
  const z = rollDeg / DEG_PER_RAD;
  const [cx, sx, cy, sy, cz, sz] = [Math.cos(x), Math.sin(x), Math.cos(y), Math.sin(y), Math.cos(z), Math.sin(z)];
  // M = Rz · Ry · Rx; LivePortrait stores Mᵀ.
  const m: Matrix3 = [
    [cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx],
    [sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx],
    [-sy, cy * sx, cy * cx],
  ];
  return [
    [m[0][0], m[1][0], m[2][0]],
    [m[0][1], m[1][1], m[2][1]],
    [m[0][2], m[1][2], m[2][2]],
  ];
}

/** Inverse of rotationFromEuler: yaw in [−90°, 90°]; at ±90° yaw, roll is reported as 0. */
export function eulerFromRotation(r: Matrix3): { pitchDeg: number; yawDeg: number; rollDeg: number } {
  const sinYaw = Math.max(-1, Math.min(1, -r[0][2]));
  const yaw = Math.asin(sinYaw);
  let pitch: number;
  let roll: number;
  if (Math.cos(yaw) > 1e-6) {
    pitch = Math.atan2(r[1][2], r[2][2]);
    roll = Math.atan2(r[0][1], r[0][0]);
  } else {
    roll = 0;
    pitch = sinYaw > 0 ? Math.atan2(r[1][0], r[2][0]) : Math.atan2(-r[1][0], -r[2][0]);
  }
  return { pitchDeg: pitch * DEG_PER_RAD, yawDeg: yaw * DEG_PER_RAD, rollDeg: roll * DEG_PER_RAD };
}

/** A frame with its derived angles filled in; optional members are omitted when undefined. */
function makeFrame(parts: {
  rotation: Matrix3;
  translation: Vec3;
  scale: number;
  eyeOpen?: [number, number] | undefined;
  lipOpen?: number | undefined;
  expression?: number[] | undefined;
}): MotionFrame {
  const frame: MotionFrame = { rotation: parts.rotation, ...eulerFromRotation(parts.rotation), translation: parts.translation, scale: parts.scale };
  if (parts.eyeOpen !== undefined) frame.eyeOpen = parts.eyeOpen;
  if (parts.lipOpen !== undefined) frame.lipOpen = parts.lipOpen;
  if (parts.expression !== undefined) frame.expression = parts.expression;
  return frame;
}

// ---------------------------------------------------------------------------------------------
// Parsing

/** Reads and validates a LivePortrait driving template. Throws MotionTemplateError. */
export function parseMotionTemplate(buf: Uint8Array): MotionTemplate {
  if (buf.length === 0) throw new MotionTemplateError('driving file is empty');
  let root: PickleValue;
  try {
    root = readPickle(buf);
  } catch (err) {
    if (err instanceof PickleError) {
      throw new MotionTemplateError(`driving file could not be read as a Python pickle: ${err.message}`, { cause: err });
    }
    throw err;
  }
  if (!(root instanceof Map)) fail(`expected a dict at the top level, found ${describePickleValue(root)}`);

  const nFrames = requireKey(root, 'n_frames', 'the file');
  if (typeof nFrames !== 'number' || !Number.isInteger(nFrames) || nFrames < 1) {
    fail(`'n_frames' must be a positive integer, found ${describeValue(nFrames)}`);
  }
  if (nFrames > MAX_TEMPLATE_FRAMES) fail(`'n_frames' is ${nFrames}, more than the ${MAX_TEMPLATE_FRAMES} allowed`);

  const fpsValue = root.get('output_fps');
  const outputFps = fpsValue === undefined ? DEFAULT_OUTPUT_FPS : fpsValue;
  if (typeof outputFps !== 'number' || !(outputFps > 0 && outputFps <= MAX_OUTPUT_FPS)) {
    fail(`'output_fps' must be a number above 0 and at most ${MAX_OUTPUT_FPS}, found ${describeValue(outputFps)}`);
  }

  const motion = sequence(requireKey(root, 'motion', 'the file'), "'motion'");
  if (motion.length !== nFrames) fail(`'n_frames' is ${nFrames} but 'motion' has ${motion.length} frames`);

  const eyes = optionalList(root, ['c_eyes_lst', 'c_d_eyes_lst'], nFrames);
  const lips = optionalList(root, ['c_lip_lst', 'c_d_lip_lst'], nFrames);

  const frames = motion.map((item, i) => {
    const where = `motion[${i}]`;
    if (!(item instanceof Map)) fail(`${where} must be a dict, found ${describePickleValue(item)}`);
    const rKey = item.has('R') ? 'R' : item.has('R_d') ? 'R_d' : undefined;
    if (rKey === undefined) fail(`${where} is missing key 'R' (or the older 'R_d')`);
    const rotation = rotationMatrix(item.get(rKey) as PickleValue, `${where}['${rKey}']`);
    const scale = numbers(requireKey(item, 'scale', where), 1, `${where}['scale']`)[0] as number;
    if (!(scale > 0)) fail(`${where}['scale'] must be positive, found ${scale}`);
    const t = numbers(requireKey(item, 't', where), 3, `${where}['t']`);
    const expression = numbers(requireKey(item, 'exp', where), EXPRESSION_LENGTH, `${where}['exp']`);
    let eyeOpen: [number, number] | undefined;
    if (eyes) {
      const e = ratios(eyes.items[i] as PickleValue, 2, `'${eyes.key}'[${i}]`);
      eyeOpen = [e[0] as number, e[1] as number];
    }
    const lipOpen = lips ? ratios(lips.items[i] as PickleValue, 1, `'${lips.key}'[${i}]`)[0] : undefined;
    return makeFrame({ rotation, translation: [t[0], t[1], t[2]] as Vec3, scale, eyeOpen, lipOpen, expression });
  });
  return { nFrames, outputFps, frames };
}

function fail(detail: string): never {
  throw new MotionTemplateError(`${NOT_A_TEMPLATE}: ${detail}`);
}

function describeValue(v: PickleValue | undefined): string {
  if (typeof v === 'number' || typeof v === 'bigint') return `${describePickleValue(v)} ${String(v)}`;
  return describePickleValue(v);
}

function requireKey(d: PickleDict, key: string, where: string): PickleValue {
  if (!d.has(key)) fail(where === 'the file' ? `missing key '${key}'` : `${where} is missing key '${key}'`);
  return d.get(key) as PickleValue;
}

function sequence(v: PickleValue, what: string): readonly PickleValue[] {
  if (Array.isArray(v)) return v;
  if (v instanceof PickleTuple) return v.items;
  return fail(`${what} must be a list, found ${describePickleValue(v)}`);
}

function optionalList(
  root: PickleDict,
  keys: readonly string[],
  nFrames: number,
): { key: string; items: readonly PickleValue[] } | undefined {
  for (const key of keys) {
    if (!root.has(key)) continue;
    const items = sequence(root.get(key) as PickleValue, `'${key}'`);
    if (items.length !== nFrames) fail(`'${key}' has ${items.length} entries but 'n_frames' is ${nFrames}`);
    return { key, items };
  }
  return undefined;
}

/** Flattens an ndarray / number / nested list into exactly `count` finite numbers. */
function numbers(v: PickleValue, count: number, what: string): number[] {
  const out: number[] = [];
  const ok = collectNumbers(v, out, 0, count);
  if (!ok || out.length !== count) fail(`${what} must hold ${count} numbers, found ${describePickleValue(v)}`);
  for (const x of out) if (!Number.isFinite(x)) fail(`${what} contains a non-finite value (${x})`);
  return out;
}

function collectNumbers(v: PickleValue, out: number[], depth: number, limit: number): boolean {
  if (out.length > limit) return false;
  if (typeof v === 'number') {
    out.push(v);
    return true;
  }
  if (typeof v === 'boolean' || typeof v === 'bigint') return false;
  if (v instanceof NdArray) {
    if (v.dtype === 'b1' || v.size > limit) return false;
    for (const x of v.toNumberArray()) out.push(x);
    return true;
  }
  const items = Array.isArray(v) ? v : v instanceof PickleTuple ? v.items : undefined;
  if (!items || depth >= 4) return false;
  for (const x of items) if (!collectNumbers(x, out, depth + 1, limit)) return false;
  return true;
}

function ratios(v: PickleValue, count: number, what: string): number[] {
  const r = numbers(v, count, what);
  for (const x of r) if (x < 0 || x > MAX_RATIO) fail(`${what} holds ${x}, outside the ratio range 0..${MAX_RATIO}`);
  return r;
}

function rotationMatrix(v: PickleValue, what: string): Matrix3 {
  if (v instanceof NdArray) {
    const s = v.shape;
    if (s.length < 2 || s[s.length - 1] !== 3 || s[s.length - 2] !== 3 || v.size !== 9) {
      fail(`${what} must be a 3x3 rotation matrix, found ${describePickleValue(v)}`);
    }
  }
  const n = numbers(v, 9, what);
  const r: Matrix3 = [
    [n[0], n[1], n[2]] as Vec3,
    [n[3], n[4], n[5]] as Vec3,
    [n[6], n[7], n[8]] as Vec3,
  ];
  if (!isRotation(r)) fail(`${what} is not a rotation matrix (it must be orthonormal with determinant 1)`);
  return r;
}

function isRotation(r: Matrix3): boolean {
  for (let i = 0; i < 3; i++) {
    for (let j = 0; j < 3; j++) {
      const a = r[i] as Vec3;
      const b = r[j] as Vec3;
      const dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
      if (Math.abs(dot - (i === j ? 1 : 0)) > ROTATION_TOLERANCE) return false;
    }
  }
  const det =
    r[0][0] * (r[1][1] * r[2][2] - r[1][2] * r[2][1]) -
    r[0][1] * (r[1][0] * r[2][2] - r[1][2] * r[2][0]) +
    r[0][2] * (r[1][0] * r[2][1] - r[1][1] * r[2][0]);
  return Math.abs(det - 1) <= ROTATION_TOLERANCE;
}

// ---------------------------------------------------------------------------------------------
// Encoding

/** Neutral values written for frames that have no eye/lip data (the human pipeline needs the lists). */
const EYE_OPEN_RATIO = 0.35;
const LIP_CLOSED_RATIO = 0;

/**
 * Writes a template in LivePortrait's current layout (float32 arrays, `R`, `c_eyes_lst`,
 * `c_lip_lst`). Missing expression → zeros; missing eye/lip ratios → open eyes / closed lips.
 * Throws MotionTemplateError when the template breaks the module invariants.
 */
export function encodeMotionTemplate(t: MotionTemplate): Uint8Array {
  validateTemplate(t);
  const f4 = (shape: number[], values: readonly number[]): NdArray => NdArray.fromNumbers('f4', shape, values);
  const motion = t.frames.map((f) => ({
    scale: f4([1, 1], [f.scale]),
    R: f4([1, 3, 3], f.rotation.flat()),
    exp: f4([1, KEYPOINT_COUNT, 3], f.expression ?? new Array<number>(EXPRESSION_LENGTH).fill(0)),
    t: f4([1, 3], f.translation),
  }));
  const doc: PickleWritable = {
    n_frames: t.nFrames,
    output_fps: Number.isInteger(t.outputFps) ? t.outputFps : pyFloat(t.outputFps),
    motion,
    c_eyes_lst: t.frames.map((f) => f4([1, 2], f.eyeOpen ?? [EYE_OPEN_RATIO, EYE_OPEN_RATIO])),
    c_lip_lst: t.frames.map((f) => f4([1, 1], [f.lipOpen ?? LIP_CLOSED_RATIO])),
  };
  return writePickle(doc);
}

function validateTemplate(t: MotionTemplate): void {
  const bad = (detail: string): never => {
    throw new MotionTemplateError(`invalid motion template: ${detail}`);
  };
  if (!Number.isInteger(t.nFrames) || t.nFrames < 1 || t.nFrames > MAX_TEMPLATE_FRAMES) bad(`nFrames ${t.nFrames} is out of range`);
  if (t.frames.length !== t.nFrames) bad(`nFrames is ${t.nFrames} but there are ${t.frames.length} frames`);
  if (!(t.outputFps > 0 && t.outputFps <= MAX_OUTPUT_FPS)) bad(`outputFps ${t.outputFps} is out of range`);
  t.frames.forEach((f, i) => {
    const finite = (xs: readonly number[], what: string): void => {
      for (const x of xs) if (!Number.isFinite(x)) bad(`frame ${i}: ${what} has a non-finite value`);
    };
    if (f.rotation.length !== 3 || f.rotation.some((row) => row.length !== 3)) bad(`frame ${i}: rotation is not 3x3`);
    finite(f.rotation.flat(), 'rotation');
    if (!isRotation(f.rotation)) bad(`frame ${i}: rotation is not a rotation matrix`);
    if (f.translation.length !== 3) bad(`frame ${i}: translation needs 3 numbers`);
    finite(f.translation, 'translation');
    if (!(f.scale > 0) || !Number.isFinite(f.scale)) bad(`frame ${i}: scale must be positive`);
    if (f.expression !== undefined) {
      if (f.expression.length !== EXPRESSION_LENGTH) bad(`frame ${i}: expression needs ${EXPRESSION_LENGTH} numbers`);
      finite(f.expression, 'expression');
    }
    const ratioList = [...(f.eyeOpen ?? []), ...(f.lipOpen === undefined ? [] : [f.lipOpen])];
    if (f.eyeOpen !== undefined && f.eyeOpen.length !== 2) bad(`frame ${i}: eyeOpen needs 2 numbers`);
    for (const r of ratioList) if (!(r >= 0 && r <= MAX_RATIO)) bad(`frame ${i}: ratio ${r} is outside 0..${MAX_RATIO}`);
  });
}

// ---------------------------------------------------------------------------------------------
// Standard motions

/**
 * Expression change per unit of eyes-open ratio for the keypoints that close the lids:
 * [keypoint, axis, slope]. Least-squares fit of `exp` against `c_d_eyes_lst` over LivePortrait's
 * example templates d1, d2, d5, d7, d8 (|r| ≈ 0.9 for the first two). Added on top of the eye
 * ratios so blinks also show with plain relative motion (no eye retargeting).
 */
const BLINK_EXP_SLOPES: readonly (readonly [number, number, number])[] = [
  [11, 1, -0.047],
  [15, 1, -0.041],
  [13, 1, 0.01],
  [16, 1, 0.012],
];
/** Translation per degree of head rotation (a neck pivot), fitted on the same templates. */
const TY_PER_PITCH_DEG = 0.007;
const TX_PER_YAW_DEG = -0.004;
const BASE_SCALE = 1.2;
/** Breathing-like scale change, as a fraction of BASE_SCALE. */
const BREATH_SCALE_FRACTION = 0.003;
const EYE_CLOSED_RATIO = 0.01;
/** Blink timing: lids close in ~80 ms, reopen in ~120 ms. */
const BLINK_CLOSE_S = 0.08;
const BLINK_OPEN_S = 0.12;

interface MotionPlan {
  durationS: number;
  /** Head pose at time t (seconds), degrees. */
  pose(tS: number): { pitch: number; yaw: number; roll: number };
  /** Breathing-like relative scale change at time t (0 = none). */
  breath(tS: number): number;
  blinkCentersS: number[];
}

/** Deterministic procedural driving motions at STANDARD_MOTION_FPS; loop-friendly (periodic curves, blinks away from the ends). */
export function generateStandardMotion(id: StandardMotionId): MotionTemplate {
  const plan = planFor(id);
  const fps = STANDARD_MOTION_FPS;
  const nFrames = Math.round(plan.durationS * fps);
  const frames: MotionFrame[] = [];
  for (let i = 0; i < nFrames; i++) {
    const tS = i / fps;
    const { pitch, yaw, roll } = plan.pose(tS);
    const closure = blinkClosure(tS, plan.blinkCentersS);
    const eye = EYE_OPEN_RATIO - closure * (EYE_OPEN_RATIO - EYE_CLOSED_RATIO);
    const expression = new Array<number>(EXPRESSION_LENGTH).fill(0);
    for (const [kp, axis, slope] of BLINK_EXP_SLOPES) expression[kp * 3 + axis] = slope * (eye - EYE_OPEN_RATIO);
    frames.push(
      makeFrame({
        rotation: rotationFromEuler(pitch, yaw, roll).map((row) => row.map(Math.fround)) as Matrix3,
        translation: [Math.fround(TX_PER_YAW_DEG * yaw), Math.fround(TY_PER_PITCH_DEG * pitch), 0],
        scale: Math.fround(BASE_SCALE * (1 + plan.breath(tS))),
        eyeOpen: [Math.fround(eye), Math.fround(eye)],
        lipOpen: LIP_CLOSED_RATIO,
        expression: expression.map(Math.fround),
      }),
    );
  }
  return { nFrames, outputFps: fps, frames };
}

function planFor(id: StandardMotionId): MotionPlan {
  const rand = mulberry32(seedFromString(id));
  switch (id) {
    case 'idle': {
      // 8 s of calm sway: breathing at 2 cycles per loop, peaks well inside ±2°.
      const durationS = 8;
      const yaw = loopCurve(rand, durationS, [1, 2], [1, 0.3], 1.5);
      const pitch = loopCurve(rand, durationS, [2, 3], [1, 0.3], 1.0);
      const roll = loopCurve(rand, durationS, [1, 2], [1, 0.5], 0.5);
      return {
        durationS,
        pose: (t) => ({ pitch: pitch(t), yaw: yaw(t), roll: roll(t) }),
        breath: (t) => BREATH_SCALE_FRACTION * Math.sin((2 * Math.PI * 2 * t) / durationS),
        blinkCentersS: blinkSchedule(rand, durationS, 3, 5),
      };
    }
    case 'default': {
      // 10 s of an attentive listener: livelier sway (±4° yaw, ±3° pitch), small roll.
      const durationS = 10;
      const yaw = loopCurve(rand, durationS, [1, 3, 7], [1, 0.45, 0.15], 3.6);
      const pitch = loopCurve(rand, durationS, [2, 5, 9], [1, 0.5, 0.2], 2.6);
      const roll = loopCurve(rand, durationS, [1, 4], [1, 0.4], 1.2);
      return {
        durationS,
        pose: (t) => ({ pitch: pitch(t), yaw: yaw(t), roll: roll(t) }),
        breath: (t) => BREATH_SCALE_FRACTION * Math.sin((2 * Math.PI * 3 * t) / durationS),
        blinkCentersS: blinkSchedule(rand, durationS, 2.5, 4.5),
      };
    }
    case 'AgreeYesTotaly': {
      // 4 s: three decreasing nods (head down 10°, 9°, 8° and back), then a blink.
      const durationS = 4;
      const nods = [
        { startS: 0.4, lengthS: 0.8, amplitudeDeg: 10 },
        { startS: 1.2, lengthS: 0.8, amplitudeDeg: 9 },
        { startS: 2.0, lengthS: 0.8, amplitudeDeg: 8 },
      ];
      const yaw = loopCurve(rand, durationS, [1], [1], 0.8);
      const roll = loopCurve(rand, durationS, [1, 2], [1, 0.5], 0.6);
      return {
        durationS,
        pose: (t) => ({ pitch: nods.reduce((sum, n) => sum + nodPulse(t, n.startS, n.lengthS) * n.amplitudeDeg, 0), yaw: yaw(t), roll: roll(t) }),
        breath: () => 0,
        blinkCentersS: [3.32],
      };
    }
  }
}

/**
 * Sum of sines with whole numbers of cycles per loop, all zero at t = 0 (so the loop starts at the
 * neutral pose, which is what relative driving compares against), scaled so the largest excursion
 * over the loop is `peakDeg`. The PRNG picks each term's sign and a ±20% amplitude jitter.
 */
function loopCurve(
  rand: () => number,
  durationS: number,
  cycles: readonly number[],
  weights: readonly number[],
  peakDeg: number,
): (tS: number) => number {
  const terms = cycles.map((k, i) => ({
    omega: (2 * Math.PI * k) / durationS,
    amp: (weights[i] ?? 0) * (0.8 + 0.4 * rand()) * (rand() < 0.5 ? -1 : 1),
  }));
  const raw = (t: number): number => terms.reduce((s, term) => s + term.amp * Math.sin(term.omega * t), 0);
  let max = 0;
  const SAMPLES = 2000;
  for (let i = 0; i < SAMPLES; i++) max = Math.max(max, Math.abs(raw((i / SAMPLES) * durationS)));
  const gain = max > 0 ? peakDeg / max : 0;
  return (t) => gain * raw(t);
}

/** 0 → 1 → 0 over [start, start + length]: quick smooth dip (40%), slower return (60%). */
function nodPulse(tS: number, startS: number, lengthS: number): number {
  const u = (tS - startS) / lengthS;
  if (u <= 0 || u >= 1) return 0;
  const DOWN_SHARE = 0.4;
  return u < DOWN_SHARE
    ? (1 - Math.cos((Math.PI * u) / DOWN_SHARE)) / 2
    : (1 + Math.cos((Math.PI * (u - DOWN_SHARE)) / (1 - DOWN_SHARE))) / 2;
}

/** Lid closure (0 open … 1 shut) at time t for blinks centred at the given times. */
function blinkClosure(tS: number, centersS: readonly number[]): number {
  let closure = 0;
  for (const c of centersS) {
    const d = tS - c;
    let v = 0;
    if (d > -BLINK_CLOSE_S && d <= 0) v = (1 + Math.cos((Math.PI * d) / BLINK_CLOSE_S)) / 2;
    else if (d > 0 && d < BLINK_OPEN_S) v = (1 + Math.cos((Math.PI * d) / BLINK_OPEN_S)) / 2;
    closure = Math.max(closure, v);
  }
  return closure;
}

/** Blink times every minS–maxS seconds, snapped to frames, kept ≥ 0.6 s from both ends of the loop. */
function blinkSchedule(rand: () => number, durationS: number, minS: number, maxS: number): number[] {
  const EDGE_S = 0.6;
  const out: number[] = [];
  let t = EDGE_S + 0.4 + rand() * (minS - 1);
  while (t < durationS - EDGE_S) {
    out.push(Math.round(t * STANDARD_MOTION_FPS) / STANDARD_MOTION_FPS);
    t += minS + rand() * (maxS - minS);
  }
  return out;
}

/** Small, fast, seedable PRNG (mulberry32); returns floats in [0, 1). */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a hash of a string, as a PRNG seed. */
function seedFromString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
