/**
 * What the page needs from a connection to the avatar, whichever transport carries it: send client
 * events, receive server events, gate the microphone (push to talk), cut the avatar off, hang up,
 * and report what the person gets (frames, sound, bitrate, A/V offset). rtc.ts and ws.ts are the
 * two implementations.
 */

import type { FaceView } from './face-view.js';

export type ServerEvent = { type: string; [field: string]: unknown };

export interface ConnectionHandlers {
  event(event: ServerEvent): void;
  /** The first decoded frame is on screen. */
  firstFrame(): void;
  /** The avatar's first sound of a response is playing (WebSocket; WebRTC says it with output_audio_buffer.started). */
  audioStarted?(responseId: string): void;
  /** Something the person should know that does not end the connection. */
  notice(why: string): void;
  /** The connection ended without being asked to: `why` in words. */
  lost(why: string, kind: 'busy' | 'key' | 'network' | 'ended', retryAfterS?: number): void;
}

export interface MediaElements {
  video: HTMLVideoElement;
  canvas: HTMLCanvasElement;
  /** Where the page draws the face itself (video_render: client), with WebGL2. */
  face: HTMLCanvasElement;
  audio: HTMLAudioElement;
}

export interface LiveStats {
  fps: number | null;
  kbps: number | null;
  /** How far the picture is behind its own sound, ms (negative: ahead of it); null until measurable. */
  avOffsetMs: number | null;
  /** Frames shown since the start. */
  frames: number;
  /** Sound received so far (sum of squares of the played samples, normalised like getStats' totalAudioEnergy). */
  audioEnergy: number;
}

export interface Connection {
  readonly transport: 'webrtc' | 'websocket';
  /** The face is drawn here from the motion stream (video_render: client), not sent as video. */
  readonly face: FaceView | null;
  readonly sessionId: string | null;
  send(event: Record<string, unknown>): void;
  /** Push to talk: the microphone sends sound only while open (silence otherwise, as a muted microphone does). */
  setMicOpen(open: boolean): void;
  /** Stops the avatar's speech now and cancels the reply. */
  interrupt(): void;
  /** Ends the call; the session ends on the server with its duration. */
  hangup(): Promise<void>;
  stats(): Promise<LiveStats>;
  close(): void;
}

/** Milliseconds since the page loaded (performance clock). */
export const now = (): number => performance.now();

/** Standard base64 of bytes (chunked: String.fromCharCode takes only so many arguments). */
export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}
