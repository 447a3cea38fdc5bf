/**
 * A face the page draws itself (the session's `video_render: "client"`): the server's
 * output_motion events in, the face drawn on a canvas by the WebGL2 renderer (face/renderer.ts)
 * when each frame's own sound is heard. Both connections use it; each says when a frame is due
 * (rtc.ts by the audio track's RTP clock, ws.ts by its Web Audio schedule).
 *
 * The stream (docs/realtime.md, A face the client draws): output_motion.face (the mesh and rig),
 * its texture file in output_motion.face.delta parts, output_motion.face.done; then frames,
 * MOTION_PARAMS.length numbers each in thousandths, several to an output_motion.delta. Frames that
 * arrive before the face is complete are kept and drawn once it is.
 *
 * On a call, RtpPlayoutClock is that clock: getSynchronizationSources() says which RTP timestamp
 * of the audio track was last played and when, output_motion.clock maps RTP timestamps onto the
 * frames' pts, and getStats' media-playout adds the output's delay after that. drawFaceOnCall
 * puts the two together for a page of its own (face-embed.ts serves it as /playground/face.js).
 *
 * Invariants: frames are drawn in pts order, each at most once, the latest due one per display
 * frame (older due ones are skipped, never drawn late); at most MAX_QUEUED frames wait (a hidden
 * tab, or a lost GL context until the browser gives it back, draws nothing). `drawn` keeps the last frames drawn, for the page's own figures and tests.
 */
import { createFaceRenderer, type ClientFace, type FaceFrame, type FaceRenderer } from './face/renderer.js';
import { fromBase64, type ServerEvent } from './connection.js';

/** The order of a frame's numbers in output_motion.delta (the server's MOTION_PARAMS). */
const PARAMS = ['pitchDeg', 'yawDeg', 'rollDeg', 'tx', 'ty', 'scale', 'mouthOpen', 'mouthWide', 'mouthPress', 'tongue', 'eyeOpenLeft', 'eyeOpenRight', 'brow', 'cheek'] as const;
/** About 2 s of frames at 25 fps. */
const MAX_QUEUED = 50;
/** Frames drawn remembered (window.playground's figures; the tests read them). */
const DRAWN_KEPT = 500;

export interface MotionFrame {
  ptsMs: number;
  frame: FaceFrame;
}

/** A frame on screen: when (performance.now()), which frame and how late after it was due. */
export interface DrawnFrame {
  at: number;
  ptsMs: number;
  mouthOpen: number;
  lateMs: number;
}

/**
 * When a frame of `ptsMs`, arrived at `arrivedMs`, is to be seen (performance.now() ms), and
 * whether its sound placed it. A `live` clock follows the audio as it plays (a call's playout: the
 * receiver's jitter buffer stretches and shrinks the sound while frames wait) and is asked again
 * at every display frame; any other is asked once, when the frame arrives (a socket's Web Audio
 * schedule, fixed by then).
 */
export type DueClock = ((ptsMs: number, arrivedMs: number) => { atMs: number; synced: boolean }) & { live?: boolean };

/** Before the audio clock is known, a drawn frame waits this long after it arrived (about a jitter buffer's delay). */
const UNSYNCED_DELAY_MS = 80;
/** A source timestamp this far from now is on another clock than the page's (see RtpPlayoutClock.pageTime). */
const FOREIGN_CLOCK_MS = 10_000;
/**
 * How often the audio output's delay is read from getStats: from the start and often, since a
 * call's first reply may begin a second in, and a frame timed without it comes that much early.
 */
const OUTPUT_DELAY_POLL_MS = 500;

/** Whether this browser can draw the face (WebGL2). */
export function canDrawFaces(): boolean {
  try {
    return document.createElement('canvas').getContext('webgl2') !== null;
  } catch {
    return false;
  }
}

/** The frames of one output_motion.delta. */
export function framesOf(event: ServerEvent): MotionFrame[] {
  const params = event.params as number[];
  const first = Number(event.pts_ms);
  const step = Number(event.frame_ms);
  const out: MotionFrame[] = [];
  for (let k = 0; (k + 1) * PARAMS.length <= params.length; k++) {
    const frame = { listening: Boolean(event.listening) } as FaceFrame;
    PARAMS.forEach((name, i) => (frame[name] = (params[k * PARAMS.length + i] ?? 0) / 1000));
    out.push({ ptsMs: first + k * step, frame });
  }
  return out;
}

const floats = (b64: string): Float32Array => {
  const b = fromBase64(b64);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
};

/** The wire face (output_motion.face and its texture file) as the renderer takes it. */
export async function decodeFace(head: ServerEvent, file: Uint8Array<ArrayBuffer>): Promise<ClientFace> {
  const texture = head.texture as { width: number; height: number; factor: number; mime_type: string };
  // Exactly the server's texels: no colour conversion, no premultiplication (the photo is opaque).
  const bitmap = await createImageBitmap(new Blob([file], { type: texture.mime_type }), { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const g = canvas.getContext('2d', { willReadFrequently: true });
  if (!g) throw new Error('no 2D canvas to decode the face texture');
  g.drawImage(bitmap, 0, 0);
  bitmap.close();
  const rgba = g.getImageData(0, 0, canvas.width, canvas.height, { colorSpace: 'srgb' }).data;
  const rgb = new Uint8Array(canvas.width * canvas.height * 3);
  for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
    rgb[j] = rgba[i]!;
    rgb[j + 1] = rgba[i + 1]!;
    rgb[j + 2] = rgba[i + 2]!;
  }
  const mesh = head.mesh as { base_order: string[]; rest: string; bases: string; depth: string; head_weight: string; triangles: string };
  const tris = fromBase64(mesh.triangles);
  type Opening = { upper: number[]; lower: number[]; depth: number; centre: number[] };
  const mouth = head.mouth as { opening: Opening; width: number; down: number[]; jaw_drop: number; colours: Record<string, number[]>; photo: null | { x0: number; y0: number; w: number; h: number; mask: string; teeth: boolean } };
  const c = mouth.colours;
  return {
    width: Number(head.width),
    height: Number(head.height),
    canvasWidth: Number(head.canvas_width),
    canvasHeight: Number(head.canvas_height),
    fit: head.fit as number[],
    texture: rgb,
    textureWidth: texture.width,
    textureHeight: texture.height,
    textureFactor: texture.factor,
    baseOrder: mesh.base_order,
    rest: floats(mesh.rest),
    bases: floats(mesh.bases),
    depth: floats(mesh.depth),
    headWeight: floats(mesh.head_weight),
    triangles: new Uint32Array(tris.buffer, tris.byteOffset, tris.byteLength / 4),
    eyes: head.eyes as Opening[],
    mouth: {
      opening: mouth.opening,
      width: mouth.width,
      down: mouth.down,
      jawDrop: mouth.jaw_drop,
      teeth: c.teeth!,
      cavityEdge: c.cavity_edge!,
      cavityDeep: c.cavity_deep!,
      tongue: c.tongue!,
      seam: c.seam!,
      photo: mouth.photo ? { ...mouth.photo, mask: fromBase64(mouth.photo.mask) } : undefined,
    },
    pivot: head.pivot as number[],
    faceWidth: Number(head.face_width),
  };
}

export class FaceView {
  private renderer: FaceRenderer | null = null;
  /** The face being received: its head event and texture parts. */
  private incoming: { head: ServerEvent; parts: string[] } | null = null;
  /** Faces decode in order. */
  private decoding: Promise<void> = Promise.resolve();
  private queued: Array<MotionFrame & { arrivedMs: number; dueMs: number; synced: boolean }> = [];
  private loop: number | null = null;
  private closed = false;
  readonly drawn: DrawnFrame[] = [];
  /** Frames drawn since the start. */
  frames = 0;
  /** The latest frame drawn (null before the first). */
  last: MotionFrame | null = null;

  /** The face shown (decoded), kept to draw it again on a restored context. */
  private face: ClientFace | null = null;
  /** The browser took the GL context away (a GPU reset, too many contexts); frames wait for it back. */
  private contextLost = false;

  constructor(
    private readonly canvas: HTMLCanvasElement,
    private readonly due: DueClock,
    private readonly onFirstFrame: () => void,
    private readonly onError: (why: string) => void,
  ) {
    // A lost context is asked back (preventDefault), and the face drawn again on the new one.
    canvas.addEventListener('webglcontextlost', this.onContextLost);
    canvas.addEventListener('webglcontextrestored', this.onContextRestored);
  }

  private readonly onContextLost = (e: Event): void => {
    e.preventDefault();
    this.contextLost = true;
    this.renderer = null; // its GL objects went with the context
  };

  private readonly onContextRestored = (): void => {
    this.contextLost = false;
    if (this.closed || !this.face) return;
    try {
      this.renderer = createFaceRenderer(this.canvas, this.face);
      this.schedule();
    } catch (err) {
      this.onError(`The face could not be drawn again: ${(err as Error).message}`);
    }
  };

  /** Takes the output_motion events; false for any other event. */
  event(event: ServerEvent): boolean {
    switch (event.type) {
      case 'output_motion.face':
        this.incoming = { head: event, parts: [] };
        return true;
      case 'output_motion.face.delta': {
        const incoming = this.incoming;
        if (incoming && incoming.head.face_id === event.face_id) incoming.parts.push(String(event.delta));
        return true;
      }
      case 'output_motion.face.done':
        this.faceDone(String(event.face_id));
        return true;
      case 'output_motion.delta':
        this.frameEvent(event);
        return true;
      default:
        return false;
    }
  }

  private faceDone(faceId: string): void {
    const incoming = this.incoming;
    if (incoming?.head.face_id !== faceId) return;
    this.incoming = null;
    this.decoding = this.decoding.then(async () => {
      try {
        const face = await decodeFace(incoming.head, fromBase64(incoming.parts.join('')));
        if (this.closed) return;
        this.face = face;
        if (this.renderer) this.renderer.setFace(face);
        else if (!this.contextLost) {
          this.canvas.width = face.width;
          this.canvas.height = face.height;
          this.renderer = createFaceRenderer(this.canvas, face);
        }
        this.schedule();
      } catch (err) {
        this.onError(`The face could not be drawn here: ${(err as Error).message}`);
      }
    });
  }

  private frameEvent(event: ServerEvent): void {
    const arrivedMs = performance.now();
    for (const f of framesOf(event)) {
      const { atMs, synced } = this.due(f.ptsMs, arrivedMs);
      this.queued.push({ ...f, arrivedMs, dueMs: atMs, synced });
    }
    while (this.queued.length > MAX_QUEUED) this.queued.shift();
    this.schedule();
  }

  private schedule(): void {
    if (this.renderer && !this.closed && this.queued.length > 0) this.loop ??= requestAnimationFrame(() => this.draw());
  }

  /** Each display frame: the latest due frame drawn, older due ones dropped (a live clock asked again now: see DueClock). */
  private draw(): void {
    this.loop = null;
    const now = performance.now();
    let shown: (typeof this.queued)[number] | null = null;
    while (this.queued.length > 0) {
      const head = this.queued[0]!;
      if (this.due.live) {
        const { atMs, synced } = this.due(head.ptsMs, head.arrivedMs);
        head.dueMs = atMs;
        head.synced = synced;
      }
      if (head.dueMs > now) break;
      shown = this.queued.shift()!;
    }
    if (shown && this.renderer) {
      this.renderer.draw(shown.frame);
      this.last = shown;
      if (this.frames++ === 0) this.onFirstFrame();
      this.drawn.push({ at: now, ptsMs: shown.ptsMs, mouthOpen: shown.frame.mouthOpen, lateMs: shown.synced ? now - shown.dueMs : NaN });
      if (this.drawn.length > DRAWN_KEPT) this.drawn.shift();
    }
    this.schedule();
  }

  /** The canvas's RGB pixels as last drawn, top row first (empty before the face arrives). */
  pixels(): Uint8Array {
    return this.renderer?.readPixels() ?? new Uint8Array(0);
  }

  /** Frames drawn a second over the last two seconds (null: fewer than two). */
  fps(): number | null {
    const now = performance.now();
    const recent = this.drawn.filter((d) => now - d.at < 2000);
    return recent.length > 1 ? ((recent.length - 1) * 1000) / (recent.at(-1)!.at - recent[0]!.at) : null;
  }

  /** How late the last frames placed by their sound were drawn, median ms (null: none yet). */
  lateness(): number | null {
    const late = this.drawn.slice(-25).map((d) => d.lateMs).filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
    return late.length === 0 ? null : late[Math.floor(late.length / 2)]!;
  }

  close(): void {
    this.closed = true;
    this.canvas.removeEventListener('webglcontextlost', this.onContextLost);
    this.canvas.removeEventListener('webglcontextrestored', this.onContextRestored);
    if (this.loop !== null) cancelAnimationFrame(this.loop);
    this.loop = null;
    this.queued = [];
    this.renderer?.destroy();
    this.renderer = null;
  }
}

/** A call's audio playout clock (see the header): when each frame's sound is heard. */
export class RtpPlayoutClock {
  /** output_motion.clock: the audio's RTP timestamp at pts 0 and its clock rate. */
  private rtp: { origin: number; hz: number } | null = null;
  /** The audio output's delay after a sample is delivered, ms (media-playout), and the totals it was last read from. */
  private outputDelayMs = 0;
  private playout = { delayS: 0, samples: 0 };
  private readonly poll: number;
  /** The source timestamps' clock less performance.now() when the page's clock is not the browser's (see pageTime). */
  private foreignOffset = -Infinity;

  constructor(
    private readonly pc: RTCPeerConnection,
    private readonly receiver: RTCRtpReceiver,
  ) {
    this.poll = window.setInterval(() => void this.readOutputDelay(), OUTPUT_DELAY_POLL_MS);
    void this.readOutputDelay();
  }

  /** Takes output_motion.clock; false for any other event. */
  event(event: ServerEvent): boolean {
    if (event.type !== 'output_motion.clock') return false;
    this.rtp = { origin: Number(event.rtp_timestamp), hz: Number(event.rtp_clock_hz) };
    return true;
  }

  readonly due: DueClock = Object.assign((ptsMs: number, arrivedMs: number) => {
    const played = this.receiver.getSynchronizationSources()[0];
    const rtp = this.rtp;
    if (!played || !rtp) return { atMs: arrivedMs + UNSYNCED_DELAY_MS, synced: false };
    // The sound delivered at `played.timestamp` had this pts; it is heard outputDelayMs later.
    const deliveredPts = (((played.rtpTimestamp - rtp.origin) >>> 0) * 1000) / rtp.hz;
    return { atMs: Math.max(arrivedMs, this.pageTime(played.timestamp) + (ptsMs - deliveredPts) + this.outputDelayMs), synced: true };
  }, { live: true });

  /**
   * A synchronisation source's timestamp (the browser's wall clock, ms since the epoch) on the
   * page's performance.now(). That is `timestamp − performance.timeOrigin`, unless the page's
   * clock is not the browser's (a fake clock of a test or library replaces performance): then the
   * two are tied by observation, the source's timestamp being the last packet played, a packet
   * time at most before now; the closest seen is kept.
   */
  private pageTime(timestamp: number): number {
    const now = performance.now();
    const direct = timestamp - performance.timeOrigin;
    if (Math.abs(direct - now) < FOREIGN_CLOCK_MS) return direct;
    this.foreignOffset = Math.max(this.foreignOffset, timestamp - now);
    return timestamp - this.foreignOffset;
  }

  /** The output's delay over the samples played since the last reading (the whole call's mean would lag a change). */
  private async readOutputDelay(): Promise<void> {
    if (this.pc.connectionState === 'closed') return this.close();
    (await this.pc.getStats()).forEach((s: Record<string, unknown>) => {
      if (s.type !== 'media-playout' || s.kind !== 'audio') return;
      const total = { delayS: Number(s.totalPlayoutDelay ?? 0), samples: Number(s.totalSamplesCount ?? 0) };
      const samples = total.samples - this.playout.samples;
      if (samples > 0) this.outputDelayMs = ((total.delayS - this.playout.delayS) / samples) * 1000;
      this.playout = total;
    });
  }

  close(): void {
    window.clearInterval(this.poll);
  }
}

/** A call's face: the view and the audio playout clock that times it, taking the call's events together. */
export class CallFace {
  readonly view: FaceView;
  private readonly clock: RtpPlayoutClock;

  constructor(pc: RTCPeerConnection, audio: RTCRtpReceiver, canvas: HTMLCanvasElement, onFirstFrame: () => void, onError: (why: string) => void) {
    this.clock = new RtpPlayoutClock(pc, audio);
    this.view = new FaceView(canvas, this.clock.due, onFirstFrame, onError);
  }

  /** Takes output_motion.clock and the face's events; false for any other event. */
  event(event: ServerEvent): boolean {
    return this.clock.event(event) || this.view.event(event);
  }

  close(): void {
    this.clock.close();
    this.view.close();
  }
}

/**
 * Draws the face of a call made with `session.video_render: "client"` on `canvas`, in step with
 * the call's audio: give it the peer connection (its audio receiver plays the avatar's voice) and
 * the `oai-events` data channel. Other events still reach the channel's own listeners.
 */
export function drawFaceOnCall(pc: RTCPeerConnection, channel: RTCDataChannel, canvas: HTMLCanvasElement, onError: (why: string) => void = console.warn): FaceView {
  const audio = pc.getTransceivers().find((t) => t.receiver.track.kind === 'audio');
  if (!audio) throw new Error('the call has no audio to time the face by');
  const face = new CallFace(pc, audio.receiver, canvas, () => undefined, onError);
  channel.addEventListener('message', (m: MessageEvent) => {
    try {
      face.event(JSON.parse(String(m.data)) as ServerEvent);
    } catch {
      // not JSON: not the face's
    }
  });
  pc.addEventListener('connectionstatechange', () => {
    if (pc.connectionState === 'closed' || pc.connectionState === 'failed') face.close();
  });
  return face.view;
}
