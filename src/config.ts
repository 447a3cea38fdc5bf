/**
 * Configuration from the environment, validated once at start-up. Every variable, its default and
 * its range is listed in CONFIG_VARS, which the README table mirrors. A bad value stops the process
 * with a message naming the variable; nothing is silently clamped.
 */
import path from 'node:path';
import type { LogLevel } from './core/log.js';
import { ConfigError } from './core/errors.js';
import { LLM_CONFIG_VARS, loadLlmConfig, type LlmConfig } from './providers/llm/config.js';
import { TTS_CONFIG_VARS, loadTtsConfig, type TtsConfig } from './providers/tts/config.js';
import { ASR_CONFIG_VARS, loadAsrConfig, type AsrConfig } from './providers/asr/config.js';

export interface WebhookConfig {
  url: string;
  secret: string;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  timeoutMs: number;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string;
  logLevel: LogLevel;
  workerCapacity: number;
  maxSessionSeconds: number;
  defaultModel: string;
  ephemeralKeyTtlSeconds: number;
  rateLimitPerMinute: number;
  rateLimitBurst: number;
  authFailuresPerMinute: number;
  maxJsonBytes: number;
  maxUploadBytes: number;
  bootstrapUserId: string;
  webhook: WebhookConfig | null;
  modelsDir: string;
  preloadModels: boolean;
  /** WebRTC calls: where the media ports are. */
  rtc: { bindAddress: string | undefined; portRange: { min: number; max: number } | undefined };
  llm: LlmConfig;
  tts: TtsConfig;
  asr: AsrConfig;
}

export interface VarSpec {
  name: string;
  default: string;
  description: string;
}

const ROOT_DIR = path.resolve(import.meta.dirname, '..');

/** The documented variables, in README order. */
export const CONFIG_VARS: VarSpec[] = [
  { name: 'HOST', default: '127.0.0.1', description: 'Interface to listen on (0.0.0.0 for all).' },
  { name: 'PORT', default: '8000', description: 'TCP port, 0 for any free port.' },
  { name: 'DATA_DIR', default: './data', description: 'Where the database and uploaded assets live.' },
  { name: 'DATABASE_URL', default: 'sqlite:$DATA_DIR/avatar.db', description: 'Store: `sqlite:<path>` (only SQLite is built in; the Store interface is where Postgres goes).' },
  { name: 'LOG_LEVEL', default: 'info', description: 'debug, info, warn, error or silent.' },
  { name: 'WORKER_CAPACITY', default: '4', description: 'Concurrent sessions (worker slots) in this process, 1..1024. When all are held, session creation answers 503 with Retry-After. The media plane alone measured 15 real-time 512x512 sessions on 2 cores (npm run bench -- media); the default leaves the rest of the CPU to local speech and language models.' },
  { name: 'MAX_SESSION_SECONDS', default: '3600', description: 'A session still running after this long is ended (end_reason max_duration), 1..86400.' },
  { name: 'DEFAULT_MODEL', default: 'gpt-5.2', description: 'Model of a session created without one.' },
  { name: 'EPHEMERAL_KEY_TTL_SECONDS', default: '60', description: 'Lifetime of a client secret when the request gives no expires_after.seconds, 1..7200.' },
  { name: 'RATE_LIMIT_PER_MINUTE', default: '600', description: 'Requests per minute per API key (token bucket); 0 turns rate limiting off.' },
  { name: 'RATE_LIMIT_BURST', default: '60', description: 'Requests a key may make at once before the per-minute rate applies, 1..100000. Realtime WebSocket connections take from the same bucket.' },
  { name: 'AUTH_FAILURES_PER_MINUTE', default: '30', description: 'Failed authentications one remote address may make per minute (all at once, refilled evenly); past that, its authentication attempts get 429 (close code 4029 on WebSocket) until the budget refills. 0 turns it off, 0..100000.' },
  { name: 'MAX_JSON_BYTES', default: '1048576', description: 'Largest JSON request body; larger ones get 413.' },
  { name: 'MAX_UPLOAD_BYTES', default: '20971520', description: 'Largest asset upload (face, voice, driving); larger ones get 413.' },
  { name: 'BOOTSTRAP_USER_ID', default: 'default', description: 'Owner of the API key created and printed on first start with an empty store.' },
  { name: 'WEBHOOK_URL', default: '', description: 'If set, every usage record is POSTed here (signed, retried from a durable outbox).' },
  { name: 'WEBHOOK_SECRET', default: '', description: 'HMAC-SHA256 secret for the X-Avatar-Signature header; required with WEBHOOK_URL.' },
  { name: 'WEBHOOK_MAX_ATTEMPTS', default: '25', description: 'Deliveries tried before a record is marked dead (kept in the outbox), 1..1000.' },
  { name: 'WEBHOOK_RETRY_BASE_MS', default: '1000', description: 'First retry delay; doubles per attempt with jitter.' },
  { name: 'WEBHOOK_RETRY_MAX_MS', default: '600000', description: 'Longest retry delay.' },
  { name: 'WEBHOOK_TIMEOUT_MS', default: '10000', description: 'Per-delivery HTTP timeout.' },
  { name: 'MODELS_DIR', default: './models', description: 'Standard assets (models/assets), the model manifest, and fetched weights (models/weights).' },
  { name: 'PRELOAD_MODELS', default: 'true', description: 'Load the language model, voices and recogniser when the server starts (true) rather than on first use (false): the first conversation then does not wait seconds for them.' },
  { name: 'RTC_BIND_ADDRESS', default: '', description: 'Local address WebRTC calls gather ICE candidates on (the address clients send media to). Empty: HOST, or every interface when HOST is 0.0.0.0.' },
  { name: 'RTC_PORT_MIN', default: '0', description: 'Lowest UDP port for WebRTC media, 0 for any; set with RTC_PORT_MAX to open a firewall range, 0..65535.' },
  { name: 'RTC_PORT_MAX', default: '0', description: 'Highest UDP port for WebRTC media, 0 for any, 0..65535.' },
  ...LLM_CONFIG_VARS,
  ...TTS_CONFIG_VARS,
  ...ASR_CONFIG_VARS,
];

export { ConfigError };

type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const defaults = new Map(CONFIG_VARS.map((v) => [v.name, v.default]));
  const raw = (name: string): string => {
    const value = env[name];
    return value === undefined || value === '' ? (defaults.get(name) ?? '') : value;
  };
  const int = (name: string, min: number, max: number): number => {
    const text = raw(name);
    if (!/^-?\d+$/.test(text)) throw new ConfigError(name, `expected an integer, got '${text}'`);
    const value = Number(text);
    if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
    return value;
  };

  const bool = (name: string): boolean => {
    const text = raw(name);
    if (text !== 'true' && text !== 'false') throw new ConfigError(name, `expected true or false, got '${text}'`);
    return text === 'true';
  };
  const dataDir = path.resolve(cwd, raw('DATA_DIR'));
  const logLevel = raw('LOG_LEVEL');
  if (!['debug', 'info', 'warn', 'error', 'silent'].includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `expected debug, info, warn, error or silent, got '${logLevel}'`);
  }
  const databaseUrl = (env.DATABASE_URL ?? '') === '' ? `sqlite:${path.join(dataDir, 'avatar.db')}` : String(env.DATABASE_URL);
  if (!databaseUrl.startsWith('sqlite:')) {
    throw new ConfigError('DATABASE_URL', `only sqlite:<path> is built in, got '${databaseUrl.split(':')[0]}:'`);
  }
  const webhookUrl = raw('WEBHOOK_URL');
  let webhook: WebhookConfig | null = null;
  if (webhookUrl !== '') {
    if (!/^https?:\/\//.test(webhookUrl) || !URL.canParse(webhookUrl)) {
      throw new ConfigError('WEBHOOK_URL', `expected an http(s) URL, got '${webhookUrl}'`);
    }
    const secret = raw('WEBHOOK_SECRET');
    if (secret.length < 16) throw new ConfigError('WEBHOOK_SECRET', 'must be set, at least 16 characters, when WEBHOOK_URL is');
    webhook = {
      url: webhookUrl,
      secret,
      maxAttempts: int('WEBHOOK_MAX_ATTEMPTS', 1, 1000),
      retryBaseMs: int('WEBHOOK_RETRY_BASE_MS', 1, 3_600_000),
      retryMaxMs: int('WEBHOOK_RETRY_MAX_MS', 1, 86_400_000),
      timeoutMs: int('WEBHOOK_TIMEOUT_MS', 100, 600_000),
    };
  }
  const defaultModel = raw('DEFAULT_MODEL');
  const bootstrapUserId = raw('BOOTSTRAP_USER_ID');
  if (!/^[\w.@-]{1,128}$/.test(bootstrapUserId)) {
    throw new ConfigError('BOOTSTRAP_USER_ID', 'expected 1..128 letters, digits, or . _ @ -');
  }
  return {
    host: raw('HOST'),
    port: int('PORT', 0, 65535),
    dataDir,
    databaseUrl,
    logLevel: logLevel as LogLevel,
    workerCapacity: int('WORKER_CAPACITY', 1, 1024),
    maxSessionSeconds: int('MAX_SESSION_SECONDS', 1, 86_400),
    defaultModel,
    ephemeralKeyTtlSeconds: int('EPHEMERAL_KEY_TTL_SECONDS', 1, 7200),
    rateLimitPerMinute: int('RATE_LIMIT_PER_MINUTE', 0, 10_000_000),
    rateLimitBurst: int('RATE_LIMIT_BURST', 1, 100_000),
    authFailuresPerMinute: int('AUTH_FAILURES_PER_MINUTE', 0, 100_000),
    maxJsonBytes: int('MAX_JSON_BYTES', 1024, 1 << 30),
    maxUploadBytes: int('MAX_UPLOAD_BYTES', 1024, 1 << 30),
    bootstrapUserId,
    webhook,
    modelsDir: path.resolve(env.MODELS_DIR ? cwd : ROOT_DIR, env.MODELS_DIR || 'models'),
    preloadModels: bool('PRELOAD_MODELS'),
    rtc: rtcConfig(raw('RTC_BIND_ADDRESS'), raw('HOST'), int('RTC_PORT_MIN', 0, 65535), int('RTC_PORT_MAX', 0, 65535)),
    llm: loadLlmConfig(env, cwd),
    tts: loadTtsConfig(env),
    asr: loadAsrConfig(env),
  };
}

function rtcConfig(bind: string, host: string, min: number, max: number): Config['rtc'] {
  if ((min === 0) !== (max === 0)) throw new ConfigError(min === 0 ? 'RTC_PORT_MIN' : 'RTC_PORT_MAX', 'set both RTC_PORT_MIN and RTC_PORT_MAX, or neither');
  if (min > max) throw new ConfigError('RTC_PORT_MIN', `must not be above RTC_PORT_MAX (${min} > ${max})`);
  const address = bind !== '' ? bind : host === '0.0.0.0' || host === '::' ? undefined : host;
  return { bindAddress: address, portRange: min === 0 ? undefined : { min, max } };
}

export function sqlitePath(config: Config): string {
  return config.databaseUrl.slice('sqlite:'.length);
}
