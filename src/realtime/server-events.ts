/**
 * The server's event vocabulary as one typed union, built on the OpenAI Realtime GA types that the
 * `openai` package ships, so that a misspelt event name, a missing field or a field the event does
 * not have fails `tsc` rather than a client.
 *
 *  - Every event the engine and gateways emit is a member of `ServerEventDraft` (an event before
 *    protocol.ts stamps its `event_id`); `ServerEvent` is the stamped form a client receives.
 *  - Event names and their top-level field names and scalar types are OpenAI's exactly. Nested
 *    records the server builds from its own state (`item`, `session`, `response`, `part`, and the
 *    transcription failure's `error`) are typed as objects: they carry fields OpenAI's types do not
 *    model (the avatar's `avatar` session block, `object` tags, `param: null` where the SDK says
 *    optional string, as the API itself sends), and their shapes are checked by the protocol
 *    tests instead.
 *  - The avatar's own events (`response.output_image.delta` / `.done`) have no OpenAI type; they
 *    are declared here beside the GA ones with the same part reference fields.
 *  - Events the server never sends (DTMF, rate limits) are left out, so emitting one by mistake
 *    is also a type error.
 */
import type {
  ConversationItemAdded,
  ConversationItemDeletedEvent,
  ConversationItemDone,
  ConversationItemInputAudioTranscriptionCompletedEvent,
  ConversationItemInputAudioTranscriptionDeltaEvent,
  ConversationItemInputAudioTranscriptionFailedEvent,
  ConversationItemTruncatedEvent,
  InputAudioBufferClearedEvent,
  InputAudioBufferCommittedEvent,
  InputAudioBufferSpeechStartedEvent,
  InputAudioBufferSpeechStoppedEvent,
  InputAudioBufferTimeoutTriggered,
  McpListToolsCompleted,
  McpListToolsFailed,
  McpListToolsInProgress,
  RealtimeErrorEvent,
  RealtimeServerEvent as OpenAIServerEvent,
  ResponseAudioDeltaEvent,
  ResponseAudioDoneEvent,
  ResponseAudioTranscriptDeltaEvent,
  ResponseAudioTranscriptDoneEvent,
  ResponseContentPartAddedEvent,
  ResponseContentPartDoneEvent,
  ResponseCreatedEvent,
  ResponseDoneEvent,
  ResponseFunctionCallArgumentsDeltaEvent,
  ResponseFunctionCallArgumentsDoneEvent,
  ResponseMcpCallArgumentsDelta,
  ResponseMcpCallArgumentsDone,
  ResponseMcpCallCompleted,
  ResponseMcpCallFailed,
  ResponseMcpCallInProgress,
  ResponseOutputItemAddedEvent,
  ResponseOutputItemDoneEvent,
  ResponseTextDeltaEvent,
  ResponseTextDoneEvent,
  SessionCreatedEvent,
  SessionUpdatedEvent,
} from 'openai/resources/realtime/realtime';

/** A JSON object the server built from its own records (an item, a session, a response). */
type Built_ = object;

/** OpenAI's event with its nested records `K` loosened to JSON objects (see the header). */
type Built<E, K extends keyof E = never> = { [F in keyof E]: F extends K ? (null extends E[F] ? Built_ | null : Built_) : E[F] };

/** Where a delta of the response's one content part belongs (every part event carries it). */
interface PartRef {
  response_id: string;
  item_id: string;
  output_index: number;
  content_index: number;
}

/** One JPEG frame of the avatar (the avatar's own event; `response.video.delta` in the legacy dialect). */
export interface ResponseOutputImageDeltaEvent extends PartRef {
  event_id: string;
  type: 'response.output_image.delta';
  /** Base64 JPEG. */
  delta: string;
  frame_index: number;
  pts_ms: number;
}

/** The order of output_motion.delta's `params` (docs/realtime.md, A face the client draws). */
export const MOTION_PARAMS = ['pitch_deg', 'yaw_deg', 'roll_deg', 'tx', 'ty', 'scale', 'mouth_open', 'mouth_wide', 'mouth_press', 'tongue', 'eye_open_left', 'eye_open_right', 'brow', 'cheek'] as const;

/**
 * The face's frames when the client draws it (the session's media option `video_render: "client"`;
 * the avatar's own event): every frame, idle or speaking, two frames an event (one when the next
 * frame is not the following one), each before the audio of its tick. `params` holds
 * MOTION_PARAMS.length numbers a frame, frames in order; frame k of the event has index
 * `frame_index + k` and time `pts_ms + k * frame_ms`.
 */
export interface OutputMotionDeltaEvent {
  event_id: string;
  type: 'output_motion.delta';
  /** The first frame's index. */
  frame_index: number;
  /** The first frame's time on the audio's clock (the pts of its output_audio.delta / RTP audio). */
  pts_ms: number;
  /** Time from one frame to the next (1000 / fps). */
  frame_ms: number;
  /**
   * Per frame: pitch_deg, yaw_deg, roll_deg (head down, toward the image's left, clockwise
   * positive), tx, ty (face widths), scale (1 as photographed), mouth_open (0..1), mouth_wide (-1
   * rounded..1 spread), mouth_press (0..1), tongue (0 low..1 tip raised), eye_open_left,
   * eye_open_right (0 shut..1 as photographed), brow (-1 knit..1 raised), cheek (0..1 raised); each
   * in thousandths (an integer: 1000 is 1.0).
   * @minItems 14
   */
  params: number[];
  /** The face is listening to the user (at the event's last frame). */
  listening: boolean;
}

/** A lip or eyelid loop of a client-drawn face: mesh vertex ids, corner to corner, left to right in the image. */
export interface MotionFaceOpening {
  upper: number[];
  lower: number[];
  /** Depth toward the camera (photo pixels), by which the opening's inside turns with the head. */
  depth: number;
  /** A point inside (photo pixels). */
  centre: number[];
}

/**
 * The face a client draws (`video_render: "client"`), sent when the session starts and when its
 * face changes, before the frames that show it: the mesh warp the server's CPU renderer draws,
 * as data (docs/realtime.md, A face the client draws). Its texture follows in
 * output_motion.face.delta parts, then output_motion.face.done. Arrays named `(base64 …)` are
 * little-endian binary.
 */
export interface OutputMotionFaceEvent {
  event_id: string;
  type: 'output_motion.face';
  /** This face's id in the stream: the deltas and done of its texture name it. */
  face_id: string;
  /** The face asset shown. */
  asset_id: string;
  /** The output size, and the canvas the warp is drawn on (output / upsample factor; upscaled bilinearly to the output). */
  width: number;
  height: number;
  canvas_width: number;
  canvas_height: number;
  /**
   * Photo pixels to canvas pixels, [m00, m01, m10, m11, tx, ty]: x' = m00·x + m01·y + tx.
   * @minItems 6
   * @maxItems 6
   */
  fit: number[];
  /** The picture the warp samples: photo pixel p is texel p / factor (pixel centres at +0.5), clamped to the edge. */
  texture: { width: number; height: number; factor: number; mime_type: 'image/webp'; bytes: number };
  mesh: {
    vertex_count: number;
    /** The per-vertex displacement bases, in the order of `bases`. */
    base_order: string[];
    /** (base64 float32) rest position x, y per vertex, photo pixels. */
    rest: string;
    /** (base64 float32) per vertex, base_order.length displacements x, y at full strength, photo pixels. */
    bases: string;
    /** (base64 float32) depth toward the camera per vertex, photo pixels. */
    depth: string;
    /** (base64 float32) how much each vertex turns with the head, 0..1. */
    head_weight: string;
    /** (base64 uint32) three vertex ids per triangle. */
    triangles: string;
  };
  /** The image-left eye first. */
  eyes: MotionFaceOpening[];
  mouth: {
    opening: MotionFaceOpening;
    /** Width at rest (photo pixels), the mouth's down axis, and the jaw's drop at mouth_open 1 (photo pixels along down). */
    width: number;
    down: number[];
    jaw_drop: number;
    /** Colours of the drawn mouth interior, linear 0..255 RGB. */
    colours: { teeth: number[]; cavity_edge: number[]; cavity_deep: number[]; tongue: number[]; seam: number[] };
    /** The photographed mouth interior (when the photo shows the lips parted): its coverage mask, w x h photo pixels from x0, y0 (base64 uint8). */
    photo: { x0: number; y0: number; w: number; h: number; mask: string; teeth: boolean } | null;
  };
  /** Head-pose constants: rotation pivot and face width (the unit of tx, ty), photo pixels. */
  pivot: number[];
  face_width: number;
}

/** A part of a client-drawn face's texture file (base64), in order. */
export interface OutputMotionFaceDeltaEvent {
  event_id: string;
  type: 'output_motion.face.delta';
  face_id: string;
  delta: string;
}

/**
 * On a WebRTC call whose face the client draws, once after session.created: the audio track's
 * RTP timestamp at pts_ms 0. The sound playing with RTP timestamp r is at pts_ms
 * ((r - rtp_timestamp) mod 2^32) * 1000 / rtp_clock_hz, so a page draws each frame when its
 * sound plays (RTCRtpReceiver.getSynchronizationSources gives r).
 */
export interface OutputMotionClockEvent {
  event_id: string;
  type: 'output_motion.clock';
  rtp_timestamp: number;
  rtp_clock_hz: number;
}

/** A client-drawn face is complete: its texture's parts are all sent. */
export interface OutputMotionFaceDoneEvent {
  event_id: string;
  type: 'output_motion.face.done';
  face_id: string;
}

/** The response's frames are all sent (`response.video.done` in the legacy dialect). */
export interface ResponseOutputImageDoneEvent extends PartRef {
  event_id: string;
  type: 'response.output_image.done';
  total_frames: number;
}

/**
 * Avatar-only sessions (avatar-engine.ts, docs/avatar-mode.md): the client's spoken segments
 * instead of responses. The `output_audio_buffer.*` and delta names are OpenAI's; their fields
 * name the segment (`segment_id`) where realtime sessions name a response.
 */
export interface AvatarSegmentStartedEvent {
  event_id: string;
  type: 'output_audio_buffer.started';
  segment_id: string;
  pts_ms: number;
}

export interface AvatarSegmentCommittedEvent {
  event_id: string;
  type: 'output_audio_buffer.committed';
  segment_id: string;
  /** Audio the segment holds, ms. */
  audio_ms: number;
}

/** Once per segment: it played out, or a clear cut it. */
export interface AvatarSegmentStoppedEvent {
  event_id: string;
  type: 'output_audio_buffer.stopped';
  segment_id: string;
  played_ms: number;
  interrupted: boolean;
}

export interface AvatarBufferClearedEvent {
  event_id: string;
  type: 'output_audio_buffer.cleared';
  /** How much of the segment in play when cut had been heard (0 if none was playing). */
  played_ms: number;
}

/**
 * A response's audio in a session whose face the client draws (video_render: client): with the
 * time of its first sample on the avatar's clock, by which the client draws each frame of
 * output_motion.delta when its sound is heard.
 */
export interface StampedAudioDeltaEvent extends ResponseAudioDeltaEvent {
  pts_ms: number;
}

/** The audio one frame interval played, silence included. */
export interface AvatarAudioDeltaEvent {
  event_id: string;
  type: 'response.output_audio.delta';
  delta: string;
  segment_id: string | null;
  pts_ms: number;
}

export interface AvatarImageDeltaEvent {
  event_id: string;
  type: 'response.output_image.delta';
  delta: string;
  frame_index: number;
  pts_ms: number;
  segment_id: string | null;
}

/** Every event this server sends, stamped (`event_id` set). */
export type ServerEvent =
  | Built<SessionCreatedEvent, 'session'>
  | Built<SessionUpdatedEvent, 'session'>
  | RealtimeErrorEvent
  | Built<ConversationItemAdded, 'item'>
  | Built<ConversationItemDone, 'item'>
  | Built<OpenAIServerEvent.ConversationItemRetrieved, 'item'>
  | ConversationItemTruncatedEvent
  | ConversationItemDeletedEvent
  | ConversationItemInputAudioTranscriptionDeltaEvent
  | ConversationItemInputAudioTranscriptionCompletedEvent
  | Built<ConversationItemInputAudioTranscriptionFailedEvent, 'error'>
  | InputAudioBufferCommittedEvent
  | InputAudioBufferClearedEvent
  | InputAudioBufferSpeechStartedEvent
  | InputAudioBufferSpeechStoppedEvent
  | InputAudioBufferTimeoutTriggered
  | OpenAIServerEvent.OutputAudioBufferStarted
  | OpenAIServerEvent.OutputAudioBufferStopped
  | OpenAIServerEvent.OutputAudioBufferCleared
  | Built<ResponseCreatedEvent, 'response'>
  | Built<ResponseDoneEvent, 'response'>
  | Built<ResponseOutputItemAddedEvent, 'item'>
  | Built<ResponseOutputItemDoneEvent, 'item'>
  | Built<ResponseContentPartAddedEvent, 'part'>
  | Built<ResponseContentPartDoneEvent, 'part'>
  | ResponseTextDeltaEvent
  | ResponseTextDoneEvent
  | ResponseAudioDeltaEvent
  | StampedAudioDeltaEvent
  | ResponseAudioDoneEvent
  | ResponseAudioTranscriptDeltaEvent
  | ResponseAudioTranscriptDoneEvent
  | ResponseFunctionCallArgumentsDeltaEvent
  | ResponseFunctionCallArgumentsDoneEvent
  | McpListToolsInProgress
  | McpListToolsCompleted
  | McpListToolsFailed
  | ResponseMcpCallArgumentsDelta
  | ResponseMcpCallArgumentsDone
  | ResponseMcpCallInProgress
  | ResponseMcpCallCompleted
  | ResponseMcpCallFailed
  | ResponseOutputImageDeltaEvent
  | OutputMotionDeltaEvent
  | OutputMotionFaceEvent
  | OutputMotionFaceDeltaEvent
  | OutputMotionFaceDoneEvent
  | OutputMotionClockEvent
  | ResponseOutputImageDoneEvent
  | AvatarSegmentStartedEvent
  | AvatarSegmentCommittedEvent
  | AvatarSegmentStoppedEvent
  | AvatarBufferClearedEvent
  | AvatarAudioDeltaEvent
  | AvatarImageDeltaEvent;

/** Omit distributed over a union, so each member keeps its own discriminated shape. */
type OmitEach<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A server event before it is stamped: what the engine and gateways build and hand to `send`. */
export type ServerEventDraft = OmitEach<ServerEvent, 'event_id'>;

/** The names of the events this server sends (GA names; protocol.ts renames for the legacy dialect). */
export type ServerEventType = ServerEvent['type'];

/** The draft of one event type, for code that builds a particular event. */
export type DraftOf<T extends ServerEventType> = Extract<ServerEventDraft, { type: T }>;
