/**
 * Session lifecycle: the one place that moves a session between states, holds and frees its worker
 * slot, enforces the maximum duration, and writes usage when a session ends.
 *
 *   create(start: true)   -> active     (REST, legacy REST, WebSocket ?model=; slot taken at once)
 *   create(start: false)  -> pending    (WebRTC call: slot reserved at offer time)
 *   pending -> active     start(): the media connection is up
 *   pending -> cancelled  end() before start (client gave up), or not started within pendingTimeoutMs
 *   pending -> failed     fail() before start (media could not start)
 *   active  -> ended      end(): DELETE, POST /sessions/{id}/end, socket/call closed, max duration,
 *                         its API key revoked (key_revoked)
 *   active  -> failed     fail(): media or worker error; server shutdown; found live after a crash
 *   terminal -> terminal  end()/fail() again: no change, the session is returned as it is
 *
 * A session leaving `active` gets a usage record (and a webhook outbox entry) in the same store
 * transaction that ends it, so usage can never be lost or doubled. Its counters are what its
 * connection delivered: the connection commits them as they accrue (usage-meter.ts) and, when the
 * session runs in this process, finish() first settles it (its output stops and the exact total is
 * committed), so every end here bills exactly what was delivered; an end decided on another node
 * (fleet) bills up to the running connection's last commit (USAGE_FLUSH_MS). Every live session is
 * heartbeated; after a crash, recover() closes it as failed, billed up to its last heartbeat.
 *
 * Ends nobody can retry (a connection closed, a worker unreachable) go through endEventually():
 * when the store is down (postgres_unavailable) the end is owed, not lost. It keeps the moment it
 * was decided (billed up to then, not up to when the store came back) and its slot, and is tried
 * again every OWED_RETRY_MS until the store takes it, with the connection's last usage commit
 * first. One log line per owed end, none per retry. A node stopped with ends still owed leaves
 * them to the next start's recover() (embedded) or the janitor (fleet), billed up to their last
 * heartbeat.
 */
import { EventEmitter } from 'node:events';
import type { Clock } from '../core/clock.js';
import { AppError, isDependencyOutage, notFound } from '../core/errors.js';
import { newEventId, newSessionId, newUsageId } from '../core/ids.js';
import type { Logger } from '../core/log.js';
import type { AssetResolver } from '../assets/asset-service.js';
import { isLive, type OutboxDraft, type SessionEnd, type SessionOrigin, type SessionRecord, type Store, type UsageRecord } from '../store/store.js';
import type { SessionConfig } from './session-config.js';
import type { WorkerPool } from './worker-pool.js';

/** Retry-After for a full pool: sessions typically last minutes, so a short, polite wait. */
const RETRY_AFTER_S = 5;
/** How often live sessions are heartbeated; crash recovery under-bills by at most this. */
export const HEARTBEAT_INTERVAL_MS = 10_000;
/** A WebRTC call must connect within this long after its offer is answered. */
export const PENDING_START_TIMEOUT_MS = 30_000;
/** An end waits at most this long for the session's connection here to commit its usage (a store outage must not hang it). */
const SETTLE_TIMEOUT_MS = 5_000;
/** An end owed while the store is down is tried again this often. */
const OWED_RETRY_MS = 1_000;

/** What runs sessions in this process (the connection registry), as an end needs it. */
export interface LocalSessionRunner {
  /** Stops the session's output here and commits the usage it delivered; resolves at once when it does not run here. */
  settle(sessionId: string): Promise<void>;
  /** A settled session could not be ended (the store failed): its connection here ends too. */
  abandon(sessionId: string): void;
  /** The sessions connections here run (a shutdown that cannot ask Redis or the store ends these). */
  running(): string[];
}

/** An end that the store could not take yet (endEventually()). */
interface OwedEnd {
  status: 'ended' | 'cancelled' | 'failed' | null;
  reason: string;
  endedAtUs: number;
  /** Commits what the session's connection delivered and could not commit while the store was down. */
  commit?: () => Promise<void>;
}

export interface SessionServiceOptions {
  maxSessionSeconds: number;
  pendingTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  /** Builds the webhook body for a usage record; null when no webhook is configured. */
  webhookPayload: ((eventId: string, usage: UsageRecord) => string) | null;
}

export interface SessionEvents {
  started: [SessionRecord];
  ended: [SessionRecord];
}

/** Names of the request fields that carry assets, for error messages (older form says face_id). */
export interface AssetParamNames {
  face: string;
  voice: string;
  driving: string;
}

export const CURRENT_ASSET_PARAMS: AssetParamNames = { face: 'face', voice: 'voice', driving: 'driving' };

export class SessionService extends EventEmitter<SessionEvents> {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly pendingTimeoutMs: number;
  private runner: LocalSessionRunner | null = null;
  private readonly owed = new Map<string, OwedEnd>();
  private owedTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: Store,
    private readonly pool: WorkerPool,
    private readonly assets: AssetResolver,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: SessionServiceOptions,
  ) {
    super();
    this.pendingTimeoutMs = options.pendingTimeoutMs ?? PENDING_START_TIMEOUT_MS;
    const interval = options.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS;
    this.heartbeat = setInterval(() => void this.beat(), interval).unref();
  }

  /** The connections of this process: an end settles a session running here before it is recorded. */
  useRunner(runner: LocalSessionRunner): void {
    this.runner = runner;
  }

  async create(
    userId: string,
    config: SessionConfig,
    origin: SessionOrigin,
    opts: {
      start: boolean;
      params?: AssetParamNames;
      apiKeyId?: string | null;
      /** The id to give the session when it is still unused (a client secret's session id); otherwise a new one. */
      preferredId?: string | null;
    },
  ): Promise<SessionRecord> {
    const params = opts.params ?? CURRENT_ASSET_PARAMS;
    // Assets first: a bad request must not take (even briefly) a slot someone else could win.
    await this.assets.require('voice', config.voice, userId, params.voice);
    if (config.face !== null) await this.assets.require('face', config.face, userId, params.face);
    if (config.driving !== null) await this.assets.require('driving', config.driving, userId, params.driving);

    const preferred = opts.preferredId && /^sess_[0-9A-Za-z]{24}$/.test(opts.preferredId) ? opts.preferredId : null;
    const id = preferred && !(await this.store.getSession(preferred)) && !(await this.pool.leaseOf(preferred)) ? preferred : newSessionId();
    const lease = await this.pool.tryAcquire(id);
    if (!lease) {
      throw new AppError('no_worker_available', 'All workers are busy. Retry later.', {
        status: 503,
        headers: { 'Retry-After': String(RETRY_AFTER_S) },
      });
    }
    const now = this.clock.nowUs();
    const record: SessionRecord = {
      id,
      userId,
      apiKeyId: opts.apiKeyId ?? null,
      origin,
      ...config,
      status: opts.start ? 'active' : 'pending',
      endReason: null,
      createdAtUs: now,
      startedAtUs: opts.start ? now : null,
      endedAtUs: null,
      durationSeconds: null,
      deadlineUs: opts.start ? now + this.options.maxSessionSeconds * 1_000_000 : null,
      lastSeenUs: now,
      currentTranscript: '',
    };
    try {
      await this.store.insertSession(record);
    } catch (err) {
      // A session with this id exists after all (the same preferred id created twice at once):
      // the lease is that session's, not ours to free.
      if (!(await this.store.getSession(id).catch(() => null))) await lease.release();
      throw err;
    }
    this.log.info('session created', { sessionId: id, userId, origin, status: record.status, workerId: lease.workerId });
    if (opts.start) {
      this.armDeadline(record);
      this.emit('started', record);
    } else {
      // Only while still pending: in fleet mode the call's worker starts it, not this node.
      this.arm(id, this.pendingTimeoutMs, () => this.end(id, 'cancelled', 'start_timeout', ['pending']));
    }
    return record;
  }

  /** The session if `userId` owns it; 404 otherwise (other users' sessions do not exist for you). */
  async get(userId: string, id: string): Promise<SessionRecord> {
    const session = await this.store.getSession(id);
    if (!session || session.userId !== userId) throw notFound('session', id);
    return session;
  }

  async list(userId: string, query: { status?: SessionRecord['status']; limit: number; before?: string }) {
    return this.store.listSessions({ userId, ...query });
  }

  async start(id: string): Promise<SessionRecord> {
    const now = this.clock.nowUs();
    const started = await this.store.markSessionStarted(id, now, now + this.options.maxSessionSeconds * 1_000_000);
    const session = await this.store.getSession(id);
    if (!session) throw notFound('session', id);
    if (!started) {
      throw new AppError('invalid_session_state', `Session ${id} is ${session.status}, not pending.`, { status: 409 });
    }
    this.disarm(id);
    this.armDeadline(session);
    this.log.info('session started', { sessionId: id });
    this.emit('started', session);
    return session;
  }

  /**
   * Ends a session at a client's or the system's request: active -> ended, pending -> cancelled.
   * `status` forces a terminal status (fail() uses it). Already-terminal sessions come back unchanged.
   */
  async end(id: string, status: 'ended' | 'cancelled' | 'failed' | null, reason: string, onlyFrom?: SessionEnd['onlyFrom'], endedAtUs?: number): Promise<SessionRecord> {
    const current = await this.store.getSession(id);
    if (!current) throw notFound('session', id);
    if (!isLive(current.status)) return current;
    if (onlyFrom && !onlyFrom.includes(current.status)) return current;
    const endStatus = status ?? (current.status === 'pending' ? 'cancelled' : 'ended');
    const at = Math.max(current.startedAtUs ?? current.createdAtUs, endedAtUs ?? this.clock.nowUs());
    return this.finish(current, { status: endStatus, endReason: reason, endedAtUs: at, onlyFrom });
  }

  /**
   * An end nobody will retry (a connection closed, its worker unreachable): ended now, or, while
   * the store is down, owed and ended as soon as it is back, billed up to now either way. `commit`
   * writes the connection's usage that could not be committed meanwhile. Never rejects.
   */
  async endEventually(id: string, status: OwedEnd['status'], reason: string, commit?: () => Promise<void>): Promise<void> {
    const owed: OwedEnd = { status, reason, endedAtUs: this.clock.nowUs(), commit };
    if (await this.payOwed(id, owed)) return;
    this.log.warn('the store is unavailable: the session ends as soon as it is back', { sessionId: id, endReason: reason });
    this.owed.set(id, owed);
    this.owedTimer ??= setInterval(() => void this.retryOwed(), OWED_RETRY_MS).unref();
  }

  /** True once the end is done (or cannot ever be: logged); false while the store is down. */
  private async payOwed(id: string, owed: OwedEnd): Promise<boolean> {
    try {
      await owed.commit?.();
      await this.end(id, owed.status, owed.reason, undefined, owed.endedAtUs);
      return true;
    } catch (err) {
      if (isDependencyOutage(err, 'postgres')) return false;
      this.log.error('ending session failed', { sessionId: id, err });
      return true;
    }
  }

  private async retryOwed(): Promise<void> {
    for (const [id, owed] of [...this.owed]) {
      if (!(await this.payOwed(id, owed))) return; // still down: the next tick tries again
      this.owed.delete(id);
    }
    if (this.owed.size === 0 && this.owedTimer) {
      clearInterval(this.owedTimer);
      this.owedTimer = null;
    }
  }

  /** Ends a session for its owner: DELETE /v1/sessions/{id} and POST /sessions/{id}/end. Idempotent. */
  async endForUser(userId: string, id: string): Promise<SessionRecord> {
    await this.get(userId, id);
    return this.end(id, null, 'client_request');
  }

  /** Ends every live session created with one of these API keys (they were revoked): end reason `key_revoked`. */
  async endForApiKeys(apiKeyIds: string[]): Promise<SessionRecord[]> {
    const ids = await this.store.listLiveSessionIdsByApiKey(apiKeyIds);
    const ended: SessionRecord[] = [];
    for (const id of ids) ended.push(await this.end(id, null, 'key_revoked'));
    return ended;
  }

  async fail(id: string, reason: string): Promise<SessionRecord> {
    return this.end(id, 'failed', reason);
  }

  /**
   * Start-up recovery: sessions still live in the store belonged to a process that stopped without
   * ending them. Each is closed as failed at its last heartbeat, with usage recorded.
   */
  async recover(): Promise<number> {
    const live = await this.store.listSessionsByStatus(['pending', 'active']);
    for (const session of live) {
      const endedAtUs = Math.max(session.startedAtUs ?? session.createdAtUs, session.lastSeenUs ?? session.createdAtUs);
      await this.finish(session, { status: 'failed', endReason: 'server_restart', endedAtUs });
    }
    if (live.length > 0) this.log.warn('closed sessions left live by a previous process', { count: live.length });
    return live.length;
  }

  /**
   * Fleet mode: the sessions of a worker that stopped heartbeating (the registry handed them to
   * this node alone) end as failed, billed up to `lastHeardUs` (about its last heartbeat) but never
   * before they started. Sessions already ended elsewhere are left as they are.
   */
  async failLost(ids: readonly string[], lastHeardUs: number, reason: string): Promise<number> {
    let failed = 0;
    for (const id of ids) {
      const session = await this.store.getSession(id);
      if (!session || !isLive(session.status)) continue;
      const endedAtUs = Math.max(session.startedAtUs ?? session.createdAtUs, Math.min(lastHeardUs, this.clock.nowUs()));
      const ended = await this.finish(session, { status: 'failed', endReason: reason, endedAtUs });
      if (ended.endReason === reason) failed++;
    }
    return failed;
  }

  /**
   * Fleet mode: the start timeouts and deadlines of sessions whose node went away with its timers.
   * Pending sessions older than the start timeout are cancelled (start_timeout) and active ones
   * past their deadline ended (max_duration), whichever node made them. Returns how many ended.
   */
  async sweepOverdue(): Promise<number> {
    const now = this.clock.nowUs();
    let ended = 0;
    for (const session of await this.store.listSessionsByStatus(['pending', 'active'])) {
      if (session.status === 'pending' && session.createdAtUs + this.pendingTimeoutMs * 1000 <= now) {
        const done = await this.finish(session, { status: 'cancelled', endReason: 'start_timeout', endedAtUs: now, onlyFrom: ['pending'] });
        if (done.endReason === 'start_timeout') ended++;
      } else if (session.status === 'active' && session.deadlineUs !== null && session.deadlineUs <= now) {
        // Billed up to its deadline, not to whenever the sweep came round.
        const done = await this.finish(session, { status: 'ended', endReason: 'max_duration', endedAtUs: Math.max(session.startedAtUs ?? session.deadlineUs, session.deadlineUs), onlyFrom: ['active'] });
        if (done.endReason === 'max_duration') ended++;
      }
    }
    return ended;
  }

  /**
   * Another node ended this session (fleet mode: announced on Redis): its timers here stop and
   * `ended` is emitted, so a connection running it in this process closes as for a local end.
   */
  noteEndedElsewhere(session: SessionRecord): void {
    if (isLive(session.status)) return;
    this.disarm(session.id);
    this.emit('ended', session);
  }

  /** Graceful shutdown: live sessions fail now (reason server_shutdown) so their usage is exact. */
  /**
   * With Redis down, the sessions connections here run count as local; with the store down, only
   * those are tried, and what cannot end is left (logged once) to the next start or the janitor.
   */
  async shutdown(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    if (this.owedTimer) clearInterval(this.owedTimer);
    this.owedTimer = null;
    const running = new Set(this.runner?.running() ?? []);
    let live: string[];
    try {
      live = (await this.store.listSessionsByStatus(['pending', 'active'])).map((s) => s.id);
    } catch (err) {
      if (!isDependencyOutage(err, 'postgres')) throw err;
      live = [...new Set([...running, ...this.owed.keys()])];
    }
    let left = 0;
    for (const id of live) {
      const local = await this.pool.leaseOf(id).then(
        (lease) => lease?.local ?? false,
        () => running.has(id) || this.owed.has(id),
      );
      if (!local) continue;
      const owed = this.owed.get(id);
      const ended = await this.end(id, 'failed', 'server_shutdown', undefined, owed?.endedAtUs).then(
        () => true,
        (err: unknown) => {
          if (!(err instanceof AppError && err.status === 503)) this.log.error('ending a session at shutdown failed', { sessionId: id, err });
          return false;
        },
      );
      if (!ended) left++;
    }
    if (left > 0) this.log.warn('sessions left live at shutdown (the store is down): the next start or the janitor ends them, billed up to their last heartbeat', { count: left });
    this.owed.clear();
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  private async finish(session: SessionRecord, end: SessionEnd): Promise<SessionRecord> {
    const createdAtUs = this.clock.nowUs();
    const payload = this.options.webhookPayload;
    const eventId = newEventId();
    const outbox: OutboxDraft | null = payload
      ? { eventId, buildPayload: (usage) => payload(eventId, usage), nextAttemptAtUs: createdAtUs }
      : null;
    // An active session running here stops delivering and commits its exact usage first; a
    // pending one (a call not connected) has delivered nothing, and a start timeout leaves an active one alone.
    const settles = session.status === 'active' && (!end.onlyFrom || end.onlyFrom.includes('active'));
    if (settles) await this.settle(session.id);
    let ended: SessionRecord | null;
    try {
      ended = await this.store.endSession(session.id, end, { id: newUsageId(), createdAtUs }, outbox);
    } catch (err) {
      if (settles) this.runner?.abandon(session.id);
      throw err;
    }
    // Not ended by us: someone else ended it first (then its slot goes too), or `end.onlyFrom` did
    // not match (a start timeout after another node started it: it stays live, slot and all).
    const now = ended ?? (await this.store.getSession(session.id)) ?? session;
    if (isLive(now.status)) return now;
    this.disarm(session.id);
    try {
      await (await this.pool.leaseOf(session.id))?.release();
    } catch (err) {
      // Fleet mode, Redis unreachable: the janitor frees the slots of ended sessions later.
      if (isDependencyOutage(err, 'redis')) this.log.debug('slot left for the janitor: Redis is unavailable', { sessionId: session.id });
      else this.log.error('freeing the worker slot failed', { sessionId: session.id, err });
    }
    if (!ended) return now;
    this.log.info('session ended', {
      sessionId: ended.id,
      status: ended.status,
      endReason: ended.endReason,
      durationSeconds: ended.durationSeconds,
    });
    this.emit('ended', ended);
    return ended;
  }

  /** Settles the session's connection here, if any, within SETTLE_TIMEOUT_MS (a failure is logged: the end goes on). */
  private async settle(id: string): Promise<void> {
    if (!this.runner) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), SETTLE_TIMEOUT_MS).unref();
    });
    const settled = this.runner.settle(id).then(
      () => 'settled' as const,
      (err: unknown) => {
        this.log.error('settling an ending session failed; ending it with what was committed', { sessionId: id, err });
        return 'failed' as const;
      },
    );
    const outcome = await Promise.race([settled, timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') this.log.warn('committing the usage of an ending session took too long; ending it with what was committed', { sessionId: id, timeoutMs: SETTLE_TIMEOUT_MS });
  }

  private armDeadline(session: SessionRecord): void {
    if (session.deadlineUs === null) return;
    const delayMs = Math.max(0, (session.deadlineUs - this.clock.nowUs()) / 1000);
    this.arm(session.id, delayMs, () => this.end(session.id, 'ended', 'max_duration', ['active']));
  }

  private arm(id: string, delayMs: number, action: () => Promise<unknown>): void {
    this.disarm(id);
    const timer = setTimeout(() => {
      this.timers.delete(id);
      action().catch((err: unknown) => this.log.error('session timer failed', { sessionId: id, err }));
    }, delayMs);
    timer.unref();
    this.timers.set(id, timer);
  }

  private disarm(id: string): void {
    const timer = this.timers.get(id);
    if (timer) clearTimeout(timer);
    this.timers.delete(id);
  }

  private async beat(): Promise<void> {
    // Every live session has exactly one timer armed (start timeout or deadline), so the timer keys
    // are the live sessions of this process.
    const ids = [...this.timers.keys()];
    if (ids.length === 0) return;
    try {
      await this.store.heartbeatSessions(ids, this.clock.nowUs());
    } catch (err) {
      // A store outage is logged by the store itself, once each way.
      if (!isDependencyOutage(err, 'postgres')) this.log.error('session heartbeat failed', { err });
    }
  }
}
