/**
 * The realtime session object (OpenAI Realtime GA `realtime.session`, plus the flat rtAV fields
 * `voice`, `face`, `driving`), built from a client's partial config with every default filled.
 * Used for the `session` of a client secret (and the key is bound to it) and, later, for
 * session.created / session.updated.
 *
 * Voices: one voice, named by the flat `voice` (rtAV) or `audio.output.voice` (OpenAI), echoed in
 * both: a standard id, an uploaded UUID, or an OpenAI voice name (alloy ... cedar), which speaks
 * with a standard voice of a fitting character (assets/catalog.ts), so those clients work
 * unchanged. `audio.output.voice` may also be OpenAI's custom-voice form `{"id": ...}` (any of
 * those ids; an uploaded voice is this server's custom voice, made from an audio sample), echoed
 * in that form there and as the id in the flat `voice`.
 */
import { AppError, invalidParam } from '../core/errors.js';
import { DEFAULT_INSTRUCTIONS, DEFAULT_VOICE, MAX_INSTRUCTIONS_CHARS } from '../sessions/session-config.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';
import type { ToolChoice } from '../providers/llm/base.js';
import { parseToolChoice, parseTools } from './tools.js';

/** model, voice, face and driving names: at most this long (as in POST /v1/sessions). */
const MAX_NAME_CHARS = 200;

const OUTPUT_MODALITIES = ['text', 'audio', 'image'];

export interface RealtimeSessionObject {
  type: 'realtime';
  object: 'realtime.session';
  model: string;
  output_modalities: string[];
  instructions: string;
  voice: string;
  face: string | null;
  driving: string | null;
  audio: {
    input: { format: { type: string; rate?: number }; transcription: unknown; noise_reduction: unknown; turn_detection: unknown };
    output: { format: { type: string; rate?: number }; voice: VoiceRef; speed: number };
  };
  tools: Record<string, unknown>[];
  tool_choice: ToolChoice;
  max_output_tokens: number | 'inf';
  tracing: unknown;
  prompt: unknown;
  include: unknown;
  /** gpt-realtime-2's `reasoning` ({effort}), echoed; no model here reasons, so it changes nothing. */
  reasoning: { effort: ReasoningEffort } | null;
  [key: string]: unknown;
}

const PCM_24K = { type: 'audio/pcm', rate: PCM_RATE_HZ };
/**
 * Turn detection of a new session: semantic_vad (Smart Turn after a short pause), chosen over
 * OpenAI's default server_vad at 500 ms because `npm run bench -- realtime` measured the same
 * median decision (563-568 vs 575 ms after the end of speech) without answering anyone who had
 * paused mid-sentence (0 of 8 paused questions cut off, against 4 of 8). A client that sends
 * turn_detection gets what it asks for.
 */
export const DEFAULT_TURN_DETECTION = {
  type: 'semantic_vad',
  eagerness: 'auto',
  create_response: true,
  interrupt_response: true,
};

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A voice as OpenAI names one: a name, or a custom voice `{ "id": ... }`. */
export type VoiceRef = string | { id: string };

/** The voice at `obj[key]` (a name or `{id}`), as its id and the form it was given in; null when absent. */
export function voiceAt(obj: Obj, key: string, param: string): { id: string; ref: VoiceRef } | null {
  const v = obj[key];
  if (!isObj(v)) {
    if (v !== undefined && v !== null && typeof v !== 'string') throw invalidParam(param, `'${param}' must be a voice name or {"id": "<voice id>"}.`, 'invalid_type');
    const id = stringAt(obj, key, param);
    return id === null ? null : { id, ref: id };
  }
  for (const k of Object.keys(v)) if (k !== 'id') throw invalidParam(`${param}.${k}`, `Unknown parameter: '${param}.${k}'.`, 'unknown_parameter');
  const id = stringAt(v, 'id', `${param}.id`);
  if (id === null) throw invalidParam(`${param}.id`, `'${param}' as an object needs its voice's 'id'.`, 'missing_required_parameter');
  return { id, ref: { id } };
}

/** A model, voice, face or driving name at `obj[key]`: null when absent, else a non-empty string of at most MAX_NAME_CHARS. */
export function stringAt(obj: Obj, key: string, param: string): string | null {
  const v = obj[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v.trim() === '') throw invalidParam(param, `'${param}' must be a non-empty string.`, 'invalid_type');
  if (v.length > MAX_NAME_CHARS) throw invalidParam(param, `'${param}' must be at most ${MAX_NAME_CHARS} characters.`, 'string_above_max_length');
  return v;
}

function instructionsOf(input: Obj): string {
  const v = input.instructions;
  if (typeof v !== 'string') return DEFAULT_INSTRUCTIONS;
  if (v.length > MAX_INSTRUCTIONS_CHARS) {
    throw invalidParam('session.instructions', `'session.instructions' must be at most ${MAX_INSTRUCTIONS_CHARS} characters.`, 'string_above_max_length');
  }
  return v;
}

export function effectiveRealtimeSession(input: Obj, defaultModel: string): RealtimeSessionObject {
  const audio = isObj(input.audio) ? input.audio : {};
  const audioIn = isObj(audio.input) ? audio.input : {};
  const audioOut = isObj(audio.output) ? audio.output : {};
  const nestedVoice = voiceAt(audioOut, 'voice', 'session.audio.output.voice');
  const flatVoice = stringAt(input, 'voice', 'session.voice');
  // One voice, however it was named: the flat and the nested field always agree.
  const voice = flatVoice ?? nestedVoice?.id ?? DEFAULT_VOICE;

  const modalitiesRaw = input.output_modalities ?? input.modalities;
  let modalities = ['audio'];
  if (modalitiesRaw !== undefined) {
    if (!Array.isArray(modalitiesRaw) || modalitiesRaw.some((m) => typeof m !== 'string' || !OUTPUT_MODALITIES.includes(m))) {
      throw invalidParam('session.output_modalities', `'output_modalities' must be a list of ${OUTPUT_MODALITIES.join(', ')}.`);
    }
    modalities = modalitiesRaw as string[];
  }
  const speed = audioOut.speed ?? 1;
  if (typeof speed !== 'number' || speed < 0.25 || speed > 1.5) {
    throw invalidParam('session.audio.output.speed', "'speed' must be a number from 0.25 to 1.5.");
  }
  const maxTokens = input.max_output_tokens ?? 'inf';
  if (maxTokens !== 'inf' && !(typeof maxTokens === 'number' && Number.isInteger(maxTokens) && maxTokens >= 1 && maxTokens <= 4096)) {
    throw new AppError('invalid_value', "'max_output_tokens' must be an integer from 1 to 4096 or 'inf'.", {
      param: 'session.max_output_tokens',
    });
  }
  const tools = parseTools(input.tools, 'session.tools');
  return {
    type: 'realtime',
    object: 'realtime.session',
    model: stringAt(input, 'model', 'session.model') ?? defaultModel,
    output_modalities: modalities,
    instructions: instructionsOf(input),
    voice,
    face: stringAt(input, 'face', 'session.face'),
    driving: stringAt(input, 'driving', 'session.driving'),
    audio: {
      input: {
        format: isObj(audioIn.format) ? (audioIn.format as { type: string }) : PCM_24K,
        transcription: audioIn.transcription ?? null,
        noise_reduction: audioIn.noise_reduction ?? null,
        turn_detection: audioIn.turn_detection === undefined ? DEFAULT_TURN_DETECTION : audioIn.turn_detection,
      },
      output: {
        format: isObj(audioOut.format) ? (audioOut.format as { type: string }) : PCM_24K,
        voice: flatVoice ?? nestedVoice?.ref ?? voice,
        speed,
      },
    },
    tools: tools.json,
    tool_choice: parseToolChoice(input.tool_choice, tools.functions, 'session.tool_choice'),
    max_output_tokens: maxTokens as number | 'inf',
    tracing: input.tracing ?? null,
    prompt: input.prompt ?? null,
    include: input.include ?? null,
    reasoning: reasoningAt(input, 'session.reasoning'),
  };
}

/** OpenAI's reasoning efforts (gpt-realtime-2; `low` its default). */
export const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high', 'xhigh'] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

/** `reasoning` at `obj.reasoning` ({effort}), checked: null when absent. */
export function reasoningAt(obj: Obj, param: string): { effort: ReasoningEffort } | null {
  const v = obj.reasoning;
  if (v === undefined || v === null) return null;
  if (!isObj(v)) throw invalidParam(param, `'${param}' must be an object such as {"effort": "low"}.`, 'invalid_type');
  for (const k of Object.keys(v)) if (k !== 'effort') throw invalidParam(`${param}.${k}`, `Unknown parameter: '${param}.${k}'.`, 'unknown_parameter');
  const effort = v.effort ?? 'low';
  if (typeof effort !== 'string' || !(REASONING_EFFORTS as readonly string[]).includes(effort)) {
    throw invalidParam(`${param}.effort`, `'${param}.effort' must be one of ${REASONING_EFFORTS.join(', ')}.`);
  }
  return { effort: effort as ReasoningEffort };
}

/**
 * The session object in the older (beta) dialect's shape, for its session.created / updated: flat
 * `modalities`, audio formats and turn detection, `video` for frames as response.video.delta.
 */
export function legacySessionObject(s: RealtimeSessionObject, o: { id: string; expiresAt: number; video: boolean }): Record<string, unknown> {
  return {
    id: o.id,
    object: 'realtime.session',
    model: s.model,
    modalities: s.output_modalities,
    instructions: s.instructions,
    voice: s.voice,
    face: s.face,
    driving: s.driving,
    video: o.video,
    input_audio_format: 'pcm16',
    output_audio_format: 'pcm16',
    input_audio_transcription: s.audio.input.transcription,
    turn_detection: s.audio.input.turn_detection,
    tools: s.tools,
    tool_choice: s.tool_choice,
    temperature: 0.8,
    max_response_output_tokens: s.max_output_tokens,
    speed: s.audio.output.speed,
    expires_at: o.expiresAt,
  };
}

/**
 * Whether a session sends frames as image events: its transport allows them (`imageEvents`; a
 * call with a video track sends RTP instead) and its output modalities ask for images (the older
 * dialect: `image`, `video`, or its `video=true`).
 */
export function imagesWanted(modalities: readonly string[], o: { dialect: 'ga' | 'legacy'; imageEvents?: boolean; legacyVideo: boolean }): boolean {
  if (o.imageEvents === false) return false;
  if (o.dialect === 'legacy') return o.legacyVideo || modalities.includes('image') || modalities.includes('video');
  return modalities.includes('image');
}

/** The session object of session.created / session.updated, in the connection's dialect. */
export function sessionObjectOf(s: RealtimeSessionObject, o: { dialect: 'ga' | 'legacy'; id: string; expiresAt: number; images: boolean }): Record<string, unknown> {
  if (o.dialect === 'legacy') return legacySessionObject(s, { id: o.id, expiresAt: o.expiresAt, video: o.images });
  return { ...s, id: o.id, expires_at: o.expiresAt };
}
