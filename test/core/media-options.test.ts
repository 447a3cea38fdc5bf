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

const CHOSEN: MediaOptions = { targetFps: 30, upsampleFactor: 1.5, ttsSource: 'flite', videoCodec: 'vp8', outputSize: '1280x720' };

test('every wire field has its camelCase option and a default; none is chosen in MEDIA_UNSET', () => {
  assert.equal(MEDIA_FIELDS, ['target_fps', 'upsample_factor', 'tts_source', 'video_codec', 'output_size']);
  assert.equal(Object.keys(MEDIA_UNSET), ['targetFps', 'upsampleFactor', 'ttsSource', 'videoCodec', 'outputSize']);
  assert.equal(Object.keys(MEDIA_DEFAULTS).sort(), Object.keys(MEDIA_UNSET).sort());
  assert.ok(Object.values(MEDIA_UNSET).every((v) => v === null));
  assert.ok(Object.values(MEDIA_DEFAULTS).every((v) => v !== null && v !== undefined));
});

test('parseMediaOptions: the wire fields by the request rules, other fields ignored; a bad one is the AppError clients see', () => {
  const body = { target_fps: '30', upsample_factor: 1.5, tts_source: 'Flite', video_codec: ' VP8', output_size: '1280X720', voice: 'alice' };
  assert.equal(parseMediaOptions(body), CHOSEN);
  assert.equal(parseMediaOptions({ target_fps: null }), MEDIA_UNSET);
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
  assert.equal(JSON.parse(text), { target_fps: 30, upsample_factor: 1.5, tts_source: 'flite', video_codec: 'vp8', output_size: '1280x720' });
  assert.equal(mediaOptionsFrom(text), CHOSEN);
  assert.equal(mediaOptionsFrom(JSON.parse(text)), CHOSEN);
  assert.equal(mediaOptionsFrom(storedMedia(MEDIA_UNSET)), MEDIA_UNSET);
  assert.equal(mediaOptionsFrom(null), MEDIA_UNSET);
  assert.equal(mediaOptionsFrom('{}'), MEDIA_UNSET);
  assert.equal(mediaOptionsFrom({ target_fps: 12, newer_option: true }), { ...MEDIA_UNSET, targetFps: 12 });
});

test.run();
