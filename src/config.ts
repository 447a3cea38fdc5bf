/**
 * Configuration from the environment, validated once at start-up. Every variable is a row (name,
 * default, description, parser; src/core/env.ts reads them); CONFIG_VARS lists the server's rows and
 * the providers', and the table in docs/configuration.md mirrors it (test/core/config.test.ts). A bad value stops the process with a message
 * naming the variable; nothing is silently clamped.
 */
import os from 'node:os';
import path from 'node:path';
import type { LogLevel } from './core/log.js';
import { ConfigError } from './core/errors.js';
import { OUTPUT_SIZES, type OutputSize } from './core/video-size.js';
import { boolean, envVar, integer, oneOf, optionalBaseUrl, optionalHttpUrl, readVars, text, type Env, type EnvVar, type Parser } from './core/env.js';
import { randomBase62 } from './core/ids.js';
import { modelsDirFrom } from './models/manifest.js';
import { LLM_CONFIG_VARS, loadLlmConfig, type LlmConfig } from './providers/llm/config.js';
import { TTS_CONFIG_VARS, loadTtsConfig, type TtsConfig } from './providers/tts/config.js';
import { ASR_CONFIG_VARS, loadAsrConfig, type AsrConfig } from './providers/asr/config.js';
import { MCP_CONFIG_VARS, loadMcpConfig, type McpConfig } from './providers/mcp/config.js';

// For setup:models (src/cli/fetch-models.ts), which fetches the local model the operator chose and reads no other setting.
export { DEFAULT_LLM_MODEL_NAME, loadLocalLlmModel } from './providers/llm/config.js';

export interface WebhookConfig {
  url: string;
  secret: string;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  timeoutMs: number;
}

export type NodeRole = 'all' | 'api' | 'worker';

export interface FleetConfig {
  redisUrl: string;
  /** api: REST, signaling, placement; worker: media plane, models, engines; all: both. */
  role: NodeRole;
  /** This node's id in the worker registry (a new one each start). */
  nodeId: string;
  /** Shared secret of the fleet's internal requests (API node to worker). */
  token: string;
  /** The base URL other nodes reach this worker at; null = the address it listens on. */
  workerUrl: string | null;
  /** A worker silent this long is dropped and its sessions fail. */
  workerTtlMs: number;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string;
  logLevel: LogLevel;
  workerCapacity: number;
  /** The avatar's video size of sessions that do not choose one. */
  avatarOutputSize: OutputSize;
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
  /** Serve the playground page at /. */
  playground: boolean;
  /** WebRTC calls: where the media ports are. */
  rtc: { bindAddress: string | undefined; portRange: { min: number; max: number } | undefined; nativeLog: RtcNativeLogLevel };
  /** Fleet mode (REDIS_URL set): many nodes on one PostgreSQL store and one Redis; null = the embedded default. */
  fleet: FleetConfig | null;
  llm: LlmConfig;
  tts: TtsConfig;
  asr: AsrConfig;
  /** Which MCP servers sessions may have this server call, and its time bounds. */
  mcp: McpConfig;
}

const DATA_DIR_PLACEHOLDER = '$DATA_DIR';

/** A PostgreSQL DATABASE_URL (store/open-store.ts reads the same schemes). */
const POSTGRES_URL = /^postgres(ql)?:\/\//;

const databaseUrl: Parser<string> = (t, name) => {
  if (t.startsWith('sqlite:')) return t;
  if (POSTGRES_URL.test(t)) {
    try {
      const url = new URL(t);
      if (!url.hostname) throw new Error('no host');
    } catch {
      throw new ConfigError(name, 'expected postgres://user:password@host:port/database');
    }
    return t;
  }
  throw new ConfigError(name, `expected sqlite:<path> or postgres://user:password@host:port/database, got '${t.split(':')[0]}:'`);
};

const optionalRedisUrl: Parser<string | null> = (t, name) => {
  if (t === '') return null;
  try {
    const url = new URL(t);
    if ((url.protocol === 'redis:' || url.protocol === 'rediss:') && url.hostname) return t;
  } catch {
    // reported below
  }
  throw new ConfigError(name, 'expected redis://host:port (or rediss://), or empty');
};

const optionalNodeId: Parser<string | null> = (t, name) => {
  if (t === '') return null;
  if (!/^[\w.-]{1,64}$/.test(t)) throw new ConfigError(name, 'expected 1..64 letters, digits, or . _ -');
  return t;
};

const userId: Parser<string> = (t, name) => {
  if (!/^[\w.@-]{1,128}$/.test(t)) throw new ConfigError(name, 'expected 1..128 letters, digits, or . _ @ -');
  return t;
};

/** The server's own variables, in docs/configuration.md's order (the providers' follow in CONFIG_VARS). */
/** RTC_NATIVE_LOG: how much of the WebRTC stack's own log reaches the server's (transport/call-peer.ts logNativeRtc). */
export const RTC_NATIVE_LOG_LEVELS = ['off', 'error', 'warning', 'info', 'debug', 'verbose'] as const;
export type RtcNativeLogLevel = (typeof RTC_NATIVE_LOG_LEVELS)[number];

const VARS = {
  host: envVar('HOST', '127.0.0.1', 'Interface to listen on (0.0.0.0 for all).', text),
  port: envVar('PORT', '8000', 'TCP port, 0 for any free port.', integer(0, 65535)),
  dataDir: envVar('DATA_DIR', './data', 'Where the database and uploaded assets live.', text),
  databaseUrl: envVar('DATABASE_URL', 'sqlite:$DATA_DIR/avatar.db', 'Store: `sqlite:<path>` (one process) or `postgres://user:password@host:port/database` (PostgreSQL, which every node of a fleet shares).', databaseUrl),
  logLevel: envVar('LOG_LEVEL', 'info', 'debug, info, warn, error or silent.', oneOf<LogLevel>('debug', 'info', 'warn', 'error', 'silent')),
  workerCapacity: envVar('WORKER_CAPACITY', '4', 'Concurrent sessions (worker slots) in this process, 1..1024. When all are held, session creation answers 503 with Retry-After. The media plane alone measured 15 real-time 512x512 sessions on 2 cores (npm run bench -- media); the default leaves the rest of the CPU to local speech and language models.', integer(1, 1024)),
  avatarOutputSize: envVar('AVATAR_OUTPUT_SIZE', '512x512', "The avatar's video size when a session does not choose one (session field output_size): 512x512, 720x720 or 1280x720 (landscape, the face centred). Larger sizes cost more CPU per session (npm run bench -- media).", oneOf<OutputSize>(...OUTPUT_SIZES)),
  maxSessionSeconds: envVar('MAX_SESSION_SECONDS', '3600', 'A session still running after this long is ended (end_reason max_duration), 1..86400.', integer(1, 86_400)),
  defaultModel: envVar('DEFAULT_MODEL', 'gpt-5.2', 'Model of a session created without one.', text),
  ephemeralKeyTtlSeconds: envVar('EPHEMERAL_KEY_TTL_SECONDS', '60', 'Lifetime of a client secret when the request gives no expires_after.seconds, 1..7200.', integer(1, 7200)),
  rateLimitPerMinute: envVar('RATE_LIMIT_PER_MINUTE', '600', 'Requests per minute per API key (token bucket); 0 turns rate limiting off.', integer(0, 10_000_000)),
  rateLimitBurst: envVar('RATE_LIMIT_BURST', '60', 'Requests a key may make at once before the per-minute rate applies, 1..100000. Realtime WebSocket connections take from the same bucket.', integer(1, 100_000)),
  authFailuresPerMinute: envVar('AUTH_FAILURES_PER_MINUTE', '30', 'Failed authentications one remote address may make per minute (all at once, refilled evenly); past that, its authentication attempts get 429 (close code 4029 on WebSocket) until the budget refills. 0 turns it off, 0..100000.', integer(0, 100_000)),
  maxJsonBytes: envVar('MAX_JSON_BYTES', '1048576', 'Largest JSON request body; larger ones get 413.', integer(1024, 1 << 30)),
  maxUploadBytes: envVar('MAX_UPLOAD_BYTES', '20971520', 'Largest asset upload (face, voice, driving); larger ones get 413.', integer(1024, 1 << 30)),
  bootstrapUserId: envVar('BOOTSTRAP_USER_ID', 'default', 'Owner of the API key created and printed on first start with an empty store.', userId),
  webhookUrl: envVar('WEBHOOK_URL', '', 'If set, every usage record is POSTed here (signed, retried from a durable outbox).', optionalHttpUrl),
  webhookSecret: envVar('WEBHOOK_SECRET', '', 'HMAC-SHA256 secret for the X-Avatar-Signature header; required with WEBHOOK_URL.', text),
  webhookMaxAttempts: envVar('WEBHOOK_MAX_ATTEMPTS', '25', 'Deliveries tried before a record is marked dead (kept in the outbox), 1..1000.', integer(1, 1000)),
  webhookRetryBaseMs: envVar('WEBHOOK_RETRY_BASE_MS', '1000', 'First retry delay; doubles per attempt with jitter.', integer(1, 3_600_000)),
  webhookRetryMaxMs: envVar('WEBHOOK_RETRY_MAX_MS', '600000', 'Longest retry delay.', integer(1, 86_400_000)),
  webhookTimeoutMs: envVar('WEBHOOK_TIMEOUT_MS', '10000', 'Per-delivery HTTP timeout.', integer(100, 600_000)),
  modelsDir: envVar('MODELS_DIR', './models', 'Standard assets (models/assets), the model manifest, and fetched weights (models/weights). Unset: the models/ folder of the repository, wherever the server is started from.', text),
  playground: envVar('PLAYGROUND', 'true', 'Serve the playground page at / (true): a browser page to talk to the avatar, which asks for an API key and keeps it in the browser. false: / is not found.', boolean),
  preloadModels: envVar('PRELOAD_MODELS', 'true', 'Load the language model, voices and recogniser when the server starts (true) rather than on first use (false): the first conversation then does not wait seconds for them.', boolean),
  rtcBindAddress: envVar('RTC_BIND_ADDRESS', '', 'Local address WebRTC calls gather ICE candidates on (the address clients send media to). Empty: HOST, or every interface when HOST is 0.0.0.0.', text),
  rtcPortMin: envVar('RTC_PORT_MIN', '0', 'Lowest UDP port for WebRTC media, 0 for any; set with RTC_PORT_MAX to open a firewall range, 0..65535.', integer(0, 65535)),
  rtcNativeLog: envVar('RTC_NATIVE_LOG', 'off', "WebRTC stack's own log (libdatachannel, libjuice, DTLS, SCTP) in the server's log as module webrtc-native: off, error, warning, info, debug or verbose. A diagnostic: from warning up it logs every rejected datagram.", oneOf<RtcNativeLogLevel>(...RTC_NATIVE_LOG_LEVELS)),
  rtcPortMax: envVar('RTC_PORT_MAX', '0', 'Highest UDP port for WebRTC media, 0 for any, 0..65535.', integer(0, 65535)),
  redisUrl: envVar('REDIS_URL', '', 'Fleet mode: the Redis every node shares (`redis://host:port`) for the worker registry, placement and cross-node events. Empty: the embedded default (one process, local slots). Needs a `postgres://` DATABASE_URL and FLEET_TOKEN.', optionalRedisUrl),
  nodeRole: envVar('NODE_ROLE', 'all', 'Fleet mode: what this node does. `api`: REST, WebSocket and call signaling, placement (no models or media); `worker`: the media plane, models and engines of the sessions placed on it; `all`: both.', oneOf<NodeRole>('all', 'api', 'worker')),
  nodeId: envVar('NODE_ID', '', "Fleet mode: this node's id in the worker registry; empty: the host name and a random suffix (a restarted worker must not reuse its id).", optionalNodeId),
  fleetToken: envVar('FLEET_TOKEN', '', "Fleet mode: the shared secret (at least 16 characters) API nodes present to workers on the internal routes; the same on every node.", text),
  workerUrl: envVar('WORKER_URL', '', 'Fleet mode: the base URL other nodes reach this worker at (`http://10.0.0.5:8000`). Empty: the address it listens on (required when HOST is 0.0.0.0 or ::).', optionalBaseUrl),
  fleetWorkerTtlMs: envVar('FLEET_WORKER_TTL_MS', '5000', 'Fleet mode: a worker that has not heartbeaten for this long is dropped and its sessions end as failed (end_reason worker_lost), 500..600000. It heartbeats every third of it.', integer(500, 600_000)),
};

/** Every documented variable, in docs/configuration.md's order: the server's, then the providers'. */
export const CONFIG_VARS: EnvVar[] = [...Object.values(VARS), ...LLM_CONFIG_VARS, ...TTS_CONFIG_VARS, ...ASR_CONFIG_VARS, ...MCP_CONFIG_VARS];

export { ConfigError };

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const v = readVars(env, VARS);
  const dataDir = path.resolve(cwd, v.dataDir);
  let webhook: WebhookConfig | null = null;
  if (v.webhookUrl !== null) {
    if (v.webhookSecret.length < 16) throw new ConfigError('WEBHOOK_SECRET', 'must be set, at least 16 characters, when WEBHOOK_URL is');
    webhook = {
      url: v.webhookUrl,
      secret: v.webhookSecret,
      maxAttempts: v.webhookMaxAttempts,
      retryBaseMs: v.webhookRetryBaseMs,
      retryMaxMs: v.webhookRetryMaxMs,
      timeoutMs: v.webhookTimeoutMs,
    };
  }
  return {
    host: v.host,
    port: v.port,
    dataDir,
    databaseUrl: v.databaseUrl.replace(DATA_DIR_PLACEHOLDER, dataDir),
    logLevel: v.logLevel,
    workerCapacity: v.workerCapacity,
    avatarOutputSize: v.avatarOutputSize,
    maxSessionSeconds: v.maxSessionSeconds,
    defaultModel: v.defaultModel,
    ephemeralKeyTtlSeconds: v.ephemeralKeyTtlSeconds,
    rateLimitPerMinute: v.rateLimitPerMinute,
    rateLimitBurst: v.rateLimitBurst,
    authFailuresPerMinute: v.authFailuresPerMinute,
    maxJsonBytes: v.maxJsonBytes,
    maxUploadBytes: v.maxUploadBytes,
    bootstrapUserId: v.bootstrapUserId,
    webhook,
    // Unset: the repository's models/ wherever the server is started from.
    modelsDir: modelsDirFrom(env, cwd),
    preloadModels: v.preloadModels,
    playground: v.playground,
    rtc: rtcConfig(v.rtcBindAddress, v.host, v.rtcPortMin, v.rtcPortMax, v.rtcNativeLog),
    fleet: fleetConfig(v.redisUrl, v.nodeRole, v.nodeId, v.fleetToken, v.workerUrl, v.fleetWorkerTtlMs, v.databaseUrl, v.host),
    llm: loadLlmConfig(env, cwd),
    tts: loadTtsConfig(env),
    asr: loadAsrConfig(env),
    mcp: loadMcpConfig(env),
  };
}

function rtcConfig(bind: string, host: string, min: number, max: number, nativeLog: RtcNativeLogLevel): Config['rtc'] {
  if ((min === 0) !== (max === 0)) throw new ConfigError(min === 0 ? 'RTC_PORT_MIN' : 'RTC_PORT_MAX', 'set both RTC_PORT_MIN and RTC_PORT_MAX, or neither');
  if (min > max) throw new ConfigError('RTC_PORT_MIN', `must not be above RTC_PORT_MAX (${min} > ${max})`);
  const address = bind !== '' ? bind : host === '0.0.0.0' || host === '::' ? undefined : host;
  return { bindAddress: address, portRange: min === 0 ? undefined : { min, max }, nativeLog };
}

function fleetConfig(redisUrl: string | null, role: NodeRole, nodeId: string | null, token: string, workerUrl: string | null, workerTtlMs: number, databaseUrl: string, host: string): FleetConfig | null {
  if (redisUrl === null) {
    if (role !== 'all') throw new ConfigError('NODE_ROLE', `'${role}' is a fleet role: set REDIS_URL (and a postgres:// DATABASE_URL) too`);
    return null;
  }
  if (!POSTGRES_URL.test(databaseUrl)) throw new ConfigError('DATABASE_URL', 'fleet mode (REDIS_URL set) needs the shared PostgreSQL store: postgres://user:password@host:port/database');
  if (token.length < 16) throw new ConfigError('FLEET_TOKEN', 'must be set, at least 16 characters, in fleet mode (REDIS_URL set)');
  // A worker listening on every interface cannot know which address other machines reach it at.
  if (role !== 'api' && workerUrl === null && (host === '0.0.0.0' || host === '::')) {
    throw new ConfigError('WORKER_URL', `must be set on a worker listening on ${host}: the URL other nodes reach it at (http://10.0.0.5:8000)`);
  }
  return { redisUrl, role, nodeId: nodeId ?? `${os.hostname().replace(/[^\w.-]/g, '-').slice(0, 40)}-${randomBase62(8)}`, token, workerUrl, workerTtlMs };
}
