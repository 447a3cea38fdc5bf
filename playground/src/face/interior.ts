/**
 * The CPU half of `interior.rs`'s `composite` for the browser's face renderer: an opening's
 * contours (upper and lower, canvas pixels) rasterised per pixel column and per sub-column,
 * with the rest gap taken off, the lower contour grown and the seam widened as the native
 * renderer does, into the texels the opening shader (`shaders.ts`) reads. Per pixel, the shader
 * then computes the coverage and the colour.
 *
 * Layout of the columns (`COLUMN_ROWS` rows of `width` RGBA texels, column i = pixel x0 + i):
 * sub-columns 0 and 1 (top, bottom each), sub-columns 2 and 3, then at the pixel centre (top,
 * bottom, upper-contour shift, rest bottom), then (the gap before the seam widened it, 0, 0, 0).
 * Where a contour does not reach, top is NONE and bottom -NONE.
 *
 * Invariants: f32 arithmetic, operation for operation as in Rust, so the columns are the native
 * ones bit for bit; nothing allocates after `ColumnScratch` is made.
 *
 * Not here: coverage, colours, pixels (the shader), and where the contours come from (`geometry.ts`).
 */

const f32 = Math.fround;
const F32_1E6 = f32(1e-6);
/** Sub-columns per pixel of an opening's coverage (`interior::SUBCOLUMNS`). */
const SUBCOLUMNS = 4;
/** Openings' contours are cut to this many points (the native renderer's limit). */
export const MAX_CONTOUR = 16;
/** Rows of the columns' texels. */
export const COLUMN_ROWS = 4;
/** Stands for "no contour here" in the columns (a float texture keeps no infinities safely). */
export const NONE = 1e30;

/** `interior::Columns`: scratch for one opening, sized to the canvas width. The caller fills the
 * contours (`upper`, `lower`, `shift`, `restUpper`, `restLower`; x, y pairs). */
export class ColumnScratch {
  readonly upper = new Float32Array(2 * MAX_CONTOUR);
  readonly lower = new Float32Array(2 * MAX_CONTOUR);
  readonly shift = new Float32Array(MAX_CONTOUR);
  readonly restUpper = new Float32Array(2 * MAX_CONTOUR);
  readonly restLower = new Float32Array(2 * MAX_CONTOUR);
  readonly top: Float32Array;
  readonly bot: Float32Array;
  readonly restTop: Float32Array;
  readonly restBot: Float32Array;
  readonly ctop: Float32Array;
  readonly cbot: Float32Array;
  readonly cshift: Float32Array;
  readonly crestBot: Float32Array;
  readonly cgap: Float32Array;

  constructor(readonly width: number) {
    const sub = (width + 2) * SUBCOLUMNS;
    [this.top, this.bot, this.restTop, this.restBot] = [0, 1, 2, 3].map(() => new Float32Array(sub)) as [Float32Array, Float32Array, Float32Array, Float32Array];
    [this.ctop, this.cbot, this.cshift, this.crestBot, this.cgap] = [0, 1, 2, 3, 4].map(() => new Float32Array(width + 2)) as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
  }
}

/** What `composite` draws besides the colour (`interior::Edges`); `rest`: the scratch holds rest contours. */
export interface Edges {
  rest: boolean;
  subtractRest: boolean;
  feather: number;
  growLower: number;
  seam: number;
}

/** `Rect::around` of the first `n` points (x, y pairs). */
function around(pts: Float32Array, n: number, r: number[]): void {
  for (let k = 0; k < n; k++) {
    const [x, y] = [pts[2 * k] as number, pts[2 * k + 1] as number];
    r[0] = Math.min(r[0] as number, Math.floor(x));
    r[1] = Math.min(r[1] as number, Math.floor(y));
    r[2] = Math.max(r[2] as number, Math.ceil(x) + 1);
    r[3] = Math.max(r[3] as number, Math.ceil(y) + 1);
  }
}

/**
 * `interior::composite` up to its pixel loop: the rectangle it fills and the columns' contour
 * geometry (written to `out`, laid out as above), or null when it draws nothing.
 */
export function composite(cols: ColumnScratch, n: number, height: number, edges: Edges, out: Float32Array): { x0: number; y0: number; x1: number; y1: number } | null {
  const r = [Infinity, Infinity, -Infinity, -Infinity];
  around(cols.upper, n, r);
  around(cols.lower, n, r);
  const x0 = Math.max(r[0] as number, 0);
  const x1 = Math.min(r[2] as number, cols.width);
  if (x0 >= x1 || Math.max(r[1] as number, 0) >= Math.min(r[3] as number, height)) return null;
  const wpx = x1 - x0;
  const ns = wpx * SUBCOLUMNS;
  const { top, bot, ctop, cbot, cgap } = cols;
  rasterise(cols.upper, n, null, x0, SUBCOLUMNS, top, ns, Infinity, true);
  rasterise(cols.lower, n, null, x0, SUBCOLUMNS, bot, ns, -Infinity, false);
  if (edges.rest && edges.subtractRest) {
    rasterise(cols.restUpper, n, null, x0, SUBCOLUMNS, cols.restTop, ns, Infinity, true);
    rasterise(cols.restLower, n, null, x0, SUBCOLUMNS, cols.restBot, ns, -Infinity, false);
    for (let j = 0; j < ns; j++) {
      const g = f32((cols.restBot[j] as number) - (cols.restTop[j] as number));
      if (g > 0 && Number.isFinite(g)) {
        top[j] = (top[j] as number) + f32(g * 0.5);
        bot[j] = (bot[j] as number) - f32(g * 0.5);
      }
    }
  }
  if (edges.growLower !== 0) for (let j = 0; j < ns; j++) bot[j] = (bot[j] as number) + edges.growLower;
  if (edges.seam > 0) for (let j = 0; j < ns; j++) widen(top, bot, j, edges.seam);
  rasterise(cols.upper, n, null, x0, 1, ctop, wpx, Infinity, true);
  rasterise(cols.lower, n, null, x0, 1, cbot, wpx, -Infinity, false);
  rasterise(cols.upper, n, cols.shift, x0, 1, cols.cshift, wpx, 0, true);
  if (edges.growLower !== 0) for (let i = 0; i < wpx; i++) cbot[i] = (cbot[i] as number) + edges.growLower;
  for (let i = 0; i < wpx; i++) {
    cgap[i] = (cbot[i] as number) - (ctop[i] as number);
    if (edges.seam > 0) widen(ctop, cbot, i, edges.seam);
  }
  if (edges.rest) rasterise(cols.restLower, n, null, x0, 1, cols.crestBot, wpx, -Infinity, false);
  else cols.crestBot.fill(-Infinity);
  let [ymin, ymax] = [Infinity, -Infinity];
  for (let j = 0; j < ns; j++) {
    if ((top[j] as number) < (bot[j] as number)) {
      ymin = Math.min(ymin, top[j] as number);
      ymax = Math.max(ymax, bot[j] as number);
    }
  }
  if (ymin >= ymax) return null;
  const fh = f32(f32(0.5 * Math.max(edges.feather, 0)) + Math.max(edges.growLower, 0));
  const y0 = Math.max(Math.floor(f32(ymin - fh)), 0);
  const y1 = Math.min(Math.ceil(f32(ymax + fh)), height);
  packColumns(cols, wpx, out);
  return { x0, y0, x1, y1 };
}

/** `interior::widen` on entry `j`: at least `seam` tall, a third above the middle, two below. */
function widen(top: Float32Array, bot: Float32Array, j: number, seam: number): void {
  const [t, b] = [top[j] as number, bot[j] as number];
  if (Number.isFinite(t) && Number.isFinite(b) && f32(b - t) < seam) {
    const mid = f32(0.5 * f32(t + b));
    top[j] = mid - f32(seam / 3);
    bot[j] = mid + f32(seam * f32(2 / 3));
  }
}

/**
 * `interior::rasterise_contour`: `out[i]` (sample x = x0 + (i + 0.5) / per) gets the contour's y
 * (or `vals` interpolated along it), the min or max where segments overlap, `none` where none
 * reaches.
 */
function rasterise(pts: Float32Array, n: number, vals: Float32Array | null, x0: number, per: number, out: Float32Array, len: number, none: number, takeMin: boolean): void {
  out.fill(none, 0, len);
  const step = f32(1 / per);
  for (let k = 0; k + 1 < n; k++) {
    const [ax, ay, bx, by] = [pts[2 * k] as number, pts[2 * k + 1] as number, pts[2 * k + 2] as number, pts[2 * k + 3] as number];
    const [va, vb] = vals ? [vals[k] as number, vals[k + 1] as number] : [ay, by];
    const [lo, hi] = ax <= bx ? [ax, bx] : [bx, ax];
    const span = f32(bx - ax);
    const first = Math.max(Math.ceil(f32(f32(f32(lo - x0) * per) - 0.5)), 0);
    const last = Math.min(Math.floor(f32(f32(f32(hi - x0) * per) - 0.5)), len - 1);
    for (let i = first; i <= last; i++) {
      const xs = f32(x0 + f32(f32(i + 0.5) * step));
      const t = Math.abs(span) > F32_1E6 ? f32(f32(xs - ax) / span) : 0.5;
      const y = f32(va + f32(f32(vb - va) * t));
      const o = out[i] as number;
      out[i] = o === none ? y : takeMin ? Math.min(o, y) : Math.max(o, y);
    }
  }
}

/** The columns of one opening into `out` (layout above). */
function packColumns(cols: ColumnScratch, wpx: number, out: Float32Array): void {
  const row = cols.width * 4;
  const v = (x: number) => (x === Infinity ? NONE : x === -Infinity ? -NONE : x);
  for (let i = 0; i < wpx; i++) {
    const j = i * SUBCOLUMNS;
    out.set([v(cols.top[j] as number), v(cols.bot[j] as number), v(cols.top[j + 1] as number), v(cols.bot[j + 1] as number)], 4 * i);
    out.set([v(cols.top[j + 2] as number), v(cols.bot[j + 2] as number), v(cols.top[j + 3] as number), v(cols.bot[j + 3] as number)], row + 4 * i);
    out.set([v(cols.ctop[i] as number), v(cols.cbot[i] as number), cols.cshift[i] as number, v(cols.crestBot[i] as number)], 2 * row + 4 * i);
    out.set([v(cols.cgap[i] as number), 0, 0, 0], 3 * row + 4 * i);
  }
}
