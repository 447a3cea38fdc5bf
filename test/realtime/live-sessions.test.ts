/**
 * GPT-Live (/v1/live/sessions) on this server's engine (issue 41): over WebSocket, the protocol's
 * own rules (session.start first and once, unknown fields, delegation and 16 kHz refused with
 * the protocol's errors, answers to early commands after session.started), a spoken turn answered
 * with no client event (transcripts on the session timeline, audio, the avatar's frames, usage),
 * barge-in with no client event, appended context reaching the model, session.close; over WebRTC
 * (Chromium), POST /v1/live/sessions answering the offer in JSON and the session starting by
 * itself, the microphone's question answered on the audio and video tracks, Live events on the
 * data channel. A sideband (/v1/live/sessions/{id}/attach) hears the session with its audio
 * reflected and sends commands, its errors to it alone; the REST controls end a session (hangup)
 * or say why they cannot apply. A hostile stream of Live events on one socket ends in no
 * server_error.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import type { Page } from 'playwright-core';
import { callIn, chromiumAvailable, CHROMIUM_PATH, eventsIn, launchBrowser, type CallStartResult, type TestBrowser } from '../../harness/clients/browser.js';
import { DEFAULT_TRANSCRIPT, startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { concatSamples, speechPcm24k } from '../../harness/measures/speech.js';
import { until } from '../../harness/servers/wait.js';
import { suiteNeeding } from '../helpers/skip.js';
import { Rng, fuzzSeed, mutateObject, oddJson, oddString } from '../helpers/fuzz.js';

type LiveEvent = { type: string; [field: string]: any };

interface LiveSocket {
  events: LiveEvent[];
  closed: Promise<{ code: number; reason: string }>;
  send(event: Record<string, unknown>): void;
  sendText(text: string): void;
  waitFor(pred: (e: LiveEvent) => boolean, what: string, timeoutMs?: number): Promise<LiveEvent>;
  close(): void;
}

async function openLive(t: RealtimeTestServer, key = t.key, path = '/v1/live/sessions'): Promise<LiveSocket> {
  const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}${path}`, { headers: { Authorization: `Bearer ${key}` } });
  const events: LiveEvent[] = [];
  ws.on('message', (data) => events.push(JSON.parse(String(data)) as LiveEvent));
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return {
    events,
    closed,
    send: (event) => ws.send(JSON.stringify(event)),
    sendText: (text) => ws.send(text),
    waitFor: (pred, what, timeoutMs = 20_000) => until(async () => events.find(pred) ?? null, (e) => e !== null, what, timeoutMs).then((e) => e!),
    close: () => ws.close(),
  };
}

/** Appends `pcm` (24 kHz) as session.input_audio.append events of 200 ms. */
function append(live: LiveSocket, pcm: Int16Array): void {
  for (let i = 0; i < pcm.length; i += 4800) {
    const chunk = pcm.subarray(i, Math.min(pcm.length, i + 4800));
    live.send({ type: 'session.input_audio.append', audio: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('base64') });
  }
}

const silence = (s: number) => new Int16Array(Math.round(24_000 * s));
const question = () => concatSamples([silence(0.5), speechPcm24k('What is the weather like today?'), silence(1.5)]);
const START = { type: 'session.start', event_id: 'start_1', session: { model: 'gpt-live-1', instructions: 'Be brief.', audio: { output: { voice: 'marin' } } } };
const errorsOf = (events: LiveEvent[]) => events.filter((e) => e.type === 'error').map((e) => [e.client_event_id, e.error.code, e.error.param ?? null]);

const Ws = suite<{ t: RealtimeTestServer }>('GPT-Live over WebSocket', {} as { t: RealtimeTestServer });
Ws.before.each(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});
Ws.after.each(async (ctx) => {
  await ctx.t.close();
});

Ws("the protocol's rules: session.start first and once, its fields checked, delegation and decisions refused; answers to early commands follow session.started", async (ctx) => {
  const live = await openLive(ctx.t);
  live.send({ type: 'session.input_audio.append', event_id: 'early', audio: '' });
  live.send({ type: 'session.start', event_id: 's_unknown', session: { model: 'gpt-live-1', voice: 'marin' } });
  live.send({ type: 'session.start', event_id: 's_nomodel', session: {} });
  live.send({ type: 'session.start', event_id: 's_deleg', session: { model: 'gpt-live-1', delegation: { type: 'client' } } });
  live.send({ type: 'session.start', event_id: 's_16k', session: { model: 'gpt-live-1', audio: { format: { type: 'audio/pcm', rate: 16000 } } } });
  live.send(START);
  live.send({ type: 'session.instructions.append', event_id: 'ins', content: 'The user is called Ann.' });
  const started = await live.waitFor((e) => e.type === 'session.started', 'session.started');
  assert.equal([started.client_event_id, started.session.model, started.session.status], ['start_1', 'gpt-live-1', 'active']);
  assert.match(started.session.id, /^sess_/);
  assert.ok(started.session.expires_at > Date.now() / 1000);
  const appended = await live.waitFor((e) => e.type === 'session.instructions.appended', 'appended');
  assert.ok(live.events.indexOf(appended) > live.events.indexOf(started), 'the answer to an early command follows session.started');
  assert.equal([appended.client_event_id, appended.start_ms === appended.end_ms], ['ins', true]);
  live.send({ ...START, event_id: 's_again' });
  live.send({ type: 'response.create', event_id: 'rc' });
  live.send({ type: 'session.update', event_id: 'su', session: { delegation: null } });
  live.send({ type: 'decision.create', event_id: 'dc' });
  live.send({ type: 'session.output_audio.fixture.play', event_id: 'fx', audio: '' });
  live.send({ type: 'session.input_audio.mute', event_id: 'mute' });
  live.send({ type: 'nonsense', event_id: 'nn' });
  await live.waitFor((e) => e.type === 'error' && e.client_event_id === 'nn', 'the last refusal');
  assert.equal(errorsOf(live.events), [
    ['early', 'session_not_started', null],
    ['s_unknown', 'unknown_parameter', 'session.voice'],
    ['s_nomodel', 'missing_required_parameter', 'session.model'],
    ['s_deleg', 'delegation_not_supported', 'session.delegation'],
    ['s_16k', 'unsupported_audio_format', 'session.audio.format'],
    ['s_again', 'session_already_started', null],
    ['rc', 'delegation_not_supported', null],
    ['su', 'delegation_not_supported', 'session.delegation'],
    ['dc', 'decisions_not_supported', null],
    ['fx', 'unsupported_event', null],
    ['nn', 'invalid_event', 'type'],
  ]);
  assert.ok(live.events.some((e) => e.type === 'session.input_audio.muted' && e.client_event_id === 'mute'));
  // The appended instructions reach the model with the next reply.
  live.send({ type: 'session.input_audio.unmute' });
  append(live, question());
  await live.waitFor((e) => e.type === 'session.output_audio.delta', 'the reply', 30_000);
  assert.ok(ctx.t.llm.requests.at(-1)!.messages.some((m) => m.role === 'system' && m.content === 'The user is called Ann.'));
  live.close();
});

Ws('a spoken question is answered with no client event: transcripts on the session timeline, audio, frames, usage; session.close ends it', async (ctx) => {
  const live = await openLive(ctx.t);
  live.send(START);
  await live.waitFor((e) => e.type === 'session.started', 'session.started');
  append(live, question());
  const heard = await live.waitFor((e) => e.type === 'session.input_transcript.delta', 'the words heard');
  assert.is(heard.delta, DEFAULT_TRANSCRIPT);
  assert.ok(heard.start_ms >= 0 && heard.end_ms > heard.start_ms + 1000, `timed by the speech: ${heard.start_ms}..${heard.end_ms}`);
  await live.waitFor((e) => e.type === 'session.usage.updated', 'usage after the reply', 30_000);
  const said = live.events.filter((e) => e.type === 'session.output_transcript.delta');
  assert.ok(said.length > 0 && said.every((d) => d.start_ms >= heard.start_ms), 'the reply is later on the timeline');
  const audio = live.events.filter((e) => e.type === 'session.output_audio.delta').reduce((n, e) => n + Buffer.from(e.delta, 'base64').length, 0);
  assert.ok(audio > 24_000, `${audio} bytes of speech`);
  const frames = live.events.filter((e) => e.type === 'session.output_image.delta');
  assert.ok(frames.length > 5 && Buffer.from(frames[0]!.delta, 'base64')[0] === 0xff, 'JPEG frames on the socket');
  // No realtime event leaks into a Live session.
  assert.equal(live.events.filter((e) => e.type.startsWith('response.') || e.type.startsWith('conversation.') || e.type.startsWith('input_audio_buffer.')), []);
  live.send({ type: 'session.close', event_id: 'bye' });
  const closed = await live.waitFor((e) => e.type === 'session.closed', 'session.closed');
  assert.equal([closed.reason, closed.client_event_id, closed.session.status], ['close_requested', 'bye', 'active']);
  assert.ok(closed.usage.seconds > 0);
  assert.equal((await live.closed).code, 1000);
});

Ws('barge-in: the user talking over the reply stops it, with no client event, and the new turn is answered', async (ctx) => {
  const LONG = 'Today is bright and mild in most places, with a light breeze from the west. '.repeat(6).trim();
  let asked = 0;
  ctx.t.llm.options = { reply: () => (asked++ === 0 ? LONG : 'Second answer.') };
  const live = await openLive(ctx.t);
  live.send(START);
  await live.waitFor((e) => e.type === 'session.started', 'session.started');
  append(live, question());
  await live.waitFor((e) => e.type === 'session.output_audio.delta', 'the reply playing', 30_000);
  append(live, question());
  await live.waitFor((e) => e.type === 'session.output_transcript.delta' && e.delta.includes('Second answer.'), 'the second turn answered', 30_000);
  const said = live.events.filter((e) => e.type === 'session.output_transcript.delta').map((e) => e.delta as string);
  const firstReply = said.filter((d) => d.includes('Today is bright')).length;
  assert.ok(firstReply < 6, `the long reply was cut (${firstReply} of 6 sentences heard)`);
  assert.is(live.events.filter((e) => e.type === 'session.input_transcript.delta').length, 2);
  live.close();
});

Ws('a sideband hears the session: every event, the input audio reflected (muted too: the model hears silence), the output audio with its times; its commands go in, its errors to it alone', async (ctx) => {
  const live = await openLive(ctx.t);
  live.send(START);
  const started = await live.waitFor((e) => e.type === 'session.started', 'session.started');
  const id = started.session.id as string;
  const sb = await openLive(ctx.t, ctx.t.key, `/v1/live/sessions/${id}/attach`);
  const info = await sb.waitFor((e) => e.type === 'info', 'the attach notice');
  assert.equal([info.code, typeof info.event_id], ['sideband_attached', 'string']);
  // Commands of the sideband: what a primary may send goes in; session.start, audio and SIP commands are refused to it alone.
  sb.send({ type: 'session.instructions.append', event_id: 'sb_ins', content: 'The user is called Ann.' });
  sb.send({ type: 'session.start', event_id: 'sb_start', session: { model: 'gpt-live-1' } });
  sb.send({ type: 'session.input_audio.append', event_id: 'sb_audio', audio: 'AAAA' });
  sb.send({ type: 'transport.dtmf.send', event_id: 'sb_dtmf', event: '1' });
  await sb.waitFor((e) => e.type === 'error' && e.client_event_id === 'sb_dtmf', 'the last refusal');
  assert.equal(errorsOf(sb.events), [['sb_start', 'session_already_started', null], ['sb_audio', 'unsupported_event', null], ['sb_dtmf', 'unsupported_event', null]]);
  await live.waitFor((e) => e.type === 'session.instructions.appended' && e.client_event_id === 'sb_ins', 'the primary hears the append');
  // Muted, the primary's audio is still reflected; the model hears silence.
  live.send({ type: 'session.input_audio.mute', event_id: 'mute' });
  append(live, question());
  await sb.waitFor((e) => e.type === 'session.input_audio.muted', 'the mute heard');
  const reflectedWhileMuted = () => sb.events.filter((e) => e.type === 'session.input_audio.append').reduce((n, e) => n + Buffer.from(e.audio, 'base64').length, 0);
  await until(async () => reflectedWhileMuted(), (n) => n >= question().length * 2, 'the muted question reflected');
  assert.ok(sb.events.filter((e) => e.type === 'session.input_audio.append').every((e) => e.event_id === undefined), 'reflected audio has no event_id');
  await new Promise((r) => setTimeout(r, 1500));
  assert.not.ok(live.events.some((e) => e.type === 'session.input_transcript.delta'), 'a muted question is not heard');
  // Unmuted: the question is answered; the sideband hears the transcripts and the reply's audio with its times.
  live.send({ type: 'session.input_audio.unmute' });
  append(live, question());
  await live.waitFor((e) => e.type === 'session.usage.updated', 'the reply', 30_000);
  await sb.waitFor((e) => e.type === 'session.usage.updated', 'the reply heard by the sideband');
  assert.is(sb.events.find((e) => e.type === 'session.input_transcript.delta')?.delta, DEFAULT_TRANSCRIPT);
  const out = sb.events.filter((e) => e.type === 'session.output_audio.delta');
  const primaryOut = live.events.filter((e) => e.type === 'session.output_audio.delta');
  assert.ok(out.length > 0 && out.length === primaryOut.length, `${out.length} reflected chunks, ${primaryOut.length} on the primary`);
  assert.ok(primaryOut.every((e) => e.start_ms === undefined), 'the primary has no times on its audio');
  for (let i = 0; i < out.length; i++) {
    const e = out[i]!;
    assert.is(e.end_ms - e.start_ms, Math.round(Buffer.from(e.delta, 'base64').length / 48), 'a range as long as its audio');
    if (i > 0) assert.ok(e.start_ms >= out[i - 1]!.end_ms, 'ranges in order, never overlapping');
  }
  assert.ok(ctx.t.llm.requests.at(-1)!.messages.some((m) => m.role === 'system' && m.content === 'The user is called Ann.'), "the sideband's instruction reached the model");
  assert.not.ok(live.events.some((e) => e.type === 'error'), "the sideband's errors are for it alone");
  // The sideband closes; the session goes on. The primary's close ends the sideband with session.closed.
  const sb2 = await openLive(ctx.t, ctx.t.key, `/v1/live/sessions/${id}/attach`);
  await sb2.waitFor((e) => e.type === 'info', 'a second sideband');
  sb2.close();
  live.send({ type: 'session.close', event_id: 'bye' });
  assert.is((await sb.waitFor((e) => e.type === 'session.closed', 'session.closed on the sideband')).reason, 'close_requested');
  assert.is((await sb.closed).code, 1000);
});

Ws("a sideband is refused for another user's, an unknown or an ended session, and with an ephemeral key", async (ctx) => {
  const live = await openLive(ctx.t);
  live.send(START);
  const id = (await live.waitFor((e) => e.type === 'session.started', 'session.started')).session.id as string;
  const refusal = async (key: string, path: string) => {
    const sb = await openLive(ctx.t, key, path);
    const { code } = await sb.closed;
    return [code, sb.events.map((e) => e.error?.code)];
  };
  const other = await ctx.t.keyFor('someone-else');
  const secret = (await ctx.t.request('POST', '/v1/realtime/client_secrets', { json: {} })).body.value as string;
  assert.equal(await refusal(other, `/v1/live/sessions/${id}/attach`), [4004, ['session_not_found']]);
  assert.equal(await refusal(ctx.t.key, '/v1/live/sessions/sess_nothing/attach'), [4004, ['session_not_found']]);
  assert.equal(await refusal(secret, `/v1/live/sessions/${id}/attach`), [4001, ['invalid_api_key']]);
  live.send({ type: 'session.close' });
  await live.closed;
  await until(async () => (await ctx.t.request('GET', `/v1/sessions/${id}`)).body.status, (s) => s === 'ended', 'the session ended');
  assert.equal(await refusal(ctx.t.key, `/v1/live/sessions/${id}/attach`), [4009, ['session_closed']]);
});

Ws('the REST controls: hangup ends a session (session.closed, then 1000); SIP, fork and recording controls say why they cannot apply', async (ctx) => {
  const live = await openLive(ctx.t);
  live.send(START);
  const id = (await live.waitFor((e) => e.type === 'session.started', 'session.started')).session.id as string;
  const post = (path: string, json?: unknown) => ctx.t.request('POST', path, json === undefined ? {} : { json });
  const code = (r: { status: number; body: any }) => [r.status, r.body?.error?.code ?? null];
  assert.equal(code(await post(`/v1/live/sessions/${id}/accept`, { session: {} })), [400, 'sip_not_supported']);
  assert.equal(code(await post(`/v1/live/sessions/${id}/reject`, { status_code: 486 })), [400, 'sip_not_supported']);
  assert.equal(code(await post(`/v1/live/sessions/${id}/refer`, { target_uri: 'tel:+1' })), [400, 'sip_not_supported']);
  assert.equal(code(await post(`/v1/live/sessions/${id}/fork`, { transport: { type: 'webrtc', sdp: 'v=0' } })), [400, 'fork_not_supported']);
  assert.equal(code(await ctx.t.request('GET', `/v1/live/sessions/${id}/content`)), [404, 'recording_not_found']);
  assert.equal(code(await post('/v1/live/sessions/sess_nothing/hangup')), [404, 'session_not_found']);
  const hangup = await post(`/v1/live/sessions/${id}/hangup`);
  assert.is(hangup.status, 204);
  const closed = await live.waitFor((e) => e.type === 'session.closed', 'session.closed');
  assert.is(closed.reason, 'close_requested');
  await live.closed;
  assert.not.ok(live.events.some((e) => e.type === 'error'), 'no error after session.closed');
  assert.is((await ctx.t.request('GET', `/v1/sessions/${id}`)).body.status, 'ended');
});

Ws('an ephemeral key is refused (Live takes API keys)', async (ctx) => {
  const secret = await ctx.t.request('POST', '/v1/realtime/client_secrets', { json: {} });
  const live = await openLive(ctx.t, secret.body.value as string);
  const { code } = await live.closed;
  assert.is(code, 4001);
  assert.equal(live.events.map((e) => e.error?.code), ['invalid_api_key']);
});

Ws('hostile Live events on a socket and its sideband: every refusal names its event, no server_error, and the session still closes cleanly', async (ctx) => {
  const seed = fuzzSeed();
  const rng = new Rng(seed);
  const live = await openLive(ctx.t);
  live.send(START);
  const id = (await live.waitFor((e) => e.type === 'session.started', 'session.started')).session.id as string;
  const sb = await openLive(ctx.t, ctx.t.key, `/v1/live/sessions/${id}/attach`);
  await sb.waitFor((e) => e.type === 'info', 'the sideband attached');
  const types = ['session.start', 'session.update', 'session.input_audio.append', 'session.input_audio.mute', 'session.input_audio.unmute', 'session.instructions.append', 'session.thinking.append', 'session.commentary.append', 'session.output_audio.fixture.play', 'transport.dtmf.send', 'response.create', 'response.item.create', 'decision.create', 'x.y'];
  for (let n = 0; n < 400; n++) {
    const base: Record<string, unknown> = { type: rng.pick(types), event_id: `fz_${n}`, content: rng.pick(['hi', oddString(rng, 300)]), audio: rng.pick(['', 'AAAA', oddString(rng, 50)]), session: rng.pick<unknown>([{ model: 'gpt-live-1' }, oddJson(rng), {}]), delegation_id: rng.pick<unknown>([null, 'd1', 7]) };
    const kind = rng.int(0, 9);
    const to = rng.int(0, 2) === 0 ? sb : live; // a third to the sideband
    if (kind === 0) to.sendText(oddString(rng, 200));
    else to.send(kind < 4 ? mutateObject(rng, base) : base);
  }
  live.send({ type: 'session.close', event_id: 'bye' });
  const closed = await live.waitFor((e) => e.type === 'session.closed', `session.closed (seed ${seed})`, 30_000);
  assert.is(closed.client_event_id, 'bye');
  await sb.waitFor((e) => e.type === 'session.closed', `session.closed on the sideband (seed ${seed})`);
  const errors = [...live.events, ...sb.events].filter((e) => e.type === 'error');
  assert.ok(errors.length > 50, `${errors.length} refusals`);
  assert.ok(sb.events.some((e) => e.type === 'error'), 'the sideband had its refusals');
  for (const e of errors) {
    assert.not.equal(e.error.type, 'server_error', `seed ${seed}: ${JSON.stringify(e)}`);
    assert.ok(typeof e.error.code === 'string' && e.error.message.length > 0, JSON.stringify(e));
  }
  const health = await fetch(`${ctx.t.url}/healthz`);
  assert.is(health.status, 200);
});

Ws.run();

const Expiry = suite('GPT-Live: the session duration limit');
Expiry('a session reaching MAX_SESSION_SECONDS is closed as expired, on the socket and its sideband', async () => {
  const t = await startRealtimeTestServer({ env: { MAX_SESSION_SECONDS: '4' } });
  try {
    const live = await openLive(t);
    live.send(START);
    const id = (await live.waitFor((e) => e.type === 'session.started', 'session.started')).session.id as string;
    const sb = await openLive(t, t.key, `/v1/live/sessions/${id}/attach`);
    const closed = await live.waitFor((e) => e.type === 'session.closed', 'session.closed', 20_000);
    assert.equal([closed.reason, closed.usage.seconds > 0], ['expired', true]);
    assert.is((await sb.waitFor((e) => e.type === 'session.closed', 'session.closed on the sideband')).reason, 'expired');
    assert.not.ok(live.events.some((e) => e.type === 'error'), 'session.closed says why; no error follows it');
    assert.is((await t.request('GET', `/v1/sessions/${id}`)).body.status, 'ended');
  } finally {
    await t.close();
  }
});
Expiry.run();

const NO_CHROMIUM = chromiumAvailable() ? null : `no Chromium at ${CHROMIUM_PATH} (run src/cli/setup.sh)`;
const Rtc = suiteNeeding<{ t: RealtimeTestServer; browser: TestBrowser }>('GPT-Live over WebRTC (Chromium)', NO_CHROMIUM, {} as { t: RealtimeTestServer; browser: TestBrowser });
Rtc.before(async (ctx) => {
  ctx.browser = await launchBrowser({ microphone: { speech: [speechPcm24k('What is the weather like today?'), 60] } });
  ctx.t = await startRealtimeTestServer();
});
Rtc.after(async (ctx) => {
  await ctx.t?.close();
  await ctx.browser?.close();
});

const waitEvent = (page: Page, type: string, timeoutMs = 30_000) => until(() => eventsIn(page), (ev) => ev.some((e) => e.type === type), type, timeoutMs).then((ev) => ev.find((e) => e.type === type)!);

Rtc('POST /v1/live/sessions answers in JSON; the session starts by itself; the question from the microphone is answered on the audio and video tracks; session.close on the data channel', async (ctx) => {
  const page = await ctx.browser.newPage();
  const call = await callIn<CallStartResult>(page, 'start', {
    baseUrl: ctx.t.url,
    key: ctx.t.key,
    form: 'live',
    session: { model: 'gpt-live-1', instructions: 'Be brief.' },
    audio: true,
    video: true,
    channel: 'oai-events',
  });
  assert.is(call.status, 201, call.answer);
  assert.match(call.sessionId ?? '', /^sess_/);
  assert.match(call.answer, /m=video/);
  const started = await waitEvent(page, 'session.started');
  assert.is(started.session.id, call.sessionId);
  const heard = await waitEvent(page, 'session.input_transcript.delta');
  assert.is(heard.delta, DEFAULT_TRANSCRIPT);
  await waitEvent(page, 'session.output_transcript.delta', 60_000);
  const stats = await until(() => callIn<{ video: { framesDecoded: number } | null; audio: { samples: number } | null }>(page, 'stats'), (s) => (s.video?.framesDecoded ?? 0) > 10 && (s.audio?.samples ?? 0) > 0, 'decoded video and audio');
  assert.ok(stats.video!.framesDecoded > 10);
  // Audio and frames travel as RTP: none on the data channel.
  const types = (await eventsIn(page)).map((e) => e.type);
  assert.not.ok(types.includes('session.output_audio.delta') || types.includes('session.output_image.delta'));
  await callIn(page, 'send', { type: 'session.close', event_id: 'bye' });
  const closed = await waitEvent(page, 'session.closed');
  assert.is(closed.reason, 'close_requested');
  await until(async () => (await ctx.t.request('GET', `/v1/sessions/${call.sessionId}`)).body.status, (s) => s === 'ended', 'the session ended');
  // A bad Live config is refused before any media.
  const bad = await fetch(`${ctx.t.url}/v1/live/sessions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ctx.t.key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ session: { model: 'gpt-live-1', delegation: { type: 'client' } }, transport: { type: 'webrtc', sdp: call.answer } }),
  });
  assert.is(bad.status, 400);
  assert.equal(((await bad.json()) as { error: { code: string; param: string } }).error.code, 'delegation_not_supported');
  await page.close();
});

Rtc.run();
