/**
 * A realtime WebSocket client for tests: connects to a test server's /v1/realtime, records every
 * server event in arrival order, and waits for events by type (with a timeout that names what it
 * was waiting for and what did arrive).
 */
import WebSocket from 'ws';
import { MOTION_PARAMS } from '../../src/realtime/server-events.js';

export interface ServerEvent {
  type: string;
  event_id: string;
  [field: string]: any;
}

export interface ConnectOptions {
  /** Query string without '?', e.g. 'model=gpt-realtime'. */
  query?: string;
  /** Authorization: Bearer key (null = none). */
  key?: string | null;
  protocols?: string[];
  headers?: Record<string, string>;
  /** The socket's path; default /v1/realtime (GPT-Live: /v1/live/sessions, or a Live sideband's …/{id}/attach). */
  path?: string;
}

const DEFAULT_WAIT_MS = 20_000;

export class RealtimeTestClient {
  readonly events: ServerEvent[] = [];
  /** Binary messages (an avatar-only session's raw frames), with how many events had arrived before each. */
  readonly binary: Array<{ data: Buffer; afterEvents: number }> = [];
  closeCode: number | null = null;
  closeReason = '';
  private waiters: Array<() => void> = [];
  private readonly closed: Promise<void>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      if (isBinary) this.binary.push({ data: data as Buffer, afterEvents: this.events.length });
      else this.events.push(JSON.parse(data.toString()) as ServerEvent);
      this.wake();
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        this.wake();
        resolve();
      }),
    );
  }

  static async connect(baseUrl: string, options: ConnectOptions = {}): Promise<RealtimeTestClient> {
    const url = `${baseUrl.replace(/^http/, 'ws')}${options.path ?? '/v1/realtime'}${options.query ? `?${options.query}` : ''}`;
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.key) headers.Authorization = `Bearer ${options.key}`;
    const ws = new WebSocket(url, options.protocols ?? [], { headers });
    const client = new RealtimeTestClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return client;
  }

  send(event: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(event));
  }

  sendRaw(text: string): void {
    this.ws.send(text);
  }

  types(): string[] {
    return this.events.map((e) => e.type);
  }

  ofType(type: string): ServerEvent[] {
    return this.events.filter((e) => e.type === type);
  }

  /** The first event (from index `from`) matching, waiting for it. */
  async waitFor(match: string | ((e: ServerEvent) => boolean), options: { from?: number; timeoutMs?: number } = {}): Promise<ServerEvent> {
    const pred = typeof match === 'string' ? (e: ServerEvent) => e.type === match : match;
    const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_WAIT_MS);
    for (;;) {
      const found = this.events.slice(options.from ?? 0).find(pred);
      if (found) return found;
      if (this.closeCode !== null) throw new Error(`socket closed (${this.closeCode} ${this.closeReason}) while waiting for ${String(match)}; got ${this.types().join(', ')}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${String(match)}; got ${this.types().join(', ')}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves with the close code once the server closes the socket. */
  async waitClose(timeoutMs = DEFAULT_WAIT_MS): Promise<number> {
    await Promise.race([this.closed, new Promise((_, reject) => setTimeout(() => reject(new Error('socket did not close')), timeoutMs))]);
    return this.closeCode as number;
  }

  async close(): Promise<void> {
    if (this.closeCode === null) {
      this.ws.close();
      await this.closed;
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

/** An output_motion.delta as it arrives (a face the client draws): several frames' MOTION_PARAMS, in thousandths. */
export type MotionEvent = { frame_index: number; pts_ms: number; frame_ms: number; params: number[]; listening: boolean; event_id: string };
/** One frame of it: its index, time and parameters (MOTION_PARAMS order), and the event it came in. */
export type MotionFrame = { frame_index: number; pts_ms: number; params: number[]; event: MotionEvent };

/** The frames of output_motion.delta events, one by one. */
export function motionFrames(events: MotionEvent[]): MotionFrame[] {
  return events.flatMap((e) =>
    Array.from({ length: e.params.length / MOTION_PARAMS.length }, (_, k) => ({
      frame_index: e.frame_index + k,
      pts_ms: e.pts_ms + k * e.frame_ms,
      params: e.params.slice(k * MOTION_PARAMS.length, (k + 1) * MOTION_PARAMS.length),
      event: e,
    })),
  );
}
