/**
 * Rows to records, shared by both stores: the SQLite and PostgreSQL schemas have the same columns
 * (migrations.ts), and PostgreSQL's BIGINT arrives as a string, so every number goes through
 * Number() (microsecond times stay below 2^53); a session's media options are one JSON value
 * (SQLite TEXT, PostgreSQL JSONB), written and read by core/media-options.ts. Also the one place that says what ending a session
 * writes: the session's terminal fields and, once it had started, its usage record.
 */
import { mediaOptionsFrom } from '../core/media-options.js';
import {
  isLive,
  type ApiKeyRecord,
  type AssetKind,
  type AssetRecord,
  type EphemeralKeyRecord,
  type OutboxEntry,
  type SessionEnd,
  type SessionRecord,
  type SessionStatus,
  type UsageCounters,
  type UsageDraft,
  type UsageRecord,
} from './store.js';

export type Row = Record<string, unknown>;

export const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
export const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export function toApiKey(r: Row): ApiKeyRecord {
  return {
    id: String(r.id),
    userId: String(r.user_id),
    name: String(r.name),
    prefix: String(r.prefix),
    hash: String(r.hash),
    createdAtUs: Number(r.created_at_us),
    revokedAtUs: num(r.revoked_at_us),
    lastUsedAtUs: num(r.last_used_at_us),
  };
}

export function toSession(r: Row): SessionRecord {
  return {
    id: String(r.id),
    userId: String(r.user_id),
    apiKeyId: str(r.api_key_id),
    origin: r.origin as SessionRecord['origin'],
    model: String(r.model),
    voice: String(r.voice),
    face: str(r.face),
    driving: str(r.driving),
    instructions: String(r.instructions),
    video: Number(r.video) === 1,
    media: mediaOptionsFrom(r.media),
    status: r.status as SessionStatus,
    endReason: str(r.end_reason),
    createdAtUs: Number(r.created_at_us),
    startedAtUs: num(r.started_at_us),
    endedAtUs: num(r.ended_at_us),
    durationSeconds: num(r.duration_seconds),
    deadlineUs: num(r.deadline_us),
    lastSeenUs: num(r.last_seen_us),
    currentTranscript: String(r.current_transcript ?? ''),
  };
}

export function countersOf(r: Row): UsageCounters {
  return {
    audioSecondsOut: Number(r.audio_seconds_out),
    framesOut: Number(r.frames_out),
    inputTokens: Number(r.input_tokens),
    outputTokens: Number(r.output_tokens),
  };
}

export function toUsage(r: Row): UsageRecord {
  return {
    id: String(r.id),
    userId: String(r.user_id),
    sessionId: String(r.session_id),
    model: String(r.model),
    voice: String(r.voice),
    face: str(r.face),
    driving: str(r.driving),
    status: r.status as SessionStatus,
    endReason: str(r.end_reason),
    startedAtUs: Number(r.started_at_us),
    endedAtUs: Number(r.ended_at_us),
    durationSeconds: Number(r.duration_seconds),
    ...countersOf(r),
    createdAtUs: Number(r.created_at_us),
  };
}

export function toOutbox(r: Row): OutboxEntry {
  return {
    id: Number(r.id),
    eventId: String(r.event_id),
    usageId: String(r.usage_id),
    payload: String(r.payload),
    attempts: Number(r.attempts),
    nextAttemptAtUs: Number(r.next_attempt_at_us),
    lastError: str(r.last_error),
    deliveredAtUs: num(r.delivered_at_us),
    deadAtUs: num(r.dead_at_us),
    createdAtUs: Number(r.created_at_us),
  };
}

export function toAsset(r: Row): AssetRecord {
  return {
    id: String(r.id),
    userId: String(r.user_id),
    kind: r.kind as AssetKind,
    name: String(r.name),
    filename: String(r.filename),
    description: String(r.description),
    contentType: String(r.content_type),
    bytes: Number(r.bytes),
    sha256: String(r.sha256),
    storagePath: String(r.storage_path),
    metadata: JSON.parse(String(r.metadata_json)) as Record<string, unknown>,
    createdAtUs: Number(r.created_at_us),
  };
}

export function toEphemeralKey(r: Row): EphemeralKeyRecord {
  return {
    hash: String(r.hash),
    userId: String(r.user_id),
    apiKeyId: str(r.api_key_id),
    session: JSON.parse(String(r.session_json)) as Record<string, unknown>,
    createdAtUs: Number(r.created_at_us),
    expiresAtUs: Number(r.expires_at_us),
  };
}

/**
 * What ending the live session in `row` writes: the session after (terminal status, reason, end
 * time, duration from its start) and, when it had started and a usage draft is given, its usage
 * record with the counters the row holds.
 */
export function sessionEnding(row: Row, end: SessionEnd, usage: UsageDraft | null): { after: SessionRecord; usage: UsageRecord | null } {
  const before = toSession(row);
  const duration = before.startedAtUs === null ? 0 : Math.max(0, end.endedAtUs - before.startedAtUs) / 1e6;
  const after: SessionRecord = { ...before, status: end.status, endReason: end.endReason, endedAtUs: end.endedAtUs, durationSeconds: duration };
  if (!usage || before.startedAtUs === null) return { after, usage: null };
  return {
    after,
    usage: {
      id: usage.id,
      userId: before.userId,
      sessionId: before.id,
      model: before.model,
      voice: before.voice,
      face: before.face,
      driving: before.driving,
      status: end.status,
      endReason: end.endReason,
      startedAtUs: before.startedAtUs,
      endedAtUs: end.endedAtUs,
      durationSeconds: duration,
      ...countersOf(row),
      createdAtUs: usage.createdAtUs,
    },
  };
}

/** Whether `end` applies to a session now in `status`: it is live, and in `end.onlyFrom` when that is given. */
export const endApplies = (status: SessionStatus, end: SessionEnd): boolean =>
  isLive(status) && (end.onlyFrom === undefined || end.onlyFrom.includes(status));
