/**
 * Slope of a series (memory against sessions done) for leak checks: ordinary least squares and
 * the Theil-Sen estimator (the median of the slopes between every pair of points, Sen 1968).
 * Theil-Sen is what leak checks decide on: one allocator step, a GC that lands late or a burst of
 * load moves a few pairs, not the median, so a flat series reads near zero however noisy, while a
 * leak of k per step reads k. OLS is reported beside it to show how much one step moved it.
 *
 * Invariants: x values need not be evenly spaced or sorted; pairs with equal x are skipped; fewer
 * than two distinct x values give slope NaN (never a made-up 0). Used by the media leak test and
 * the soak benchmark (both import it from harness/).
 */

export interface Point {
  x: number;
  y: number;
}

export interface SlopeFit {
  /** Change of y per unit of x. */
  slope: number;
  /** y at x = 0 on the fitted line. */
  intercept: number;
  /** Points the fit used. */
  n: number;
}

/**
 * Most points Theil-Sen takes all pairs of: 2,000 points are 2 million pairs (16 MB, tens of ms).
 * Longer series are thinned to this many, evenly spaced; that adds sampling noise, not a bias.
 */
const THEIL_SEN_MAX_POINTS = 2000;

export function olsSlope(points: readonly Point[]): SlopeFit {
  const n = points.length;
  if (n < 2) return { slope: Number.NaN, intercept: Number.NaN, n };
  let mx = 0;
  let my = 0;
  for (const p of points) {
    mx += p.x;
    my += p.y;
  }
  mx /= n;
  my /= n;
  let sxy = 0;
  let sxx = 0;
  for (const p of points) {
    sxy += (p.x - mx) * (p.y - my);
    sxx += (p.x - mx) ** 2;
  }
  const slope = sxx === 0 ? Number.NaN : sxy / sxx;
  return { slope, intercept: my - slope * mx, n };
}

export function theilSenSlope(points: readonly Point[]): SlopeFit {
  const used = thin(points, THEIL_SEN_MAX_POINTS);
  const n = used.length;
  const slopes = new Float64Array((n * (n - 1)) / 2);
  let k = 0;
  for (let i = 0; i < n; i++) {
    const a = used[i]!;
    for (let j = i + 1; j < n; j++) {
      const b = used[j]!;
      if (b.x !== a.x) slopes[k++] = (b.y - a.y) / (b.x - a.x);
    }
  }
  if (k === 0) return { slope: Number.NaN, intercept: Number.NaN, n };
  const slope = medianOf(slopes.subarray(0, k));
  const intercept = medianOf(Float64Array.from(used, (p) => p.y - slope * p.x));
  return { slope, intercept, n };
}

/** The later half of a series (by position): what is left once warm-up growth has levelled off. */
export function secondHalf<T>(series: readonly T[]): T[] {
  return series.slice(Math.floor(series.length / 2));
}

/** Median of a typed array (sorted in place; the mean of the middle two for an even count). */
function medianOf(values: Float64Array): number {
  values.sort();
  const mid = values.length >> 1;
  return values.length % 2 === 1 ? values[mid]! : (values[mid - 1]! + values[mid]!) / 2;
}

function thin(points: readonly Point[], max: number): readonly Point[] {
  if (points.length <= max) return points;
  const step = (points.length - 1) / (max - 1);
  return Array.from({ length: max }, (_, i) => points[Math.round(i * step)]!);
}
