/**
 * The engine's ports (session-engine.ts): what a transport gives it to run one session (its
 * options and dependencies) and what it reports back through them (usage, chat history, asset
 * checks). The connection (signaling/realtime-connection.ts) implements them; the engine, the
 * response run and the avatar engine read them from here, so nothing imports types from the
 * engine's own file.
 */
import type { Logger } from '../core/log.js';
import type { LanguageModels } from '../providers/llm/base.js';
import type { SpeechService } from '../providers/tts/base.js';
import type { SpeechRecognizers } from '../providers/asr/base.js';
import type { VoiceActivityDetector } from '../providers/vad/base.js';
import type { EndOfTurnModel } from '../providers/turn/base.js';
import type { McpConnector } from '../providers/mcp/base.js';
import type { AvatarOutput } from './avatar-output.js';
import type { InputImages } from './input-images.js';
import type { Dialect, Json, ServerEventDraft } from './protocol.js';

/** Usage delivered to the client: seconds of speech played, frames sent, the model's tokens. */
export interface UsageDelta {
  audioSecondsOut?: number;
  framesOut?: number;
  inputTokens?: number;
  outputTokens?: number;
}

/** What the engine records outside itself (chat history, usage), through the store. */
export interface SessionRecorder {
  appendTurn(role: 'user' | 'assistant', content: string): Promise<void>;
  setCurrentTranscript(text: string): Promise<void>;
  /**
   * Counts usage as it is delivered, right after the event that carries it is sent (audio as it
   * plays, each frame, tokens once the model reports them); the connection commits it to the store.
   */
  addUsage(delta: UsageDelta): void;
}

/** Asset checks for session.update (standard id or an upload the user owns). */
export interface AssetChecker {
  require(kind: 'face' | 'voice' | 'driving', id: string, userId: string, param: string): Promise<void>;
}

/**
 * The transport a session's client is on. 'webrtc': audio goes as RTP (no output_audio.delta;
 * output_audio_buffer.* events instead), the microphone comes through pushMicrophone(), and
 * input_audio_buffer events are refused.
 */
export type EngineTransport = 'websocket' | 'webrtc';

export interface EngineOptions {
  sessionId: string;
  userId: string;
  dialect: Dialect;
  /** Default 'websocket'. */
  transport?: EngineTransport;
  /**
   * Whether frames may go out as image events when the client asks for images (default true).
   * False for a call with a video track: its frames travel as RTP.
   */
  imageEvents?: boolean;
  defaultModel: string;
  /** Unix seconds at which the session ends (its maximum duration). */
  expiresAt: number;
  /** The session's tts_source (REST sessions), 'auto' otherwise. */
  ttsSource: string;
  /** Older-form connections: `video=true` asks for frames (response.video.delta). */
  legacyVideo: boolean;
  /** Initial config (an ephemeral key's session, or fields of the REST session). */
  initial: Json;
  /**
   * A WebRTC session whose output audio is also wanted as events (a Live session's observers
   * hear it reflected): output_audio.delta besides the RTP. Default false.
   */
  audioEventsToo?: boolean;
}

/** The process's models and checks a session's engine uses (the server's realtime runtime holds them). */
export interface EngineProviders {
  llm: LanguageModels;
  tts: SpeechService;
  asr: SpeechRecognizers;
  createVad(): Promise<VoiceActivityDetector>;
  /** semantic_vad's end-of-turn model, loaded once per process; null when none is installed. */
  endOfTurnModel(): Promise<EndOfTurnModel | null>;
  /** Checks input_image parts before the engine keeps them (src/media/input-images.ts). */
  images: InputImages;
  /** Reaches the MCP servers sessions declare, as the operator's policy allows (providers/mcp). */
  mcp: McpConnector;
}

export interface EngineDeps extends EngineProviders {
  send(event: ServerEventDraft): void;
  avatar: AvatarOutput;
  assets: AssetChecker;
  recorder: SessionRecorder;
  log: Logger;
}
