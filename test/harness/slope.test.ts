/**
 * The slope estimators the leak test and the soak benchmark decide on: exact on a line, Theil-Sen
 * unmoved by outliers that drag OLS, NaN (not 0) when there is nothing to fit.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { olsSlope, secondHalf, theilSenSlope, type Point } from '../../harness/measures/slope.js';

const Slope = suite('slope');

const line = (n: number, slope: number, intercept: number): Point[] => Array.from({ length: n }, (_, x) => ({ x, y: intercept + slope * x }));
const close = (a: number, b: number, tol = 1e-9) => Math.abs(a - b) <= tol;

Slope('both estimators recover an exact line, unsorted and unevenly spaced', () => {
  const points = [5, 1, 9, 2, 30, 7].map((x) => ({ x, y: 3 - 0.5 * x }));
  for (const fit of [olsSlope(points), theilSenSlope(points)]) {
    assert.ok(close(fit.slope, -0.5), `slope ${fit.slope}`);
    assert.ok(close(fit.intercept, 3), `intercept ${fit.intercept}`);
    assert.is(fit.n, 6);
  }
});

Slope('Theil-Sen ignores a few wild points that drag OLS; a real trend still shows through them', () => {
  // A flat series (memory that does not grow) with three allocator spikes of +40 near the end.
  const flat = line(40, 0, 100);
  for (const i of [31, 35, 38]) flat[i] = { x: i, y: 140 };
  assert.ok(close(theilSenSlope(flat).slope, 0), `Theil-Sen ${theilSenSlope(flat).slope}`);
  assert.ok(olsSlope(flat).slope > 0.3, `OLS ${olsSlope(flat).slope} is dragged up`);
  // A leak of 1 per step under the same spikes reads 1.
  const leak = line(40, 1, 100);
  for (const i of [31, 35, 38]) leak[i] = { x: i, y: leak[i]!.y + 40 };
  assert.ok(close(theilSenSlope(leak).slope, 1), `Theil-Sen ${theilSenSlope(leak).slope}`);
});

Slope('Theil-Sen reads a leak under symmetric noise; long series are thinned, not refused', () => {
  let seed = 42;
  const noise = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 - 0.5) * 8; // ±4
  const noisy = Array.from({ length: 5000 }, (_, x) => ({ x, y: 0.01 * x + noise() }));
  const fit = theilSenSlope(noisy);
  assert.is(fit.n, 2000);
  assert.ok(Math.abs(fit.slope - 0.01) < 0.001, `slope ${fit.slope}`);
});

Slope('nothing to fit is NaN, never 0', () => {
  assert.ok(Number.isNaN(theilSenSlope([]).slope));
  assert.ok(Number.isNaN(theilSenSlope([{ x: 1, y: 1 }]).slope));
  assert.ok(Number.isNaN(theilSenSlope([{ x: 2, y: 1 }, { x: 2, y: 5 }]).slope), 'equal x only');
  assert.ok(Number.isNaN(olsSlope([{ x: 2, y: 1 }, { x: 2, y: 5 }]).slope));
});

Slope('secondHalf() keeps the later half', () => {
  assert.equal(secondHalf([1, 2, 3, 4, 5]), [3, 4, 5]);
  assert.equal(secondHalf([1, 2, 3, 4]), [3, 4]);
  assert.equal(secondHalf([]), []);
});

Slope.run();
