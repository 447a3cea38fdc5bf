/**
 * Wire shapes of REST responses. The session object is exactly spec 2.1 (current form); the older
 * form adds `session_id`, `video` and `face_id` the way its clients read them. Each view returns
 * the static type of its schema in api/responses.ts (the one the OpenAPI document publishes), so a
 * view and its description cannot drift apart at compile time.
 */
import type { Static } from '@sinclair/typebox';
import type { StandardAssetInfo } from '../assets/asset-service.js';
import { formatNullableTimestamp, formatTimestamp } from '../core/clock.js';
import type { ApiKeyRecord, AssetRecord, ChatTurn, SessionRecord } from '../store/store.js';
import type { Asset, Chat, LegacySession, Session, StandardAsset } from './api/responses.js';

export function sessionView(s: SessionRecord): Static<typeof Session> {
  return {
    id: s.id,
    user_id: s.userId,
    voice: s.voice,
    model: s.model,
    instructions: s.instructions,
    status: s.status,
    created_at: formatTimestamp(s.createdAtUs),
    started_at: formatNullableTimestamp(s.startedAtUs),
    ended_at: formatNullableTimestamp(s.endedAtUs),
    duration_seconds: s.durationSeconds,
  };
}

export function legacySessionView(s: SessionRecord): Static<typeof LegacySession> {
  return {
    session_id: s.id,
    ...sessionView(s),
    video: s.video,
    face_id: s.face,
  };
}

export function chatView(s: SessionRecord, turns: ChatTurn[]): Static<typeof Chat> {
  return {
    session_id: s.id,
    instructions: s.instructions,
    turns: turns.map(({ role, content }) => ({ role, content })),
    current_transcript: s.currentTranscript,
  };
}

/** The kind-named id field an asset view repeats its id in: face_id, voice_id, driving_id. */
function assetIdField(kind: AssetRecord['kind']): 'face_id' | 'voice_id' | 'driving_id' {
  return `${kind}_id`;
}

export function assetView(a: AssetRecord): Static<typeof Asset> {
  return {
    id: a.id,
    [assetIdField(a.kind)]: a.id,
    object: a.kind,
    name: a.name,
    filename: a.filename,
    description: a.description,
    content_type: a.contentType,
    bytes: a.bytes,
    sha256: a.sha256,
    metadata: a.metadata,
    created_at: formatTimestamp(a.createdAtUs),
  };
}

/** A standard asset in the shape of `assetView`: public, no owner, no creation time. */
export function standardAssetView(a: StandardAssetInfo): Static<typeof StandardAsset> {
  return {
    id: a.entry.id,
    [assetIdField(a.kind)]: a.entry.id,
    object: a.kind,
    standard: true,
    name: a.entry.id,
    filename: a.entry.filename,
    description: a.entry.description,
    content_type: a.contentType,
    bytes: a.bytes,
    sha256: a.sha256,
    metadata: a.metadata,
    created_at: null,
  };
}

export function apiKeyView(k: ApiKeyRecord) {
  return {
    id: k.id,
    user_id: k.userId,
    name: k.name,
    prefix: k.prefix,
    created_at: formatTimestamp(k.createdAtUs),
    revoked_at: formatNullableTimestamp(k.revokedAtUs),
    last_used_at: formatNullableTimestamp(k.lastUsedAtUs),
  };
}
