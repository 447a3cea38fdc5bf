/**
 * The persistence seam. Everything a user expects to survive a restart goes through Store: API
 * keys, ephemeral keys, sessions and their chat, usage records, the webhook outbox and custom
 * assets. Methods are async so that a networked implementation (Postgres, for fleet mode) can fill
 * the same interface; the SQLite implementation answers synchronously underneath.
 *
 * Times are integer microseconds since the Unix epoch (core/clock.ts).
 */

export type SessionStatus = 'pending' | 'active' | 'ended' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: readonly SessionStatus[] = ['ended', 'failed', 'cancelled'];
/** Whether a session in this status may still be started or ended (pending or active). */
export const isLive = (status: SessionStatus): status is 'pending' | 'active' => status === 'pending' || status === 'active';

/** Which door a session came in by; decides its event dialect and who ends it. */
export type SessionOrigin = 'rest' | 'legacy' | 'realtime' | 'call';

import type { MediaOptions } from '../core/media-options.js';

export interface SessionRecord {
  id: string;
  userId: string;
  /** The API key that created it (directly or through an ephemeral key); null for sessions older than that record. */
  apiKeyId: string | null;
  origin: SessionOrigin;
  model: string;
  voice: string;
  face: string | null;
  driving: string | null;
  instructions: string;
  /** Legacy form's `video` flag; the current form always produces video. */
  video: boolean;
  /** The media options it was created with (null = the default): one column, core/media-options.ts. */
  media: MediaOptions;
  status: SessionStatus;
  /** Why the session left `active`/`pending` (client_request, max_duration, server_restart, ...). */
  endReason: string | null;
  createdAtUs: number;
  startedAtUs: number | null;
  endedAtUs: number | null;
  durationSeconds: number | null;
  /** When the session must end at the latest (started + MAX_SESSION_SECONDS). */
  deadlineUs: number | null;
  /** Last heartbeat while live: a session found live after a crash is billed up to here. */
  lastSeenUs: number | null;
  currentTranscript: string;
}

export interface ChatTurn {
  role: 'user' | 'assistant';
  content: string;
}

export interface UsageCounters {
  audioSecondsOut: number;
  framesOut: number;
  inputTokens: number;
  outputTokens: number;
}

export interface UsageRecord extends UsageCounters {
  id: string;
  userId: string;
  sessionId: string;
  model: string;
  voice: string;
  face: string | null;
  driving: string | null;
  status: SessionStatus;
  endReason: string | null;
  startedAtUs: number;
  endedAtUs: number;
  durationSeconds: number;
  createdAtUs: number;
}

export interface ApiKeyRecord {
  id: string;
  userId: string;
  name: string;
  /** The first characters of the key, for recognising it in listings. */
  prefix: string;
  hash: string;
  createdAtUs: number;
  revokedAtUs: number | null;
  lastUsedAtUs: number | null;
}

export interface EphemeralKeyRecord {
  hash: string;
  userId: string;
  /** The API key that minted it: revoking that key revokes this one. Null for keys older than that record. */
  apiKeyId: string | null;
  /** The effective realtime session config the key is bound to (JSON object). */
  session: Record<string, unknown>;
  createdAtUs: number;
  expiresAtUs: number;
}

export type AssetKind = 'face' | 'voice' | 'driving';

export interface AssetRecord {
  id: string;
  userId: string;
  kind: AssetKind;
  name: string;
  filename: string;
  description: string;
  contentType: string;
  bytes: number;
  sha256: string;
  /** Path of the stored file, relative to the data directory. */
  storagePath: string;
  /** What validation learned (dimensions, duration, sample rate, frames, ...). */
  metadata: Record<string, unknown>;
  createdAtUs: number;
}

export interface OutboxEntry {
  id: number;
  eventId: string;
  usageId: string;
  payload: string;
  attempts: number;
  nextAttemptAtUs: number;
  lastError: string | null;
  deliveredAtUs: number | null;
  deadAtUs: number | null;
  createdAtUs: number;
}

export interface SessionEnd {
  status: Extract<SessionStatus, 'ended' | 'failed' | 'cancelled'>;
  endReason: string;
  endedAtUs: number;
  /** End it only from these live statuses (a start timeout ends a session only while it is still pending). */
  onlyFrom?: Array<Extract<SessionStatus, 'pending' | 'active'>>;
}

export interface SessionListQuery {
  userId: string;
  status?: SessionStatus;
  limit: number;
  /** Return sessions created strictly before this session (cursor pagination, newest first). */
  before?: string;
}

export interface Store {
  /** Applies pending migrations; returns the schema version now in force. */
  migrate(): Promise<number>;
  ping(): Promise<void>;
  close(): Promise<void>;

  // API keys
  insertApiKey(key: ApiKeyRecord): Promise<void>;
  findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null>;
  listApiKeys(userId?: string): Promise<ApiKeyRecord[]>;
  /** Revokes by id or prefix; returns the keys revoked now. */
  revokeApiKey(idOrPrefix: string, atUs: number): Promise<ApiKeyRecord[]>;
  touchApiKey(id: string, atUs: number): Promise<void>;
  getApiKey(id: string): Promise<ApiKeyRecord | null>;
  /** Keys revoked at or after `sinceUs` (by any process), oldest revocation first. */
  listRevokedApiKeys(sinceUs: number): Promise<ApiKeyRecord[]>;
  countApiKeys(): Promise<number>;

  /** The store's own clock (PostgreSQL: the database server's), microseconds since the epoch: fleet nodes' SyncedClock follows it. */
  databaseTimeUs(): Promise<number>;

  // Ephemeral keys
  insertEphemeralKey(key: EphemeralKeyRecord): Promise<void>;
  findEphemeralKey(hash: string): Promise<EphemeralKeyRecord | null>;
  deleteExpiredEphemeralKeys(nowUs: number): Promise<number>;

  // Sessions
  insertSession(session: SessionRecord): Promise<void>;
  getSession(id: string): Promise<SessionRecord | null>;
  listSessions(query: SessionListQuery): Promise<SessionRecord[]>;
  listSessionsByStatus(statuses: SessionStatus[]): Promise<SessionRecord[]>;
  /** Ids of the pending or active sessions created with one of these API keys. */
  listLiveSessionIdsByApiKey(apiKeyIds: string[]): Promise<string[]>;
  countSessionsByStatus(): Promise<Record<SessionStatus, number>>;
  /** pending -> active; false when the session was not pending. */
  markSessionStarted(id: string, startedAtUs: number, deadlineUs: number): Promise<boolean>;
  /** Records that these live sessions were still running at `atUs` (crash recovery bills up to here). */
  heartbeatSessions(ids: string[], atUs: number): Promise<void>;
  /**
   * Moves a live (pending or active) session to a terminal status and, when it had started, writes
   * its usage record and webhook outbox entry in the same transaction. Returns the ended session, or
   * null when it was already terminal (so ending twice is harmless).
   */
  endSession(id: string, end: SessionEnd, usage: UsageDraft | null, outbox: OutboxDraft | null): Promise<SessionRecord | null>;
  setCurrentTranscript(id: string, text: string): Promise<void>;
  appendChatTurn(id: string, turn: ChatTurn, atUs: number): Promise<void>;
  listChatTurns(id: string): Promise<ChatTurn[]>;
  addUsageCounters(sessionId: string, delta: Partial<UsageCounters>): Promise<void>;
  /**
   * Raises a live session's counters to at least `totals`, each counter on its own (the larger of
   * the stored and the given value): a running total written again, or retried after an error
   * whose outcome is unknown, never counts twice. No effect once the session has ended (its usage
   * record is final); returns whether the session was live.
   */
  raiseUsageCounters(sessionId: string, totals: UsageCounters): Promise<boolean>;
  getUsageCounters(sessionId: string): Promise<UsageCounters>;

  // Usage
  listUsage(userId: string, fromUs: number, toUs: number, limit: number): Promise<UsageRecord[]>;
  getUsageForSession(sessionId: string): Promise<UsageRecord | null>;

  // Webhook outbox
  dueOutboxEntries(nowUs: number, limit: number): Promise<OutboxEntry[]>;
  markOutboxDelivered(id: number, atUs: number): Promise<void>;
  markOutboxFailed(id: number, error: string, nextAttemptAtUs: number | null, atUs: number): Promise<void>;
  countOutbox(): Promise<{ pending: number; delivered: number; dead: number }>;
  nextOutboxAttemptUs(): Promise<number | null>;

  // Assets
  insertAsset(asset: AssetRecord): Promise<void>;
  getAsset(id: string): Promise<AssetRecord | null>;
  listAssets(userId: string, kind: AssetKind): Promise<AssetRecord[]>;
  deleteAsset(id: string): Promise<boolean>;
}

/** Usage record fields that the store completes from the session and its counters. */
export type UsageDraft = Pick<UsageRecord, 'id' | 'createdAtUs'>;
/** The webhook outbox entry to enqueue with the usage record; payload built by the caller from the record. */
export interface OutboxDraft {
  eventId: string;
  buildPayload(usage: UsageRecord): string;
  nextAttemptAtUs: number;
}
