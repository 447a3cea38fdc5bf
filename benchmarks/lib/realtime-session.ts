/**
 * What the realtime benchmarks share about a server in its own process: waiting for its start-up
 * warm-up, a WebSocket session set up as the benchmarks use it, and the critical-path timings the
 * server logs for every response ('response timing').
 */
import type { ServerProcess } from '../../test/helpers/process.js';
import { RealtimeTestClient } from '../../test/helpers/realtime-client.js';

/** The server's 'response timing' log line: ms from the response's start to each step (null: not reached). */
export interface ResponseTiming {
  firstTextMs: number | null;
  firstClauseMs: number | null;
  firstVoiceChunkMs: number | null;
  firstAudioMs: number | null;
}

/** Every response's timing in the server's output so far, by response id. */
export function responseTimings(server: ServerProcess): Map<string, ResponseTiming> {
  const timings = new Map<string, ResponseTiming>();
  for (const m of server.stdout().matchAll(/^\{.*"msg":"response timing".*\}$/gm)) {
    const r = JSON.parse(m[0]) as ResponseTiming & { responseId: string };
    timings.set(r.responseId, r);
  }
  return timings;
}

export async function waitWarm(server: ServerProcess): Promise<void> {
  for (let waited = 0; !server.stdout().includes('models warmed up'); waited += 100) {
    if (waited > 180_000) throw new Error('the server did not finish warming up in 3 minutes');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A session with audio and images out, `turnDetection`, and any further session fields in `extra`. */
export async function connect(url: string, key: string, turnDetection: unknown, extra: Record<string, unknown> = {}): Promise<RealtimeTestClient> {
  const c = await RealtimeTestClient.connect(url, { key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created', { timeoutMs: 60_000 });
  c.send({
    type: 'session.update',
    session: { type: 'realtime', output_modalities: ['audio', 'image'], audio: { input: { turn_detection: turnDetection } }, ...extra },
  });
  await c.waitFor('session.updated');
  return c;
}
