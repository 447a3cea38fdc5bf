/**
 * The process's media engine (as mediasoup's Worker is a process's media plane): the native
 * renderers by name (media-core's registry, native/media-core/src/frames/renderers.rs; "cpu",
 * the mesh-warp renderer, first) and the avatars of the process's sessions, each drawn by the
 * renderer its `renderer` media option names. One per server (server/realtime-runtime.ts builds
 * it). What the sessions of a process share (a renderer that batches every session's frames on a
 * GPU, the renderer of a later issue that draws the face in the viewer's browser) is a renderer
 * of this engine, registered natively under its name and added to RENDERERS; never a part of one
 * session.
 */
import { RENDERERS, type ResolvedMedia } from '../core/media-options.js';
import type { Logger } from '../core/log.js';
import type { AvatarAssets } from './avatar-assets.js';
import { type AvatarStartOptions, MediaAvatarOutput } from './avatar-output.js';
import { nativeRenderers } from './media-session.js';

export interface MediaEngineOptions {
  assets: AvatarAssets;
  pipelinesDir: string;
  /** The server's defaults where they differ from MEDIA_DEFAULTS (its AVATAR_OUTPUT_SIZE). */
  mediaDefaults?: Partial<ResolvedMedia>;
  jpegQuality?: number;
  log?: Logger;
}

export class MediaEngine {
  constructor(private readonly options: MediaEngineOptions) {}

  /**
   * The renderers a session can name: the native engine's that the media option offers
   * (RENDERERS). A name in RENDERERS that the native engine lacks is not offered (a build
   * without that renderer); test/media/media-engine.test.ts holds the two lists equal here.
   */
  renderers(): string[] {
    const native = new Set(nativeRenderers());
    return RENDERERS.filter((name) => native.has(name));
  }

  /** A session's avatar, on the renderer its media options name (a face prepared by that renderer). */
  startAvatar(start: AvatarStartOptions): Promise<MediaAvatarOutput> {
    return MediaAvatarOutput.start({ ...this.options, ...start });
  }
}
