/**
 * Avatar-only fuzz: a seeded stream of hostile client events to avatar-only sessions over real
 * WebSockets to the real server and media plane (docs/avatar-mode.md). Cases are the avatar's own
 * events (appends of odd lengths, rates and encodings, commits, clears, listen, session.update with
 * every field) broken the way the realtime fuzz breaks events, the realtime events it refuses by
 * name, floods past the queue bound, non-JSON and binary frames. After each case a probe (a
 * session.update with a field avatar sessions refuse) must be answered naming the probe.
 *
 * Asserts: no `server_error`; every error caused by an event with an event_id names it; the
 * connections stay open; every session still plays a final segment to its end (once, not
 * interrupted); /healthz keeps answering; nothing escapes to the process.
 *
 * FUZZ_SEED replays a run; FUZZ_AVATAR_TIME_BUDGET_MS changes its length.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Rng, checkCaseErrors, fuzzSeed, mutateObject, oddJson, oddString } from '../helpers/fuzz.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { watchHealth } from '../helpers/health.js';
import { startRealtimeTestServer } from '../../harness/servers/realtime-server.js';

const TIME_BUDGET_MS = Number(process.env.FUZZ_AVATAR_TIME_BUDGET_MS) || 20_000;
const MIN_CASES = 100;
const CASE_TIMEOUT_MS = 30_000;
const HEALTH_DEADLINE_MS = 2_000;

interface Built {
  frames: Array<string | Buffer>;
  eventId: string | null;
  describe: string;
}

const pcm = (rng: Rng, samples: number) => {
  const out = new Int16Array(samples);
  for (let i = 0; i < samples; i++) out[i] = rng.int(-12000, 12000);
  return Buffer.from(out.buffer).toString('base64');
};

/** A valid event of the avatar's vocabulary (or a realtime one it refuses). */
function validEvent(rng: Rng): Record<string, unknown> {
  switch (rng.int(0, 9)) {
    case 0:
    case 1:
    case 2:
      return { type: 'output_audio_buffer.append', audio: pcm(rng, rng.pick([0, 1, 160, 480, 2400, 24000])) };
    case 3:
      return { type: 'output_audio_buffer.commit' };
    case 4:
      return { type: 'output_audio_buffer.clear' };
    case 5:
      return { type: 'avatar.listen', listening: rng.chance(0.5) };
    case 6:
      return {
        type: 'session.update',
        session: rng.pick([
          { audio: { input: { format: { type: 'audio/pcm', rate: rng.pick([8000, 11025, 16000, 22050, 24000, 44100, 48000, 7999, 48001, 0]) } } } },
          { audio: { input: { format: { type: rng.pick(['audio/pcmu', 'audio/pcma', 'audio/opus']) } } } },
          { audio: { output: { format: { type: rng.pick(['audio/pcm', 'audio/pcmu', 'audio/pcma']) } } } },
          { output_modalities: rng.pick([['audio'], ['image'], ['audio', 'image'], [], ['text']]) },
          { face: rng.pick(['default', 'no-such-face', '', null]) },
          { driving: rng.pick(['default', 'no-such-motion', null]) },
          { video: { format: rng.pick(['jpeg', 'i420', 'png']) } },
          { type: rng.pick(['avatar', 'realtime', 'transcription']) },
          { tools: [] },
        ]),
      };
    case 7:
      return { type: rng.pick(['response.create', 'input_audio_buffer.append', 'conversation.item.create', 'response.cancel']) };
    case 8:
      return { type: 'output_audio_buffer.append', audio: rng.pick(['!!', 'AAA', '', '====', Buffer.from([1, 2, 3]).toString('base64')]) };
    default:
      return { type: 'output_audio_buffer.append', audio: pcm(rng, 24000 * rng.int(10, 30)) }; // a flood: up to 30 s at once, past the 120 s bound in a few
  }
}

function buildCase(rng: Rng, n: number): Built {
  const kind = rng.int(0, 9);
  if (kind === 0) return { frames: [oddString(rng, 200)], eventId: null, describe: 'not an event' };
  if (kind === 1) return { frames: [rng.bytes(rng.int(1, 64))], eventId: null, describe: 'binary' };
  if (kind === 2) return { frames: [JSON.stringify(oddJson(rng))], eventId: null, describe: 'odd json' };
  const body = kind < 7 ? validEvent(rng) : mutateObject(rng, validEvent(rng));
  delete body.event_id;
  // The event_id first: the server finds it even in an event it refuses unparsed (too deep, too many elements).
  const eventId = rng.chance(0.8) ? `fz_${n}` : null;
  const text = JSON.stringify(eventId ? { event_id: eventId, ...body } : body);
  return { frames: [text], eventId, describe: text.slice(0, 120) };
}


/** After the fuzz: a clear, then a short segment that must play to its end, once. */
async function finalSegment(client: RealtimeTestClient): Promise<string | null> {
  client.send({ type: 'session.update', session: { audio: { input: { format: { type: 'audio/pcm', rate: 24000 } } }, output_modalities: ['audio', 'image'] } });
  client.send({ type: 'output_audio_buffer.clear', event_id: 'final_clear' });
  await client.waitFor((e) => e.type === 'output_audio_buffer.cleared', { from: client.events.length, timeoutMs: CASE_TIMEOUT_MS });
  const from = client.events.length;
  client.send({ type: 'output_audio_buffer.append', audio: pcm(new Rng(1), 4800) });
  client.send({ type: 'output_audio_buffer.commit' });
  const committed = await client.waitFor('output_audio_buffer.committed', { from, timeoutMs: CASE_TIMEOUT_MS });
  const stopped = await client.waitFor((e) => e.type === 'output_audio_buffer.stopped' && e.segment_id === committed.segment_id, { from, timeoutMs: CASE_TIMEOUT_MS });
  if (stopped.interrupted || stopped.played_ms !== 200) return `final segment ended ${JSON.stringify(stopped)}`;
  return null;
}

test('hostile events to avatar-only sessions: no server_error, errors name their events, sessions keep playing, /healthz responsive', async () => {
  const seed = fuzzSeed();
  console.log(`  avatar fuzz seed ${seed} (replay: FUZZ_SEED=${seed})`);
  const escaped: string[] = [];
  const onEscape = (err: unknown) => escaped.push(String((err as Error)?.stack ?? err).slice(0, 500));
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
  const t = await startRealtimeTestServer();
  const healthWatch = watchHealth(t.url, HEALTH_DEADLINE_MS);
  let health = { asked: 0, worstMs: 0, failed: [] as string[] };
  const started = performance.now();
  const failures: string[] = [];
  const clients: RealtimeTestClient[] = [];
  let cases = 0;
  try {
    for (const query of ['intent=avatar', 'intent=avatar&video_format=i420']) {
      const client = await RealtimeTestClient.connect(t.url, { key: t.key, query });
      await client.waitFor('session.created');
      clients.push(client);
    }
    await Promise.all(
      clients.map(async (client, index) => {
        const rng = new Rng(seed + index * 7919);
        for (let n = index; performance.now() - started < TIME_BUDGET_MS && failures.length < 20; n += clients.length) {
          const built = buildCase(rng, n);
          const from = client.events.length;
          for (const frame of built.frames) client.ws.send(frame);
          const probe = `probe_${n}`;
          client.send({ type: 'session.update', event_id: probe, session: { instructions: 'probe' } });
          try {
            await client.waitFor((e) => e.type === 'error' && e.error?.event_id === probe, { from, timeoutMs: CASE_TIMEOUT_MS });
          } catch (err) {
            failures.push(`case ${n} (${built.describe}): the session did not answer: ${(err as Error).message.slice(0, 300)}`);
            return;
          }
          checkCaseErrors(client.events.slice(from).filter((e) => !(e.type === 'error' && e.error?.event_id === probe)), built, n, failures);
          client.binary.length = 0; // raw frames: 10 MB/s that nothing here reads
          cases++;
        }
      }),
    );
    for (const client of clients) {
      if (client.closeCode !== null) failures.push(`connection closed ${client.closeCode} ${client.closeReason}`);
      else if (failures.length === 0) {
        const problem = await finalSegment(client).catch((err: Error) => err.message.slice(0, 300));
        if (problem) failures.push(problem);
      }
      const stoppedPerSegment = new Map<string, number>();
      for (const e of client.ofType('output_audio_buffer.stopped')) stoppedPerSegment.set(e.segment_id, (stoppedPerSegment.get(e.segment_id) ?? 0) + 1);
      const twice = [...stoppedPerSegment].filter(([, count]) => count > 1);
      if (twice.length > 0) failures.push(`segments finished more than once: ${JSON.stringify(twice.slice(0, 3))}`);
    }
  } finally {
    health = await healthWatch.stop();
    for (const client of clients) await client.close();
    await t.close();
    process.off('uncaughtException', onEscape);
    process.off('unhandledRejection', onEscape);
  }
  const codes = new Map<string, number>();
  for (const c of clients) for (const e of c.ofType('error')) codes.set(e.error.code, (codes.get(e.error.code) ?? 0) + 1);
  console.log(`  ${cases} cases in ${((performance.now() - started) / 1000).toFixed(1)} s; error codes ${JSON.stringify(Object.fromEntries([...codes].sort((a, b) => b[1] - a[1])))}`);
  assert.equal(failures.slice(0, 15), [], `${failures.length} problems (seed ${seed})`);
  assert.equal(health.failed.slice(0, 10), [], `/healthz was not responsive (seed ${seed})`);
  assert.equal(escaped.slice(0, 5), [], `${escaped.length} errors escaped to the process (seed ${seed})`);
  assert.ok(cases >= MIN_CASES, `only ${cases} cases ran`);
});

test.run();
