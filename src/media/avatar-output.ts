/**
 * The realtime engine's `AvatarOutput` over a native media session: speech in, the played audio
 * (PCM16 24 kHz, every tick) and the rendered frames (JPEG, when asked for) out, on the session's
 * one clock. For a WebRTC call the same session also encodes H.264 or VP8 and Opus, handed to the
 * call's transport through onMedia() as encoded access units / RTP packets (raw frames never
 * reach JavaScript). A session's media options reach the native config in one place,
 * nativeMediaConfig: a new option that the renderer or the encoders use is mapped there.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../core/log.js';
import { MEDIA_DEFAULTS, resolveMedia, type MediaOptions, type ResolvedMedia } from '../core/media-options.js';
import { outputDimensions } from '../core/video-size.js';
import type { AvatarClientFace, AvatarOutput, AvatarOutputEvents, AvatarOutputListener, SpeechPlacement } from '../realtime/avatar-output.js';
import type { PhonemeTiming } from '../audio/pcm.js';
import type { AvatarAssets } from './avatar-assets.js';
import { clientFaceOf } from './client-face.js';
import { MediaSession, prepareFace, type MediaSessionConfig, type MediaSessionEvents } from './media-session.js';

/** What the avatar of a connection renders and encodes. */
export interface AvatarStartOptions {
  userId: string;
  faceId: string;
  drivingId: string;
  /** The session's media options (null = the default; the runtime passes the server's defaults, MediaAvatarOptions). */
  media: MediaOptions;
  /** JPEG frames for image events (WebSocket, or a call without a video track that asked for images). */
  jpeg: boolean;
  /** Raw I420 frames (an avatar-only WebSocket session with video.format i420). */
  i420?: boolean;
  /** RTP media for a WebRTC call: the video codec (null: no video track) and Opus audio. */
  rtp: { video: 'h264' | 'vp8' | null; audio: boolean } | null;
}

/** Encoded media the avatar hands to a call's transport, on the session clock. */
export interface AvatarMediaEvents {
  h264: [{ data: Buffer; ptsNs: number; keyframe: boolean }];
  vp8: [{ data: Buffer; ptsNs: number; keyframe: boolean; marker: boolean }];
  opus: [{ data: Buffer; ptsNs: number; durationNs: number }];
}

/** The avatar of a call: the engine's AvatarOutput plus its encoded RTP media. */
export interface CallAvatar extends AvatarOutput {
  onMedia<K extends keyof AvatarMediaEvents>(event: K, listener: (...args: AvatarMediaEvents[K]) => void): void;
  requestKeyframe(): void;
  /** The video encoder's target bitrate, kbit/s: the call's transport follows its link with it. */
  setVideoBitrate(kbps: number): void;
}

export const DEFAULT_AVATAR_FPS = MEDIA_DEFAULTS.targetFps;

/** What a session's media options set in the native session: size, frame rate, the renderer and its options. */
export function nativeMediaConfig(media: ResolvedMedia): Required<Pick<MediaSessionConfig, 'width' | 'height' | 'fps' | 'upsampleFactor' | 'renderer'>> {
  const { width, height } = outputDimensions(media.outputSize);
  return { width, height, fps: media.targetFps, upsampleFactor: media.upsampleFactor, renderer: media.renderer };
}

export interface MediaAvatarOptions extends AvatarStartOptions {
  /** The server's defaults where they differ from MEDIA_DEFAULTS (its AVATAR_OUTPUT_SIZE). */
  mediaDefaults?: Partial<ResolvedMedia>;
  assets: AvatarAssets;
  pipelinesDir: string;
  jpegQuality?: number;
  log?: Logger;
}

/** The events of the output itself; the rest are the media session's tick events. */
type OwnEvent = 'failed' | 'face';
type TickEvent = Exclude<keyof AvatarOutputEvents, OwnEvent>;
const isOwn = (event: keyof AvatarOutputEvents): event is OwnEvent => event === 'failed' || event === 'face';
/** The media session's event behind each of the engine's tick events. */
const TICK_EVENTS = { audio: 'pcm', frame: 'jpeg', raw: 'i420', motion: 'motion' } as const satisfies Record<TickEvent, keyof MediaSessionEvents>;

export class MediaAvatarOutput implements CallAvatar {
  readonly fps: number;
  /** Output size in pixels: every face is framed for it. */
  readonly size: { width: number; height: number };
  /** The renderer drawing this avatar (media option `renderer`): a new face is prepared by it. */
  readonly renderer: string;
  private readonly own = new EventEmitter<Pick<AvatarOutputEvents, OwnEvent>>();

  private constructor(
    private readonly media: MediaSession,
    private readonly options: MediaAvatarOptions,
    private readonly native: ReturnType<typeof nativeMediaConfig>,
    public clientFace: AvatarClientFace | null,
  ) {
    this.size = { width: native.width, height: native.height };
    this.fps = native.fps;
    this.renderer = native.renderer;
    media.on('media_error', (e) => this.own.emit('failed', new Error(`media pipeline failed: ${e.code}: ${e.message}`)));
  }

  on<K extends keyof AvatarOutputEvents>(event: K, listener: AvatarOutputListener<K>): void {
    // A tick's events are the native ones (a superset of the engine's shapes): heard from the media session itself.
    if (isOwn(event)) this.own.on(event, listener as never);
    else this.media.on(TICK_EVENTS[event as TickEvent], listener as never);
  }

  off<K extends keyof AvatarOutputEvents>(event: K, listener: AvatarOutputListener<K>): void {
    if (isOwn(event)) this.own.off(event, listener as never);
    else this.media.off(TICK_EVENTS[event as TickEvent], listener as never);
  }

  static async start(options: MediaAvatarOptions): Promise<MediaAvatarOutput> {
    const resolved = resolveMedia(options.media, options.mediaDefaults);
    const native = nativeMediaConfig(resolved);
    // Drawn by the client: the face's parameters each frame, and nothing drawn or encoded here.
    const video = resolved.videoRender === 'server';
    const [face, motion] = await Promise.all([
      options.assets.face(options.faceId, options.userId, native.width, native.height),
      options.assets.motion(options.drivingId, options.userId),
    ]);
    const clientFace = video ? null : await clientFaceOf(options.faceId, await prepareFace(face, native.renderer), native);
    const media = await MediaSession.start(
      {
        ...native,
        outputs: {
          pcm: true,
          jpeg: video && options.jpeg,
          i420: video && (options.i420 ?? false),
          h264: video && options.rtp?.video === 'h264',
          vp8: video && options.rtp?.video === 'vp8',
          opus: options.rtp?.audio ?? false,
          motion: !video,
        },
        jpegQuality: options.jpegQuality,
        pacing: 'realtime',
        pipelinesDir: options.pipelinesDir,
        face,
        motion,
      },
      { logger: options.log },
    );
    return new MediaAvatarOutput(media, options, native, clientFace);
  }

  pushSpeech(pcm: Int16Array, sampleRateHz: number, phonemes: PhonemeTiming[]): SpeechPlacement {
    return this.media.pushAudio(pcm, sampleRateHz, { phonemes });
  }

  interrupt(): { ptsNs: number } {
    return this.media.interrupt();
  }

  onMedia<K extends keyof AvatarMediaEvents>(event: K, listener: (...args: AvatarMediaEvents[K]) => void): void {
    // The native events carry more fields than a transport needs; they are a superset of AvatarMediaEvents.
    this.media.on(event, listener as never);
  }

  requestKeyframe(): void {
    if (!this.media.closed) this.media.requestKeyframe();
  }

  setVideoBitrate(kbps: number): void {
    if (!this.media.closed) this.media.setVideoBitrate(kbps);
  }

  async setFace(faceId: string): Promise<void> {
    const face = await this.options.assets.face(faceId, this.options.userId, this.size.width, this.size.height);
    const prepared = await prepareFace(face, this.renderer);
    const clientFace = this.clientFace && (await clientFaceOf(faceId, prepared, this.native));
    if (this.media.closed) return;
    this.media.setFace(prepared);
    if (clientFace) {
      this.clientFace = clientFace;
      this.own.emit('face', clientFace);
    }
  }

  listen(on: boolean): void {
    if (!this.media.closed) this.media.setListening(on);
  }

  async setDriving(drivingId: string): Promise<void> {
    const motion = await this.options.assets.motion(drivingId, this.options.userId);
    if (!this.media.closed) this.media.setDriving(motion);
  }

  close(): Promise<void> {
    return this.media.close();
  }
}
