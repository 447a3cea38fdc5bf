import { Type } from '@sinclair/typebox';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AppError } from '../../src/core/errors.js';
import { anyCaseEnum, compileRequest, lenientBoolean, nonBlankString, numericField, oneOfValues } from '../../src/core/schema.js';

const Body = Type.Object({
  name: Type.Optional(nonBlankString(5)),
  fps: Type.Optional(numericField({ min: 1, max: 60 }, { integer: true })),
  factor: Type.Optional(numericField({ min: 1, max: 4 })),
  codec: Type.Optional(anyCaseEnum(['h264', 'vp8'])),
  video: Type.Optional(lenientBoolean()),
  nested: Type.Optional(
    Type.Object({
      anchor: Type.Optional(Type.Literal('created_at')),
      seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, 'x-error-code': 'invalid_value' })),
    }),
  ),
});
const parse = compileRequest(Body);
const Required = compileRequest(Type.Object({ model: nonBlankString(10) }));
const Query = compileRequest(Type.Object({ status: Type.Optional(oneOfValues(['a', 'b'], { errorCode: 'invalid_value' })) }));

/** The AppError `fn` throws (fails when it throws nothing or something else). */
function thrown(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    assert.instance(err, AppError);
    return err as AppError;
  }
  throw new Error('expected an AppError, nothing was thrown');
}

function rejects(input: unknown, code: string, param: string | null, message?: RegExp, parser: (i: unknown) => unknown = parse): void {
  const err = thrown(() => parser(input));
  assert.is(err.code, code, `${JSON.stringify(input)}: ${err.message}`);
  assert.is(err.param, param, JSON.stringify(input));
  assert.is(err.status, 400);
  if (message) assert.match(err.message, message);
}

test('a valid body passes, unknown fields untouched, the input not changed', () => {
  const input = { name: 'ab', fps: 25, extra: { any: 1 } };
  assert.equal(parse(input), { name: 'ab', fps: 25, extra: { any: 1 } });
  assert.equal(parse({}), {});
  assert.equal(input, { name: 'ab', fps: 25, extra: { any: 1 } });
});

test('codes, params and messages follow the templates', () => {
  rejects({ name: 42 }, 'invalid_type', 'name', /^'name' must be a string\.$/);
  rejects({ name: 'abcdef' }, 'string_above_max_length', 'name', /^'name' must be at most 5 characters\.$/);
  rejects({ name: '   ' }, 'invalid_value', 'name', /^'name' must not be empty\.$/);
  rejects({ fps: 0 }, 'out_of_range', 'fps', /^'fps' must be from 1 to 60, got 0\.$/);
  rejects({ fps: 61 }, 'out_of_range', 'fps');
  rejects({ fps: 24.5 }, 'invalid_type', 'fps', /^'fps' must be an integer from 1 to 60\.$/);
  rejects({ fps: 'fast' }, 'invalid_type', 'fps');
  rejects({ factor: 0.5 }, 'out_of_range', 'factor');
  rejects({ factor: 'x' }, 'invalid_type', 'factor', /a number from 1 to 4/);
  rejects({ codec: 'av1' }, 'invalid_value', 'codec', /^'codec' must be one of h264, vp8\.$/);
  rejects({ codec: 512 }, 'invalid_value', 'codec');
  rejects({ video: 'yes' }, 'invalid_type', 'video', /^'video' must be a boolean\.$/);
  rejects({}, 'missing_required_parameter', 'model', /^Missing required parameter: 'model'\.$/, Required);
  rejects({ status: 'c' }, 'invalid_value', 'status', /one of a, b/, Query);
});

test('nested fields are named by their dotted path; x-error-code overrides the keyword code', () => {
  rejects({ nested: 5 }, 'invalid_type', 'nested', /^'nested' must be an object\.$/);
  rejects({ nested: { seconds: 0 } }, 'invalid_value', 'nested.seconds');
  rejects({ nested: { seconds: 'x' } }, 'invalid_value', 'nested.seconds');
  rejects({ nested: { anchor: 'now' } }, 'invalid_value', 'nested.anchor', /^'nested.anchor' must be 'created_at'\.$/);
});

test('a body that is not an object is invalid_request_body, with no param', () => {
  for (const body of [[1, 2], 'text', 3, null]) rejects(body, 'invalid_request_body', null);
});

test('the lenient rules: numeric strings, "true"/"false", any-case enums, null = absent', () => {
  assert.equal(parse({ fps: '25', factor: ' 1.5 ' }), { fps: 25, factor: 1.5 });
  assert.equal(parse({ video: 'false' }), { video: false });
  assert.equal(parse({ codec: '  VP8 ' }), { codec: 'vp8' });
  assert.equal(parse({ codec: 'H264' }), { codec: 'h264' });
  assert.equal(parse({ name: null, fps: null, nested: { seconds: null } }), { nested: {} });
  rejects({ model: null }, 'missing_required_parameter', 'model', undefined, Required);
  // Still checked after the pre-pass: a numeric string out of range, a string that is not numeric.
  rejects({ fps: '0' }, 'out_of_range', 'fps');
  rejects({ fps: '1e1' }, 'invalid_type', 'fps');
});

test.run();
