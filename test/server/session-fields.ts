/**
 * Bad fields of a POST /v1/sessions body, one at a time, and the error code each must get:
 * sessions.test.ts sends them to the server, and openapi.test.ts checks that the published
 * schema refuses every one whose refusal is a matter of shape (not the unknown_* asset codes,
 * which depend on what is stored), so the validator and the document cannot drift apart.
 */
export const BAD_SESSION_FIELDS: readonly [field: string, value: unknown, code: string][] = [
  ['model', 42, 'invalid_type'],
  ['model', '', 'invalid_value'],
  ['instructions', ['x'], 'invalid_type'],
  ['voice', 'nobody', 'unknown_voice'],
  ['face', 'face9', 'unknown_face'],
  ['face', '00000000-0000-4000-8000-000000000000', 'unknown_face'],
  ['driving', 'dance', 'unknown_driving'],
  ['target_fps', 0, 'out_of_range'],
  ['target_fps', 61, 'out_of_range'],
  ['target_fps', 24.5, 'invalid_type'],
  ['target_fps', 'fast', 'invalid_type'],
  ['upsample_factor', 0.5, 'out_of_range'],
  ['upsample_factor', 5, 'out_of_range'],
  ['tts_source', 'siri', 'invalid_value'],
  ['video_codec', 'av1', 'invalid_value'],
  ['output_size', '1920x1080', 'invalid_value'],
  ['output_size', 512, 'invalid_value'],
];

/** The codes that say the value's shape is wrong, as opposed to naming an asset that does not exist. */
export const SHAPE_CODES: ReadonlySet<string> = new Set(['invalid_type', 'invalid_value', 'out_of_range', 'string_above_max_length']);
