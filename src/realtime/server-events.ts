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
 * The face of one frame when the client draws it (the session's media option
 * `video_render: "client"`; the avatar's own event): sent every frame, idle or speaking, before
 * the audio of the same tick. `params` in the order of MOTION_PARAMS.
 */
export interface OutputMotionDeltaEvent {
  event_id: string;
  type: 'output_motion.delta';
  frame_index: number;
  /** The frame's time on the audio's clock (the pts of its output_audio.delta / RTP audio). */
  pts_ms: number;
  /**
   * pitch_deg, yaw_deg, roll_deg (head down, toward the image's left, clockwise positive), tx, ty
   * (face widths), scale (1 as photographed), mouth_open (0..1), mouth_wide (-1 rounded..1
   * spread), mouth_press (0..1), tongue (0 low..1 tip raised), eye_open_left, eye_open_right (0
   * shut..1 as photographed), brow (-1 knit..1 raised), cheek (0..1 raised); each in thousandths
   * (an integer: 1000 is 1.0).
   * @minItems 14
   * @maxItems 14
   */
  params: number[];
  /** The face is listening to the user. */
  listening: boolean;
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
