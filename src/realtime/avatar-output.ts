/**
 * What the realtime engine needs from the avatar: a place to queue speech, and the played result
 * coming back tick by tick on one clock. The media facade implements it over the native addon
 * (src/media/avatar-output.ts); the engine never imports media code.
 *
 * Time is the output clock in integer nanoseconds. Every tick (1/fps) the output emits the audio
 * it played in that tick (`audio`, PCM16 mono 24 kHz, silence included) and, when frames are
 * wanted, the rendered frame with the same pts (`frame`, JPEG, or `raw`, I420). Speech pushed while nothing plays
 * starts at the next tick; speech pushed while something plays follows it without a gap.
 * The tick's events have the native media session's shapes (`data`, `ptsNs`, ...), so the facade
 * hands a listener to the media session itself: a tick reaches its listener in one step.
 */
import type { PhonemeTiming } from '../audio/pcm.js';

export interface SpeechPlacement {
  startPtsNs: number;
  endPtsNs: number;
}

export interface AvatarAudioChunk {
  /** PCM16 mono at PCM_RATE_HZ (src/audio/pcm.ts), little-endian. */
  data: Buffer;
  ptsNs: number;
}

export interface AvatarFrame {
  /** The frame as a JPEG. */
  data: Buffer;
  ptsNs: number;
}

/** A rendered frame as raw I420 planes (BT.601 limited range, rows unpadded), when asked for. */
export interface AvatarRawFrame {
  /** The I420 planes. */
  data: Buffer;
  ptsNs: number;
  frameIndex: number;
  width: number;
  height: number;
}

/**
 * The face one frame shows, for a face the client draws (media option video_render: client):
 * head pose (degrees; translation in face widths; scale 1 as photographed), the mouth, the eyes
 * (image left, right), brows, cheeks, and whether the face listens. Emitted before the audio of
 * the same tick.
 */
export interface AvatarMotionFrame {
  ptsNs: number;
  frameIndex: number;
  face: {
    pitchDeg: number;
    yawDeg: number;
    rollDeg: number;
    tx: number;
    ty: number;
    scale: number;
    mouthOpen: number;
    mouthWide: number;
    mouthPress: number;
    tongue: number;
    eyeOpenLeft: number;
    eyeOpenRight: number;
    brow: number;
    cheek: number;
    listening: boolean;
  };
}

/** An opening of a client-drawn face: mesh vertex ids corner to corner, left to right; depth and a point inside (photo pixels). */
export interface AvatarFaceOpening {
  upper: number[];
  lower: number[];
  depth: number;
  centre: number[];
}

/**
 * Everything a client needs to draw the face itself, once per face (media option video_render:
 * client): face-render's ClientFace (native/face-render/src/client.rs, which says what each field
 * means) with its texture encoded losslessly. A frame is then its AvatarMotionFrame alone.
 */
export interface AvatarClientFace {
  /** The face's asset id. */
  faceId: string;
  width: number;
  height: number;
  canvasWidth: number;
  canvasHeight: number;
  /** Photo pixels → canvas pixels: [m00, m01, m10, m11, tx, ty]. */
  fit: number[];
  /** The photo the warp samples, as a lossless image file; `factor` photo pixels per texel. */
  texture: { width: number; height: number; factor: number; mimeType: 'image/webp'; data: Buffer };
  baseOrder: string[];
  rest: Float32Array;
  bases: Float32Array;
  depth: Float32Array;
  headWeight: Float32Array;
  triangles: Uint32Array;
  eyes: AvatarFaceOpening[];
  mouth: {
    opening: AvatarFaceOpening;
    width: number;
    down: number[];
    jawDrop: number;
    teeth: number[];
    cavityEdge: number[];
    cavityDeep: number[];
    tongue: number[];
    seam: number[];
    /** The photographed mouth interior's coverage mask, when the photo shows the lips parted. */
    photo?: { x0: number; y0: number; w: number; h: number; mask: Buffer; teeth: boolean };
  };
  pivot: number[];
  faceWidth: number;
}

export interface AvatarOutputEvents {
  audio: [AvatarAudioChunk];
  frame: [AvatarFrame];
  raw: [AvatarRawFrame];
  /** The face of each frame when the client draws it (no `frame`s then). */
  motion: [AvatarMotionFrame];
  /** The client-drawn face changed (setFace): the new one, before its first frame. */
  face: [AvatarClientFace];
  /** The output failed and stopped (a pipeline error); the session cannot speak any more. */
  failed: [Error];
}

export type AvatarOutputListener<K extends keyof AvatarOutputEvents> = (...args: AvatarOutputEvents[K]) => void;

export interface AvatarOutput {
  readonly fps: number;
  /** The frames' size in pixels. */
  readonly size: { width: number; height: number };
  /** The face the client draws (media option video_render: client), null when the server draws it; a change is the `face` event. */
  readonly clientFace: AvatarClientFace | null;
  /** Queues speech (mono PCM16, 8..48 kHz) with optional phoneme timings for the lips. */
  pushSpeech(pcm: Int16Array, sampleRateHz: number, phonemes: PhonemeTiming[]): SpeechPlacement;
  /** Drops queued speech: the next frame is idle and the audio silent. Returns where it cut: the first frame without speech. */
  interrupt(): { ptsNs: number };
  /** Switches the face photo (a standard id or an uploaded face the user owns). */
  setFace(faceId: string): Promise<void>;
  /** Switches the driving motion (idle head motion and blinks). */
  setDriving(drivingId: string): Promise<void>;
  /** The user is speaking (true) or has stopped: the face listens (attention, nods) or settles back to idle. */
  listen(on: boolean): void;
  /** Hears `event` until `off` (or the output closes). */
  on<K extends keyof AvatarOutputEvents>(event: K, listener: AvatarOutputListener<K>): void;
  off<K extends keyof AvatarOutputEvents>(event: K, listener: AvatarOutputListener<K>): void;
  close(): Promise<void>;
}
