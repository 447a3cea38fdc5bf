/**
 * Wire shape of a usage record (GET /v1/usage and the webhook body), described once: `UsageRecord`
 * is the schema the OpenAPI document publishes, and usageView returns its static type, so the two
 * cannot drift.
 */
import { Type, type Static } from '@sinclair/typebox';
import { formatTimestamp } from '../core/clock.js';
import { oneOfValues, Timestamp as TIMESTAMP } from '../core/schema.js';
import type { SessionStatus, UsageRecord as StoredUsage } from '../store/store.js';

/** Every status of a session (the record's, the list filter's). */
export const SESSION_STATUSES: readonly SessionStatus[] = ['pending', 'active', 'ended', 'failed', 'cancelled'];
export const SessionStatusSchema = oneOfValues(SESSION_STATUSES);
const nullableString = Type.Union([Type.String(), Type.Null()]);

export const UsageRecord = Type.Object({
  id: Type.String(),
  object: Type.Literal('usage.record'),
  user_id: Type.String(),
  session_id: Type.String(),
  model: Type.String(),
  voice: Type.String(),
  face: nullableString,
  driving: nullableString,
  status: SessionStatusSchema,
  end_reason: nullableString,
  started_at: TIMESTAMP,
  ended_at: TIMESTAMP,
  duration_seconds: Type.Number(),
  audio_seconds_out: Type.Number(),
  frames_out: Type.Integer(),
  input_tokens: Type.Integer(),
  output_tokens: Type.Integer(),
  created_at: TIMESTAMP,
});

export function usageView(u: StoredUsage): Static<typeof UsageRecord> {
  return {
    id: u.id,
    object: 'usage.record',
    user_id: u.userId,
    session_id: u.sessionId,
    model: u.model,
    voice: u.voice,
    face: u.face,
    driving: u.driving,
    status: u.status,
    end_reason: u.endReason,
    started_at: formatTimestamp(u.startedAtUs),
    ended_at: formatTimestamp(u.endedAtUs),
    duration_seconds: u.durationSeconds,
    audio_seconds_out: u.audioSecondsOut,
    frames_out: u.framesOut,
    input_tokens: u.inputTokens,
    output_tokens: u.outputTokens,
    created_at: formatTimestamp(u.createdAtUs),
  };
}
