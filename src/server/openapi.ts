/**
 * OpenAPI 3.1 description of every REST route, served at /v1/openapi.json, GENERATED: the paths
 * from the operations table (api/operations.ts), the component schemas from the same TypeBox
 * schemas the routes parse requests with and the views type their responses by. Nothing here
 * describes a field. test/server/openapi.test.ts checks that the paths and methods are exactly
 * the router's, that real responses and the requests it sends validate against this document, and
 * that what the validators refuse the document refuses too.
 *
 * Rendering: TypeBox's symbols are dropped (a JSON copy); a field that also takes its decimal
 * string (`x-numeric-string`) or "true"/"false" (`x-boolean-string`) is an anyOf of both forms;
 * an any-case enum lists its canonical values and says in its description that case and
 * surrounding spaces are ignored (the server accepts more than the document: it never accepts
 * less); and the validator's own annotations (x-...) are left out of the published schemas.
 */
import type { TObject, TSchema } from '@sinclair/typebox';
import { CONFIG_VARS } from '../config.js';
import { NUMERIC_STRING_PATTERN } from '../core/schema.js';
import { COMPONENTS, OPERATIONS, ref, type Operation } from './api/operations.js';

type Json = Record<string, unknown>;

export function openApiDocument(serverUrl: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Realtime avatar server',
      version: '0.1.0',
      description:
        'OpenAI-Realtime-compatible conversational avatar server: REST control plane. Errors are ' +
        '{"error":{"message","type","code","param"}}. Configuration variables: ' +
        CONFIG_VARS.map((v) => v.name).join(', ') +
        '. Realtime over WebSocket (not a REST route, so not a path here): GET /v1/realtime upgrades to a session of OpenAI Realtime GA events ' +
        '(query: model, session_id, call_id for a call\'s sideband); with intent=avatar (and video_format=jpeg|i420), or an ephemeral key minted with ' +
        "session.type 'avatar', the session is avatar-only (schema AvatarSession; events in docs/avatar-mode.md); with intent=transcription (no model), or a key minted with " +
        "session.type 'transcription', it is a transcription session (schema TranscriptionSession: turns and their transcripts, no response; docs/realtime.md).",
    },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'API key (avs_...) or, where stated, an ephemeral key (ek_...)' },
      },
      schemas: Object.fromEntries(Object.entries(COMPONENTS).map(([name, schema]) => [name, published(schema)])),
    },
    paths: paths(),
  };
}

function paths(): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const [key, op] of Object.entries(OPERATIONS)) {
    const [method, template] = key.split(' ') as [string, string];
    (out[template] ??= {})[method.toLowerCase()] = operationObject(op);
  }
  return out;
}

function operationObject(op: Operation): Json {
  const { params, query, body, ...rest } = op;
  const parameters = [...(params ?? []), ...(query ? queryParameters(query) : [])];
  return {
    ...rest,
    ...(parameters.length ? { parameters } : {}),
    ...(body
      ? {
          requestBody: {
            required: body.required,
            content: Object.fromEntries(Object.entries(body.content).map(([type, c]) => [type, typeof c === 'string' ? { schema: ref(c) } : c])),
          },
        }
      : {}),
  };
}

function queryParameters(query: TObject): Json[] {
  return Object.entries(query.properties).map(([name, schema]) => {
    const { description, ...rest } = published(schema);
    return { name, in: 'query', schema: rest, ...(description === undefined ? {} : { description }) };
  });
}

/** A schema as the document shows it (see the header). */
function published(schema: TSchema): Json {
  return render(JSON.parse(JSON.stringify(schema)) as Json);
}

function render(schema: Json): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key.startsWith('x-')) continue;
    if (key === 'properties' && value && typeof value === 'object') {
      out[key] = Object.fromEntries(Object.entries(value as Record<string, Json>).map(([k, v]) => [k, render(v)]));
    } else if ((key === 'items' || key === 'additionalProperties') && value && typeof value === 'object' && !Array.isArray(value)) {
      out[key] = render(value as Json);
    } else if ((key === 'anyOf' || key === 'oneOf' || key === 'allOf') && Array.isArray(value)) {
      out[key] = value.map((v) => render(v as Json));
    } else {
      out[key] = value;
    }
  }
  if (schema['x-any-case'] === true) out.description = `${schema.description === undefined ? '' : `${String(schema.description)}; `}any case, surrounding spaces ignored`;
  const { description, default: byDefault, ...value } = out;
  const annotations = { ...(description === undefined ? {} : { description }), ...(byDefault === undefined ? {} : { default: byDefault }) };
  if (schema['x-numeric-string'] === true) return { anyOf: [value, { type: 'string', pattern: NUMERIC_STRING_PATTERN }], ...annotations };
  if (schema['x-boolean-string'] === true) return { anyOf: [value, { type: 'string', enum: ['true', 'false'] }], ...annotations };
  return out;
}
