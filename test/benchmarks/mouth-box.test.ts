/**
 * The mouth box the call benchmarks sample (harness/clients/browser.ts DEFAULT_FACE_MOUTH_BOX) is
 * the default face's mouth as the server frames it (512x512, src/media/framing.ts), and no
 * benchmark keeps a box of its own: the webrtc bench kept the pre-framing box [190, 126, 68, 52]
 * after framing, and measured the forehead's grey level as the mouth's for two days.
 *  - the box holds the framed inner-lip mid-points (landmarks 13, 14) and the corners (61, 291);
 *    the stale box holds none of them (the check can fail);
 *  - no benchmarks/ or harness/ file (the measures the benchmarks share) holds a literal mouth box
 *    (four numbers on a line that names a mouth); the scan reads every file and finds the stale
 *    line when it is fed one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { FaceLandmarks } from '../../src/media/face-registration.js';
import { chooseFrame, frameLandmarks } from '../../src/media/framing.js';
import { DEFAULT_FACE_MOUTH_BOX } from '../../harness/clients/browser.js';
import { REPO_ROOT } from '../../harness/servers/server.js';

const STALE_BOX = [190, 126, 68, 52];
const MOUTH_POINTS = { 'upper inner lip (13)': 13, 'lower inner lip (14)': 14, 'left corner (61)': 61, 'right corner (291)': 291 };

function framedMouth(): Record<string, [number, number]> {
  const face = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test/fixtures/faces/default.landmarks.json'), 'utf8')) as FaceLandmarks;
  const lm = frameLandmarks(face.landmarks, chooseFrame(face, 512, 512), 512, 512);
  return Object.fromEntries(Object.entries(MOUTH_POINTS).map(([name, i]) => [name, [lm[i]![0], lm[i]![1]]]));
}

const inside = (box: readonly number[], [x, y]: [number, number]) => x >= box[0]! && x <= box[0]! + box[2]! && y >= box[1]! && y <= box[1]! + box[3]!;

test('the default mouth box holds the framed mouth landmarks; the stale pre-framing box holds none', () => {
  const points = framedMouth();
  for (const [name, p] of Object.entries(points)) {
    assert.ok(inside(DEFAULT_FACE_MOUTH_BOX, p), `${name} at ${p.map(Math.round)} is outside DEFAULT_FACE_MOUTH_BOX ${DEFAULT_FACE_MOUTH_BOX}`);
    assert.not.ok(inside(STALE_BOX, p), `${name} at ${p.map(Math.round)} is inside the stale box`);
  }
});

/** An array of four numbers. */
const FOUR_NUMBERS = /\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]/g;

function tsFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? tsFiles(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
}

/**
 * Lines that name a mouth and hold four numbers in pixels of a frame (one of them 16 or more, so
 * that indices such as [0, 1, 2, 3] are not a box): a mouth box of their own.
 */
function literalMouthBoxes(source: string): string[] {
  return source.split('\n').filter((line) => /mouth/i.test(line) && [...line.matchAll(FOUR_NUMBERS)].some((m) => m.slice(1).some((v) => Number(v) >= 16)));
}

test('no benchmarks or harness file holds a literal mouth box', () => {
  // The scan finds the line the webrtc bench had, and passes over boxes that are not a mouth's.
  assert.equal(literalMouthBoxes(`const x = 1;\nconst MOUTH_BOX = [${STALE_BOX.join(', ')}];\n`).length, 1);
  assert.equal(literalMouthBoxes("await callIn(page, 'startSampling', mouthBox ?? [190, 126, 68, 52]);").length, 1);
  assert.equal(literalMouthBoxes('const ANY_BOX = [0, 0, 16, 16];\nconst FULL = { box: [0, 0, 512, 512] };\nconst mouthBox = [0, 1, 2, 3].map((k) => k);').length, 0);
  const files = [...tsFiles(path.join(REPO_ROOT, 'benchmarks')), ...tsFiles(path.join(REPO_ROOT, 'harness'))];
  assert.ok(files.length >= 10 && files.some((f) => f.endsWith('webrtc.bench.ts')) && files.some((f) => f.endsWith('onsets.ts')), `benchmarks/ and harness/ files read: ${files.length}`);
  const found = files.flatMap((f) => literalMouthBoxes(fs.readFileSync(f, 'utf8')).map((line) => `${path.relative(REPO_ROOT, f)}: ${line.trim()}`));
  assert.equal(found, [], 'a benchmark keeps a mouth box of its own; use DEFAULT_FACE_MOUTH_BOX (harness/clients/browser.ts) or find it on the frames');
});

test.run();
