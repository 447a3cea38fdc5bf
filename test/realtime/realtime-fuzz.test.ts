/**
 * Realtime fuzz: a seeded stream of hostile client events over real WebSockets to the real server
 * (harness/servers/realtime-server.ts: real engine, store and avatar; scripted model, tone voice,
 * set transcript; real Silero VAD). Cases are built from the real event shapes and then broken:
 * wrong types, missing and unknown fields, huge and tiny numbers, deep nesting, many elements, long
 * strings, unicode, bad base64, odd PCM, unknown types, valid events in odd orders, binary frames,
 * non-JSON, and a few oversize events and 15 MiB audio appends. Several connections run side by side (one a
 * transcription session, which refuses what it has not by name), each sending
 * one case and then a probe event (an item retrieve that must fail with item_retrieve_invalid_item_id naming
 * the probe), so what a case caused is known and the session is shown to answer after every case.
 *
 * Asserts: no `server_error` event (the providers here never fail, so every error is the client's);
 * every error caused by an event that carried an event_id names it, and no error names an event
 * that was not sent; every connection stays open;
 * each session still answers a final valid text turn (the transcription session: a committed turn's
 * transcript); /healthz keeps answering in time; nothing
 * escapes to the process (uncaught exceptions and unhandled rejections are collected while the
 * suite runs, so one escape does not end the run before the others are seen; the listeners are
 * removed afterwards, since `npm test` runs every test file in this one process).
 *
 * FUZZ_SEED replays a run; FUZZ_WS_CASES and FUZZ_WS_TIME_BUDGET_MS change its size.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Rng, buildRealtimeCase, checkCaseErrors, fuzzSeed, learnRealtime, type RealtimeKnown } from '../helpers/fuzz.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { watchHealth } from '../helpers/health.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { startMcpServer } from '../../harness/servers/mcp-server.js';

const CASES = Number(process.env.FUZZ_WS_CASES) || 3000;
/** Cases stop being issued after this long, so a loaded machine bounds the suite's time, not its coverage. */
const TIME_BUDGET_MS = Number(process.env.FUZZ_WS_TIME_BUDGET_MS) || 35_000;
/** A run on a very loaded machine must still have tried this many cases to count. */
const MIN_CASES = 300;
/**
 * Connections fuzzed side by side: one ga, one older dialect, two ga with turn detection off at
 * first, and a transcription session (TRANSCRIPTION_CONNECTION).
 */
const CONNECTIONS = 5;
const TRANSCRIPTION_CONNECTION = 4;
/** A case's probe must be answered within this long, or the session is taken as stuck. */
const CASE_TIMEOUT_MS = 30_000;
/** /healthz is asked this often while the fuzz runs. */
const HEALTH_INTERVAL_MS = 100;
/** /healthz must answer within this long: an event that blocks the event loop for seconds shows; load noise does not. */
const HEALTH_DEADLINE_MS = 2_000;
/**
 * Cases (by index) that send a valid 15 MiB base64 audio append, and an event over the 16 MiB
 * limit. Case n runs on connection n % CONNECTIONS: these land on the two where turn detection is
 * off, so minutes of audio are not run through the VAD.
 */
const HUGE_APPEND_AT = new Set([98, 1503]);
const OVERSIZE_AT = new Set([313, 2202]);

interface ConnState {
  client: RealtimeTestClient;
  known: RealtimeKnown;
  /** Problems found (with the case that caused them). */
  failures: string[];
  cases: number;
}

async function connect(t: RealtimeTestServer, index: number): Promise<RealtimeTestClient> {
  const query = index === TRANSCRIPTION_CONNECTION ? 'intent=transcription' : index === 1 ? 'model=gpt-realtime&voice=default' : 'model=gpt-realtime';
  const client = await RealtimeTestClient.connect(t.url, { key: t.key, query });
  await client.waitFor('session.created');
  if (index === 2 || index === 3) {
    client.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
    await client.waitFor('session.updated');
  }
  return client;
}

/** The transcription session's last turn: committed by the client, it must be transcribed. */
async function finalTranscription(client: RealtimeTestClient): Promise<string | null> {
  client.send({ type: 'session.update', event_id: 'final_update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 24_000 }, turn_detection: null } } } });
  const updated = await client.waitFor((e) => e.type === 'session.updated' || (e.type === 'error' && e.error.event_id === 'final_update'), { from: client.events.length - 1, timeoutMs: CASE_TIMEOUT_MS });
  if (updated.type === 'error') return `final update refused: ${JSON.stringify(updated.error)}`;
  const from = client.events.length;
  client.send({ type: 'input_audio_buffer.clear' });
  client.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(24_000).toString('base64') });
  client.send({ type: 'input_audio_buffer.commit', event_id: 'final_commit' });
  const committed = await client.waitFor((e) => e.type === 'input_audio_buffer.committed' || (e.type === 'error' && e.error.event_id === 'final_commit'), { from, timeoutMs: CASE_TIMEOUT_MS });
  if (committed.type === 'error') return `final commit refused: ${JSON.stringify(committed.error)}`;
  const ended = await client.waitFor((e) => e.type.startsWith('conversation.item.input_audio_transcription.') && e.type !== 'conversation.item.input_audio_transcription.delta' && e.item_id === committed.item_id, { from, timeoutMs: CASE_TIMEOUT_MS });
  return ended.type === 'conversation.item.input_audio_transcription.completed' ? null : `final transcription ${JSON.stringify(ended)}`;
}

/** One valid text turn at the end: the session must still answer (a response still running is cancelled first). */
async function finalTurn(client: RealtimeTestClient): Promise<string | null> {
  client.send({ type: 'session.update', event_id: 'final_update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
  await client.waitFor((e) => e.type === 'session.updated' || (e.type === 'error' && e.error.event_id === 'final_update'), { from: client.events.length - 1, timeoutMs: CASE_TIMEOUT_MS });
  client.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Are you still there?' }] } });
  for (let attempt = 0; attempt < 5; attempt++) {
    const from = client.events.length;
    // Its own output limit: the fuzz may have left the session's at a token or two, which the
    // model honours (the reply would then be incomplete, rightly).
    client.send({ type: 'response.create', event_id: `final_${attempt}`, response: { output_modalities: ['text'], max_output_tokens: 'inf' } });
    const first = await client.waitFor((e) => e.type === 'response.created' || (e.type === 'error' && e.error.event_id === `final_${attempt}`), { from, timeoutMs: CASE_TIMEOUT_MS });
    if (first.type === 'response.created') {
      const done = await client.waitFor((e) => e.type === 'response.done' && e.response.id === first.response.id, { from, timeoutMs: CASE_TIMEOUT_MS });
      return done.response.status === 'completed' && done.response.output[0]?.content?.[0]?.text ? null : `final turn ended ${JSON.stringify(done.response.status_details)}`;
    }
    if (first.error.code !== 'conversation_already_has_active_response') return `final turn refused: ${JSON.stringify(first.error)}`;
    const cancelFrom = client.events.length;
    client.send({ type: 'response.cancel' });
    await client.waitFor((e) => e.type === 'response.done' || e.type === 'error', { from: cancelFrom, timeoutMs: CASE_TIMEOUT_MS });
  }
  return 'final turn: a response stayed active through five cancels';
}

test('thousands of hostile realtime events: no server_error, errors name their events, sessions answer, /healthz responsive', async () => {
  const seed = fuzzSeed();
  console.log(`  realtime fuzz seed ${seed} (replay: FUZZ_SEED=${seed})`);
  const escaped: string[] = [];
  const onEscape = (err: unknown) => escaped.push(String((err as Error)?.stack ?? err).slice(0, 500));
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
  // A live MCP server the fuzzed sessions may declare (and unreachable or refused ones beside it).
  const mcp = await startMcpServer();
  const t = await startRealtimeTestServer({ env: { WORKER_CAPACITY: String(CONNECTIONS), MCP_ALLOWED_HOSTS: '127.0.0.1', MCP_ALLOW_PRIVATE_ADDRESSES: 'true', MCP_LIST_TIMEOUT_MS: '2000' } });
  const healthWatch = watchHealth(t.url, HEALTH_DEADLINE_MS, HEALTH_INTERVAL_MS);
  let health = { asked: 0, worstMs: 0, failed: [] as string[] };
  const started = performance.now();
  const conns: ConnState[] = [];
  try {
    for (let i = 0; i < CONNECTIONS; i++) conns.push({ client: await connect(t, i), known: { itemIds: [], assistantItemIds: [], responseIds: [], mcpUrl: mcp.url }, failures: [], cases: 0 });
    const worker = async (conn: ConnState, index: number) => {
      // Each connection draws its own cases (index, index + CONNECTIONS, ...) from its own stream,
      // so a seed replays the same cases on the same connection.
      const rng = new Rng(seed + index * 7919);
      for (let n = index; n < CASES && performance.now() - started < TIME_BUDGET_MS && conn.failures.length < 20; n += CONNECTIONS) {
        const { client } = conn;
        const built = buildRealtimeCase(rng, n, conn.known, { hugeAppendAt: HUGE_APPEND_AT, oversizeAt: OVERSIZE_AT });
        const from = client.events.length;
        for (const frame of built.frames) client.ws.send(frame);
        const probe = `probe_${n}`;
        client.send({ type: 'conversation.item.retrieve', item_id: '__fuzz_probe__', event_id: probe });
        try {
          await client.waitFor((e) => e.type === 'error' && e.error?.event_id === probe, { from, timeoutMs: CASE_TIMEOUT_MS });
        } catch (err) {
          conn.failures.push(`case ${n} (${built.describe}): the session did not answer: ${(err as Error).message.slice(0, 300)}`);
          return;
        }
        const caused = client.events.slice(from).filter((e) => !(e.type === 'error' && e.error?.event_id === probe));
        // An error may name an earlier case (a response it started failing later), never an event that was not sent.
        checkCaseErrors(caused, built, n, conn.failures, 'fz_');
        learnRealtime(conn.known, caused);
        conn.cases++;
      }
    };
    await Promise.all(conns.map((c, i) => worker(c, i)));
    for (const conn of conns) {
      if (conn.client.closeCode !== null) conn.failures.push(`connection closed ${conn.client.closeCode} ${conn.client.closeReason}`);
      else if (conn.failures.length === 0) {
        const last = conns.indexOf(conn) === TRANSCRIPTION_CONNECTION ? finalTranscription : finalTurn;
        const problem = await last(conn.client).catch((err: Error) => err.message.slice(0, 300));
        if (problem) conn.failures.push(problem);
      }
    }
  } finally {
    health = await healthWatch.stop();
    for (const conn of conns) await conn.client.close();
    await t.close();
    await mcp.close();
    process.off('uncaughtException', onEscape);
    process.off('unhandledRejection', onEscape);
  }
  const seconds = (performance.now() - started) / 1000;
  const issued = conns.reduce((n, c) => n + c.cases, 0);
  const errorCodes = new Map<string, number>();
  for (const c of conns) for (const e of c.client.ofType('error')) errorCodes.set(e.error.code, (errorCodes.get(e.error.code) ?? 0) + 1);
  console.log(
    `  ${issued} cases in ${seconds.toFixed(1)} s over ${CONNECTIONS} connections; error codes ${JSON.stringify(Object.fromEntries([...errorCodes].sort((a, b) => b[1] - a[1])))}; /healthz asked ${health.asked} times, worst ${Math.round(health.worstMs)} ms`,
  );
  const failures = conns.flatMap((c) => c.failures);
  assert.equal(failures.slice(0, 15), [], `${failures.length} problems (seed ${seed})`);
  assert.equal(health.failed.slice(0, 10), [], `/healthz was not responsive (seed ${seed})`);
  assert.equal(escaped.slice(0, 5), [], `${escaped.length} errors escaped to the process (seed ${seed})`);
  assert.ok(issued >= MIN_CASES, `only ${issued} cases ran in ${TIME_BUDGET_MS} ms`);
});

test.run();
