/**
 * Request validation from one description: a TypeBox schema is both the JSON Schema the OpenAPI
 * document shows (server/openapi.ts) and, compiled here by the one ajv instance, the parser a
 * route calls. A parser returns the request with the lenient rules applied, or throws the
 * AppError today's clients see: code, param and message from the FIRST failing rule only.
 *
 * The lenient rules, applied by a pre-pass (a copy; the input is never changed) before ajv:
 *   - a declared property that is `null` is absent (its default applies);
 *   - `x-numeric-string` fields (numericField): a decimal string such as "25" or " 1.5 " is that number;
 *   - `x-boolean-string` fields (lenientBoolean): "true"/"false" are booleans;
 *   - `x-any-case` enums (anyCaseEnum): strings are trimmed and lower-cased first;
 *   - unknown fields pass untouched (no additionalProperties: false on requests).
 *
 * Codes by ajv keyword: type → invalid_type, required → missing_required_parameter, maxLength →
 * string_above_max_length, minimum/maximum → out_of_range, anything else (enum, const, pattern)
 * → invalid_value; a schema's `x-error-code` overrides (queries answer invalid_value for
 * everything). A body that is not an object is invalid_request_body. The param is the field's
 * dotted path (`expires_after.seconds`). Only this module imports ajv (test/architecture.test.ts).
 */
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { Type, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { AppError } from './errors.js';

/** The annotations this module reads; ajv ignores them when validating. */
const ANNOTATIONS = ['x-numeric-string', 'x-boolean-string', 'x-any-case', 'x-error-code'] as const;
/** The decimal strings a numericField accepts for its number (the OpenAPI document shows this pattern). */
export const NUMERIC_STRING_PATTERN = '^\\s*-?\\d+(\\.\\d+)?\\s*$';
const NUMERIC_STRING = new RegExp(NUMERIC_STRING_PATTERN);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: false, verbose: true });
ajv.addFormat('uuid', UUID);
for (const keyword of ANNOTATIONS) ajv.addKeyword({ keyword });

type JsonSchema = Record<string, unknown>;

// ── Schema helpers with today's rules ────────────────────────────────────────

/** A number (or an integer) in [min, max]; its decimal string is accepted too. */
export function numericField(
  range: { min: number; max: number },
  options: { integer?: boolean; description?: string; errorCode?: string; default?: number } = {},
) {
  const schema = { minimum: range.min, maximum: range.max, 'x-numeric-string': true, ...describe(options), ...(options.default === undefined ? {} : { default: options.default }) };
  return options.integer ? Type.Integer(schema) : Type.Number(schema);
}

/** One of `values`, compared after trimming and lower-casing (" H264" is h264). */
export function anyCaseEnum<T extends string>(values: readonly T[], options: { description?: string } = {}): TUnsafe<T> {
  return Type.Unsafe<T>({ enum: [...values], 'x-any-case': true, ...describe(options) });
}

/** One of `values` exactly. */
export function oneOfValues<T extends string>(values: readonly T[], options: { description?: string; errorCode?: string } = {}): TUnsafe<T> {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...describe(options) });
}

/** A string of at most `maxChars` characters that is not blank. */
export function nonBlankString(maxChars: number, options: { description?: string; default?: string } = {}) {
  return Type.String({ maxLength: maxChars, pattern: '\\S', ...options });
}

/** A boolean, or the string "true" / "false". */
export function lenientBoolean(options: { description?: string; default?: boolean } = {}) {
  return Type.Boolean({ 'x-boolean-string': true, ...options });
}

/** The wire form of core/clock.ts formatTimestamp: UTC, ISO 8601 without zone, microseconds. */
export const Timestamp = Type.String({
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{6}$',
  description: 'UTC, ISO 8601 without zone, with microseconds',
  examples: ['2026-01-01T00:00:00.000000'],
});

function describe(options: { description?: string; errorCode?: string }): JsonSchema {
  return {
    ...(options.description === undefined ? {} : { description: options.description }),
    ...(options.errorCode === undefined ? {} : { 'x-error-code': options.errorCode }),
  };
}

// ── Parsers ─────────────────────────────────────────────────────────────────

/** A parser for requests described by `schema`: the lenient rules applied, or an AppError (400). */
export function compileRequest<S extends TSchema>(schema: S): (input: unknown) => Static<S> {
  const validate = ajv.compile(schema);
  return (input) => {
    const value = lenient(schema as unknown as JsonSchema, input);
    if (validate(value)) return value as Static<S>;
    throw toAppError(validate.errors?.[0]);
  };
}

/** The pre-pass: a copy of `value` with the lenient rules of `schema` applied (see the header). */
function lenient(schema: JsonSchema, value: unknown): unknown {
  if (schema['x-numeric-string'] === true && typeof value === 'string' && NUMERIC_STRING.test(value)) return Number(value);
  if (schema['x-boolean-string'] === true && (value === 'true' || value === 'false')) return value === 'true';
  if (schema['x-any-case'] === true && typeof value === 'string') return value.trim().toLowerCase();
  const properties = schema.properties as Record<string, JsonSchema> | undefined;
  if (properties === undefined || value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const [key, sub] of Object.entries(properties)) {
    if (!Object.hasOwn(copy, key)) continue;
    if (copy[key] === null) delete copy[key];
    else copy[key] = lenient(sub, copy[key]);
  }
  return copy;
}

const CODES: Record<string, string> = {
  type: 'invalid_type',
  required: 'missing_required_parameter',
  maxLength: 'string_above_max_length',
  minimum: 'out_of_range',
  maximum: 'out_of_range',
};

function toAppError(error: ErrorObject | undefined): AppError {
  if (error === undefined) return new AppError('invalid_request_body', 'The request is not valid.', { status: 400 });
  const path = error.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (error.keyword === 'required') path.push(String((error.params as { missingProperty: string }).missingProperty));
  if (path.length === 0) return new AppError('invalid_request_body', 'The request body must be a JSON object.', { status: 400 });
  const param = path.join('.');
  const parent = (error.parentSchema ?? {}) as JsonSchema;
  const code = (error.keyword === 'required' ? undefined : (parent['x-error-code'] as string | undefined)) ?? CODES[error.keyword] ?? 'invalid_value';
  return new AppError(code, messageFor(error, parent, param), { status: 400, param });
}

/** Today's message templates, by keyword. */
function messageFor(error: ErrorObject, parent: JsonSchema, param: string): string {
  const f = `'${param}'`;
  const { minimum: min, maximum: max } = parent as { minimum?: number; maximum?: number };
  switch (error.keyword) {
    case 'required':
      return `Missing required parameter: ${f}.`;
    case 'type': {
      const type = Array.isArray(parent.type) ? parent.type[0] : parent.type;
      if ((type === 'integer' || type === 'number') && min !== undefined && max !== undefined) {
        return `${f} must be ${type === 'integer' ? 'an integer' : 'a number'} from ${min} to ${max}.`;
      }
      return `${f} must be ${type === 'integer' || type === 'object' || type === 'array' ? 'an' : 'a'} ${type}.`;
    }
    case 'maxLength':
      return `${f} must be at most ${parent.maxLength} characters.`;
    case 'pattern':
      return parent.pattern === '\\S' ? `${f} must not be empty.` : `${f} must match ${String(parent.pattern)}.`;
    case 'minimum':
    case 'maximum':
      return `${f} must be from ${min ?? '-∞'} to ${max ?? '∞'}, got ${String(error.data)}.`;
    case 'enum':
      return `${f} must be one of ${(parent.enum as unknown[]).join(', ')}.`;
    case 'const':
      return `${f} must be ${typeof parent.const === 'string' ? `'${parent.const}'` : JSON.stringify(parent.const)}.`;
    default:
      return `${f} ${error.message ?? 'is not valid'}.`;
  }
}
