/**
 * The requests of the server's own routes, each described once as a TypeBox schema: the route
 * parses with the compiled parser exported here and the OpenAPI document (operations.ts) shows the
 * same schema. Session bodies live in sessions/session-config.ts (the WebRTC call reads their media
 * fields too) and the call offer in signaling/realtime-calls.ts, for the same reason.
 *
 * Queries answer invalid_value for every bad parameter (today's contract), so their fields carry
 * `x-error-code`; a parameter given twice is refused before the schema (Koa gives an array).
 * Cross-field and format rules stay with the route: usage's times (parseTimestamp) and start < end.
 */
import { Type, type Static, type TObject } from '@sinclair/typebox';
import { invalidParam } from '../../core/errors.js';
import { compileRequest, numericField, oneOfValues } from '../../core/schema.js';
import { SESSION_STATUSES } from '../../usage/usage-view.js';

const CLIENT_SECRET_TTL_RANGE_S = { min: 1, max: 7200 } as const;
const INVALID = { errorCode: 'invalid_value' } as const;

/** GET /v1/sessions. */
export const SessionListQuery = Type.Object({
  status: Type.Optional(oneOfValues(SESSION_STATUSES, INVALID)),
  limit: Type.Optional(numericField({ min: 1, max: 100 }, { integer: true, default: 20, ...INVALID })),
  before: Type.Optional(Type.String({ description: 'A session id: list those created before it' })),
});

const time = (description: string) => Type.String({ description: `Unix seconds or ISO 8601 (UTC when no zone); ${description}` });

/** GET /v1/usage: the session start times [start_time, end_time); `start` and `end` are aliases. */
export const UsageQuery = Type.Object({
  start_time: Type.Optional(time('default end_time - 30 days')),
  end_time: Type.Optional(time('default now')),
  start: Type.Optional(time("an alias of 'start_time'")),
  end: Type.Optional(time("an alias of 'end_time'")),
  limit: Type.Optional(numericField({ min: 1, max: 1000 }, { integer: true, default: 100, ...INVALID })),
});

/**
 * POST /v1/realtime/client_secrets. Of `session` only `type` is checked here: its other fields are
 * the realtime session rules' (realtime/session-object.ts, avatar-session-update.ts), which answer
 * the same 400s a session.update would.
 */
export const ClientSecretRequest = Type.Object({
  expires_after: Type.Optional(
    Type.Object({
      anchor: Type.Optional(Type.Literal('created_at')),
      seconds: Type.Optional(
        Type.Integer({ minimum: CLIENT_SECRET_TTL_RANGE_S.min, maximum: CLIENT_SECRET_TTL_RANGE_S.max, default: 60, 'x-error-code': 'invalid_value', description: "The key's lifetime; default EPHEMERAL_KEY_TTL_SECONDS" }),
      ),
    }),
  ),
  session: Type.Optional(
    Type.Object(
      {
        type: Type.Optional(
          oneOfValues(['realtime', 'avatar', 'transcription'], { description: "'avatar': an avatar-only session (the client supplies the speech); 'transcription': a transcription session (no response)" }),
        ),
      },
      {
        description:
          "Realtime session config (GA fields and the flat voice/face/driving) with type 'realtime' (the default), an avatar-only session (AvatarSession) with type 'avatar', or a transcription session (TranscriptionSession) with type 'transcription'",
      },
    ),
  ),
});

/** A raw upload's name, description and file name come in the query (multipart sends them as fields). */
export const UploadQuery = Type.Object({
  name: Type.Optional(Type.String({ description: 'A name for the asset' })),
  description: Type.Optional(Type.String()),
  filename: Type.Optional(Type.String({ description: 'The original file name' })),
});

export const parseSessionListQuery = queryParser(SessionListQuery);
export const parseUsageQuery = queryParser(UsageQuery);
export const parseUploadQuery = queryParser(UploadQuery);
export const parseClientSecretRequest = compileRequest(ClientSecretRequest);

type Query = Record<string, string | string[] | undefined>;

/** A parser of the query `schema` describes: its parameters given once each (others are ignored). */
function queryParser<S extends TObject>(schema: S): (query: Query) => Static<S> {
  const parse = compileRequest(schema);
  const keys = Object.keys(schema.properties);
  return (query) => {
    const single: Record<string, string> = {};
    for (const key of keys) {
      const value = query[key];
      if (value === undefined) continue;
      if (typeof value !== 'string') throw invalidParam(key, `'${key}' must be given once.`);
      single[key] = value;
    }
    return parse(single);
  };
}
