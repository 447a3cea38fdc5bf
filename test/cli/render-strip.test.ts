/**
 * render:strip's before/after: the states a revision's renderer can draw are read from that
 * revision's parse_state, and the rest of each state is dropped for its row, never the state.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { keepKnownKeys, stateKeys } from '../../src/cli/render-strip.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const PARSE_STATE_FILE = 'native/face-render/tests/common/mod.rs';
/** The last commit before brows, cheeks and the tongue existed (issue 28). */
const BEFORE_EXPRESSION = 'd7131c3';

test("the keys are read from parse_state's match arms, this tree's and an older one's", () => {
  const now = stateKeys(fs.readFileSync(path.join(ROOT, PARSE_STATE_FILE), 'utf8'));
  for (const key of ['open', 'wide', 'press', 'tongue', 'brow', 'cheek', 'pitch', 'roll', 'scale', 'eye']) assert.ok(now.has(key), key);
  let old: string;
  try {
    old = execFileSync('git', ['show', `${BEFORE_EXPRESSION}:${PARSE_STATE_FILE}`], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    // A shallow clone without that commit: the fixture below stands in for it.
    old = 'pub fn parse_state(s: &str) -> FaceState {\n match k {\n "open" => 1,\n "wide" => 2,\n "press" => 3,\n "pitch" => 4,\n "roll" => 5,\n "scale" => 6,\n }\n}\n';
  }
  const before = stateKeys(old);
  assert.ok(before.has('open') && before.has('pitch'));
  assert.not.ok(before.has('brow') || before.has('cheek') || before.has('tongue'), 'the older renderer knew no brow, cheek or tongue');
  assert.is(keepKnownKeys('open=0.28,wide=0.7,tongue=0.5,brow=0.8,cheek=0.5,pitch=-1.5', before), 'open=0.28,wide=0.7,pitch=-1.5');
  assert.is(keepKnownKeys('brow=0.8,cheek=0.5', before), 'rest', 'nothing left to draw is the rest state');
  assert.is(keepKnownKeys('rest', before), 'rest');
  assert.is(keepKnownKeys('open=0.8,brow=1', now), 'open=0.8,brow=1', 'this tree draws them all');
});

test.run();
