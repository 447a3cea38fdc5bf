/**
 * WebRTC calls (spec 4.5): `POST /v1/realtime/calls` takes a client's SDP offer and answers it;
 * the call's session then runs on the connection core (realtime-connection.ts) with audio and
 * video as RTP and events on the data channel. `POST /v1/realtime/calls/{call_id}/hangup` ends it.
 *
 * The offer comes as the client sends it: multipart (`sdp` and an optional `session` JSON string,
 * parts with or without content types: OpenAI's unified form and rtAV's clients), a raw
 * `application/sdp` body (the session config then comes from the ephemeral key, or defaults), or
 * JSON `{sdp, session}`. API keys and ephemeral keys are accepted. The answer is 201 with
 * `Content-Type: application/sdp` (OpenAI's SDKs check for 201 and read the body; rtAV's clients
 * take any 2xx and any type), `Location: /v1/realtime/calls/{call_id}` and `X-Session-Id`.
 *
 * Order, so that a refused call leaves nothing behind: the body is read within
 * OFFER_BODY_DEADLINE_MS (408 past it) and bounded (413, an offer over MAX_OFFER_BYTES too), the
 * body and the session config are checked (400), the offer is parsed and its codecs chosen (400,
 * transport/sdp.ts, which also bounds its sections and candidates), the session is created pending
 * with its worker slot reserved (503 when none is free), and only then is the peer built; if that
 * fails, the session is cancelled.
 *
 * A call's life:
 *   offer answered      session pending (slot held); cancelled if the peer never connects
 *                       (SessionService's start timeout) or goes away first
 *   peer connected      session active; the avatar starts (H.264 or VP8 + Opus as negotiated,
 *                       JPEG image events instead of video for a data-channel-only call that asks
 *                       for images); the engine sends session.created once the channel is open
 *   during              microphone RTP -> Opus decoder -> engine VAD; avatar media -> RTP;
 *                       data channel text <-> engine events (no output_audio.delta: audio is RTP)
 *   peer closed/failed, hangup, session ended (DELETE, max duration), key revoked, shutdown
 *                       -> the connection closes: engine, avatar, then the session ends with usage
 *
 * Sidebands (`/v1/realtime?call_id=`, OpenAI's server-side controls: how a backend runs the tools
 * of a browser's call): a WebSocket of the call's owner attaches to the call's connection as a
 * listener (realtime-connection.ts), from the answer on, at most MAX_SIDEBANDS_PER_CALL at once.
 * Refusals: a call unknown or of another user → call_id_not_found (404); a call that has ended →
 * call_ended (409); one sideband too many → too_many_sideband_connections (409). Fleet mode: a
 * call of another worker is found through its route in Redis (sidebandRoute), and the socket is
 * relayed there.
 */
import { Type } from '@sinclair/typebox';
import { compileRequest } from '../core/schema.js';
import { randomBase62 } from '../core/ids.js';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { apiKeyIdOf, type Principal } from '../auth/keys.js';
import { MicrophoneDecoder } from '../media/opus-decoder.js';
import { type Json, RealtimeError, binaryMessageRefused, isObject } from '../realtime/protocol.js';
import { liveCallConfig } from '../realtime/live-dialect.js';
import { isTranscriptionConfig } from '../realtime/transcription-session.js';
import { MEDIA_FIELDS, type MediaOptions, parseSessionMedia, resolveMedia, splitMediaFields } from '../core/media-options.js';
import type { SessionRecord } from '../store/store.js';
import { CallPeer, OPUS_CLOCK_HZ, releaseClosedPeers } from '../transport/call-peer.js';
import { negotiate, parseOffer, MAX_OFFER_BYTES, type Negotiated } from '../transport/sdp.js';
import type { ConnectionRegistry } from './connection-registry.js';
import { runHereOrRelay } from './placement.js';
import { type ConnectionDeps, type Listener, type ListenerSink, type RealtimeConnection, sessionConfigFrom } from './realtime-connection.js';
import { type FleetRouting, type ForwardedCall, type RemoteWorker, INTERNAL_CALLS_PATH, postToWorker } from './worker-relay.js';

/**
 * An offer's body must have arrived within this long (408 `request_timeout` past it): offers are a
 * few kB, and a client that trickles one (slowloris) must not hold its connection for minutes.
 */
export const OFFER_BODY_DEADLINE_MS = 10_000;
/** Server events held while the data channel opens (session.created and what follows it). */
const MAX_QUEUED_EVENTS = 256;
/**
 * Image deltas are skipped while this much is queued on the data channel (a client reading slower
 * than 25 frames a second): frames are dropped, never the conversation's events.
 */
const MAX_CHANNEL_BACKLOG_BYTES = 1024 * 1024;
/**
 * Sideband WebSockets one call takes at once: a backend's control socket, one more while it
 * reconnects, a monitor; each gets every event (image deltas included), so not a fan-out service.
 */
export const MAX_SIDEBANDS_PER_CALL = 4;
/**
 * Ended calls of this process remembered (id → user), so a late sideband hears call_ended rather
 * than call_id_not_found; the oldest are forgotten first (fleet mode asks the call's route instead).
 */
const REMEMBERED_ENDED_CALLS = 1024;

export interface CallRequest {
  sdp: string;
  /** The `session` config sent with the offer, if any. */
  session: Json | null;
}

export interface CallAnswer {
  callId: string;
  sessionId: string;
  sdp: string;
}

export interface CallGatewayDeps {
  connection: ConnectionDeps;
  registry: ConnectionRegistry;
  rtc: { bindAddress: string | undefined; portRange: { min: number; max: number } | undefined };
  /** Fleet mode: where sessions run when not here; null in the embedded default. */
  routing: FleetRouting | null;
  log: Logger;
}

/** Who made a call (or opens its sideband): the user and the API key behind their key. */
export interface Caller {
  userId: string;
  apiKeyId: string | null;
}

interface Call {
  id: string;
  userId: string;
  peer: CallPeer;
  connection: RealtimeConnection;
}

export class CallGateway {
  private readonly calls = new Map<string, Call>();
  /** Calls of this process that have ended, id → user (REMEMBERED_ENDED_CALLS at most). */
  private readonly endedCalls = new Map<string, string>();
  private readonly log: Logger;

  constructor(private readonly deps: CallGatewayDeps) {
    this.log = deps.log.child({ module: 'realtime-calls' });
  }

  get size(): number {
    return this.calls.size;
  }

  /** Answers an offer: the session is created pending and runs when the peer connects. */
  async create(principal: Principal, request: CallRequest): Promise<CallAnswer> {
    const { sessions, defaultModel } = this.deps.connection;
    // 1. The config: the ephemeral key's session under the one sent with the offer. Media fields
    // (the key's, then the offer's) are the session record's settings, not realtime session fields.
    const sent = request.session ?? {};
    const minted = splitMediaFields(principal.kind === 'ephemeral' ? principal.session : {});
    const offered = splitMediaFields(sent);
    const media = parseSessionMedia({ ...minted.media, ...offered.media });
    const { videoCodec } = resolveMedia(media);
    const realtime: Json = offered.rest;
    const base: Json = minted.rest;
    if (base.type !== undefined && realtime.type !== undefined && base.type !== realtime.type) {
      throw new AppError('invalid_value', `This ephemeral key was minted for a '${String(base.type)}' session; the call cannot open a '${String(realtime.type)}' one.`, { status: 400, param: 'session.type' });
    }
    const initial: Json = { ...base, ...realtime, audio: mergeAudio(base.audio, realtime.audio) };
    if (initial.audio === undefined) delete initial.audio;
    const config = asBadRequest(() => sessionConfigFrom(initial, defaultModel, 'webrtc'));
    // 2. The offer.
    const negotiated = negotiateFor(request.sdp, videoCodec, initial, media);
    // 3. The session, pending, its slot reserved.
    const session = await sessions.create(principal.userId, { ...config, media, video: negotiated.video !== null }, 'call', {
      start: false,
      params: { face: 'session.face', voice: 'session.voice', driving: 'session.driving' },
      apiKeyId: apiKeyIdOf(principal),
      preferredId: principal.kind === 'ephemeral' && typeof principal.session.id === 'string' ? principal.session.id : null,
    });
    // 4. The peer, and the connection that will run the session.
    const caller: Caller = { userId: principal.userId, apiKeyId: apiKeyIdOf(principal) };
    const routing = this.deps.routing;
    let answer: CallAnswer;
    let remote: RemoteWorker | null;
    try {
      remote = await runHereOrRelay(routing, session.id, this.log);
    } catch (err) {
      await sessions.end(session.id, 'cancelled', 'offer_failed').catch(() => undefined);
      throw err;
    }
    if (remote) {
      // Placed on another worker: it builds the peer, so media flows between client and worker.
      const forwarded: ForwardedCall = { sessionId: session.id, caller, sdp: request.sdp, initial, videoCodec };
      // (the worker reads the session's media options from its record)
      try {
        answer = await postToWorker<CallAnswer>(remote, routing!.token, INTERNAL_CALLS_PATH, forwarded);
      } catch (err) {
        await sessions.end(session.id, 'cancelled', 'offer_failed').catch(() => undefined);
        throw err;
      }
    } else {
      answer = await this.answerFor(session, caller, request.sdp, initial, negotiated, videoCodec);
    }
    await routing?.rememberCall(answer.callId, session.id);
    return answer;
  }

  /** Fleet mode, on the worker: an offer forwarded by the API node that placed its session here. */
  async answerForwarded(call: ForwardedCall): Promise<CallAnswer> {
    const session = await this.deps.connection.store.getSession(call.sessionId);
    if (!session || session.status !== 'pending') {
      throw new AppError('invalid_session_state', `Session ${call.sessionId} is ${session?.status ?? 'unknown'}, not pending.`, { status: 409 });
    }
    const negotiated = negotiateFor(call.sdp, call.videoCodec, call.initial, session.media);
    return this.answerFor(session, call.caller, call.sdp, call.initial, negotiated, call.videoCodec);
  }

  /** Builds the peer for a pending session of this process and answers the offer; the session is cancelled if that fails. */
  private async answerFor(session: SessionRecord, caller: Caller, sdp: string, initial: Json, negotiated: Negotiated, videoCodec: 'h264' | 'vp8'): Promise<CallAnswer> {
    let peer: CallPeer;
    let answer: string;
    try {
      ({ peer, answer } = await CallPeer.answer(sdp, {
        videoCodec,
        sendMedia: !isTranscriptionConfig(initial),
        sendVideo: negotiated.video !== null,
        bindAddress: this.deps.rtc.bindAddress,
        portRange: this.deps.rtc.portRange,
        log: this.log.child({ sessionId: session.id }),
      }));
    } catch (err) {
      await this.deps.connection.sessions.end(session.id, 'cancelled', 'offer_failed').catch(() => undefined);
      throw err;
    }
    const call = this.track(caller, session, peer, initial, negotiated);
    return { callId: call.id, sessionId: session.id, sdp: answer };
  }

  /** Ends a call for its owner (POST /v1/realtime/calls/{id}/hangup). */
  async hangup(userId: string, callId: string): Promise<{ sessionId: string }> {
    const call = this.calls.get(callId);
    const notFound = () => new AppError('call_not_found', `No call found with id '${callId}'.`, { status: 404, param: 'call_id' });
    const routing = this.deps.routing;
    if (!call && routing) {
      // Fleet mode: the call may run on another worker; the hangup goes there.
      const sessionId = await routing.callSession(callId);
      if (!sessionId) throw notFound();
      const session = await this.deps.connection.store.getSession(sessionId);
      if (!session || session.userId !== userId) throw notFound();
      const remote = await runHereOrRelay(routing, sessionId, this.log);
      if (remote) await postToWorker(remote, routing.token, `${INTERNAL_CALLS_PATH}/${encodeURIComponent(callId)}/hangup`, { userId });
      else await this.deps.connection.sessions.end(sessionId, null, 'client_disconnected');
      return { sessionId };
    }
    if (!call || call.userId !== userId) throw notFound();
    const sessionId = call.connection.sessionId ?? '';
    call.peer.close();
    await call.connection.close();
    return { sessionId };
  }

  /**
   * Attaches a sideband of `caller` to a call of this process: it gets the call's events and sends
   * client events into it (see the header for the refusals, thrown as AppErrors). Null when the
   * call is not here and may run on another worker (fleet mode: sidebandRoute()).
   */
  attachSideband(caller: Caller, callId: string, sink: ListenerSink): Listener | null {
    const call = this.calls.get(callId);
    if (!call) {
      if (this.endedCalls.get(callId) === caller.userId) throw callEnded(callId);
      if (this.deps.routing) return null;
      throw callNotFound(callId);
    }
    if (call.userId !== caller.userId) throw callNotFound(callId);
    if (!call.connection.live) throw callEnded(callId);
    if (call.connection.listenerCount >= MAX_SIDEBANDS_PER_CALL) {
      throw new AppError('too_many_sideband_connections', `Call ${callId} already has ${MAX_SIDEBANDS_PER_CALL} sideband connections; close one before opening another.`, { status: 409, param: 'call_id' });
    }
    return call.connection.attach(sink);
  }

  /**
   * Fleet mode: where a call of another node runs, for its sideband (found through the call's
   * route; its session checked for owner and state). Throws as attachSideband.
   */
  async sidebandRoute(userId: string, callId: string): Promise<{ sessionId: string; worker: RemoteWorker }> {
    const routing = this.deps.routing;
    const sessionId = routing ? await routing.callSession(callId) : null;
    if (!routing || !sessionId) throw callNotFound(callId);
    const session = await this.deps.connection.store.getSession(sessionId);
    if (!session || session.userId !== userId) throw callNotFound(callId);
    if (session.status !== 'pending' && session.status !== 'active') throw callEnded(callId);
    const worker = await runHereOrRelay(routing, sessionId, this.log);
    // Its lease is on this node, yet the call is not here: it is ending.
    if (!worker) throw callEnded(callId);
    return { sessionId, worker };
  }

  /**
   * Ends every call (shutdown; the registry has ended their connections already), then frees
   * node-datachannel's hold on closed peers if no peer of this process is open.
   */
  async close(): Promise<void> {
    const calls = [...this.calls.values()];
    for (const call of calls) call.peer.close();
    await Promise.allSettled(calls.map((c) => c.connection.close()));
    releaseClosedPeers();
  }

  private track(caller: Caller, session: SessionRecord, peer: CallPeer, initial: Json, negotiated: Negotiated): Call {
    const id = `rtc_${randomBase62(24)}`;
    const log = this.log.child({ callId: id, sessionId: session.id });
    const queued: string[] = [];
    let droppedImages = 0;
    const connection = this.deps.registry.track(
      this.deps.connection,
      {
        kind: 'webrtc',
        sendText: (text) => {
          if (!peer.channelOpen) {
            if (queued.length < MAX_QUEUED_EVENTS) queued.push(text);
            return;
          }
          if (isImageDelta(text) && (peer.channelBuffered > MAX_CHANNEL_BACKLOG_BYTES || Buffer.byteLength(text) > peer.maxMessageSize)) {
            if (droppedImages++ === 0) log.warn('image events dropped: the data channel is backed up, or a frame is over its message size', { maxMessageSize: peer.maxMessageSize });
            return;
          }
          peer.sendText(text);
        },
        end: (_reason, errorText) => {
          if (errorText) peer.sendText(errorText);
          peer.close();
        },
      },
      caller,
      'ga',
    );
    connection.hold(session, true);
    const call: Call = { id, userId: caller.userId, peer, connection };
    this.calls.set(id, call);

    peer.on('channel_open', (label) => {
      log.info('data channel open', { label });
      for (const text of queued.splice(0)) peer.sendText(text);
    });
    // Held by the connection until its engine runs.
    peer.on('channel_message', (text) => connection.receive(text));
    peer.on('channel_binary', () => {
      connection.send(binaryMessageRefused());
    });
    const mic = negotiated.audio ? new MicrophoneDecoder((pcm) => connection.pushMicrophone(pcm), log) : null;
    peer.on('audio_rtp', (packet) => mic?.push(packet));
    peer.once('connected', () => void this.start(call, session, initial, negotiated, log));
    peer.once('closed', (reason) => {
      log.info('call ended', { reason, peer: peer.stats(), microphone: mic?.stats, droppedImages });
      this.calls.delete(id);
      this.endedCalls.set(id, caller.userId);
      if (this.endedCalls.size > REMEMBERED_ENDED_CALLS) this.endedCalls.delete(this.endedCalls.keys().next().value!);
      void connection.close();
    });
    return call;
  }

  /** The peer connected: the session starts and runs, its media wired to the peer. */
  private async start(call: Call, pending: SessionRecord, initial: Json, negotiated: Negotiated, log: Logger): Promise<void> {
    const { connection, peer } = call;
    let session: SessionRecord;
    try {
      session = await this.deps.connection.sessions.start(pending.id);
    } catch (err) {
      log.warn('the call connected after its session ended', { err });
      peer.close();
      return;
    }
    const video = negotiated.video?.codec ?? null;
    const running = await connection.run(session, {
      initial,
      ownsSession: true,
      legacyVideo: false,
      rtp: { video, audio: negotiated.audio !== null },
      jpeg: video === null && negotiated.dataChannel !== null,
      imageEvents: video === null,
    });
    if (!running) {
      peer.close();
      return;
    }
    const avatar = connection.callAvatar;
    if (!avatar) return; // a transcription session: the microphone in, events out, no media back
    avatar.onMedia('h264', (e) => peer.sendVideo(e.data, e.ptsNs));
    avatar.onMedia('vp8', (e) => peer.sendVideo(e.data, e.ptsNs));
    avatar.onMedia('opus', (e) => peer.sendAudio(e.data, e.ptsNs));
    peer.on('keyframe_request', () => avatar.requestKeyframe());
    peer.on('video_bitrate', (kbps) => avatar.setVideoBitrate(kbps));
    avatar.requestKeyframe(); // the video track may have opened before the avatar existed
    // A face the client draws: the frames' pts_ms onto the audio track's RTP clock, so the page draws each frame as its sound plays.
    if (avatar.clientFace) connection.send({ type: 'output_motion.clock', rtp_timestamp: peer.audioRtpOrigin, rtp_clock_hz: OPUS_CLOCK_HZ });
  }
}

/**
 * What the answer takes of the offer: a transcription session sends no media, and a face the
 * client draws (video_render: client) no video, so their answers take no video.
 */
function negotiateFor(sdp: string, videoCodec: 'h264' | 'vp8', initial: Json, media: MediaOptions): Negotiated {
  const negotiated = negotiate(parseOffer(sdp), videoCodec);
  return isTranscriptionConfig(initial) || resolveMedia(media).videoRender === 'client' ? { ...negotiated, video: null } : negotiated;
}

function callNotFound(callId: string): AppError {
  return new AppError('call_id_not_found', `No call found with id '${callId}'.`, { status: 404, param: 'call_id' });
}

function callEnded(callId: string): AppError {
  return new AppError('call_ended', `Call ${callId} has ended; a sideband attaches to a live call.`, { status: 409, param: 'call_id' });
}

/**
 * The offer in its multipart and JSON forms (the raw application/sdp form is `sdp` alone), as the
 * OpenAPI document shows it; parseCallBody checks the fields with it.
 */
export const CallOffer = Type.Object({
  sdp: Type.String({ pattern: '\\S', description: 'The SDP offer', 'x-error-code': 'missing_required_parameter' }),
  session: Type.Optional(
    Type.Union([Type.Object({}), Type.String()], {
      description:
        `Realtime session config (GA fields, the flat voice/face/driving/modalities, and ${MEDIA_FIELDS.join(', ')}), or an avatar-only one (AvatarSession, type 'avatar': speech in on the data channel, audio and video out as RTP): an object, or a JSON string of one in a form`,
    }),
  ),
});
const readOffer = compileRequest(CallOffer);

/** POST /v1/live/sessions: a GPT-Live session over WebRTC (its config is session.start's; realtime/live-dialect.ts). */
export const LiveSessionOffer = Type.Object({
  session: Type.Object({ model: Type.String({ description: 'gpt-live-1 or any model name this server routes' }) }, { description: "The Live session config (session.start's `session`): model, instructions, audio.output.voice, input" }),
  transport: Type.Object({
    type: Type.Literal('webrtc', { 'x-error-code': 'invalid_value' }),
    sdp: Type.String({ pattern: '\\S', description: 'The SDP offer (audio, video, a data channel)', 'x-error-code': 'missing_required_parameter' }),
  }),
});
const readLiveOffer = compileRequest(LiveSessionOffer);

/** Reads the JSON body of POST /v1/live/sessions into a call request whose session runs the Live dialect. */
export function parseLiveBody(body: Buffer): CallRequest {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new AppError('invalid_json', `The request body is not valid JSON: ${(err as Error).message}`, { status: 400 });
  }
  const transport = isObject(value) && isObject(value.transport) ? value.transport : null;
  if (typeof transport?.sdp === 'string' && Buffer.byteLength(transport.sdp) > MAX_OFFER_BYTES) {
    throw new AppError('request_too_large', `The SDP offer is over ${MAX_OFFER_BYTES} bytes (real ones are a few kB).`, { status: 413, param: 'transport.sdp' });
  }
  const offer = readLiveOffer(value);
  return { sdp: offer.transport.sdp, session: asBadRequest(() => liveCallConfig(offer.session)) };
}

/** Reads the body of POST /v1/realtime/calls in any of its three forms. */
export function parseCallBody(contentType: string, body: Buffer, multipartFields: Record<string, string> | null): CallRequest {
  const type = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  let sdp: unknown;
  let session: unknown;
  if (multipartFields) {
    sdp = multipartFields.sdp;
    session = multipartFields.session;
  } else if (type === 'application/json') {
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch (err) {
      throw new AppError('invalid_json', `The request body is not valid JSON: ${(err as Error).message}`, { status: 400 });
    }
    if (!isObject(value)) throw new AppError('invalid_request_body', 'The JSON body must be an object with "sdp" (and optionally "session").', { status: 400 });
    sdp = value.sdp;
    session = value.session;
  } else if (type === 'application/sdp' || type === 'text/plain' || type === '') {
    sdp = body.toString('utf8');
  } else {
    throw new AppError('unsupported_media_type', `Send the offer as multipart/form-data ("sdp", "session"), application/sdp, or application/json; got '${type}'.`, { status: 415 });
  }
  // Its size first, whatever else is wrong: an offer too large is a 413, as its body would be.
  if (typeof sdp === 'string' && Buffer.byteLength(sdp) > MAX_OFFER_BYTES) throw new AppError('request_too_large', `The SDP offer is over ${MAX_OFFER_BYTES} bytes (real ones are a few kB).`, { status: 413, param: 'sdp' });
  const offer = readOffer({ sdp, session });
  return { sdp: offer.sdp, session: parseSessionField(offer.session) };
}

function parseSessionField(value: unknown): Json | null {
  if (value === undefined || value === null || value === '') return null;
  let parsed = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch (err) {
      throw new AppError('invalid_json', `'session' is not valid JSON: ${(err as Error).message}`, { status: 400, param: 'session' });
    }
  }
  if (!isObject(parsed)) throw new AppError('invalid_type', "'session' must be a JSON object (the realtime session config).", { status: 400, param: 'session' });
  return parsed;
}

function mergeAudio(base: unknown, sent: unknown): unknown {
  if (!isObject(sent)) return base;
  if (!isObject(base)) return sent;
  const merged: Json = { ...base };
  for (const side of ['input', 'output']) {
    if (isObject(sent[side])) merged[side] = { ...(isObject(base[side]) ? base[side] : {}), ...sent[side] };
    else if (sent[side] !== undefined) merged[side] = sent[side];
  }
  return merged;
}

/** A refusal of the call's session config (the session.update rules, the media-field checks) as a REST 400 naming `session.<field>`. */
function asBadRequest<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof RealtimeError || err instanceof AppError) {
      const param = err.param === null ? 'session' : err.param.startsWith('session') ? err.param : `session.${err.param}`;
      throw new AppError(err.code, err.message, { status: 400, param });
    }
    throw err;
  }
}

function isImageDelta(text: string): boolean {
  // Event JSON starts with {"type":"...": a cheap look, not a parse.
  return text.startsWith('{"type":"response.output_image.delta"');
}
