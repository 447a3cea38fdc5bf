/**
 * The CPU half of the browser's face renderer: the face as the server sends it (`ClientFace`,
 * face-render's `ClientFace`) and, per frame, everything `renderer.rs` computes before it touches
 * a pixel — the sanitised state, the mouth/eye/brow/cheek coefficients, the head pose, every
 * vertex moved and fitted into the canvas, the triangles to re-warp (each with the fixed-point
 * sampling set-up of `raster.rs` and its edges), and the eye and mouth openings (contours,
 * posed layers, the mouth's look; their column geometry is `interior.ts`'s). The GPU half
 * (`renderer.ts`, `shaders.ts`) then only does per-pixel work.
 *
 * Invariants: the arithmetic is the native renderer's, operation for operation, in the same
 * precision (f32 values are rounded with `Math.fround` where Rust rounds them), so the frames
 * drawn from these numbers are the native frames. A frame's buffers are allocated once per face
 * and overwritten by the next frame. No DOM types: Node's tests import this module.
 *
 * Not here: GL, pixels, and decoding the wire form of a `ClientFace`.
 */
import { COLUMN_ROWS, ColumnScratch, composite, MAX_CONTOUR, type Edges } from './interior.js';

/** An opening (lips or eyelids): mesh vertex ids corner to corner, left to right. */
export interface ClientOpening {
  upper: ArrayLike<number>;
  lower: ArrayLike<number>;
  /** Depth toward the camera and a point inside, photo pixels. */
  depth: number;
  centre: ArrayLike<number>;
}

/** The photographed mouth interior: a coverage mask, `w` x `h` photo pixels from (`x0`, `y0`). */
export interface ClientPhotoMouth {
  x0: number;
  y0: number;
  w: number;
  h: number;
  mask: Uint8Array;
  teeth: boolean;
}

/** The mouth: its opening, rest width, "down" axis, jaw drop at open = 1, colours (0..255 RGB). */
export interface ClientMouth {
  opening: ClientOpening;
  width: number;
  down: ArrayLike<number>;
  jawDrop: number;
  teeth: ArrayLike<number>;
  cavityEdge: ArrayLike<number>;
  cavityDeep: ArrayLike<number>;
  tongue: ArrayLike<number>;
  seam: ArrayLike<number>;
  photo?: ClientPhotoMouth | null;
}

/** One face drawn at one output size (media-node's `ClientFaceData`). */
export interface ClientFace {
  /** Output size, and the canvas the warp runs on (output / upsample factor). */
  width: number;
  height: number;
  canvasWidth: number;
  canvasHeight: number;
  /** Photo pixels → canvas pixels: [m00, m01, m10, m11, tx, ty]. */
  fit: ArrayLike<number>;
  /** RGB8 texels; photo pixel p is texel p / textureFactor (pixel centres at +0.5). */
  texture: Uint8Array;
  textureWidth: number;
  textureHeight: number;
  textureFactor: number;
  /** Names of the bases, in the order of `bases` (must be `BASE_ORDER`). */
  baseOrder: ArrayLike<string>;
  /** Per vertex: rest x, y (photo pixels); `BASE_ORDER.length` x, y displacements; depth; head weight. */
  rest: Float32Array;
  bases: Float32Array;
  depth: Float32Array;
  headWeight: Float32Array;
  /** Three vertex ids per triangle. */
  triangles: Uint32Array;
  /** Image-left eye first. */
  eyes: ArrayLike<ClientOpening>;
  mouth: ClientMouth;
  /** Head-pose pivot and face width (the unit of `tx`, `ty`), photo pixels. */
  pivot: ArrayLike<number>;
  faceWidth: number;
}

/**
 * One frame's face (the server's `FaceParams`): pose in degrees and face widths, mouth, eyes
 * (image left, right), brows and cheeks. `listening` changes nothing drawn.
 */
export interface FaceFrame {
  pitchDeg: number;
  yawDeg: number;
  rollDeg: number;
  tx: number;
  ty: number;
  scale: number;
  mouthOpen: number;
  mouthWide: number;
  mouthPress: number;
  tongue: number;
  eyeOpenLeft: number;
  eyeOpenRight: number;
  brow: number;
  cheek: number;
  listening?: boolean;
}

/** The order of `ClientFace.bases` (face-render's `BASE_ORDER`). */
export const BASE_ORDER = ['open', 'wide', 'round', 'press', 'eye0', 'eye1', 'round_open', 'brow_raise', 'brow_knit', 'cheek'] as const;

/** 2-D affine map [m00, m01, m10, m11, tx, ty]. */
export type Affine = [number, number, number, number, number, number];

/** The sampler's replicated border and fixed-point scale (`sampler.rs`). */
export const PAD = 2;
const FRAC_ONE = 65536;

const f32 = Math.fround;
const NUM_BASES = BASE_ORDER.length;
const RADS_PER_DEG = f32(f32(Math.PI) / 180);
const MAX_ANGLE_DEG = 20;
const MAX_SHIFT_FACE_WIDTHS = 0.5;
const SCALE_RANGE = [0.5, 2] as const;
const MOVE_EPS_PX = f32(1e-3);
const MOUTH_FEATHER_FRAC = f32(0.02);
const MOUTH_SEAM_FRAC = f32(0.03);
const F32_1E6 = f32(1e-6);

/** Values per warp triangle in `Warp.ints` and `Warp.floats` (see `warpTriangle`). */
export const WARP_INTS = 12;
export const WARP_FLOATS = 12;

/** The triangles re-warped this frame, `count` of them, laid out for the warp shader. */
export interface Warp {
  count: number;
  /** Per triangle: u, v at the origin pixel, du, dv per column, du, dv per row (fixed point,
   * padded texels), origin column, first row, end row, first and end column of its box. */
  ints: Int32Array;
  /** Per triangle: the long edge (x, y, slope, the middle vertex's y), the upper and lower edge
   * (x, y, slope, unused), canvas pixels. */
  floats: Float32Array;
}

/** What the synthesised mouth interior needs of the frame (`interior::MouthLook`). */
export interface MouthLook {
  xLeft: number;
  xRight: number;
  mouthWidth: number;
  open: number;
  wide: number;
  tongue: number;
  jaw: number;
  upperTeeth: boolean;
}

/**
 * One opening to fill: the pixel rectangle `composite` covers, its column geometry, and what
 * its colour function needs.
 */
export interface Opening {
  /** Pixels [x0, x1) x [y0, y1) of the canvas. */
  x0: number;
  y0: number;
  x1: number;
  y1: number;
  /** The columns' contour geometry, `COLUMN_ROWS` rows of `canvasWidth` RGBA texels (layout:
   * `interior.ts`). */
  columns: Float32Array;
  feather: number;
  /** Canvas pixels → photo pixels: the inverse of the opening's posed layer. */
  inverse: Affine;
  /** The mouth's look; null for an eye. */
  look: MouthLook | null;
}


/** Everything drawn for one frame. */
export interface FrameGeometry {
  /** Vertex positions, canvas pixels (x, y per vertex). */
  positions: Float32Array;
  warp: Warp;
  /** Eyes (image left, right) then the mouth, those that moved. */
  openings: Opening[];
}

/** A sanitised state (`pose::sanitize`), f32 values. */
interface State {
  pitch: number;
  yaw: number;
  roll: number;
  tx: number;
  ty: number;
  scale: number;
  open: number;
  wide: number;
  press: number;
  tongue: number;
  eyeLeft: number;
  eyeRight: number;
  brow: number;
  cheek: number;
}

function clean(v: number, lo: number, hi: number, rest: number): number {
  const x = f32(v);
  return Number.isNaN(x) ? rest : Math.min(Math.max(x, lo), hi);
}

function sanitize(f: FaceFrame): State {
  const a = MAX_ANGLE_DEG;
  const m = MAX_SHIFT_FACE_WIDTHS;
  return {
    pitch: clean(f.pitchDeg, -a, a, 0),
    yaw: clean(f.yawDeg, -a, a, 0),
    roll: clean(f.rollDeg, -a, a, 0),
    tx: clean(f.tx, -m, m, 0),
    ty: clean(f.ty, -m, m, 0),
    scale: clean(f.scale, SCALE_RANGE[0], SCALE_RANGE[1], 1),
    open: clean(f.mouthOpen, 0, 1, 0),
    wide: clean(f.mouthWide, -1, 1, 0),
    press: clean(f.mouthPress, 0, 1, 0),
    tongue: clean(f.tongue, 0, 1, 0),
    eyeLeft: clean(f.eyeOpenLeft, 0, 1, 1),
    eyeRight: clean(f.eyeOpenRight, 0, 1, 1),
    brow: clean(f.brow, -1, 1, 0),
    cheek: clean(f.cheek, 0, 1, 0),
  };
}

/** The bases' coefficients in `BASE_ORDER` (`renderer.rs` and `expression_bases::coefficients`). */
function coefficients(s: State, out: Float32Array): void {
  const open = f32(s.open * f32(1 - s.press));
  const round = Math.max(-s.wide, 0);
  out.set([open, Math.max(s.wide, 0), round, s.press, f32(1 - s.eyeLeft), f32(1 - s.eyeRight), f32(open * round), Math.max(s.brow, 0), Math.max(-s.brow, 0), s.cheek]);
}

function applyAffine(a: Affine, x: number, y: number): [number, number] {
  return [a[0] * x + a[1] * y + a[4], a[2] * x + a[3] * y + a[5]];
}

/** The affine map taking the three points `src` to `dst` (x, y each); null when `src` is degenerate. */
function fromTriangles(src: ArrayLike<number>, dst: ArrayLike<number>): Affine | null {
  const at = (p: ArrayLike<number>, i: number) => p[i] as number;
  const [e1x, e1y, e2x, e2y] = [at(src, 2) - at(src, 0), at(src, 3) - at(src, 1), at(src, 4) - at(src, 0), at(src, 5) - at(src, 1)];
  const det = e1x * e2y - e1y * e2x;
  if (Math.abs(det) < 1e-12) return null;
  const [f1x, f1y, f2x, f2y] = [at(dst, 2) - at(dst, 0), at(dst, 3) - at(dst, 1), at(dst, 4) - at(dst, 0), at(dst, 5) - at(dst, 1)];
  const inv = [e2y / det, -e2x / det, -e1y / det, e1x / det] as const;
  const m = [f1x * inv[0] + f2x * inv[2], f1x * inv[1] + f2x * inv[3], f1y * inv[0] + f2y * inv[2], f1y * inv[1] + f2y * inv[3]] as const;
  return [m[0], m[1], m[2], m[3], at(dst, 0) - (m[0] * at(src, 0) + m[1] * at(src, 1)), at(dst, 1) - (m[2] * at(src, 0) + m[3] * at(src, 1))];
}

export function invertAffine(a: Affine): Affine | null {
  const det = a[0] * a[3] - a[1] * a[2];
  if (Math.abs(det) < 1e-12) return null;
  const m = [a[3] / det, -a[1] / det, -a[2] / det, a[0] / det] as const;
  return [m[0], m[1], m[2], m[3], -(m[0] * a[4] + m[1] * a[5]), -(m[2] * a[4] + m[3] * a[5])];
}

/** The head pose as a point transform (`pose::PoseXf`): scaled rotation rows, pivot, shift. */
type Mat3 = [number, number, number, number, number, number, number, number, number];

class Pose {
  private constructor(
    private readonly r: Mat3,
    private readonly pivot: [number, number],
    private readonly t: [number, number],
  ) {}

  /** Null for the rest pose. */
  static of(s: State, pivot: [number, number], faceWidth: number): Pose | null {
    if (s.pitch === 0 && s.yaw === 0 && s.roll === 0 && s.tx === 0 && s.ty === 0 && s.scale === 1) return null;
    const [p, y, r] = [f32(s.pitch * RADS_PER_DEG), f32(s.yaw * RADS_PER_DEG), f32(s.roll * RADS_PER_DEG)];
    // Pitch about x (+ nose down), yaw about y (+ nose to the image's left), roll about z (+ clockwise).
    const rx: Mat3 = [1, 0, 0, 0, Math.cos(p), Math.sin(p), 0, -Math.sin(p), Math.cos(p)];
    const ry: Mat3 = [Math.cos(y), 0, -Math.sin(y), 0, 1, 0, Math.sin(y), 0, Math.cos(y)];
    const rz: Mat3 = [Math.cos(r), -Math.sin(r), 0, Math.sin(r), Math.cos(r), 0, 0, 0, 1];
    const m = mul3(rz, mul3(ry, rx)).map((v) => v * s.scale) as Mat3;
    return new Pose(m, pivot, [s.tx * faceWidth, s.ty * faceWidth]);
  }

  apply(qx: number, qy: number, depth: number, weight: number): [number, number] {
    if (weight === 0) return [qx, qy];
    const r = this.r;
    const [x, y] = [qx - this.pivot[0], qy - this.pivot[1]];
    const hx = this.pivot[0] + r[0] * x + r[1] * y + r[2] * depth + this.t[0];
    const hy = this.pivot[1] + r[3] * x + r[4] * y + r[5] * depth + this.t[1];
    return [qx + weight * (hx - qx), qy + weight * (hy - qy)];
  }
}

/** 3x3 product of row-major matrices, each entry summed in the native order. */
function mul3(a: Mat3, b: Mat3): Mat3 {
  const at = (m: Mat3, i: number, j: number) => m[3 * i + j] as number;
  const out: number[] = [];
  for (let i = 0; i < 3; i++) for (let j = 0; j < 3; j++) out.push(at(a, i, 0) * at(b, 0, j) + at(a, i, 1) * at(b, 1, j) + at(a, i, 2) * at(b, 2, j));
  return out as Mat3;
}

/** `raster.rs`'s `Edge`: the upper endpoint (smaller y, then x) and dx/dy, f32. */
function edge(ax: number, ay: number, bx: number, by: number, out: Float32Array, at: number): void {
  const first = ay < by || (ay === by && ax <= bx);
  const [px, py, qx, qy] = first ? [ax, ay, bx, by] : [bx, by, ax, ay];
  const slope = f32(f32(qx - px) / f32(qy - py));
  // A horizontal edge is never evaluated (its rows are outside the triangle's); keep it finite.
  out.set([px, py, Number.isFinite(slope) ? slope : 0], at);
}

/** Per frame: a `ClientFace`'s vertices, warp triangles and openings, as `renderer.rs` computes them. */
export class FaceGeometry {
  readonly face: ClientFace;
  private readonly vertices: number;
  private readonly fit: Affine;
  /** Rest positions: in the canvas, and in padded texels (`Source::to_sample`). */
  private readonly restDst: Float32Array;
  private readonly restSrc: Float32Array;
  private readonly positions: Float32Array;
  private readonly moving: Uint8Array;
  private readonly coef = new Float32Array(NUM_BASES);
  private readonly ints: Int32Array;
  private readonly floats: Float32Array;
  private readonly cols: ColumnScratch;
  /** `Opening.columns` of the eyes and the mouth (all drawn after they are all computed). */
  private readonly columns: Float32Array[];

  constructor(face: ClientFace) {
    checkFace(face);
    this.face = face;
    const n = face.rest.length / 2;
    this.vertices = n;
    this.fit = Array.from(face.fit) as Affine;
    this.restDst = new Float32Array(2 * n);
    this.restSrc = new Float32Array(2 * n);
    const k = face.textureFactor;
    for (let i = 0; i < n; i++) {
      const [x, y] = [face.rest[2 * i] as number, face.rest[2 * i + 1] as number];
      this.restDst.set(applyAffine(this.fit, x, y), 2 * i);
      this.restSrc.set([x / k - 0.5 + PAD, y / k - 0.5 + PAD], 2 * i);
    }
    this.positions = new Float32Array(2 * n);
    this.moving = new Uint8Array(n);
    const tris = face.triangles.length / 3;
    this.ints = new Int32Array(tris * WARP_INTS);
    this.floats = new Float32Array(tris * WARP_FLOATS);
    this.cols = new ColumnScratch(face.canvasWidth);
    this.columns = [0, 1, 2].map(() => new Float32Array(face.canvasWidth * 4 * COLUMN_ROWS));
  }

  /** Everything `frame` draws. The arrays are reused by the next call. */
  frame(frame: FaceFrame): FrameGeometry {
    const s = sanitize(frame);
    coefficients(s, this.coef);
    const face = this.face;
    const pose = Pose.of(s, [face.pivot[0] as number, face.pivot[1] as number], face.faceWidth);
    this.moveVertices(pose);
    const count = this.warpTriangles();
    const openings: Opening[] = [];
    for (let e = 0; e < 2; e++) {
      const eye = this.eyeOpening(face.eyes[e] as ClientOpening, e, pose);
      if (eye) openings.push(eye);
    }
    const mouth = this.mouthOpening(s, pose);
    if (mouth) openings.push(mouth);
    return { positions: this.positions, warp: { count, ints: this.ints, floats: this.floats }, openings };
  }

  /** Step 1 of `Renderer::render`: bases, pose, fit; and which vertices left their rest. */
  private moveVertices(pose: Pose | null): void {
    const { rest, bases, depth, headWeight } = this.face;
    const coef = this.coef;
    for (let i = 0; i < this.vertices; i++) {
      let x = rest[2 * i] as number;
      let y = rest[2 * i + 1] as number;
      for (let b = 0; b < NUM_BASES; b++) {
        const c = coef[b] as number;
        if (c === 0) continue;
        x += f32(c * (bases[(i * NUM_BASES + b) * 2] as number));
        y += f32(c * (bases[(i * NUM_BASES + b) * 2 + 1] as number));
      }
      if (pose) [x, y] = pose.apply(x, y, depth[i] as number, headWeight[i] as number);
      const [rx, ry] = applyAffine(this.fit, x, y);
      this.positions[2 * i] = rx;
      this.positions[2 * i + 1] = ry;
      const [px, py] = [this.positions[2 * i] as number, this.positions[2 * i + 1] as number];
      this.moving[i] = Math.abs(f32(px - (this.restDst[2 * i] as number))) > MOVE_EPS_PX || Math.abs(f32(py - (this.restDst[2 * i + 1] as number))) > MOVE_EPS_PX ? 1 : 0;
    }
  }

  /** The triangles with a moving vertex that `raster::draw_triangle` draws; returns how many. */
  private warpTriangles(): number {
    const tris = this.face.triangles;
    let count = 0;
    for (let t = 0; t < tris.length; t += 3) {
      const [a, b, c] = [tris[t] as number, tris[t + 1] as number, tris[t + 2] as number];
      if (!(this.moving[a] || this.moving[b] || this.moving[c])) continue;
      if (this.warpTriangle(a, b, c, count)) count++;
    }
    return count;
  }

  /** `draw_triangle`'s set-up for one triangle into slot `slot`; false when it draws nothing. */
  private warpTriangle(a: number, b: number, c: number, slot: number): boolean {
    const p = this.positions;
    const dst = [p[2 * a], p[2 * a + 1], p[2 * b], p[2 * b + 1], p[2 * c], p[2 * c + 1]] as number[];
    const [ax, ay, bx, by, cx, cy] = dst as [number, number, number, number, number, number];
    const o = f32(f32(f32(bx - ax) * f32(cy - ay)) - f32(f32(by - ay) * f32(cx - ax)));
    if (!(o > F32_1E6)) return false;
    const r = this.restSrc;
    const map = fromTriangles(dst, [r[2 * a], r[2 * a + 1], r[2 * b], r[2 * b + 1], r[2 * c], r[2 * c + 1]] as number[]);
    if (!map) return false;
    const v = [
      [ax, ay],
      [bx, by],
      [cx, cy],
    ].sort((m, n) => (m[1] as number) - (n[1] as number) || (m[0] as number) - (n[0] as number)) as [number, number][];
    const [v0, v1, v2] = v as [[number, number], [number, number], [number, number]];
    // (`raster::ceil_i32` is `Math.ceil` on these values.)
    const yStart = Math.max(Math.ceil(f32(v0[1] - 0.5)), 0);
    const yEnd = Math.min(Math.ceil(f32(v2[1] - 0.5)), this.face.canvasHeight);
    if (yStart >= yEnd) return false;
    const minX = Math.min(v0[0], v1[0], v2[0]);
    const maxX = Math.max(v0[0], v1[0], v2[0]);
    const xo = Math.trunc(Math.max(minX, 0));
    const fixed = (x: number) => Math.floor(x * FRAC_ONE + 0.5);
    const [oxc, oyc] = [xo + 0.5, yStart + 0.5];
    // A box around the triangle (a pixel to spare): the shader keeps the pixels it covers.
    const x0 = Math.max(Math.floor(minX) - 1, 0);
    const x1 = Math.min(Math.ceil(maxX) + 2, this.face.canvasWidth);
    this.ints.set(
      [fixed(map[0] * oxc + map[1] * oyc + map[4]), fixed(map[2] * oxc + map[3] * oyc + map[5]), fixed(map[0]), fixed(map[2]), fixed(map[1]), fixed(map[3]), xo, yStart, yEnd, x0, x1, 0],
      slot * WARP_INTS,
    );
    const f = slot * WARP_FLOATS;
    edge(v0[0], v0[1], v2[0], v2[1], this.floats, f);
    this.floats[f + 3] = v1[1];
    edge(v0[0], v0[1], v1[0], v1[1], this.floats, f + 4);
    edge(v1[0], v1[1], v2[0], v2[1], this.floats, f + 8);
    return true;
  }

  /** The fit of an opening's layer, moved rigidly with the head at its depth (`layer_affine`). */
  private layerAffine(o: ClientOpening, pose: Pose | null): Affine {
    const [cx, cy] = [o.centre[0] as number, o.centre[1] as number];
    const probe = [cx, cy, cx + 8, cy, cx, cy + 8];
    const moved: number[] = [];
    for (let k = 0; k < 6; k += 2) {
      const [px, py] = pose ? pose.apply(probe[k] as number, probe[k + 1] as number, o.depth, 1) : [probe[k] as number, probe[k + 1] as number];
      moved.push(...applyAffine(this.fit, px, py));
    }
    return fromTriangles(probe, moved) ?? this.fit;
  }

  /** Whether a vertex of the opening's contours moved (else the native renderer leaves it). */
  private moved(o: ClientOpening): boolean {
    for (const ids of [o.upper, o.lower]) for (let k = 0; k < ids.length; k++) if (this.moving[ids[k] as number]) return true;
    return false;
  }

  private eyeOpening(eye: ClientOpening, slot: number, pose: Pose | null): Opening | null {
    if (!this.moved(eye)) return null;
    const n = Math.min(eye.upper.length, MAX_CONTOUR);
    const cols = this.cols;
    this.contours(eye, n);
    cols.shift.fill(0);
    const columns = this.columns[slot] as Float32Array;
    const rect = composite(cols, n, this.face.canvasHeight, { rest: false, subtractRest: false, feather: 0, growLower: 0, seam: 0 }, columns);
    if (!rect) return null;
    const inverse = invertAffine(this.layerAffine(eye, pose)) ?? IDENTITY;
    return { ...rect, columns, feather: 0, inverse, look: null };
  }

  private mouthOpening(s: State, pose: Pose | null): Opening | null {
    const face = this.face;
    const mouth = face.mouth;
    const mo = mouth.opening;
    if (!this.moved(mo)) return null;
    const a = this.layerAffine(mo, pose);
    const inverse = invertAffine(a) ?? IDENTITY;
    const n = Math.min(mo.upper.length, MAX_CONTOUR);
    const cols = this.cols;
    this.contours(mo, n);
    for (let k = 0; k < n; k++) {
      const [vu, vl] = [mo.upper[k] as number, mo.lower[k] as number];
      const pu = applyAffine(a, face.rest[2 * vu] as number, face.rest[2 * vu + 1] as number);
      const pl = applyAffine(a, face.rest[2 * vl] as number, face.rest[2 * vl + 1] as number);
      cols.shift[k] = f32((cols.upper[2 * k + 1] as number) - f32(pu[1]));
      cols.restUpper.set(pu, 2 * k);
      cols.restLower.set(pl, 2 * k);
    }
    const open = this.coef[0] as number; // BASE_ORDER[0], 'open': the effective jaw opening
    const drop = open * mouth.jawDrop;
    const [dx, dy] = [(mouth.down[0] as number) * drop, (mouth.down[1] as number) * drop];
    const mouthWidth = f32(mouth.width * this.fit[0]);
    const look: MouthLook = {
      xLeft: cols.upper[0] as number,
      xRight: cols.upper[2 * (n - 1)] as number,
      mouthWidth,
      open,
      wide: s.wide,
      tongue: s.tongue,
      jaw: f32(a[2] * dx + a[3] * dy),
      upperTeeth: !mouth.photo?.teeth,
    };
    const synthesised = !mouth.photo;
    const feather = Math.max(f32(MOUTH_FEATHER_FRAC * mouthWidth), 1);
    const edges: Edges = {
      rest: true,
      subtractRest: synthesised,
      feather,
      // A photo showing its teeth: cover the sliver of them on the lower lip as the jaw opens,
      // and draw a seam where its lips close.
      growLower: synthesised ? 0 : Math.min(Math.max(f32(0.5 * look.jaw), 0), 1),
      seam: synthesised ? 0 : Math.max(f32(MOUTH_SEAM_FRAC * mouthWidth), 1),
    };
    const columns = this.columns[2] as Float32Array;
    const rect = composite(cols, n, face.canvasHeight, edges, columns);
    if (!rect) return null;
    return { ...rect, columns, feather, inverse, look };
  }

  /** The opening's first `n` upper and lower contour points at this frame into the scratch. */
  private contours(o: ClientOpening, n: number): void {
    const p = this.positions;
    const cols = this.cols;
    for (let k = 0; k < n; k++) {
      const [u, l] = [o.upper[k] as number, o.lower[k] as number];
      cols.upper.set([p[2 * u] as number, p[2 * u + 1] as number], 2 * k);
      cols.lower.set([p[2 * l] as number, p[2 * l + 1] as number], 2 * k);
    }
  }
}

const IDENTITY: Affine = [1, 0, 0, 1, 0, 0];

/** The checks a face must pass before it is drawn (the wire form could be anything). */
function checkFace(face: ClientFace): void {
  const bad = (what: string) => {
    throw new TypeError(`invalid ClientFace: ${what}`);
  };
  if (Array.from(face.baseOrder).join() !== BASE_ORDER.join()) bad(`bases are ${Array.from(face.baseOrder).join(', ')}, expected ${BASE_ORDER.join(', ')}`);
  const n = face.rest.length / 2;
  if (!Number.isInteger(n) || face.bases.length !== n * NUM_BASES * 2 || face.depth.length !== n || face.headWeight.length !== n) bad('per-vertex arrays disagree on the vertex count');
  if (face.triangles.length % 3 !== 0 || face.triangles.some((v) => v >= n)) bad('triangles name missing vertices');
  if (face.texture.length !== face.textureWidth * face.textureHeight * 3) bad('texture size');
  if (face.fit.length !== 6 || face.canvasWidth < 1 || face.canvasHeight < 1 || face.canvasWidth > face.width || face.canvasHeight > face.height) bad('fit or canvas size');
  if (face.eyes.length !== 2) bad('two eyes expected');
  for (const o of [face.eyes[0], face.eyes[1], face.mouth.opening] as ClientOpening[]) {
    if (o.upper.length < 2 || o.lower.length < Math.min(o.upper.length, MAX_CONTOUR)) bad('an opening has too few points');
    if (Array.from(o.upper).some((v) => v >= n) || Array.from(o.lower).some((v) => v >= n)) bad('an opening names missing vertices');
  }
  const pm = face.mouth.photo;
  if (pm && pm.mask.length !== pm.w * pm.h) bad('mouth mask size');
}
