/**
 * Face registration: finds the face in a portrait photo once and records where it is, so the
 * renderer can rig it. Uses @vladmandic/human (BlazeFace detector, FaceMesh and Iris models, all
 * shipped inside the npm package) on the TensorFlow.js WebAssembly backend, fully offline.
 *
 * Invariants:
 * - Landmarks use MediaPipe FaceMesh indexing (468 mesh points, then 468-472 the iris of the eye
 *   around points 33/133 — the subject's right eye — and 473-477 the other iris; each block starts
 *   with the iris centre). Human 3.3 emits the two iris blocks the other way round; they are put in
 *   MediaPipe order here by geometry, not by trusting the library's order.
 * - All coordinates are in the ORIGINAL image's pixels after EXIF rotation (x right, y down; z is
 *   relative depth in the same pixel scale as x, smaller = nearer the camera), rounded to 0.01 px.
 * - Detection runs on a worker thread (face-detect-worker.ts), one per process, shared by every
 *   registry, detections one at a time: the event loop only decodes (sharp, on libuv's pool) and
 *   maps coordinates. The worker loads the models on its first photo and ends after a few idle
 *   minutes; a worker that fails is replaced on the next photo.
 * - A result is cached as `<cacheDir>/<sha256 of the image bytes>.json` (written to a temporary
 *   file, then renamed), so the same bytes never run the model twice; the usability rules are
 *   re-applied to cached results, so tightening a rule takes effect without clearing the cache.
 * - Nothing is downloaded: model files are read from node_modules through a fetch shim installed
 *   only while the models load, and the wasm binaries come from @tensorflow/tfjs-backend-wasm.
 *
 * It does not: track faces over video, recognise identities, estimate age/emotion, or judge image
 * quality beyond the rules in checkUsable(). It is a one-off step per photo (60-100 ms of wasm
 * work warm), not for per-frame use.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { AppError } from '../core/errors.js';
import { OffThread } from '../core/off-thread.js';
import { chooseFrame, type FaceFrame } from './framing.js';
import { humanModelId } from './human-package.js';

export interface FacePose {
  /** Nodding; as Human reports it, converted to degrees. */
  pitchDeg: number;
  /** Turning left/right; as Human reports it, converted to degrees. */
  yawDeg: number;
  /** Tilt in the image plane; positive = head rotated clockwise as seen in the image. */
  rollDeg: number;
}

export interface FaceLandmarks {
  /** Size of the source image after EXIF rotation, pixels. */
  width: number;
  height: number;
  /** 478 x [x, y, z] in source-image pixels (z: relative depth, same scale as x). */
  landmarks: [number, number, number][];
  /** Tight bounding box of the landmarks: x, y, w, h in pixels. */
  box: [number, number, number, number];
  pose: FacePose;
  /** Face confidence 0..1 from the mesh model (Human's `face.score`). */
  score: number;
  /** How many faces were found; the largest one is the one described here. */
  faces: number;
  /** Library and models that produced the result, e.g. 'human@3.3.6 facemesh+iris'. */
  model: string;
}

/** A registered face: what the models found, and the head-and-shoulders crop chosen from it. */
export interface RegisteredFace extends FaceLandmarks {
  /** The square head-and-shoulders crop (framing.ts) in source pixels; wider outputs widen it sideways. */
  frame: FaceFrame;
}

export const LANDMARK_COUNT = 478;

/** A few MediaPipe FaceMesh indices the rest of the code refers to by name. */
export const LANDMARK = {
  noseTip: 1,
  foreheadTop: 10,
  chin: 152,
  rightEyeOuter: 33,
  rightEyeInner: 133,
  leftEyeInner: 362,
  leftEyeOuter: 263,
  mouthRight: 61,
  mouthLeft: 291,
  upperLipTop: 0,
  lowerLipBottom: 17,
  rightIrisCentre: 468,
  leftIrisCentre: 473,
} as const;

/** Below this mesh confidence the region is probably not a face (real portraits score 0.9-1.0). */
export const MIN_FACE_SCORE = 0.5;
/** The face must fill this much of the image height: smaller faces give the renderer too few pixels
 * to animate and usually mean a group or full-body shot. */
export const MIN_FACE_HEIGHT_FRACTION = 0.15;
/** Absolute floor on the face height, pixels: below this the mouth and eyes are a few pixels wide. */
export const MIN_FACE_HEIGHT_PX = 64;
/** A frontal 2D rig distorts visibly beyond these head angles (the far cheek is hidden). */
export const MAX_YAW_DEG = 35;
export const MAX_PITCH_DEG = 30;

/** Longest side of the image the detector sees, pixels. Human truncates landmark coordinates to
 * whole pixels of its input, so small photos are upscaled (512 -> 1024 halves that error) and big
 * ones downscaled (the mesh model only sees a 192 px crop of the face anyway). */
const DETECT_LONG_SIDE_PX = 1024;
/** FaceMesh input size, pixels: Human returns z in units of this crop, not of the image. */
const FACEMESH_INPUT_PX = 192;
/** A photo's detection may take this long on the worker (first use loads the models, ~1 s). */
const DETECT_TIMEOUT_MS = 60_000;
/** The detection worker stays this long after its last photo, keeping the models loaded. */
const DETECTOR_IDLE_EXIT_MS = 5 * 60_000;
/** Outputs are rounded to 1/100 pixel or degree: far below the models' own accuracy. */
const ROUND_PER_UNIT = 100;

const RAD_TO_DEG = 180 / Math.PI;

export class FaceRegistry {
  private readonly cacheDir: string;
  private readonly inflight = new Map<string, Promise<RegisteredFace>>();
  private closed = false;
  private runs = 0;

  constructor(cacheDir: string) {
    if (typeof cacheDir !== 'string' || cacheDir.length === 0) throw new TypeError('cacheDir must be a non-empty path');
    this.cacheDir = cacheDir;
  }

  /** How many times this registry ran the face models (cache hits do not count). */
  get modelRuns(): number {
    return this.runs;
  }

  /**
   * Registers the face in `image` (JPEG, PNG, WebP... anything sharp decodes). Resolves with the
   * landmarks in source pixels and the chosen frame; rejects with a 422 AppError (param 'file')
   * when the photo has no usable face, or a 400 `invalid_file` when it does not decode.
   */
  async register(image: Buffer): Promise<RegisteredFace> {
    if (!Buffer.isBuffer(image)) throw new TypeError('image must be a Buffer');
    if (this.closed) throw new Error('FaceRegistry is closed');
    const key = createHash('sha256').update(image).digest('hex');
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.registerOnce(key, image).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return pending;
  }

  /** Waits for registrations in progress; the shared model stays loaded (see module comment). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inflight.values()]);
  }

  /** Cache first; otherwise decode, run the models, apply the rules, and cache the result.
   * Refusals are not cached: a refused photo is rarely sent twice, and the rules may change. */
  private async registerOnce(key: string, image: Buffer): Promise<RegisteredFace> {
    const file = path.join(this.cacheDir, `${key}.json`);
    const cached = await readCached(file);
    if (cached) {
      throwIfUnusable(cached);
      return framed(cached);
    }
    const decoded = await decode(image);
    this.runs++;
    const faces = await detector.run<DetectedFace[]>('detect', detectRequest(decoded), { timeoutMs: DETECT_TIMEOUT_MS });
    const result = toLandmarks(faces, decoded);
    throwIfUnusable(result);
    await writeAtomic(file, JSON.stringify(result));
    return framed(result);
  }
}

/** The result with its square frame (derived, so never cached: a new framing rule applies at once). */
function framed(result: FaceLandmarks): RegisteredFace {
  return { ...result, frame: chooseFrame(result, 1, 1) };
}

/**
 * The usability rules, as a pure function: returns the error to report, or null when the face is
 * good enough for a frontal rig. `width`/`height` are the source image's size in pixels.
 */
export function checkUsable(
  result: Pick<FaceLandmarks, 'box' | 'pose' | 'score'>,
  width: number,
  height: number,
): AppError | null {
  if (result.score < MIN_FACE_SCORE) {
    return unusable(
      'no_usable_face',
      `Found something face-like, but not clearly a face (confidence ${result.score.toFixed(2)}, at least ${MIN_FACE_SCORE} needed). ` +
        'Upload a sharp, well-lit photo of one person facing the camera, with the face uncovered (no sunglasses, mask or hands over it).',
    );
  }
  const faceHeightPx = result.box[3];
  const minHeightPx = Math.max(MIN_FACE_HEIGHT_PX, MIN_FACE_HEIGHT_FRACTION * height);
  if (faceHeightPx < minHeightPx) {
    return unusable(
      'face_too_small',
      `The face is too small: ${Math.round(faceHeightPx)} px tall, ${Math.round((100 * faceHeightPx) / height)}% of the ${width}x${height} photo ` +
        `(at least ${MIN_FACE_HEIGHT_PX} px and ${Math.round(100 * MIN_FACE_HEIGHT_FRACTION)}% of the height are needed). ` +
        'Upload a head-and-shoulders portrait, or crop the photo around the face.',
    );
  }
  const { yawDeg, pitchDeg } = result.pose;
  if (Math.abs(yawDeg) > MAX_YAW_DEG || Math.abs(pitchDeg) > MAX_PITCH_DEG) {
    return unusable(
      'face_not_frontal',
      `The head is turned too far for the avatar (yaw ${Math.round(yawDeg)}°, at most ±${MAX_YAW_DEG}°; ` +
        `pitch ${Math.round(pitchDeg)}°, at most ±${MAX_PITCH_DEG}°). Upload a photo in which the person looks straight at the camera.`,
    );
  }
  return null;
}

function throwIfUnusable(result: FaceLandmarks): void {
  const problem = checkUsable(result, result.width, result.height);
  if (problem) throw problem;
}

function unusable(code: string, message: string): AppError {
  return new AppError(code, message, { status: 422, param: 'file' });
}

// ---------------------------------------------------------------------------------------------
// Image decoding and the mapping between detector pixels and source pixels.

/** What the detection worker (face-detect-worker.ts) is given: the decoded pixels and the detector's size. */
export interface DetectRequest {
  rgb: Uint8Array;
  decodedWidth: number;
  decodedHeight: number;
  detectWidth: number;
  detectHeight: number;
}

/** What it returns of each face Human found (Human's FaceResult, reduced to what registration reads). */
export interface DetectedFace {
  /** Human's Point: [x, y, z?] in detector pixels. */
  mesh: [number, number, number?][];
  size: [number, number];
  box: [number, number, number, number];
  score: number;
  angle: { pitch: number; yaw: number; roll: number } | null;
}

/** One detection worker per process: Human caches its models in module scope, so one load serves all registries. */
const detector = new OffThread(new URL('./face-detect-worker.ts', import.meta.url), 'face detection', { idleExitMs: DETECTOR_IDLE_EXIT_MS });

function detectRequest(image: DecodedImage): DetectRequest {
  const { rgb, decodedWidth, decodedHeight, detectWidth, detectHeight } = image;
  return { rgb, decodedWidth, decodedHeight, detectWidth, detectHeight };
}

interface DecodedImage {
  /** Source size after EXIF rotation. */
  width: number;
  height: number;
  /** RGB, 3 bytes per pixel, `decodedWidth` x `decodedHeight`. */
  rgb: Buffer;
  decodedWidth: number;
  decodedHeight: number;
  /** The size the detector sees (the decoded pixels are upscaled to it on the tensor). */
  detectWidth: number;
  detectHeight: number;
}

/** Decodes to RGB. Big photos are shrunk by sharp (JPEG shrink-on-load makes that cheap); small
 * ones are decoded as they are and upscaled later on the tensor, which costs a few ms where a
 * libvips upscale costs 25-50 ms. */
async function decode(image: Buffer): Promise<DecodedImage> {
  try {
    const meta = await sharp(image).metadata();
    const width = meta.autoOrient.width;
    const height = meta.autoOrient.height;
    const scale = DETECT_LONG_SIDE_PX / Math.max(width, height);
    const detectWidth = Math.max(1, Math.round(width * scale));
    const detectHeight = Math.max(1, Math.round(height * scale));
    let pipeline = sharp(image).autoOrient();
    if (scale < 1) pipeline = pipeline.resize(detectWidth, detectHeight, { fit: 'fill', kernel: 'lanczos3' });
    const { data, info } = await pipeline.removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
    const decodedWidth = scale < 1 ? detectWidth : width;
    const decodedHeight = scale < 1 ? detectHeight : height;
    if (info.channels !== 3 || info.width !== decodedWidth || info.height !== decodedHeight) {
      throw new Error(`unexpected decode result ${info.width}x${info.height}x${info.channels}`);
    }
    return { width, height, rgb: data, decodedWidth, decodedHeight, detectWidth, detectHeight };
  } catch (err) {
    throw new AppError('invalid_file', `The image could not be decoded: ${(err as Error).message}`, {
      status: 400,
      param: 'file',
      cause: err,
    });
  }
}

function toLandmarks(faces: DetectedFace[], image: DecodedImage): FaceLandmarks {
  const withMesh = faces.filter((f) => f.mesh.length >= LANDMARK_COUNT);
  const face = largest(withMesh);
  if (!face) {
    throw unusable(
      'no_face_detected',
      'No face was found in the photo. Upload a well-lit, front-facing head-and-shoulders portrait of one person.',
    );
  }
  // Detector pixels -> source pixels, per axis (the resize rounds each side separately).
  const sx = image.width / image.detectWidth;
  const sy = image.height / image.detectHeight;
  // Human truncates every coordinate toward zero; +0.5 moves x and y back to the cell centre.
  // z comes in FaceMesh crop units: one crop pixel is cropSide/192 detector pixels.
  const cropSidePx = Math.max(face.size[0], face.size[1]);
  const sz = (cropSidePx / FACEMESH_INPUT_PX) * sx;
  const points: [number, number, number][] = face.mesh.slice(0, LANDMARK_COUNT).map((p) => {
    const x = p[0];
    const y = p[1];
    const z = p[2] ?? 0;
    return [(x + (x < 0 ? -0.5 : 0.5)) * sx, (y + (y < 0 ? -0.5 : 0.5)) * sy, z * sz];
  });
  putIrisesInMediaPipeOrder(points);
  const angle = face.angle ?? { pitch: 0, yaw: 0, roll: 0 };
  return {
    width: image.width,
    height: image.height,
    landmarks: points.map(([x, y, z]) => [round(x), round(y), round(z)]),
    box: boundingBox(points).map(round) as [number, number, number, number],
    pose: {
      pitchDeg: round(angle.pitch * RAD_TO_DEG),
      yawDeg: round(angle.yaw * RAD_TO_DEG),
      rollDeg: round(angle.roll * RAD_TO_DEG),
    },
    score: round(face.score),
    faces: withMesh.length,
    model: humanModelId(),
  };
}

function largest(faces: DetectedFace[]): DetectedFace | undefined {
  let best: DetectedFace | undefined;
  for (const f of faces) if (!best || f.box[2] * f.box[3] > best.box[2] * best.box[3]) best = f;
  return best;
}

/** Swaps the two 5-point iris blocks when 468 sits nearer the left eye (263/362) than the right. */
function putIrisesInMediaPipeOrder(points: [number, number, number][]): void {
  const at = (i: number): [number, number, number] => points[i] as [number, number, number];
  const mid = (a: number, b: number): [number, number] => [(at(a)[0] + at(b)[0]) / 2, (at(a)[1] + at(b)[1]) / 2];
  const dist = (p: [number, number, number], q: [number, number]) => Math.hypot(p[0] - q[0], p[1] - q[1]);
  const rightEye = mid(LANDMARK.rightEyeOuter, LANDMARK.rightEyeInner);
  const leftEye = mid(LANDMARK.leftEyeOuter, LANDMARK.leftEyeInner);
  const first = at(LANDMARK.rightIrisCentre);
  if (dist(first, rightEye) <= dist(first, leftEye)) return;
  const firstBlock = points.slice(468, 473);
  const secondBlock = points.slice(473, 478);
  points.splice(468, 10, ...secondBlock, ...firstBlock);
}

function boundingBox(points: [number, number, number][]): [number, number, number, number] {
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (const [x, y] of points) {
    minX = Math.min(minX, x);
    minY = Math.min(minY, y);
    maxX = Math.max(maxX, x);
    maxY = Math.max(maxY, y);
  }
  return [minX, minY, maxX - minX, maxY - minY];
}

function round(v: number): number {
  const r = Math.round(v * ROUND_PER_UNIT) / ROUND_PER_UNIT;
  return r === 0 ? 0 : r; // no -0 in the JSON
}

// ---------------------------------------------------------------------------------------------
// The cache.

async function readCached(file: string): Promise<FaceLandmarks | null> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const value = JSON.parse(text) as FaceLandmarks;
    // A result from another model version, or a damaged file, is recomputed and overwritten.
    if (value.model !== humanModelId() || !Array.isArray(value.landmarks) || value.landmarks.length !== LANDMARK_COUNT) return null;
    return value;
  } catch {
    // Unparseable cache entries are safe to ignore: the entry is recomputed and replaced.
    return null;
  }
}

async function writeAtomic(file: string, text: string): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await fs.writeFile(tmp, text);
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

