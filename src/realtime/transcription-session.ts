/**
 * Transcription sessions (`session.type: "transcription"`): the realtime API as streaming speech to
 * text, as OpenAI's GA API has them. Opened with `?intent=transcription` (no model), an ephemeral
 * key minted with that type, or a call whose session has it; a session keeps its type. Their
 * config is the input side of a realtime session and nothing else:
 *
 *   { "type": "transcription",
 *     "audio": { "input": { "format", "noise_reduction", "transcription", "turn_detection" } },
 *     "include": ["item.input_audio_transcription.logprobs"] }
 *
 * read by the realtime session's own parsers (session-update.ts), so a format, a turn detection or
 * a transcription means the same in both. What differs: the default turn detection is server_vad at
 * OpenAI's defaults (OpenAI's for transcription sessions; semantic_vad here judges a pause by its
 * sound and its words by rule, as no language model reads them); `create_response`,
 * `interrupt_response` are accepted and have nothing to act on (no response is ever made), and
 * `idle_timeout_ms` is refused (its timeout asks for a response). `transcription: null` (or none)
 * transcribes with the server's recogniser, as in a realtime session. `include` is echoed; logprobs
 * are not produced by the recognisers here. Any other field is refused as unknown, naming it.
 */
import { type WireAudioFormat, wireFormat } from '../audio/wire-format.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import { type Json, RealtimeError, describeValue, isObject, quoted } from './protocol.js';
import { type TranscriptionSettings, type TurnDetection, checkFormat, parseTranscription, parseTurnDetection } from './session-update.js';

/** The session fields a transcription session has (the rest of a realtime session's are refused). */
const FIELDS = new Set(['type', 'audio', 'include', 'id', 'object', 'expires_at', 'client_secret']);
const INPUT_FIELDS = new Set(['format', 'noise_reduction', 'transcription', 'turn_detection']);
const INCLUDABLE = new Set(['item.input_audio_transcription.logprobs']);

/** Turn detection of a new transcription session: OpenAI's default for them. */
export const DEFAULT_TRANSCRIPTION_TURN_DETECTION = { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 };

export interface TranscriptionSessionSettings {
  /** The accumulated input config (`audio.input`'s fields) and `include`, as the client gave them. */
  input: Json;
  include: string[] | null;
  inputFormat: WireAudioFormat;
  /** Null: the client commits the buffer itself. Never creates or interrupts a response. */
  turnDetection: TurnDetection | null;
  transcription: TranscriptionSettings;
}

/** Whether a session config asks for a transcription session. */
export function isTranscriptionConfig(config: Json): boolean {
  return config.type === 'transcription';
}

/**
 * Applies `update` (a session.update's `session`, or the opening config) to `previous` (null: a
 * new session). `input` fields merge one by one; a bad one is refused with the field's name.
 */
export function applyTranscriptionUpdate(previous: TranscriptionSessionSettings | null, update: Json): TranscriptionSessionSettings {
  for (const key of Object.keys(update)) {
    if (!FIELDS.has(key)) {
      throw new RealtimeError('unknown_parameter', `Unknown parameter: 'session.${quoted(key)}'. A transcription session has only 'audio.input' and 'include'.`, `session.${quoted(key)}`);
    }
  }
  if (update.type !== undefined && update.type !== 'transcription') {
    throw new RealtimeError('invalid_value', `Invalid value for 'session.type': ${describeValue(update.type)}. A transcription session stays one; open a realtime session for a conversation.`, 'session.type');
  }
  const input: Json = { ...(previous?.input ?? {}), ...inputOf(update.audio) };
  const include = update.include === undefined ? (previous?.include ?? null) : includeOf(update.include);
  if (input.format !== undefined) checkFormat(input.format, 'session.audio.input.format');
  const format = isObject(input.format) ? (input.format.type as WireAudioFormat['type']) : 'audio/pcm';
  const turnDetection = parseTurnDetection(input.turn_detection === undefined ? DEFAULT_TRANSCRIPTION_TURN_DETECTION : input.turn_detection);
  if (turnDetection?.idleTimeoutMs != null) {
    const param = 'session.audio.input.turn_detection.idle_timeout_ms';
    throw new RealtimeError('invalid_value', `Invalid value for '${param}': the idle timeout asks the model to respond, and a transcription session has no responses.`, param);
  }
  return {
    input,
    include,
    inputFormat: wireFormat(format),
    turnDetection: turnDetection && { ...turnDetection, createResponse: false, interruptResponse: false },
    transcription: parseTranscription(input.transcription),
  };
}

/** The session object of session.created / session.updated (OpenAI's RealtimeTranscriptionSessionCreateResponse shape). */
export function transcriptionSessionObject(settings: TranscriptionSessionSettings, id: string, expiresAt: number): Json {
  const { input } = settings;
  return {
    type: 'transcription',
    object: 'realtime.transcription_session',
    id,
    expires_at: expiresAt,
    audio: {
      input: {
        format: isObject(input.format) ? { ...input.format, ...(input.format.type === 'audio/pcm' ? { rate: PCM_RATE_HZ } : {}) } : { type: 'audio/pcm', rate: PCM_RATE_HZ },
        noise_reduction: input.noise_reduction ?? null,
        transcription: input.transcription ?? null,
        turn_detection: input.turn_detection === undefined ? DEFAULT_TRANSCRIPTION_TURN_DETECTION : input.turn_detection,
      },
    },
    include: settings.include,
  };
}

function inputOf(audio: unknown): Json {
  if (audio === undefined || audio === null) return {};
  if (!isObject(audio)) throw new RealtimeError('invalid_type', "Invalid type for 'session.audio': expected an object.", 'session.audio');
  for (const key of Object.keys(audio)) {
    if (key !== 'input') {
      throw new RealtimeError('unknown_parameter', `Unknown parameter: 'session.audio.${quoted(key)}'. A transcription session has input audio only.`, `session.audio.${quoted(key)}`);
    }
  }
  if (audio.input === undefined) return {};
  if (!isObject(audio.input)) throw new RealtimeError('invalid_type', "Invalid type for 'session.audio.input': expected an object.", 'session.audio.input');
  for (const key of Object.keys(audio.input)) {
    if (!INPUT_FIELDS.has(key)) {
      throw new RealtimeError('unknown_parameter', `Unknown parameter: 'session.audio.input.${quoted(key)}'.`, `session.audio.input.${quoted(key)}`);
    }
  }
  return audio.input;
}

function includeOf(value: unknown): string[] | null {
  if (value === null) return null;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || !INCLUDABLE.has(v))) {
    throw new RealtimeError('invalid_value', "Invalid value for 'session.include': expected null or a list of 'item.input_audio_transcription.logprobs'.", 'session.include');
  }
  return [...new Set(value as string[])];
}
