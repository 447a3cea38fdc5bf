/**
 * GPT-Live (`/v1/live/sessions`, OpenAI's full-duplex voice protocol of July 2026) over this
 * server's realtime engine: a translation at the edge, both ways, as the older dialect's renaming
 * is (protocol.ts). A Live client never asks for a response: the session's own turn-taking decides
 * when the avatar speaks and when it stops (semantic_vad with create_response and
 * interrupt_response: barge-in needs no client event), and the context is only appended to.
 *
 * Client → engine:
 *   session.start {session: {model, instructions?, audio?: {format?, output?: {voice?}}, input?}}
 *       first, once (anything else first: `session_not_started`); becomes a session.update with
 *       the turn detection above and input transcription, and `input` (developer, user and
 *       assistant text) becomes conversation items. Answered by session.started once applied.
 *   session.input_audio.append → input_audio_buffer.append (dropped while muted);
 *   session.input_audio.mute / .unmute → session.input_audio.muted / .unmuted;
 *   session.instructions.append, session.thinking.append → a system item (…appended, with
 *       start_ms = end_ms = now on the session timeline); session.commentary.append → an
 *       assistant item (what the avatar is taken to have said);
 *   session.close → session.closed {reason: close_requested, usage}, then the socket closes.
 *   Delegation (session.start's or session.update's `delegation`, response.create,
 *   response.item.create, a non-null delegation_id), decisions (`triggers`, decision.*) and audio
 *   fixtures name backends this server does not have: an `error` (delegation_not_supported,
 *   decisions_not_supported, …) naming the command, never silence.
 * Engine → client:
 *   response.output_audio.delta → session.output_audio.delta (in the session's format);
 *   response.output_audio_transcript.delta → session.output_transcript.delta;
 *   conversation.item.input_audio_transcription.delta/.completed → session.input_transcript.delta
 *       (a completion whose words no delta carried is sent as one delta), timed by the turn's
 *       audio (speech_started / speech_stopped on the input clock, which is the session's
 *       timeline for a client that streams its microphone);
 *   response.output_image.delta → session.output_image.delta (the avatar's frames, base64 JPEG,
 *       with frame_index and pts_ms: this server's own event; Live has none);
 *   error → error (with client_event_id); everything else stays inside.
 * Usage is time (GPT-Live bills per second): session.usage.updated {usage: {seconds}} after each
 * reply and every USAGE_INTERVAL_MS, and in session.closed. Answers to commands sent before the
 * session has started follow session.started.
 */
import { type Json, RealtimeError, type ServerEventDraft, isObject, newItemId, readClientEvent } from './protocol.js';

export const LIVE_CLIENT_EVENT_TYPES = [
  'session.start',
  'session.update',
  'session.close',
  'session.input_audio.append',
  'session.input_audio.mute',
  'session.input_audio.unmute',
  'session.instructions.append',
  'session.thinking.append',
  'session.commentary.append',
  'session.output_audio.fixture.play',
  'response.create',
  'response.item.create',
  'decision.create',
  'decision.item.create',
  'decision.item.delete',
] as const;
type LiveClientType = (typeof LIVE_CLIENT_EVENT_TYPES)[number];

/** How often usage is reported while the session runs (OpenAI: about every 15 s). */
export const USAGE_INTERVAL_MS = 15_000;

const START_FIELDS = new Set(['model', 'instructions', 'audio', 'input', 'client', 'delegation', 'triggers', 'store', 'safety_identifier']);

/**
 * A Live session's marker in a connection's initial config (the gateway sets it): over WebSocket
 * its config comes with the client's session.start; a WebRTC session's (POST /v1/live/sessions)
 * is `session`, started as soon as the call runs.
 */
export const LIVE_INITIAL: Json = { type: 'live' };

export function isLiveConfig(config: Json): boolean {
  return config.type === 'live';
}

/** The config a WebRTC Live session starts with (checked as session.start checks it); throws the RealtimeError session.start would send. */
export function liveCallConfig(session: unknown): Json {
  const probe = new LiveDialect({ id: 'probe', expiresAt: 0 });
  const { send } = probe.clientEvent(JSON.stringify({ type: 'session.start', session }));
  const refused = send.find((e) => e.type === 'error') as { error: { code: string; message: string; param: string | null } } | undefined;
  if (refused) throw new RealtimeError(refused.error.code, refused.error.message, refused.error.param);
  return { ...LIVE_INITIAL, session: session as Json };
}

/** A Live server event before its event_id is stamped. */
export type LiveEventDraft = Json & { type: string };

export interface LiveTranslation {
  /** Realtime client events for the engine, in order. */
  engine: Json[];
  /** Live events answered at once. */
  send: LiveEventDraft[];
  /** The client closed the session: send, then close the socket. */
  close: boolean;
}

export interface LiveSessionInfo {
  id: string;
  /** Unix seconds. */
  expiresAt: number;
}

export class LiveDialect {
  private started: 'no' | 'starting' | 'yes' = 'no';
  private startEventId: string | null = null;
  private muted = false;
  private model = '';
  private readonly startedAt = Date.now();
  /** Input audio ms of the turn being transcribed, by item (speech_started / speech_stopped). */
  private readonly turns = new Map<string, { startMs: number; endMs: number | null; spoke: boolean }>();
  private session: Json = {};
  /** Answers to commands sent while the session was starting: they follow session.started. */
  private readonly held: LiveEventDraft[] = [];

  constructor(private readonly info: LiveSessionInfo) {}

  /** Milliseconds on the session timeline. */
  private now(): number {
    return Date.now() - this.startedAt;
  }

  /** Seconds the session has lasted (its usage). */
  usage(): LiveEventDraft {
    return { type: 'session.usage.updated', usage: this.usageObject() };
  }

  /** The last event: session.closed (a client's close, or the session's end). */
  closed(reason: 'close_requested' | 'expired' | 'connection_lost', clientEventId: string | null = null): LiveEventDraft {
    return { type: 'session.closed', reason, session: this.resource(), usage: this.usageObject(), client_event_id: clientEventId };
  }

  get isStarted(): boolean {
    return this.started === 'yes';
  }

  /** One Live client message (JSON text). */
  clientEvent(text: string): LiveTranslation {
    const out: LiveTranslation = { engine: [], send: [], close: false };
    const read = readClientEvent<LiveClientType>(text, LIVE_CLIENT_EVENT_TYPES);
    if (read.error) {
      out.send.push(liveError(read.error, read.eventId));
      return out;
    }
    const { type, eventId, body } = read.event;
    try {
      if (type === 'session.start') return this.start(body, eventId, out);
      if (this.started === 'no') throw new RealtimeError('session_not_started', `Send session.start first and wait for session.started; got ${type}.`, null);
      switch (type) {
        case 'session.input_audio.append':
          if (typeof body.audio !== 'string') throw new RealtimeError('missing_required_parameter', "Missing required parameter: 'audio'.", 'audio');
          if (!this.muted) out.engine.push({ type: 'input_audio_buffer.append', audio: body.audio });
          break;
        case 'session.input_audio.mute':
        case 'session.input_audio.unmute':
          this.muted = type === 'session.input_audio.mute';
          out.send.push({ type: this.muted ? 'session.input_audio.muted' : 'session.input_audio.unmuted', client_event_id: eventId });
          break;
        case 'session.instructions.append':
        case 'session.thinking.append':
        case 'session.commentary.append':
          this.append(type, body, eventId, out);
          break;
        case 'session.close':
          out.send.push(this.closed('close_requested', eventId));
          out.close = true;
          break;
        case 'session.update':
          for (const key of Object.keys(body.session && isObject(body.session) ? body.session : {})) {
            if (key === 'delegation') throw noDelegation('session.delegation');
            if (key === 'triggers') throw noDecisions('session.triggers');
            throw new RealtimeError('unknown_parameter', `Unknown parameter: 'session.${key}'.`, `session.${key}`);
          }
          out.send.push({ type: 'session.updated', session: this.resource(), client_event_id: eventId });
          break;
        case 'response.create':
        case 'response.item.create':
          throw noDelegation(null);
        case 'session.output_audio.fixture.play':
          throw new RealtimeError('unsupported_event', 'Audio fixtures are not played by this server: the avatar speaks what its own model says.', null);
        default:
          throw noDecisions(null);
      }
    } catch (err) {
      out.send.push(liveError(err, eventId));
    }
    if (this.started === 'starting') this.held.push(...out.send.splice(0));
    return out;
  }

  /** One engine event: the Live events it becomes (none for most). */
  serverEvent(event: ServerEventDraft): LiveEventDraft[] {
    switch (event.type) {
      case 'session.updated': {
        if (this.started !== 'starting') return [];
        this.started = 'yes';
        const held = this.held.splice(0);
        return [{ type: 'session.started', session: this.resource(), client_event_id: this.startEventId }, ...held];
      }
      case 'response.done':
        return [this.usage()];
      case 'response.output_audio.delta':
        return [{ type: 'session.output_audio.delta', delta: event.delta }];
      case 'response.output_audio_transcript.delta': {
        const now = this.now();
        return [{ type: 'session.output_transcript.delta', delta: event.delta, start_ms: now, end_ms: now }];
      }
      case 'response.output_image.delta':
        return [{ type: 'session.output_image.delta', delta: event.delta, frame_index: event.frame_index, pts_ms: event.pts_ms }];
      case 'input_audio_buffer.speech_started':
        this.turns.set(event.item_id, { startMs: event.audio_start_ms, endMs: null, spoke: false });
        return [];
      case 'input_audio_buffer.speech_stopped': {
        const turn = this.turns.get(event.item_id);
        if (turn) turn.endMs = event.audio_end_ms;
        return [];
      }
      case 'conversation.item.input_audio_transcription.delta': {
        const turn = this.turns.get(event.item_id);
        if (turn) turn.spoke = true;
        return !event.delta ? [] : [this.inputDelta(event.item_id, event.delta)];
      }
      case 'conversation.item.input_audio_transcription.completed': {
        const turn = this.turns.get(event.item_id);
        this.turns.delete(event.item_id);
        return turn?.spoke || event.transcript === '' ? [] : [this.inputDelta(event.item_id, event.transcript, turn)];
      }
      case 'error':
        return [liveError(new RealtimeError(event.error.code ?? 'error', event.error.message, event.error.param ?? null), event.error.event_id ?? null, event.error.type)];
      default:
        return [];
    }
  }

  private inputDelta(itemId: string, delta: string, turn = this.turns.get(itemId)): LiveEventDraft {
    const startMs = turn?.startMs ?? this.now();
    return { type: 'session.input_transcript.delta', delta, start_ms: startMs, end_ms: turn?.endMs ?? Math.max(startMs, this.now()) };
  }

  private start(body: Json, eventId: string | null, out: LiveTranslation): LiveTranslation {
    try {
      if (this.started !== 'no') throw new RealtimeError('session_already_started', 'session.start may be sent once (a WebRTC session is started by its POST /v1/live/sessions).', null);
      const s = body.session;
      if (!isObject(s)) throw new RealtimeError('missing_required_parameter', "Missing required parameter: 'session'.", 'session');
      for (const key of Object.keys(s)) if (!START_FIELDS.has(key)) throw new RealtimeError('unknown_parameter', `Unknown parameter: 'session.${key}'.`, `session.${key}`);
      if (typeof s.model !== 'string' || s.model === '') throw new RealtimeError('missing_required_parameter', "Missing required parameter: 'session.model'.", 'session.model');
      if (s.delegation !== undefined && s.delegation !== null) throw noDelegation('session.delegation');
      if (Array.isArray(s.triggers) && s.triggers.length > 0) throw noDecisions('session.triggers');
      if (s.instructions !== undefined && typeof s.instructions !== 'string') throw new RealtimeError('invalid_type', "Invalid type for 'session.instructions': expected a string.", 'session.instructions');
      const audio = isObject(s.audio) ? s.audio : {};
      const format = liveFormat(audio.format);
      const output = isObject(audio.output) ? audio.output : {};
      this.model = s.model;
      this.session = { model: s.model, ...(typeof s.instructions === 'string' ? { instructions: s.instructions } : {}), audio: { format: format.live, output: { voice: output.voice ?? 'marin' } } };
      out.engine.push({
        type: 'session.update',
        session: {
          type: 'realtime',
          model: s.model,
          ...(typeof s.instructions === 'string' ? { instructions: s.instructions } : {}),
          output_modalities: ['audio', 'image'],
          audio: {
            input: { format: format.engine, transcription: { model: 'whisper-1' }, turn_detection: { type: 'semantic_vad', create_response: true, interrupt_response: true } },
            output: { format: format.engine, ...(output.voice !== undefined ? { voice: output.voice } : {}) },
          },
        },
      });
      for (const [i, item] of (Array.isArray(s.input) ? s.input : []).entries()) out.engine.push({ type: 'conversation.item.create', item: initialItem(item, `session.input[${i}]`) });
      this.started = 'starting';
      this.startEventId = eventId;
    } catch (err) {
      out.send.push(liveError(err, eventId));
    }
    return out;
  }

  private append(type: 'session.instructions.append' | 'session.thinking.append' | 'session.commentary.append', body: Json, eventId: string | null, out: LiveTranslation): void {
    if (typeof body.content !== 'string') throw new RealtimeError('missing_required_parameter', "Missing required parameter: 'content'.", 'content');
    if (body.delegation_id !== undefined && body.delegation_id !== null) throw noDelegation('delegation_id');
    const commentary = type === 'session.commentary.append';
    const text = type === 'session.thinking.append' ? `(Your own thinking, not said aloud:) ${body.content}` : body.content;
    out.engine.push({
      type: 'conversation.item.create',
      item: { id: newItemId(), type: 'message', role: commentary ? 'assistant' : 'system', content: [{ type: commentary ? 'output_text' : 'input_text', text }] },
    });
    const now = this.now();
    out.send.push({ type: type.replace(/append$/, 'appended'), start_ms: now, end_ms: now, client_event_id: eventId });
  }

  private resource(): Json {
    return { id: this.info.id, expires_at: this.info.expiresAt, model: this.model || this.session.model, status: 'active', ...this.session };
  }

  private usageObject(): Json {
    return { seconds: Math.round(this.now() / 100) / 10 };
  }
}

/** A Live `error` event: the error with the client's event id, on the error and beside it. */
function liveError(err: unknown, clientEventId: string | null, type?: string): LiveEventDraft {
  const e = err instanceof RealtimeError ? err : new RealtimeError('server_error', 'The server had an error while processing your event.', null, 'server_error');
  return {
    type: 'error',
    error: { type: type ?? e.type, code: e.code, message: e.message, param: e.param, client_event_id: clientEventId },
    client_event_id: clientEventId,
  };
}

function noDelegation(param: string | null): RealtimeError {
  return new RealtimeError(
    'delegation_not_supported',
    "This server has no backend model to delegate to: the session's own model answers, and tasks for a backend (response.create, response.item.create, delegation) cannot be run.",
    param,
  );
}

function noDecisions(param: string | null): RealtimeError {
  return new RealtimeError('decisions_not_supported', 'Decisions (triggers and decision.* commands) are not available on this server.', param);
}

/** A Live audio format as the engine's: 24 kHz PCM16, or G.711 (16 kHz PCM is refused: the engine runs at 24 kHz). */
function liveFormat(format: unknown): { live: Json; engine: Json } {
  if (format === undefined || format === null) return { live: { type: 'audio/pcm', rate: 24000 }, engine: { type: 'audio/pcm', rate: 24000 } };
  if (!isObject(format)) throw new RealtimeError('invalid_type', "Invalid type for 'session.audio.format': expected an object.", 'session.audio.format');
  if (format.type === 'audio/pcm' && (format.rate === undefined || format.rate === 24000)) return { live: { type: 'audio/pcm', rate: 24000 }, engine: { type: 'audio/pcm', rate: 24000 } };
  if ((format.type === 'audio/pcmu' || format.type === 'audio/pcma') && (format.rate === undefined || format.rate === 8000)) {
    return { live: { type: format.type, rate: 8000 }, engine: { type: format.type } };
  }
  throw new RealtimeError('unsupported_audio_format', "This server's Live sessions take audio/pcm at 24000 Hz, or audio/pcmu and audio/pcma at 8000 Hz.", 'session.audio.format');
}

/** An initial history item (developer, user or assistant text) as a conversation item. */
function initialItem(raw: unknown, param: string): Json {
  if (!isObject(raw) || !Array.isArray(raw.content)) throw new RealtimeError('invalid_value', `'${param}' must be a message with text content.`, param);
  const role = raw.role === 'developer' ? 'system' : raw.role;
  if (role !== 'system' && role !== 'user' && role !== 'assistant') throw new RealtimeError('invalid_value', `'${param}.role' must be developer, user or assistant.`, `${param}.role`);
  const text = raw.content.map((c) => (isObject(c) && typeof c.text === 'string' ? c.text : '')).join(' ');
  return { type: 'message', role, content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }] };
}
