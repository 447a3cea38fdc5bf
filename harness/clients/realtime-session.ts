/**
 * A WebSocket session on any endpoint that speaks the OpenAI Realtime protocol, the one way the
 * benchmarks open one (the endpoint benchmark's measures, the realtime benchmark's turns and its
 * tool round trip): the target's base URL made into its /v1/realtime URL, the connection opened
 * with a bound on every wait and a plain error for what went wrong (the key refused, nothing
 * listening, no session.created, an error event instead), every server event stamped with its
 * arrival time, and session.update sent and answered or refused (a capability probe reads the
 * refusal). `connect` is a session on this repo's server as the realtime benchmark sets it up.
 *
 * Base URLs: http(s)://host[:port][/prefix] or ws(s)://…, with or without a trailing '/v1' or
 * '/v1/realtime': https://api.openai.com, https://api.openai.com/v1 and wss://api.openai.com/v1/realtime
 * are one target. The model goes in the query (?model=), the key in `Authorization: Bearer`.
 *
 * Invariants: `at[i]` is when `c.events[i]` arrived (performance.now(), the stamp listener is
 * attached before any event can arrive, right after the socket opened); nothing here waits
 * without a timeout; the key never appears in an error or a label.
 */
import { RealtimeTestClient, type ServerEvent } from './realtime-client.js';

export interface EndpointTarget {
  /** Base URL (see the header). */
  url: string;
  key: string;
  /** The model asked for in the query. */
  model: string;
}

/** No open socket within this: the target is not reachable (a hang becomes an error). */
const OPEN_TIMEOUT_MS = 15_000;
/** No session.created within this after the socket opened. */
const CREATED_TIMEOUT_MS = 20_000;
/** session.update, conversation.item.create: answered (or refused) within this. */
export const ANSWER_TIMEOUT_MS = 15_000;

export interface EndpointSession {
  c: RealtimeTestClient;
  /** Arrival time (performance.now()) of each of c.events, by index. */
  at: number[];
  /** When the connection was asked for, and when session.created arrived. */
  openedAt: number;
  createdAt: number;
  /** The session object of session.created. */
  created: Record<string, any>;
}

/** The target's base URL without a trailing '/', '/v1' or '/v1/realtime' (and without any query). */
export function baseOf(url: string): string {
  return url
    .trim()
    .replace(/[?#].*$/, '')
    .replace(/\/+$/, '')
    .replace(/\/v1(\/realtime)?$/, '');
}

/** The WebSocket URL a session on `target` opens (without the key, which goes in a header). */
export function realtimeUrl(target: EndpointTarget): string {
  return `${baseOf(target.url).replace(/^http/i, 'ws')}/v1/realtime?model=${encodeURIComponent(target.model)}`;
}

/** The target's URL as results may show it: its base, never a key, no credentials in it. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(baseOf(url));
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/+$/, '');
  } catch {
    return baseOf(url);
  }
}

/**
 * Opens a session on `target` and waits for session.created; throws a plain error (the key refused,
 * nothing listening, an error event instead, no answer in time).
 */
export async function openSession(target: EndpointTarget): Promise<EndpointSession> {
  const url = realtimeUrl(target);
  const openedAt = performance.now();
  const pending = RealtimeTestClient.connect(baseOf(target.url), { key: target.key, query: `model=${encodeURIComponent(target.model)}` });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), OPEN_TIMEOUT_MS)));
  let c: RealtimeTestClient;
  try {
    const first = await Promise.race([pending, late]);
    if (first === 'late') {
      void pending.then((x) => x.ws.terminate()).catch(() => undefined);
      throw new Error(`no WebSocket connection to ${url} within ${OPEN_TIMEOUT_MS / 1000} s`);
    }
    c = first;
  } catch (err) {
    throw explainOpenError(err as Error, url);
  } finally {
    clearTimeout(timer);
  }
  // A socket error after the open (a reset) ends the session as a close does; unheard, it would end the process.
  c.ws.on('error', () => undefined);
  const at: number[] = [];
  c.ws.on('message', (_data, isBinary) => {
    if (!isBinary) at.push(performance.now());
  });
  try {
    const first = await c.waitFor((e) => e.type === 'session.created' || e.type === 'error', { timeoutMs: CREATED_TIMEOUT_MS });
    if (first.type === 'error') {
      const what = refusedKey(first) ? 'the target refused the key' : 'the target sent an error instead of session.created';
      throw new Error(`${what}: ${describeError(first)} (${url})`);
    }
    return { c, at, openedAt, createdAt: at[c.events.indexOf(first)] ?? performance.now(), created: (first.session ?? {}) as Record<string, any> };
  } catch (err) {
    c.ws.terminate();
    const message = (err as Error).message;
    if (/^the target (sent|refused)/.test(message)) throw err;
    throw new Error(`no session.created from ${url}: ${message.slice(0, 300)}`);
  }
}

/**
 * A session on this repo's server (`url`, `key`) as the realtime benchmark opens it: model
 * gpt-realtime, audio and images out, `turnDetection`, and any further session fields in `extra`;
 * throws when the server refuses them.
 */
export async function connect(url: string, key: string, turnDetection: unknown, extra: Record<string, unknown> = {}): Promise<EndpointSession> {
  const s = await openSession({ url, key, model: 'gpt-realtime' });
  const answer = await updateSession(s, { output_modalities: ['audio', 'image'], audio: { input: { turn_detection: turnDetection } }, ...extra });
  if (!answer.ok) {
    await closeSession(s);
    throw new Error(`the server refused the session's settings: ${answer.reason}`);
  }
  return s;
}

/** A plain error for a socket that did not open: the key refused, another HTTP status, nothing listening. */
function explainOpenError(err: Error, url: string): Error {
  const status = /Unexpected server response: (\d+)/.exec(err.message)?.[1];
  if (status === '401' || status === '403') return new Error(`the target refused the key: HTTP ${status} on the WebSocket upgrade to ${url}`);
  if (status) return new Error(`the target answered the WebSocket upgrade to ${url} with HTTP ${status}`);
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') return new Error(`nothing listens at ${url} (connection refused)`);
  if (code === 'ENOTFOUND') return new Error(`the target's host is not found: ${url}`);
  return new Error(`no WebSocket connection to ${url}: ${err.message}`);
}

/** An error event that says the key is wrong (a target that takes the upgrade and refuses in an event, as OpenAI and this server do). */
function refusedKey(e: ServerEvent): boolean {
  const err = (e.error ?? {}) as { code?: string; type?: string };
  return err.type === 'authentication_error' || /api_key|auth/i.test(err.code ?? '');
}

/** An error event's code and message (its type when it has no code). */
export function describeError(e: ServerEvent): string {
  const err = (e.error ?? {}) as { code?: string; type?: string; message?: string };
  return `${err.code ?? err.type ?? 'error'}: ${err.message ?? JSON.stringify(e.error ?? e).slice(0, 200)}`;
}

let nextEventId = 1;
/** A client event_id, so that a refusal can be matched to its event. */
export const eventId = (what: string) => `evt_bench_${what}_${nextEventId++}`;

export type Answer = { ok: true; event: ServerEvent; index: number } | { ok: false; reason: string };

/**
 * Sends `event` (with an event_id) and waits for the first event after it that `answered` matches,
 * or an error naming that event_id (or naming none: a target that does not echo ids).
 */
export async function ask(s: EndpointSession, event: Record<string, unknown>, answered: (e: ServerEvent) => boolean, timeoutMs = ANSWER_TIMEOUT_MS): Promise<Answer> {
  const id = eventId(String(event.type).replace(/\W+/g, '_'));
  const from = s.c.events.length;
  s.c.send({ ...event, event_id: id });
  const mine = (e: ServerEvent) => e.type === 'error' && (e.error?.event_id === id || e.error?.event_id === undefined || e.error?.event_id === null);
  try {
    const e = await s.c.waitFor((x) => answered(x) || mine(x), { from, timeoutMs });
    if (e.type === 'error' && !answered(e)) return { ok: false, reason: describeError(e) };
    return { ok: true, event: e, index: s.c.events.indexOf(e) };
  } catch (err) {
    return { ok: false, reason: (err as Error).message.replace(/; got .*/s, '').slice(0, 200) };
  }
}

/** session.update with `session` (type 'realtime' added): the target's session.updated, or why it refused. */
export function updateSession(s: EndpointSession, session: Record<string, unknown>): Promise<Answer> {
  return ask(s, { type: 'session.update', session: { type: 'realtime', ...session } }, (e) => e.type === 'session.updated');
}

/** A user message item; answered by conversation.item.added/.created/.done, or refused. */
export function addUserItem(s: EndpointSession, content: Array<Record<string, unknown>>): Promise<Answer> {
  const added = new Set(['conversation.item.added', 'conversation.item.created', 'conversation.item.done']);
  return ask(s, { type: 'conversation.item.create', item: { type: 'message', role: 'user', content } }, (e) => added.has(e.type));
}

/** Index of the first event from `from` matching, waiting up to `timeoutMs`; null when none came (or the socket closed). */
export async function nextIndex(s: EndpointSession, match: (e: ServerEvent) => boolean, from: number, timeoutMs: number): Promise<number | null> {
  try {
    const e = await s.c.waitFor(match, { from, timeoutMs });
    return s.c.events.indexOf(e, from);
  } catch {
    return null;
  }
}

/** Closes a session, or drops its socket when the target does not close it within 5 s. */
export async function closeSession(s: EndpointSession): Promise<void> {
  const timer = new Promise<'late'>((r) => setTimeout(() => r('late'), 5000).unref());
  if ((await Promise.race([s.c.close().then(() => 'closed' as const), timer])) === 'late') s.c.ws.terminate();
}

/** The event kinds the measures read, by what they mean (GA names first, then beta and avatar aliases). */
export const AUDIO_DELTAS = new Set(['response.output_audio.delta', 'response.audio.delta']);
export const TEXT_DELTAS = new Set(['response.output_text.delta', 'response.output_audio_transcript.delta', 'response.text.delta', 'response.audio_transcript.delta']);
export const IMAGE_DELTAS = new Set(['response.output_image.delta', 'response.image.delta', 'response.video.delta']);

/** The response an event belongs to (response_id, or response.id on response.created/.done). */
export function responseOf(e: ServerEvent): string | undefined {
  return (e.response_id ?? e.response?.id) as string | undefined;
}
