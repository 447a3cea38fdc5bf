/**
 * Method B of the lip-sync measure (harness/measures/mouth-pixels.ts) on synthetic frames: a drawn
 * face (textured skin, two eyes, a nose, lips) whose mouth opens as a dark ellipse with a band of
 * upper teeth, moved by a known translation.
 *  - the opening grows with the drawn cavity and is the rest level on the rest frame;
 *  - the tracker recovers a head translation within 1 px, and the moved region measures what the
 *    unmoved face does; a region that did not follow would not (the check can fail);
 *  - a smiling rest (the teeth band showing with the lips closed) counts its teeth at rest, so its
 *    rest level subtracts them, and an open mouth still measures above it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MouthPixels, planesOf, type PixelPlanes } from '../../harness/measures/mouth-pixels.js';

const SIDE = 200;
const MOUTH = { x: 100, y: 140, halfWidth: 25 };

/** Landmarks of the drawn face at rest: only those method B reads (eye corners 33, 263; nose tip 1; mouth corners 61, 291). */
function landmarks(): [number, number, number][] {
  const lm: [number, number, number][] = Array.from({ length: 468 }, () => [0, 0, 0]);
  lm[33] = [55, 70, 0];
  lm[263] = [145, 70, 0];
  lm[1] = [100, 110, 0];
  lm[61] = [MOUTH.x - MOUTH.halfWidth, MOUTH.y, 0];
  lm[291] = [MOUTH.x + MOUTH.halfWidth, MOUTH.y, 0];
  return lm;
}

/** A deterministic skin texture: ±18 grey levels in 4 px cells. */
function texture(x: number, y: number): number {
  const h = Math.imul(Math.floor(x / 4) * 73856093 ^ Math.floor(y / 4) * 19349663, 2654435761) >>> 0;
  return ((h % 37) - 18) | 0;
}

const inEllipse = (x: number, y: number, cx: number, cy: number, rx: number, ry: number) => ry > 0 && ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1;

/** The face with its mouth open `open` px (0: closed), moved by (dx, dy); `smile`: the upper teeth show at rest. */
function frame(open: number, dx = 0, dy = 0, smile = false): PixelPlanes {
  const rgb = new Uint8Array(SIDE * SIDE * 3);
  for (let py = 0; py < SIDE; py++)
    for (let px = 0; px < SIDE; px++) {
      const [x, y] = [px - dx, py - dy];
      const t = texture(x, y);
      let c: [number, number, number] = [205 + t, 150 + t, 120 + t];
      if (inEllipse(x, y, 70, 70, 14, 7) || inEllipse(x, y, 130, 70, 14, 7)) c = [40, 30, 30];
      if (inEllipse(x, y, 100, 105, 8, 5)) c = [150, 100, 85];
      if (inEllipse(x, y, MOUTH.x, MOUTH.y, MOUTH.halfWidth, 5 + open / 2)) c = [170, 70, 70];
      const cavity = open / 2;
      const band = smile ? 3 : Math.min(3, open / 3);
      if (inEllipse(x, y, MOUTH.x, MOUTH.y, MOUTH.halfWidth - 4, Math.max(cavity, band))) {
        const top = MOUTH.y - Math.max(cavity, band);
        c = y < top + band ? [240, 240, 235] : [30, 15, 15];
      }
      rgb.set(c.map((v) => Math.max(0, Math.min(255, v))), (py * SIDE + px) * 3);
    }
  return planesOf(rgb, SIDE, SIDE, 3);
}

test('the opening grows with the drawn cavity, and is the rest level at rest', () => {
  const b = new MouthPixels(frame(0), landmarks());
  const rest = b.measure(frame(0)).opening;
  const openings = [0, 6, 12, 18].map((h) => b.measure(frame(h)).opening - rest);
  assert.is(openings[0], 0);
  for (let i = 1; i < openings.length; i++) assert.ok(openings[i]! > openings[i - 1]! + 0.02, `openings ${openings.map((o) => o.toFixed(3))}`);
});

test('the head translation is recovered within 1 px, and the moved region measures what the unmoved face does', () => {
  const b = new MouthPixels(frame(0), landmarks());
  const still = b.measure(frame(12));
  for (const [dx, dy] of [
    [5, -3],
    [-9, 7],
  ] as const) {
    const moved = b.measure(frame(12, dx, dy));
    assert.ok(Math.abs(moved.dx - dx) <= 1 && Math.abs(moved.dy - dy) <= 1, `found (${moved.dx}, ${moved.dy}) for (${dx}, ${dy})`);
    assert.ok(Math.abs(moved.opening - still.opening) < 0.01, `moved ${moved.opening.toFixed(3)} against still ${still.opening.toFixed(3)}`);
  }
  // A face moved beyond the search is not followed: its region no longer measures the mouth.
  const far = b.measure(frame(12, 0, 30));
  assert.ok(Math.abs(far.opening - still.opening) > 0.02, `a region left behind measures ${far.opening.toFixed(3)} against ${still.opening.toFixed(3)}`);
});

test('a smiling rest counts its teeth at rest; an open mouth measures above that rest', () => {
  const b = new MouthPixels(frame(0, 0, 0, true), landmarks());
  const rest = b.measure(frame(0, 0, 0, true));
  assert.ok(rest.teeth > 0.02, `teeth at rest ${rest.teeth.toFixed(3)}`);
  assert.is(b.measure(frame(0, 0, 0, true)).opening - rest.opening, 0);
  assert.ok(b.measure(frame(12, 0, 0, true)).opening - rest.opening > 0.05);
});

test.run();
