/**
 * POST /v1/realtime/client_secrets (spec 4.4): mints an ephemeral key bound to the caller and to
 * the session config given. The response is a superset that rtAV clients (`client_secret` string,
 * `expires_in` seconds) and OpenAI SDKs (`value`, `expires_at`, `session`) both accept.
 */
import { apiKeyIdOf } from '../../auth/keys.js';
import { unixSeconds } from '../../core/clock.js';
import { newSessionId } from '../../core/ids.js';
import { AppError } from '../../core/errors.js';
import { effectiveRealtimeSession } from '../../realtime/session-object.js';
import { applyAvatarSessionUpdate, avatarSessionObject } from '../../realtime/avatar-session-update.js';
import { applyTranscriptionUpdate, transcriptionSessionObject } from '../../realtime/transcription-session.js';
import { DEFAULT_AVATAR_FPS } from '../../media/avatar-output.js';
import { outputDimensions } from '../../core/video-size.js';
import { parseSessionMedia, splitMediaFields } from '../../core/media-options.js';
import type { Static } from '@sinclair/typebox';
import { parseClientSecretRequest } from '../api/requests.js';
import type { ClientSecret } from '../api/responses.js';
import type { AppRouter } from '../context.js';
import { principalOf } from '../middleware.js';
import type { Services } from '../services.js';
import type { RouteGuards } from './guards.js';

export function clientSecretRoutes(router: AppRouter, s: Services, g: RouteGuards): void {
  router.post('/v1/realtime/client_secrets', ...g.authed, g.json, async (ctx) => {
    const principal = principalOf(ctx);
    const { userId } = principal;
    const body = parseClientSecretRequest(ctx.state.body === undefined ? {} : ctx.state.body);
    const ttl = body.expires_after?.seconds ?? s.config.ephemeralKeyTtlSeconds;
    // The media fields (video_render, output_size, ...) are checked here and kept with the key for the session it opens.
    const { media, rest: sessionIn } = splitMediaFields(body.session ?? { type: 'realtime' });
    parseSessionMedia(media);
    const session =
      sessionIn.type === 'avatar'
        ? avatarSessionFor(sessionIn, outputDimensions(s.config.avatarOutputSize))
        : sessionIn.type === 'transcription'
          ? transcriptionSessionFor(sessionIn)
          : effectiveRealtimeSession(sessionIn, s.config.defaultModel);
    for (const kind of ['voice', 'face', 'driving'] as const) {
      const id = session[kind];
      if (typeof id === 'string') await s.assets.require(kind, id, userId, `session.${kind}`);
    }
    // The authed guard admits API keys only, so the principal is the minting key itself.
    const mintedBy = apiKeyIdOf(principal);
    if (mintedBy === null) throw new AppError('ephemeral_key_not_allowed', 'Client secrets are minted with an API key.', { status: 401 });
    // The session's id (OpenAI's RealtimeSessionCreateResponse requires one): the first connection
    // made with this key runs a session of this id; later ones, if the key is used again, get new ids.
    const bound = { ...session, ...media, id: newSessionId() };
    const { key, expiresAtUs } = await s.keys.createEphemeralKey(userId, mintedBy, bound, ttl);
    const expiresAt = unixSeconds(expiresAtUs);
    ctx.body = {
      value: key,
      expires_at: expiresAt,
      session: { ...bound, expires_at: expiresAt },
      client_secret: key,
      expires_in: ttl,
    } satisfies Static<typeof ClientSecret>;
  });
}

/** A transcription session's object (transcription-session.ts; a bad field is a 400 naming it). */
function transcriptionSessionFor(sessionIn: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, expires_at: _expires, ...session } = transcriptionSessionObject(applyTranscriptionUpdate(null, sessionIn), '', 0);
  return session;
}

/**
 * An avatar-only session's object (avatar-session-update.ts; a bad field is a 400 naming it), with
 * the frames a session opened with this key gets (the server's default size and rate), so that an
 * agent can set up its video output before it connects.
 */
function avatarSessionFor(sessionIn: Record<string, unknown>, size: { width: number; height: number }): Record<string, unknown> {
  const frames = { ...size, fps: DEFAULT_AVATAR_FPS };
  const { id: _id, expires_at: _expires, ...session } = avatarSessionObject(applyAvatarSessionUpdate(null, sessionIn, true), '', 0, frames);
  return session;
}
