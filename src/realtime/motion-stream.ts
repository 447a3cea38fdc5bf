/**
 * The face a client draws, as realtime events (media option video_render: client): the face
 * once, when the session starts and when it changes (output_motion.face with the mesh, then its
 * texture file in output_motion.face.delta parts, then output_motion.face.done), and the frames
 * MOTION_FRAMES_PER_EVENT to an event (output_motion.delta), which keeps the stream under 30 kb/s: the envelope of
 * an event costs more than a frame's fourteen numbers.
 *
 * Invariants: every frame the avatar emits is sent once, in order; an event's frames are
 * consecutive (a gap in the indices sends the held frame alone); a held frame waits for the next
 * frame only, one frame time (the motion of a tick leaves before its audio, so the client still
 * has it ahead of its playout). Nothing is sent before start(): session.created comes first. Face
 * events come in the order of the avatar's faces, each before the frames that show it.
 *
 * Not here: drawing (playground/src/face/), what the frames hold (the native animator).
 */
import type { AvatarClientFace, AvatarFaceOpening, AvatarMotionFrame, AvatarOutput } from './avatar-output.js';
import type { ServerEventDraft } from './protocol.js';
import type { MotionFaceOpening } from './server-events.js';

/** Frames an output_motion.delta carries. */
export const MOTION_FRAMES_PER_EVENT = 2;
/** Base64 characters of an output_motion.face.delta: well under a data channel's 256 KiB message bound. */
export const FACE_DELTA_CHARS = 48 * 1024;

/** A parameter in thousandths (integers keep the event small). */
const thousandths = (v: number): number => (Number.isFinite(v) ? Math.round(v * 1000) : 0);

function frameParams(frame: AvatarMotionFrame): number[] {
  const f = frame.face;
  return [f.pitchDeg, f.yawDeg, f.rollDeg, f.tx, f.ty, f.scale, f.mouthOpen, f.mouthWide, f.mouthPress, f.tongue, f.eyeOpenLeft, f.eyeOpenRight, f.brow, f.cheek].map(thousandths);
}

/** Consecutive frames of a client-drawn face as one output_motion.delta (params in MOTION_PARAMS order, frame after frame). */
export function motionEvent(frames: readonly AvatarMotionFrame[], fps: number): ServerEventDraft {
  const first = frames[0]!;
  return {
    type: 'output_motion.delta',
    frame_index: first.frameIndex,
    pts_ms: Math.round(first.ptsNs / 1e6),
    frame_ms: Math.round((1e5 / fps)) / 100,
    params: frames.flatMap(frameParams),
    listening: frames[frames.length - 1]!.face.listening,
  };
}

const base64Of = (a: ArrayBufferView): string => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
const opening = (o: AvatarFaceOpening): MotionFaceOpening => ({ upper: o.upper, lower: o.lower, depth: o.depth, centre: o.centre });

/** A client-drawn face as its events: output_motion.face, its texture's deltas, then output_motion.face.done. */
export function faceEvents(faceId: string, f: AvatarClientFace): ServerEventDraft[] {
  const m = f.mouth;
  const head: ServerEventDraft = {
    type: 'output_motion.face',
    face_id: faceId,
    asset_id: f.faceId,
    width: f.width,
    height: f.height,
    canvas_width: f.canvasWidth,
    canvas_height: f.canvasHeight,
    fit: f.fit,
    texture: { width: f.texture.width, height: f.texture.height, factor: f.texture.factor, mime_type: f.texture.mimeType, bytes: f.texture.data.length },
    mesh: {
      vertex_count: f.rest.length / 2,
      base_order: f.baseOrder,
      rest: base64Of(f.rest),
      bases: base64Of(f.bases),
      depth: base64Of(f.depth),
      head_weight: base64Of(f.headWeight),
      triangles: base64Of(f.triangles),
    },
    eyes: f.eyes.map(opening),
    mouth: {
      opening: opening(m.opening),
      width: m.width,
      down: m.down,
      jaw_drop: m.jawDrop,
      colours: { teeth: m.teeth, cavity_edge: m.cavityEdge, cavity_deep: m.cavityDeep, tongue: m.tongue, seam: m.seam },
      photo: m.photo ? { x0: m.photo.x0, y0: m.photo.y0, w: m.photo.w, h: m.photo.h, mask: base64Of(m.photo.mask), teeth: m.photo.teeth } : null,
    },
    pivot: f.pivot,
    face_width: f.faceWidth,
  };
  const texture = f.texture.data.toString('base64');
  const deltas: ServerEventDraft[] = [];
  for (let i = 0; i < texture.length; i += FACE_DELTA_CHARS) {
    deltas.push({ type: 'output_motion.face.delta', face_id: faceId, delta: texture.slice(i, i + FACE_DELTA_CHARS) });
  }
  return [head, ...deltas, { type: 'output_motion.face.done', face_id: faceId }];
}

/** Sends a client-drawn avatar's faces and frames through `emit`, from start() (after session.created) for as long as the avatar runs. */
export class MotionStream {
  private started = false;
  /** Consecutive frames not sent yet (fewer than MOTION_FRAMES_PER_EVENT). */
  private held: AvatarMotionFrame[] = [];
  private faces = 0;

  constructor(
    private readonly avatar: AvatarOutput,
    private readonly emit: (event: ServerEventDraft) => void,
  ) {
    avatar.on('face', (face) => this.started && this.sendFace(face));
    avatar.on('motion', (frame) => this.started && this.frame(frame));
  }

  /** The face the avatar shows now, then every face and frame from here on. */
  start(): void {
    if (this.started) return;
    this.started = true;
    if (this.avatar.clientFace) this.sendFace(this.avatar.clientFace);
  }

  private sendFace(face: AvatarClientFace): void {
    for (const e of faceEvents(`face_${++this.faces}`, face)) this.emit(e);
  }

  private frame(frame: AvatarMotionFrame): void {
    const last = this.held[this.held.length - 1];
    if (last && frame.frameIndex !== last.frameIndex + 1) this.flush();
    this.held.push(frame);
    if (this.held.length === MOTION_FRAMES_PER_EVENT) this.flush();
  }

  private flush(): void {
    this.emit(motionEvent(this.held, this.avatar.fps));
    this.held = [];
  }
}
