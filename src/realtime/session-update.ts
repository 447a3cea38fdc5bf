/**
 * session.update: merges a client's partial session config into the session's accumulated config
 * and derives the effective session object (session-object.ts) plus the settings the engine acts
 * on (turn detection, transcription). Only the fields present change; objects under `audio` merge
 * field by field, everything else is replaced. Three shapes are accepted, normalised here and
 * nowhere else:
 *  - GA: `{type:"realtime", output_modalities, audio:{input:{...}, output:{voice, speed}}, ...}`;
 *  - rtAV flat fields: `voice`, `face`, `driving`, `model`, `modalities` (no `type`);
 *  - beta top-level fields: `turn_detection`, `input_audio_transcription`, `input_audio_format`,
 *    `output_audio_format`, `speed`, `max_response_output_tokens`, `temperature` (ignored).
 */
import { effectiveRealtimeSession, type RealtimeSessionObject } from './session-object.js';
import { type Json, RealtimeError, checkMaxLength, describeValue, isObject, quoted } from './protocol.js';
import type { SegmenterConfig } from './speech-segmenter.js';
import { AppError } from '../core/errors.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import { type WireAudioFormat, wireFormat } from '../audio/wire-format.js';
import type { ToolChoice, ToolDefinition } from '../providers/llm/base.js';
import { type McpServerDeclaration, parseTools } from './tools.js';

type WireAudioType = WireAudioFormat['type'];

const KNOWN_FIELDS = new Set([
  'type', 'id', 'object', 'model', 'output_modalities', 'modalities', 'instructions', 'voice', 'face', 'driving', 'audio',
  'tools', 'tool_choice', 'max_output_tokens', 'tracing', 'prompt', 'include', 'truncation', 'expires_at', 'reasoning',
  'client_secret', 'parallel_tool_calls',
  // beta names
  'turn_detection', 'input_audio_transcription', 'input_audio_format', 'output_audio_format', 'input_audio_noise_reduction',
  'speed', 'max_response_output_tokens', 'temperature',
]);

/** Transcription model and language names: at most this long (real ones are a few characters). */
const MAX_TRANSCRIPTION_NAME_CHARS = 200;
/**
 * A transcription prompt: at most this long. Whisper reads only the last 224 tokens (about 900
 * characters) of a prompt; this keeps any real prompt whole and a 16 MiB one out of the recogniser.
 */
const MAX_TRANSCRIPTION_PROMPT_CHARS = 4000;

/**
 * semantic_vad's eagerness: how sure the judge must be that the turn has ended (`confidence`,
 * turn-judge.ts: the evidence and the silence so far, weighed), the silence after which the
 * pause's transcript is made for it (`pause`), how long a pause may last before the turn ends
 * whatever the judge says (`ceiling`; OpenAI documents 8 s, 4 s and 2 s for low, medium and high),
 * and the silence that ends a turn when there is no judge at all (`fallback`).
 */
const SEMANTIC_EAGERNESS: Record<string, { confidence: number; pause: number; ceiling: number; fallback: number }> = {
  low: { confidence: 0.99, pause: 32, ceiling: 8000, fallback: 1200 },
  medium: { confidence: 0.97, pause: 32, ceiling: 4000, fallback: 700 },
  auto: { confidence: 0.97, pause: 32, ceiling: 4000, fallback: 700 },
  high: { confidence: 0.9, pause: 32, ceiling: 2000, fallback: 350 },
};
/** eagerness auto, the default: what the turn-end benchmark holds its default judge to. */
export const DEFAULT_SEMANTIC_EAGERNESS = SEMANTIC_EAGERNESS.auto!;

export interface TurnDetection {
  segmenter: SegmenterConfig;
  createResponse: boolean;
  interruptResponse: boolean;
  /**
   * idle_timeout_ms: silence after the assistant's last response before the turn times out
   * (input_audio_buffer.timeout_triggered, and a response that checks in); null: never.
   */
  idleTimeoutMs: number | null;
}

/** idle_timeout_ms's range (OpenAI documents 5-30 s; shorter and longer ones are allowed here). */
const IDLE_TIMEOUT_MIN_MS = 500;
const IDLE_TIMEOUT_MAX_MS = 3_600_000;

export interface TranscriptionSettings {
  model: string | null;
  language: string | null;
  prompt: string | null;
}

/** The accumulated raw config, the effective session object, and what the engine acts on. */
export interface SessionSettings {
  raw: Json;
  session: RealtimeSessionObject;
  /** The functions the model may call, and how (session.tools, session.tool_choice). */
  tools: ToolDefinition[];
  /** The MCP servers this server calls for the session (session.tools of type mcp). */
  mcp: McpServerDeclaration[];
  toolChoice: ToolChoice;
  /** session.parallel_tool_calls (default true). */
  parallelToolCalls: boolean;
  /** Wire formats of the client's input audio and of the audio sent back (WebSocket). */
  inputFormat: WireAudioFormat;
  outputFormat: WireAudioFormat;
  /** Null = manual turns (the client commits and asks for responses). */
  turnDetection: TurnDetection | null;
  transcription: TranscriptionSettings;
}

/** Applies `update` (the `session` of a session.update) to `previous` (null = initial config). */
/** The assets a session.update changes to (each to be checked before it applies), with the field that named it. */
export function changedAssets(before: RealtimeSessionObject, after: RealtimeSessionObject, update: Json): Array<{ kind: 'face' | 'voice' | 'driving'; id: string; param: string }> {
  const changed: Array<{ kind: 'face' | 'voice' | 'driving'; id: string | null; param: string }> = [];
  if (after.voice !== before.voice) changed.push({ kind: 'voice', id: after.voice, param: update.voice !== undefined ? 'session.voice' : 'session.audio.output.voice' });
  if (after.face !== before.face) changed.push({ kind: 'face', id: after.face, param: 'session.face' });
  if (after.driving !== before.driving) changed.push({ kind: 'driving', id: after.driving, param: 'session.driving' });
  return changed.filter((c): c is { kind: 'face' | 'voice' | 'driving'; id: string; param: string } => c.id !== null);
}

export function applySessionUpdate(previous: Json | null, update: Json, defaultModel: string): SessionSettings {
  for (const key of Object.keys(update)) {
    if (!KNOWN_FIELDS.has(key)) throw new RealtimeError('unknown_parameter', `Unknown parameter: 'session.${quoted(key)}'.`, `session.${quoted(key)}`);
  }
  if (update.type !== undefined && update.type !== 'realtime') {
    throw new RealtimeError(
      'invalid_value',
      update.type === 'avatar' || update.type === 'transcription'
        ? `Invalid value for 'session.type': a realtime session cannot become ${update.type === 'avatar' ? 'avatar-only' : 'a transcription session'}; open one with ?intent=${update.type}, an ephemeral key of session.type '${update.type}', or a call whose session has type '${update.type}'.`
        : `Invalid value for 'session.type': ${describeValue(update.type)}. This server runs realtime sessions ('realtime'), avatar-only ones ('avatar') and transcription sessions ('transcription'), each chosen when the session opens.`,
      'session.type',
    );
  }
  if (update.parallel_tool_calls !== undefined && typeof update.parallel_tool_calls !== 'boolean') {
    throw new RealtimeError('invalid_type', "Invalid type for 'session.parallel_tool_calls': expected a boolean.", 'session.parallel_tool_calls');
  }
  const normalised = normaliseBeta(update);
  const raw = mergeConfig(previous ?? {}, normalised);
  let session: RealtimeSessionObject;
  try {
    session = effectiveRealtimeSession(raw, defaultModel);
  } catch (err) {
    throw asRealtimeError(err);
  }
  const audioIn = session.audio.input;
  const tools = parseTools(raw.tools, 'session.tools'); // checked above; the MCP servers' headers are not in the echo
  return {
    raw,
    session,
    tools: tools.functions,
    mcp: tools.mcp,
    toolChoice: session.tool_choice,
    parallelToolCalls: raw.parallel_tool_calls !== false,
    inputFormat: wireFormat(session.audio.input.format.type as WireAudioType),
    outputFormat: wireFormat(session.audio.output.format.type as WireAudioType),
    turnDetection: parseTurnDetection(audioIn.turn_detection),
    transcription: parseTranscription(audioIn.transcription),
  };
}

function asRealtimeError(err: unknown): unknown {
  return err instanceof AppError ? new RealtimeError(err.code, err.message, err.param) : err;
}

/** Beta top-level fields → their GA places. */
function normaliseBeta(update: Json): Json {
  const out: Json = { ...update };
  const audio: Json = isObject(out.audio) ? { ...out.audio } : {};
  const input: Json = isObject(audio.input) ? { ...audio.input } : {};
  const output: Json = isObject(audio.output) ? { ...audio.output } : {};
  const move = (from: string, to: Json, key: string) => {
    if (out[from] !== undefined) {
      if (to[key] === undefined) to[key] = out[from];
      delete out[from];
    }
  };
  move('turn_detection', input, 'turn_detection');
  move('input_audio_transcription', input, 'transcription');
  move('input_audio_noise_reduction', input, 'noise_reduction');
  move('speed', output, 'speed');
  for (const [from, target] of [['input_audio_format', input], ['output_audio_format', output]] as const) {
    if (out[from] !== undefined) {
      target.format = betaFormat(out[from], `session.${from}`);
      delete out[from];
    }
  }
  if (out.max_response_output_tokens !== undefined) {
    if (out.max_output_tokens === undefined) out.max_output_tokens = out.max_response_output_tokens;
    delete out.max_response_output_tokens;
  }
  delete out.temperature;
  delete out.id;
  delete out.object;
  delete out.expires_at;
  delete out.client_secret;
  if (Object.keys(input).length > 0) audio.input = input;
  if (Object.keys(output).length > 0) audio.output = output;
  if (Object.keys(audio).length > 0) out.audio = audio;
  if (input.format !== undefined) checkFormat(input.format, 'session.audio.input.format');
  if (output.format !== undefined) checkFormat(output.format, 'session.audio.output.format');
  return out;
}

/** The beta names: pcm16, and G.711 for telephony. */
function betaFormat(value: unknown, param: string): Json {
  if (value === 'pcm16') return { type: 'audio/pcm', rate: PCM_RATE_HZ };
  if (value === 'g711_ulaw') return { type: 'audio/pcmu' };
  if (value === 'g711_alaw') return { type: 'audio/pcma' };
  throw new RealtimeError('unsupported_audio_format', `Invalid value for '${param}': expected 'pcm16', 'g711_ulaw' or 'g711_alaw'.`, param);
}

/**
 * GA formats: PCM16 at 24 kHz, or G.711 μ-law / A-law at 8 kHz (telephony: the audio is
 * converted at the edge, src/audio/wire-format.ts; the engine works at 24 kHz).
 */
export function checkFormat(format: unknown, param: string): void {
  if (!isObject(format)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object.`, param);
  if (format.type === 'audio/pcmu' || format.type === 'audio/pcma') {
    if (format.rate !== undefined && format.rate !== 8000) {
      throw new RealtimeError('invalid_value', `Invalid value for '${param}.rate': ${format.type} is 8000 Hz.`, `${param}.rate`);
    }
    return;
  }
  if (format.type !== 'audio/pcm') {
    throw new RealtimeError(
      'unsupported_audio_format',
      `Audio format ${describeValue(format.type)} is not supported; use {"type":"audio/pcm","rate":${PCM_RATE_HZ}}, {"type":"audio/pcmu"} or {"type":"audio/pcma"}.`,
      `${param}.type`,
    );
  }
  if (format.rate !== undefined && format.rate !== PCM_RATE_HZ) {
    throw new RealtimeError('invalid_value', `Invalid value for '${param}.rate': only ${PCM_RATE_HZ} is supported.`, `${param}.rate`);
  }
}

/**
 * Merges `update` into `base`: `audio`, `audio.input`, `audio.output` field by field, the rest
 * replaced. The two spellings of one setting never both survive: a flat `voice` replaces the
 * nested one and vice versa, `modalities` and `output_modalities` likewise.
 */
function mergeConfig(base: Json, update: Json): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(update)) {
    if (key === 'audio' && isObject(value)) {
      const baseAudio = isObject(out.audio) ? out.audio : {};
      const audio: Json = { ...baseAudio };
      for (const side of ['input', 'output'] as const) {
        const part = value[side];
        if (isObject(part)) audio[side] = { ...(isObject(baseAudio[side]) ? baseAudio[side] : {}), ...part };
        else if (part !== undefined) audio[side] = part;
      }
      out.audio = audio;
    } else {
      out[key] = value;
    }
  }
  const nestedVoice = isObject(update.audio) && isObject(update.audio.output) ? update.audio.output.voice : undefined;
  if (update.voice !== undefined && isObject(out.audio) && isObject(out.audio.output)) {
    const output: Json = { ...out.audio.output };
    delete output.voice;
    out.audio = { ...out.audio, output };
  } else if (nestedVoice !== undefined) {
    delete out.voice;
  }
  if (update.modalities !== undefined) delete out.output_modalities;
  if (update.output_modalities !== undefined) delete out.modalities;
  return out;
}

export function parseTurnDetection(value: unknown): TurnDetection | null {
  if (value === null) return null;
  const param = 'session.audio.input.turn_detection';
  if (!isObject(value)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object or null.`, param);
  const type = value.type ?? 'server_vad';
  if (type !== 'server_vad' && type !== 'semantic_vad') {
    throw new RealtimeError('invalid_value', `Invalid value for '${param}.type': expected 'server_vad' or 'semantic_vad'.`, `${param}.type`);
  }
  const num = (key: string, min: number, max: number, fallback: number): number => {
    const v = value[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
      throw new RealtimeError('invalid_value', `Invalid value for '${param}.${key}': expected a number from ${min} to ${max}.`, `${param}.${key}`);
    }
    return v;
  };
  const bool = (key: string): boolean => {
    const v = value[key];
    if (v === undefined || v === null) return true;
    if (typeof v !== 'boolean') throw new RealtimeError('invalid_type', `Invalid type for '${param}.${key}': expected a boolean.`, `${param}.${key}`);
    return v;
  };
  let segmenter: SegmenterConfig;
  if (type === 'semantic_vad') {
    const eagerness = value.eagerness ?? 'auto';
    const mapped = typeof eagerness === 'string' && Object.hasOwn(SEMANTIC_EAGERNESS, eagerness) ? SEMANTIC_EAGERNESS[eagerness] : undefined;
    if (mapped === undefined) {
      throw new RealtimeError('invalid_value', `Invalid value for '${param}.eagerness': expected low, medium, high or auto.`, `${param}.eagerness`);
    }
    segmenter = {
      threshold: 0.5,
      prefixPaddingMs: 300,
      silenceDurationMs: mapped.ceiling,
      endOfTurn: { pauseMs: mapped.pause, confidence: mapped.confidence, fallbackSilenceMs: mapped.fallback },
    };
  } else {
    segmenter = {
      threshold: num('threshold', 0, 1, 0.5),
      prefixPaddingMs: num('prefix_padding_ms', 0, 10_000, 300),
      silenceDurationMs: num('silence_duration_ms', 0, 10_000, 500),
      endOfTurn: null,
    };
  }
  const idle = value.idle_timeout_ms;
  return {
    segmenter,
    createResponse: bool('create_response'),
    interruptResponse: bool('interrupt_response'),
    idleTimeoutMs: idle === undefined || idle === null ? null : Math.round(num('idle_timeout_ms', IDLE_TIMEOUT_MIN_MS, IDLE_TIMEOUT_MAX_MS, 0)),
  };
}

export function parseTranscription(value: unknown): TranscriptionSettings {
  if (value === null || value === undefined) return { model: null, language: null, prompt: null };
  const param = 'session.audio.input.transcription';
  if (!isObject(value)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object or null.`, param);
  const str = (key: string, maxChars: number): string | null => {
    const v = value[key];
    if (v === undefined || v === null || v === '') return null;
    if (typeof v !== 'string') throw new RealtimeError('invalid_type', `Invalid type for '${param}.${key}': expected a string.`, `${param}.${key}`);
    return checkMaxLength(v, maxChars, `${param}.${key}`);
  };
  return { model: str('model', MAX_TRANSCRIPTION_NAME_CHARS), language: str('language', MAX_TRANSCRIPTION_NAME_CHARS), prompt: str('prompt', MAX_TRANSCRIPTION_PROMPT_CHARS) };
}
