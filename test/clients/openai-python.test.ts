/**
 * openai-python (the `openai` package pinned in test/clients/requirements.txt) against this
 * server, unchanged but for the base URL and key: test/clients/py/transcription.py opens a
 * transcription session the way the SDK documents (client.realtime.connect with
 * intent=transcription and no model), sets it up with the SDK's own params, streams a spoken
 * question, and validates every server event with pydantic against the SDK's RealtimeServerEvent
 * union. The server runs in this process with the scripted recogniser of
 * harness/servers/realtime-server.ts (so the transcript is known); its VAD, protocol and store are
 * the real ones.
 *
 * Needs target/clients-venv (src/cli/setup.sh --fleet); without it the test is registered as
 * skipped and says why.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as assert from 'uvu/assert';
import { DEFAULT_TRANSCRIPT, startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { tempDir } from '../../harness/servers/server.js';
import { concatSamples, speechPcm24k } from '../../harness/measures/speech.js';
import { suiteNeeding } from '../helpers/skip.js';
import { pythonClientsMissing, runPythonClient } from './client-harness.js';
import { startMcpServer, type TestMcpServer } from '../../harness/servers/mcp-server.js';
import type { GenerateRequest } from '../../src/providers/llm/base.js';
import { encodeWav16 } from '../../src/assets/audio-file.js';

const CLIENT_TIMEOUT_S = 60;
const RUN_TIMEOUT_MS = (CLIENT_TIMEOUT_S + 30) * 1000;

const Transcription = suiteNeeding<{ t: RealtimeTestServer }>('openai-python realtime: a transcription session', pythonClientsMissing(), {} as { t: RealtimeTestServer });

Transcription.before(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});

Transcription.after(async (ctx) => {
  await ctx.t?.close();
});

Transcription('client.realtime.connect(intent=transcription) streams a question and gets its transcript, every event valid in the SDK\'s types', async (ctx) => {
  const silence = new Int16Array(24_000 * 0.9);
  const pcm = concatSamples([silence, speechPcm24k('What is the weather like today?'), silence]);
  const audio = path.join(tempDir('openai-python-'), 'question.pcm');
  fs.writeFileSync(audio, Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  const run = await runPythonClient('transcription.py', ['--base-url', `${ctx.t.url}/v1`, '--key', ctx.t.key, '--audio', audio, '--timeout', String(CLIENT_TIMEOUT_S)], RUN_TIMEOUT_MS);
  const why = run.describe();
  assert.is(run.code, 0, why);
  assert.equal(run.of('invalid'), [], why);
  assert.equal(run.of('timeout'), [], why);
  const created = run.server('session.created')[0];
  assert.equal([created?.session_class, created?.session_type], ['RealtimeTranscriptionSessionCreateRequest', 'transcription'], why);
  const updated = run.server('session.updated')[0];
  assert.equal([updated?.session_class, updated?.session_type], ['RealtimeTranscriptionSessionCreateRequest', 'transcription'], why);
  const completed = run.server('conversation.item.input_audio_transcription.completed');
  assert.is(completed[0]?.transcript, DEFAULT_TRANSCRIPT, why);
  assert.is(completed[0]?.model, 'ConversationItemInputAudioTranscriptionCompletedEvent', why);
  for (const type of ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'conversation.item.added', 'conversation.item.done']) {
    assert.ok(run.server(type).length > 0, `${type} seen\n${why}`);
  }
  assert.equal(run.lines.filter((l) => l.event === 'server' && String(l.type).startsWith('response.')), [], `no response\n${why}`);
  assert.equal(run.server('error'), [], why);
  // The SDK asked for the recogniser the session named.
  assert.equal([ctx.t.asr.requests.at(-1)?.language], ['en']);
});

Transcription.run();

const Mcp = suiteNeeding<{ t: RealtimeTestServer; mcp: TestMcpServer }>('openai-python realtime: MCP tools the server runs', pythonClientsMissing(), {} as { t: RealtimeTestServer; mcp: TestMcpServer });

Mcp.before(async (ctx) => {
  ctx.mcp = await startMcpServer();
  ctx.t = await startRealtimeTestServer({ env: { MCP_ALLOWED_HOSTS: '127.0.0.1', MCP_ALLOW_PRIVATE_ADDRESSES: 'true' } });
  // The model calls the weather tool when the user has spoken, and reads its outcome after.
  ctx.t.llm.options = {
    reply: (r: GenerateRequest) => (r.messages.at(-1)?.role === 'tool' ? `It is ${r.messages.at(-1)!.content}` : ''),
    toolCalls: (r: GenerateRequest) => (r.messages.at(-1)?.role === 'user' ? [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] : []),
  };
});

Mcp.after(async (ctx) => {
  await ctx.t?.close();
  await ctx.mcp?.close();
});

Mcp('a tool needing approval: listed, asked for, approved with an mcp_approval_response, called and answered; every event valid in the SDK\'s types', async (ctx) => {
  const run = await runPythonClient('openai_mcp.py', ['--base-url', `${ctx.t.url}/v1`, '--key', ctx.t.key, '--mcp-url', ctx.mcp.url, '--approval', 'always', '--timeout', String(CLIENT_TIMEOUT_S)], RUN_TIMEOUT_MS);
  const why = run.describe();
  assert.is(run.code, 0, why);
  assert.equal(run.of('invalid'), [], why);
  assert.equal(run.of('timeout'), [], why);
  assert.equal(run.server('error'), [], why);
  for (const type of ['mcp_list_tools.in_progress', 'mcp_list_tools.completed', 'response.mcp_call_arguments.done', 'response.mcp_call.in_progress', 'response.mcp_call.completed']) {
    assert.ok(run.server(type).length > 0, `${type} seen\n${why}`);
  }
  const done = run.server('response.done');
  assert.equal(done.map((d) => d.output), [['mcp_approval_request'], ['mcp_call', 'message']], why);
  assert.is(done.at(-1)?.call_output, 'Sunny and 21 degrees in Paris.', why);
  assert.ok(run.server('conversation.item.done').some((e) => e.item_class === 'RealtimeMcpListTools'), why);
  assert.equal(ctx.mcp.calls, [{ name: 'get_weather', arguments: { city: 'Paris' } }]);
  assert.ok(ctx.mcp.headers.every((h) => h['x-api-key'] === 'py-secret'));
});

Mcp.run();

const Live = suiteNeeding<{ t: RealtimeTestServer }>('openai-python GPT-Live: client.live with the avatar', pythonClientsMissing(), {} as { t: RealtimeTestServer });

Live.before(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});

Live.after(async (ctx) => {
  await ctx.t?.close();
});

Live('client.live.connect: session.start, a spoken question, the avatar answers by itself; transcripts, audio, frames, usage, session.closed; every event valid in the SDK\'s live types', async (ctx) => {
  const silence = new Int16Array(24_000 * 0.9);
  const pcm = concatSamples([silence, speechPcm24k('What is the weather like today?'), silence, silence]);
  const audio = path.join(tempDir('openai-live-'), 'question.pcm');
  fs.writeFileSync(audio, Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  const run = await runPythonClient('openai_live.py', ['--base-url', `${ctx.t.url}/v1`, '--key', ctx.t.key, '--audio', audio, '--timeout', String(CLIENT_TIMEOUT_S)], RUN_TIMEOUT_MS);
  const why = run.describe();
  assert.is(run.code, 0, why);
  assert.equal(run.of('invalid'), [], why);
  assert.equal(run.of('timeout'), [], why);
  assert.equal(run.server('error'), [], why);
  const started = run.server('session.started')[0];
  assert.equal([started?.model, started?.client_event_id], ['SessionStartedEvent', 'start_1'], why);
  const heard = run.server('session.input_transcript.delta');
  assert.is(heard.map((d) => d.delta).join(''), DEFAULT_TRANSCRIPT, why);
  assert.ok((heard[0]?.end_ms as number) > (heard[0]?.start_ms as number), `the words are timed on the session timeline\n${why}`);
  const said = run.server('session.output_transcript.delta').map((d) => d.delta).join('');
  assert.ok(said.length > 0, why);
  assert.ok(run.server('session.output_audio.delta').reduce((n, d) => n + (d.bytes as number), 0) > 24_000, `at least half a second of speech\n${why}`);
  assert.ok(run.of('frame').length > 5, `the avatar's frames arrive on the socket\n${why}`);
  assert.ok((run.server('session.usage.updated')[0]?.seconds as number) > 0, why);
  const closed = run.server('session.closed')[0];
  assert.equal(closed?.reason, 'close_requested', why);
  // The model answered the question the recogniser heard.
  assert.ok(ctx.t.llm.requests.some((r) => r.messages.some((m) => m.role === 'user' && m.content.includes(DEFAULT_TRANSCRIPT))), why);
});

Live.run();

const LiveRtc = suiteNeeding<{ t: RealtimeTestServer }>('openai-python GPT-Live over WebRTC: client.live.create with aiortc', pythonClientsMissing(), {} as { t: RealtimeTestServer });

LiveRtc.before(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});

LiveRtc.after(async (ctx) => {
  await ctx.t?.close();
});

LiveRtc('client.live.create answers the offer, the session starts by itself, the question on the microphone track is answered on the audio and video tracks; a sideband hears it all with the audio reflected; client.live.sessions.hangup ends it', async (ctx) => {
  const pcm = concatSamples([new Int16Array(24_000 * 0.5), speechPcm24k('What is the weather like today?'), new Int16Array(24_000 * 3)]);
  const wav = path.join(tempDir('openai-live-rtc-'), 'question.wav');
  fs.writeFileSync(wav, encodeWav16(pcm, 24_000));
  const run = await runPythonClient('openai_live_rtc.py', ['--base-url', `${ctx.t.url}/v1`, '--key', ctx.t.key, '--wav', wav, '--timeout', String(CLIENT_TIMEOUT_S)], RUN_TIMEOUT_MS);
  const why = run.describe();
  assert.is(run.code, 0, why);
  assert.equal(run.of('invalid'), [], why);
  assert.equal(run.of('timeout'), [], why);
  assert.equal(run.server('error'), [], why);
  const created = run.of('created')[0];
  assert.equal([created?.class, String(created?.session_id).startsWith('sess_')], ['LiveCreateResponse', true], why);
  assert.ok(run.server('session.started').length === 1, why);
  assert.is(run.server('session.input_transcript.delta').map((d) => d.delta).join(''), DEFAULT_TRANSCRIPT, why);
  assert.ok(run.server('session.output_transcript.delta').length > 0, why);
  const media = run.of('media')[0];
  assert.ok((media?.audio_frames as number) > 50 && (media?.video_frames as number) > 10, `the avatar heard and seen\n${why}`);
  // The sideband: attached, the microphone and the avatar's speech reflected (PCM16 24 kHz, the output with its times), its command in, a SIP command refused to it alone.
  const sideband = (type: string) => run.of('sideband').filter((l) => l.type === type);
  assert.equal(sideband('info')[0]?.code, 'sideband_attached', why);
  assert.ok((media?.reflected_in_bytes as number) > 48_000, `a second of the microphone reflected\n${why}`);
  assert.ok((media?.reflected_out_bytes as number) > 24_000, `the reply's audio reflected\n${why}`);
  const ranges = media?.reflected_out_ranges as [number, number][];
  assert.ok(ranges.length > 0 && ranges.every(([a, b]) => b > a), `timed output audio\n${why}`);
  assert.equal(sideband('session.instructions.appended').map((l) => l.client_event_id), ['sb_ins'], why);
  assert.equal(sideband('error').map((l) => [l.client_event_id, l.code]), [['sb_dtmf', 'unsupported_event']], why);
  assert.not.ok(run.server('error').length > 0, 'the sideband\'s error is for it alone');
  assert.ok(sideband('session.output_transcript.delta').length > 0, why);
  assert.ok(ctx.t.llm.requests.some((r) => r.messages.some((m) => m.role === 'system' && m.content === 'The user is called Ann.')), 'the sideband\'s instruction reached the model');
  // Hung up by REST: both hear session.closed.
  assert.equal(run.of('hung_up').length, 1, why);
  assert.equal(run.server('session.closed')[0]?.reason, 'close_requested', why);
  assert.equal(sideband('session.closed')[0]?.reason, 'close_requested', why);
});

LiveRtc.run();
