/** Wire shape of a usage record (GET /v1/usage and the webhook body). */
import { formatTimestamp } from '../core/clock.js';
import type { UsageRecord } from '../store/store.js';

export function usageView(u: UsageRecord) {
  return {
    id: u.id,
    object: 'usage.record' as const,
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
