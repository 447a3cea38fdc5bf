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
 *
 * Observers (sidebands, `/v1/live/sessions/{id}/attach`: a trusted backend beside the primary
 * transport) hear every event the primary does, and besides, as OpenAI reflects them:
 *   the primary's input audio as session.input_audio.append {audio} (PCM16 24 kHz, no event_id,
 *       taken before muting: a muted session still reflects it);
 *   the avatar's output audio as session.output_audio.delta with start_ms / end_ms on the
 *       session timeline (PCM16 24 kHz), whatever the primary transport (over WebRTC the primary
 *       hears it on its track, not as events).
 *   Their commands are the primary's but for session.start, session.input_audio.append (audio
 *   comes from the primary transport) and transport.dtmf.send (SIP only): an error each.
 * Muting sends silence to the model in place of the primary's audio (its clock runs on).
 */
import { linearToAlaw, linearToUlaw } from '../audio/g711.js';
import { InputAudioDecoder, type WireAudioFormat, wireFormat } from '../audio/wire-format.js';
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
  'transport.dtmf.send',
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
  const probe = new LiveDialect({ id: 'probe', expiresAt: 0, transport: 'webrtc' });
  const { send } = probe.clientEvent(JSON.stringify({ type: 'session.start', session }));
  const refused = send.find((e) => e.event.type === 'error')?.event as { error: { code: string; message: string; param: string | null } } | undefined;
  if (refused) throw new RealtimeError(refused.error.code, refused.error.message, refused.error.param);
  return { ...LIVE_INITIAL, session: session as Json };
}

/** A Live server event before its event_id is stamped. */
export type LiveEventDraft = Json & { type: string };

/** Who hears a Live event: the primary transport and the observers, or one side. */
export type LiveAudience = 'all' | 'primary' | 'observers';

/** A Live event and who hears it; `bare` events carry no event_id (reflected input audio). */
export interface LiveOut {
  event: LiveEventDraft;
  to: LiveAudience;
  bare?: true;
}

/** Where a command came from: the primary transport, or an observer (a sideband). */
export type LiveSource = 'primary' | 'observer';

export interface LiveTranslation {
  /** Realtime client events for the engine, in order. */
  engine: Json[];
  /** Live events answered at once (an observer's errors are for it alone: the caller routes them). */
  send: LiveOut[];
  /** The client closed the session: send, then close the socket. */
  close: boolean;
}

export interface LiveSessionInfo {
  id: string;
  /** Unix seconds. */
  expiresAt: number;
  /** The primary transport: over WebRTC the output audio is on the media track, not in events. */
  transport: 'websocket' | 'webrtc';
}

/** Reflected microphone audio of a WebRTC primary goes to observers in chunks of this much. */
export const REFLECT_CHUNK_SAMPLES = 2400; // 100 ms at 24 kHz

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
  private readonly held: LiveOut[] = [];
  /** The session's audio format (set by session.start): what the primary's appends and output deltas are in. */
  private format: WireAudioFormat = wireFormat('audio/pcm');
  /** The primary's appends and the output deltas as PCM16 24 kHz for observers (G.711 sessions only). */
  private inputReflector: InputAudioDecoder | null = null;
  private outputReflector: InputAudioDecoder | null = null;
  /** A WebRTC primary's microphone, gathered to REFLECT_CHUNK_SAMPLES for observers. */
  private microphone: Int16Array[] = [];
  private microphoneSamples = 0;
  /** End of the last reflected output audio, ms on the session timeline: reflected ranges never overlap. */
  private outputEndMs = 0;

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

  /** One Live client message (JSON text), of the primary transport or of an observer. */
  clientEvent(text: string, from: LiveSource = 'primary'): LiveTranslation {
    const out: LiveTranslation = { engine: [], send: [], close: false };
    const read = readClientEvent<LiveClientType>(text, LIVE_CLIENT_EVENT_TYPES);
    if (read.error) {
      out.send.push(toAll(liveError(read.error, read.eventId)));
      return out;
    }
    const { type, eventId, body } = read.event;
    try {
      if (from === 'observer') refuseFromObserver(type);
      if (type === 'session.start') return this.start(body, eventId, out);
      if (this.started === 'no') throw new RealtimeError('session_not_started', `Send session.start first and wait for session.started; got ${type}.`, null);
      switch (type) {
        case 'session.input_audio.append':
          if (typeof body.audio !== 'string') throw new RealtimeError('missing_required_parameter', "Missing required parameter: 'audio'.", 'audio');
          this.appendAudio(body.audio, out);
          break;
        case 'session.input_audio.mute':
        case 'session.input_audio.unmute':
          this.muted = type === 'session.input_audio.mute';
          out.send.push(toAll({ type: this.muted ? 'session.input_audio.muted' : 'session.input_audio.unmuted', client_event_id: eventId }));
          break;
        case 'session.instructions.append':
        case 'session.thinking.append':
        case 'session.commentary.append':
          this.append(type, body, eventId, out);
          break;
        case 'session.close':
          out.send.push(toAll(this.closed('close_requested', eventId)));
          out.close = true;
          break;
        case 'session.update':
          for (const key of Object.keys(body.session && isObject(body.session) ? body.session : {})) {
            if (key === 'delegation') throw noDelegation('session.delegation');
            if (key === 'triggers') throw noDecisions('session.triggers');
            throw new RealtimeError('unknown_parameter', `Unknown parameter: 'session.${key}'.`, `session.${key}`);
          }
          out.send.push(toAll({ type: 'session.updated', session: this.resource(), client_event_id: eventId }));
          break;
        case 'response.create':
        case 'response.item.create':
          throw noDelegation(null);
        case 'session.output_audio.fixture.play':
          throw new RealtimeError('unsupported_event', 'Audio fixtures are not played by this server: the avatar speaks what its own model says.', null);
        case 'transport.dtmf.send':
          throw new RealtimeError('unsupported_event', 'transport.dtmf.send is for SIP calls; this server takes WebSocket and WebRTC sessions only.', null);
        default:
          throw noDecisions(null);
      }
    } catch (err) {
      out.send.push(toAll(liveError(err, eventId)));
    }
    // An observer's answers are routed by the caller at once (its errors are for it alone).
    if (this.started === 'starting' && from === 'primary') this.held.push(...out.send.splice(0));
    return out;
  }

  /**
   * The primary's audio (base64, in the session's format): to the engine (silence of the same
   * length while muted), and to the observers as PCM16 24 kHz.
   */
  private appendAudio(audio: string, out: LiveTranslation): void {
    out.engine.push({ type: 'input_audio_buffer.append', audio: this.muted ? silenceLike(audio, this.format) : audio });
    out.send.push(reflectedInput(this.inputReflector ? pcmBase64(this.inputReflector.decode(Buffer.from(audio, 'base64'))) : audio));
  }

  /**
   * A WebRTC primary's microphone (PCM16 24 kHz) as the model should hear it (silence while
   * muted), and the reflected audio due to observers (when `observed`): none until
   * REFLECT_CHUNK_SAMPLES gathered.
   */
  microphoneAudio(pcm: Int16Array, observed: boolean): { engine: Int16Array; reflect: LiveOut | null } {
    const engine = this.muted ? new Int16Array(pcm.length) : pcm;
    if (!observed) {
      this.microphone = [];
      this.microphoneSamples = 0;
      return { engine, reflect: null };
    }
    this.microphone.push(pcm.slice());
    this.microphoneSamples += pcm.length;
    if (this.microphoneSamples < REFLECT_CHUNK_SAMPLES) return { engine, reflect: null };
    const chunk = new Int16Array(this.microphoneSamples);
    let at = 0;
    for (const part of this.microphone.splice(0)) (chunk.set(part, at), (at += part.length));
    this.microphoneSamples = 0;
    return { engine, reflect: reflectedInput(pcmBase64(chunk)) };
  }

  /** The first event an observer hears: that it is attached, and to what. */
  attached(): LiveEventDraft {
    return { type: 'info', code: 'sideband_attached', message: `Attached to Live session ${this.info.id}: every event of the session, the input and output audio reflected (PCM16 24 kHz).`, client_event_id: null };
  }

  /** One engine event: the Live events it becomes (none for most), and who hears each. */
  serverEvent(event: ServerEventDraft): LiveOut[] {
    switch (event.type) {
      case 'session.updated': {
        if (this.started !== 'starting') return [];
        this.started = 'yes';
        const held = this.held.splice(0);
        return [toAll({ type: 'session.started', session: this.resource(), client_event_id: this.startEventId }), ...held];
      }
      case 'response.done':
        return [toAll(this.usage())];
      case 'response.output_audio.delta':
        return this.outputAudio(event.delta);
      case 'response.output_audio_transcript.delta': {
        const now = this.now();
        return [toAll({ type: 'session.output_transcript.delta', delta: event.delta, start_ms: now, end_ms: now })];
      }
      case 'response.output_image.delta':
        return [toAll({ type: 'session.output_image.delta', delta: event.delta, frame_index: event.frame_index, pts_ms: event.pts_ms })];
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
        return !event.delta ? [] : [toAll(this.inputDelta(event.item_id, event.delta))];
      }
      case 'conversation.item.input_audio_transcription.completed': {
        const turn = this.turns.get(event.item_id);
        this.turns.delete(event.item_id);
        return turn?.spoke || event.transcript === '' ? [] : [toAll(this.inputDelta(event.item_id, event.transcript, turn))];
      }
      case 'error':
        return [toAll(liveError(new RealtimeError(event.error.code ?? 'error', event.error.message, event.error.param ?? null), event.error.event_id ?? null, event.error.type))];
      default:
        return [];
    }
  }

  /**
   * A chunk of the avatar's output audio (base64, in the session's format): the primary hears it
   * as it is over WebSocket (over WebRTC it is on the media track), observers as PCM16 24 kHz with
   * its range on the session timeline (played as it is emitted: it ends now).
   */
  private outputAudio(delta: string): LiveOut[] {
    const out: LiveOut[] = this.info.transport === 'websocket' ? [{ event: { type: 'session.output_audio.delta', delta }, to: 'primary' }] : [];
    const pcm = this.outputReflector ? this.outputReflector.decode(Buffer.from(delta, 'base64')) : null;
    const samples = pcm ? pcm.length : Math.floor(Buffer.byteLength(delta, 'base64') / 2);
    const durationMs = Math.round((samples * 1000) / 24_000);
    const startMs = Math.max(this.outputEndMs, this.now() - durationMs);
    this.outputEndMs = startMs + durationMs;
    const audio = pcm ? pcmBase64(pcm) : delta;
    out.push({ event: { type: 'session.output_audio.delta', delta: audio, start_ms: startMs, end_ms: this.outputEndMs }, to: 'observers' });
    return out;
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
      this.format = wireFormat(format.live.type as 'audio/pcm' | 'audio/pcmu' | 'audio/pcma');
      const g711 = this.format.type !== 'audio/pcm';
      this.inputReflector = g711 ? new InputAudioDecoder(this.format) : null;
      this.outputReflector = g711 ? new InputAudioDecoder(this.format) : null;
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
      out.send.push(toAll(liveError(err, eventId)));
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
    out.send.push(toAll({ type: type.replace(/append$/, 'appended'), start_ms: now, end_ms: now, client_event_id: eventId }));
  }

  private resource(): Json {
    return { id: this.info.id, expires_at: this.info.expiresAt, model: this.model || this.session.model, status: 'active', ...this.session };
  }

  private usageObject(): Json {
    return { seconds: Math.round(this.now() / 100) / 10 };
  }
}

function toAll(event: LiveEventDraft): LiveOut {
  return { event, to: 'all' };
}

/** Reflected input audio for observers (PCM16 24 kHz, base64); no event_id. */
function reflectedInput(audio: string): LiveOut {
  return { event: { type: 'session.input_audio.append', audio }, to: 'observers', bare: true };
}

function pcmBase64(pcm: Int16Array): string {
  return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');
}

/** Silence as long as `audio` (base64) in `format`: zeros for PCM, the G.711 code of 0. */
function silenceLike(audio: string, format: WireAudioFormat): string {
  const bytes = Buffer.from(audio, 'base64').length;
  return Buffer.alloc(bytes, format.type === 'audio/pcmu' ? linearToUlaw(0) : format.type === 'audio/pcma' ? linearToAlaw(0) : 0).toString('base64');
}

/** Commands an observer (a sideband) may not send: an error each, naming why. */
function refuseFromObserver(type: LiveClientType): void {
  if (type === 'session.start') throw new RealtimeError('session_already_started', 'A sideband attaches to a session that has started; session.start is for the primary WebSocket.', null);
  if (type === 'session.input_audio.append') throw new RealtimeError('unsupported_event', "A sideband cannot append audio: the session's audio comes from its primary transport (reflected here as session.input_audio.append).", null);
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
