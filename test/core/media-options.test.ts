/**
 * core/media-options.ts: the one description of a session's media options. The decoded names
 * follow the wire names, every option has a default, the store's form round-trips in both of its
 * shapes (SQLite's JSON text, PostgreSQL's JSONB object) and reads missing or null as the default.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AppError } from '../../src/core/errors.js';
import {
  MEDIA_DEFAULTS,
  MEDIA_FIELDS,
  MEDIA_UNSET,
  mediaOptionsFrom,
  parseMediaOptions,
  resolveMedia,
  storedMedia,
  type MediaOptions,
} from '../../src/core/media-options.js';

// Written so that a new option needs no change here (MEDIA_UNSET fills in what a case does not name).
const CHOSEN: MediaOptions = { ...MEDIA_UNSET, targetFps: 30, upsampleFactor: 1.5, ttsSource: 'flite', videoCodec: 'vp8', outputSize: '1280x720' };
const camel = (wire: string) => wire.split('_').map((w, i) => (i === 0 ? w : w[0]!.toUpperCase() + w.slice(1))).join('');

test('every wire field has its camelCase option and a default; none is chosen in MEDIA_UNSET', () => {
  assert.ok(MEDIA_FIELDS.includes('upsample_factor') && 'upsampleFactor' in MEDIA_UNSET, 'a known field and its option');
  assert.equal(Object.keys(MEDIA_UNSET), MEDIA_FIELDS.map(camel));
  assert.equal(Object.keys(MEDIA_DEFAULTS).sort(), Object.keys(MEDIA_UNSET).sort());
  assert.ok(Object.values(MEDIA_UNSET).every((v) => v === null));
  assert.ok(Object.values(MEDIA_DEFAULTS).every((v) => v !== null && v !== undefined));
});

test('parseMediaOptions: the wire fields by the request rules, other fields ignored; a bad one is the AppError clients see', () => {
  const body = { target_fps: '30', upsample_factor: 1.5, tts_source: 'Flite', video_codec: ' VP8', output_size: '1280X720', voice: 'alice' };
  assert.equal(parseMediaOptions(body), CHOSEN);
  assert.equal(parseMediaOptions({ target_fps: null }), MEDIA_UNSET);
  assert.is(parseMediaOptions({ renderer: 'CPU' }).renderer, 'cpu');
  assert.is(resolveMedia(MEDIA_UNSET).renderer, 'cpu');
  assert.throws(() => parseMediaOptions({ renderer: 'gpu' }), (err: unknown) => err instanceof AppError && err.param === 'renderer');
  try {
    parseMediaOptions({ upsample_factor: 8 });
    assert.unreachable('upsample_factor 8 was accepted');
  } catch (err) {
    assert.instance(err, AppError);
    assert.equal([(err as AppError).code, (err as AppError).param], ['out_of_range', 'upsample_factor']);
  }
});

test('resolveMedia: chosen options win over the server defaults, which win over MEDIA_DEFAULTS', () => {
  assert.equal(resolveMedia(MEDIA_UNSET), MEDIA_DEFAULTS);
  assert.equal(resolveMedia(MEDIA_UNSET, { outputSize: '720x720' }), { ...MEDIA_DEFAULTS, outputSize: '720x720' });
  assert.equal(resolveMedia({ ...MEDIA_UNSET, outputSize: '1280x720', targetFps: 12 }, { outputSize: '720x720' }), {
    ...MEDIA_DEFAULTS,
    targetFps: 12,
    outputSize: '1280x720',
  });
});

test("the store's form: JSON under the wire names, read back from text or an object; missing, null and unknown fields", () => {
  const text = storedMedia(CHOSEN);
  const stored = JSON.parse(text) as Record<string, unknown>;
  assert.equal(Object.keys(stored), MEDIA_FIELDS);
  assert.equal([stored.target_fps, stored.upsample_factor, stored.output_size], [30, 1.5, '1280x720']);
  assert.equal(mediaOptionsFrom(text), CHOSEN);
  assert.equal(mediaOptionsFrom(JSON.parse(text)), CHOSEN);
  assert.equal(mediaOptionsFrom(storedMedia(MEDIA_UNSET)), MEDIA_UNSET);
  assert.equal(mediaOptionsFrom(null), MEDIA_UNSET);
  assert.equal(mediaOptionsFrom('{}'), MEDIA_UNSET);
  assert.equal(mediaOptionsFrom({ target_fps: 12, newer_option: true }), { ...MEDIA_UNSET, targetFps: 12 });
});

test.run();
