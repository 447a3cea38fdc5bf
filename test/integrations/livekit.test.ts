/**
 * The LiveKit Agents plugin (integrations/livekit: avatar_server_livekit) against this server's
 * avatar-only sessions (docs/avatar-mode.md), driven by test/integrations/py/livekit_avatar.py:
 *
 * - Without a LiveKit server, twice (raw I420 frames, the plugin's default, and JPEG): LiveKit's
 *   own AvatarRunner reads the plugin's audio output (a QueueAudioOutput) into its
 *   VideoGenerator, with a stand-in for the room; the script plays the agent session (20 ms
 *   frames of a real recording through capture_frame / flush / clear_buffer / wait_for_playout)
 *   through a whole segment, one cut by a barge-in and one after it. The plugin names each
 *   segment on its appends (segment_id) and sizes AvatarOptions from the session object: the
 *   server's events, played audio and frames must carry its ids and that size.
 * - A key the server refuses: connect() raises, saying why.
 * - The whole room, when a LiveKit server binary is here (LIVEKIT_SERVER_BIN, or
 *   target/livekit-server/server as `go install github.com/livekit/livekit-server/cmd/server`
 *   makes it): a real AgentSession (its voice the recording; no recogniser or model) with the
 *   plugin started by the two lines of an entrypoint, and a user in the room who receives the
 *   avatar's audio and video and the transcription. Skipped, saying why, without the binary.
 *
 * The server is the real one (media plane, renderer, encoders) started in this process. Needs
 * target/clients-venv (src/cli/setup.sh --fleet) with the plugin installed in it
 * (`pip install --no-deps -e integrations/livekit`); without either the tests are registered as
 * skipped and say why.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CLIENTS_PYTHON, pythonClientsMissing, runPythonClient, type ClientLine, type ClientRun } from '../clients/client-harness.js';
import { freePort } from '../../harness/servers/net.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';
import { REPO_ROOT } from '../../harness/servers/server.js';

/** runPythonClient reads scripts from test/clients/py; this one lives next to this test. */
const SCRIPT = '../../integrations/py/livekit_avatar.py';
/** Real speech, 16 kHz mono: segment 1 is all of it, segment 2 its 24 kHz version, segment 3 its first second. */
const WAV = path.join(REPO_ROOT, 'native/animation/tests/data/utterance_16k.wav');
const SPEECH_MS = 2946;
const CLIENT_TIMEOUT_S = 60;
const RUN_TIMEOUT_MS = (CLIENT_TIMEOUT_S + 40) * 1000;
/** Seconds of segment 2 played before the barge-in (the script's --interrupt-after). */
const INTERRUPT_AFTER_S = 0.8;
/** What AgentSession.say() speaks in the whole-room test (the script's SAY_TEXT). */
const SAY_TEXT = 'Hello there, this is the avatar speaking to you through a LiveKit room today.';

function pluginMissing(): string | null {
  const venv = pythonClientsMissing();
  if (venv) return venv;
  const found = spawnSync(CLIENTS_PYTHON, ['-c', 'import importlib.util, sys; sys.exit(importlib.util.find_spec("avatar_server_livekit") is None)'], { stdio: 'ignore' });
  if (found.status !== 0) return 'the plugin is not installed in target/clients-venv (pip install --no-deps -e integrations/livekit)';
  return null;
}

/** A livekit-server binary: LIVEKIT_SERVER_BIN, target/livekit-server/server, or livekit-server on PATH. */
function livekitServerBinary(): string | null {
  const candidates = [process.env.LIVEKIT_SERVER_BIN, path.join(REPO_ROOT, 'target/livekit-server/server')];
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) if (dir) candidates.push(path.join(dir, 'livekit-server'));
  for (const c of candidates) {
    if (!c) continue;
    try {
      fs.accessSync(c, fs.constants.X_OK);
      return c;
    } catch {
      // next
    }
  }
  return null;
}

const missing = pluginMissing();
if (missing) process.stdout.write(`livekit plugin: skipping: ${missing}\n`);
const livekitBin = livekitServerBinary();
const roomMissing =
  missing ??
  (livekitBin
    ? null
    : 'no LiveKit server binary (LIVEKIT_SERVER_BIN, target/livekit-server/server or livekit-server on PATH; none is packaged for npm, PyPI or Debian: `GOBIN=$PWD/target/livekit-server go install github.com/livekit/livekit-server/cmd/server@v1.13.5` builds one from the Go module proxy)');
if (!missing && roomMissing) process.stdout.write(`livekit plugin, whole room: skipping: ${roomMissing}\n`);

interface Ctx {
  server: RealtimeTestServer;
}

const Plugin = suite<Ctx>('livekit plugin AvatarSession / VideoGenerator, avatar-only session', {} as Ctx);
const pluginTest = missing ? Plugin.skip : Plugin;
const roomTest = roomMissing ? Plugin.skip : Plugin;

Plugin.before(async (ctx) => {
  if (missing) return;
  ctx.server = await startRealtimeTestServer();
});

Plugin.after(async (ctx) => {
  await ctx.server?.close();
});

const runScript = (ctx: Ctx, ...args: string[]): Promise<ClientRun> =>
  runPythonClient(
    SCRIPT,
    ['--url', ctx.server.url, '--key', ctx.server.key, '--wav', WAV, '--interrupt-after', String(INTERRUPT_AFTER_S), '--timeout', String(CLIENT_TIMEOUT_S), ...args],
    RUN_TIMEOUT_MS,
  );

for (const format of ['i420', 'jpeg'] as const) {
  pluginTest(`${format} frames through AvatarRunner: frames and played audio on one clock, playback started / finished once per segment from the server, a barge-in cuts to silence`, async (ctx) => {
    const started = Date.now();
    const run = await runScript(ctx, '--format', format);
    const why = run.describe();
    assert.is(run.code, 0, why);
    assert.equal(run.of('done').map((d) => d.ok), [true], why);
    checkRunner(run, format, why);
    const latency = run.of('latency')[0]!;
    process.stdout.write(
      `livekit plugin (${format}): first audio pushed → output_audio_buffer.started ${latency.first_push_to_started_ms} ms, → first voiced played audio at the runner ${latency.first_push_to_voiced_audio_ms} ms; connect ${run.of('connected')[0]!.connect_ms} ms; run ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    );
  });
}

pluginTest('a key the server refuses: connect() raises AvatarServerError saying why', async (ctx) => {
  const run = await runScript(ctx, '--bad-key');
  const why = run.describe();
  assert.is(run.code, 0, why);
  assert.equal(run.of('connected'), [], why);
  const refused = run.of('refused');
  assert.is(refused.length, 1, why);
  assert.match(refused[0]!.error, /refused the session.*invalid_api_key/, why);
});

roomTest('whole room: AgentSession + the two entrypoint lines on a real LiveKit server; the user gets the avatar, turn state and transcript follow the server', async (ctx) => {
  const started = Date.now();
  const livekit = await startLivekitServer(livekitBin!);
  let run: ClientRun;
  try {
    run = await runScript(ctx, '--livekit-url', livekit.url, '--livekit-key', livekit.key, '--livekit-secret', livekit.secret);
  } finally {
    await livekit.close();
  }
  const why = `${run.describe()}\nlivekit-server (tail):\n${livekit.log().slice(-3000)}`;
  assert.is(run.code, 0, why);
  assert.equal(run.of('done').map((d) => d.ok), [true], why);
  checkRoom(run, why);
  process.stdout.write(`livekit plugin, whole room: ${roomReport(run)}; run ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
});

function checkRunner(run: ClientRun, format: 'i420' | 'jpeg', why: string): void {
  assert.equal(run.server('error'), [], why);
  const connected = run.of('connected')[0];
  assert.ok(connected, why);
  assert.is(connected.format, format, why);
  const width = connected.width as number;
  const height = connected.height as number;
  assert.ok(width > 0 && height > 0 && width % 2 === 0 && height % 2 === 0, why);
  // The size and rate AvatarOptions got are the session object's (known before any frame); the
  // frames below are checked against them.
  const video = connected.session_video as { format: string; width: number; height: number; fps: number };
  assert.equal([video.width, video.height, video.fps], [width, height, connected.fps], why);
  const frameMs = 1000 / (connected.fps as number);
  // AvatarRunner published the avatar's tracks (to the stand-in room) once each.
  assert.equal(run.of('published').map((p) => `${p.kind}:${p.name}`).sort(), ['audio:avatar_audio', 'video:avatar_video'], why);

  // Frames: the session's size, I420 as it came (no decode) or decoded JPEG, pts increasing on
  // the frame clock; none skipped by the plugin.
  const frames = run.of('video');
  assert.ok(frames.length >= 100, `${frames.length} frames\n${why}`);
  for (const v of frames) {
    assert.is(v.width, width, why);
    assert.is(v.height, height, why);
    if (format === 'i420') {
      assert.is(v.buffer, 'I420', why);
      assert.is(v.bytes, (width * height * 3) / 2, why);
    } else {
      assert.is(v.buffer, 'RGBA', why);
      assert.is(v.bytes, width * height * 4, why);
    }
  }
  const vpts = frames.map((v) => v.pts_ms as number);
  for (let i = 1; i < vpts.length; i++) assert.ok(vpts[i]! > vpts[i - 1]!, `frame pts ${vpts[i - 1]} then ${vpts[i]}\n${why}`);
  const vsteps = vpts.slice(1).filter((p, i) => Math.abs(p - vpts[i]! - frameMs) > 0.5);
  assert.ok(vsteps.length <= 3, `a frame every ${frameMs} ms (${vsteps.length} jumps)\n${why}`);
  // Nothing piles up ahead of the runner here (the stand-in room publishes at once), so next to
  // nothing is skipped to catch up (a loaded machine may cost a few frames at the start).
  const summary = run.of('summary')[0]!;
  assert.ok(summary.skipped_video <= 10 && summary.skipped_audio <= 10, `skipped ${summary.skipped_video} frames, ${summary.skipped_audio} audio\n${why}`);

  // Played audio: 24 kHz mono, one frame interval each, contiguous, on the frames' clock.
  const audio = run.of('audio');
  for (const a of audio) {
    assert.is(a.rate, 24000, why);
    assert.is(a.channels, 1, why);
    assert.is(a.samples, Math.round((24000 * frameMs) / 1000), why);
  }
  const apts = audio.map((a) => a.pts_ms as number);
  for (let i = 1; i < apts.length; i++) assert.ok(Math.abs(apts[i]! - apts[i - 1]! - frameMs) < 0.5, `audio pts ${apts[i - 1]} then ${apts[i]}\n${why}`);
  const audioPts = new Set(apts);
  // (From the first audio on: the events before session.updated, audio or frame, went to connect().)
  const unpaired = vpts.filter((p) => p >= apts[0]! && p <= apts[apts.length - 1]! && !audioPts.has(p));
  assert.equal(unpaired, [], `every frame has the audio of its interval (frames ${unpaired.join(", ")} have none; audio from pts ${apts[0]})\n${why}`);

  // The agent session's view: started and finished exactly once per segment, in order, from the
  // server's events.
  const starts = run.of('playback_started');
  const ends = run.of('playback_finished');
  assert.equal(starts.map((s) => s.segment), [1, 2, 3], why);
  assert.equal(ends.map((s) => s.segment), [1, 2, 3], why);
  const serverStarts = run.server('output_audio_buffer.started');
  const serverStops = run.server('output_audio_buffer.stopped');
  assert.is(serverStarts.length, 3, why);
  assert.is(serverStops.length, 3, why);
  for (let i = 0; i < 3; i++) {
    assert.ok(run.lines.indexOf(serverStarts[i]!) < run.lines.indexOf(starts[i]!), `playback_started ${i + 1} follows the server's started\n${why}`);
    assert.ok(run.lines.indexOf(starts[i]!) < run.lines.indexOf(ends[i]!), why);
    assert.ok(run.lines.indexOf(serverStops[i]!) < run.lines.indexOf(ends[i]!), why);
    assert.is(ends[i]!.playback_position, (serverStops[i]!.played_ms as number) / 1000, why);
    assert.is(ends[i]!.interrupted, serverStops[i]!.interrupted, why);
  }
  assert.is(run.of('segment_end').length, 3, `an AudioSegmentEnd per segment\n${why}`);
  const playouts = run.of('playout');
  assert.equal(
    playouts.map((p) => [p.segment, p.interrupted]),
    [
      [1, false],
      [2, true],
      [3, false],
    ],
    why,
  );
  const near = (got: number, wantMs: number, tol: number) => Math.abs(got * 1000 - wantMs) <= tol;
  assert.ok(near(playouts[0]!.playback_position, SPEECH_MS, 40), `segment 1 played ${playouts[0]!.playback_position} s\n${why}`);
  assert.ok(near(playouts[2]!.playback_position, 1000, 40), `segment 3 played ${playouts[2]!.playback_position} s\n${why}`);
  const clear = run.of('clear')[0]!;
  const cut = playouts[1]!.playback_position * 1000;
  assert.ok(cut >= INTERRUPT_AFTER_S * 1000 - 100 && cut < (clear.pushed_ms as number) - 500, `segment 2 played ${cut} ms of ${clear.pushed_ms} pushed before the barge-in\n${why}`);
  assert.ok(run.lines.indexOf(clear) < run.lines.indexOf(playouts[1]!), why);

  // The returned audio: the speech while a segment plays; silence outside any segment from
  // 100 ms after the barge-in (against the newest audio the runner had then) until segment 3.
  const seg1 = serverStarts[0]!.segment_id as string;
  assert.ok(audio.some((a) => a.segment_id === seg1 && a.rms > 1000), `segment 1's played audio is the speech\n${why}`);
  const cutPts = (serverStarts[1]!.pts_ms as number) + cut;
  assert.ok(cutPts <= (clear.last_pts_ms as number) + 400, `the cut (pts ${cutPts}) is at what had been heard (pts ${clear.last_pts_ms})\n${why}`);
  const seg3Pts = serverStarts[2]!.pts_ms as number;
  const afterCut = audio.filter((a) => a.pts_ms >= (clear.last_pts_ms as number) + 100 && a.pts_ms < seg3Pts);
  assert.ok(afterCut.length >= 10, why);
  const loud = afterCut.filter((a) => a.rms > 0 || a.segment_id !== null);
  assert.equal(loud, [], `silence after the barge-in\n${why}`);

  // Segment ids: the plugin names each segment on its appends, and the server's events, its
  // played audio and its JPEG frames name the segments so; the generator's events carry them.
  const ids = run.of('sent').filter((s) => s.type === 'output_audio_buffer.append').map((s) => s.segment_id as string);
  assert.is(ids.length, 3, `one segment id per segment\n${why}`);
  assert.is(new Set(ids).size, 3, why);
  for (const id of ids) assert.match(id, /^livekit_seg_\d+$/, why);
  assert.equal(serverStarts.map((s) => s.segment_id), ids, `the server's started events name the plugin's segments\n${why}`);
  assert.equal(serverStops.map((s) => s.segment_id), ids, `the server's stopped events name the plugin's segments\n${why}`);
  const committed = run.server('output_audio_buffer.committed').map((s) => s.segment_id as string);
  assert.ok(committed.includes(ids[0]!) && committed.includes(ids[2]!) && committed.every((id) => ids.includes(id)), `committed ${committed.join(', ')}\n${why}`);
  assert.equal(run.of('gen_started').map((s) => s.segment_id), ids, why);
  assert.equal(run.of('gen_finished').map((s) => s.segment_id), ids, why);
  const audioIds = new Set(audio.map((a) => a.segment_id));
  assert.equal([...audioIds].filter((id) => id !== null && !ids.includes(id)), [], `played audio names only the plugin's segments\n${why}`);
  for (const id of ids) assert.ok(audioIds.has(id), `played audio of ${id}\n${why}`);
  if (format === 'jpeg') {
    const frameIds = new Set(frames.map((v) => v.segment_id));
    assert.equal([...frameIds].filter((id) => id !== null && !ids.includes(id)), [], why);
    assert.ok(frameIds.has(ids[0]!), `frames of ${ids[0]} name it\n${why}`);
  }
}

function checkRoom(run: ClientRun, why: string): void {
  assert.equal(run.server('error'), [], why);
  const avatar = run.of('avatar_started')[0];
  assert.ok(avatar, why);
  // The user sees the agent publish the avatar's audio and video.
  assert.equal(run.of('user_track').map((t) => `${t.participant}:${t.kind}:${t.name}`).sort(), ['agent:audio:avatar_audio', 'agent:video:avatar_video'], why);

  // Turn state follows the server: "speaking" only once the server played the first sample, back
  // to "listening" once it said the segment stopped.
  const starts = run.server('output_audio_buffer.started');
  const stops = run.server('output_audio_buffer.stopped');
  assert.is(starts.length, 2, why);
  assert.is(stops.length, 2, why);
  const speaking = run.of('agent_state').filter((s) => s.new === 'speaking');
  const backToListening = run.of('agent_state').filter((s) => s.old === 'speaking' && s.new === 'listening');
  assert.is(speaking.length, 2, why);
  assert.is(backToListening.length, 2, why);
  for (let i = 0; i < 2; i++) {
    assert.ok(run.lines.indexOf(starts[i]!) < run.lines.indexOf(speaking[i]!), `speaking ${i + 1} after the server's started\n${why}`);
    assert.ok(run.lines.indexOf(stops[i]!) < run.lines.indexOf(backToListening[i]!), `listening ${i + 1} after the server's stopped\n${why}`);
  }
  assert.is(stops[0]!.interrupted, false, why);
  assert.ok(Math.abs((stops[0]!.played_ms as number) - SPEECH_MS) <= 60, why);
  assert.is(stops[1]!.interrupted, true, why);
  // Each reply is a segment named by the plugin.
  const ids = starts.map((s) => s.segment_id as string);
  assert.is(new Set(ids).size, 2, why);
  for (const id of ids) assert.match(id, /^livekit_seg_\d+$/, why);
  assert.equal(stops.map((s) => s.segment_id), ids, why);

  // The chat history: the whole reply, then the interrupted one cut where the server cut it.
  const say = run.of('say').filter((s) => s.phase === 'done');
  assert.equal(say.map((s) => s.interrupted), [false, true], why);
  const items = run.of('item').filter((i) => i.role === 'assistant');
  assert.is(items.length, 2, why);
  assert.is(items[0]!.text, SAY_TEXT, why);
  assert.is(items[0]!.interrupted, false, why);
  assert.is(items[1]!.interrupted, true, why);
  const partial = (items[1]!.text as string).trim();
  assert.ok(partial.length > 0 && partial.length < SAY_TEXT.length && SAY_TEXT.startsWith(partial), `the interrupted reply keeps what was heard: "${partial}"\n${why}`);
  // The user's transcription: final for both, the second one cut.
  const finals = run.of('transcription').filter((t) => t.final === 'true');
  assert.is(finals.length, 2, why);
  assert.is(finals[0]!.text, SAY_TEXT, why);
  assert.ok((finals[1]!.text as string).length < SAY_TEXT.length, why);

  // avatar.listen from the user's state.
  assert.equal(run.of('listen').map((l) => l.listening), [true, false], why);

  // What the user received: the avatar's frames at the session's size, and its voice while each
  // reply plays, none of it long after the interruption.
  const media = run.of('user_media')[0]!;
  assert.ok(media.video_frames >= 50, why);
  // (WebRTC may send a smaller layer while it probes the bandwidth.)
  const sizes = media.video_sizes as string[];
  assert.ok(sizes.includes(`${avatar.width}x${avatar.height}`), why);
  for (const size of sizes) {
    const [w, h] = size.split('x').map(Number) as [number, number];
    assert.ok(w <= avatar.width && Math.abs(w / h - avatar.width / avatar.height) < 0.02, `received ${size}\n${why}`);
  }
  const windows = media.voiced_windows as [number, number][];
  assert.ok(windows.length >= 2, why);
  const interrupt = run.of('interrupt')[0]!;
  const lastVoice = windows[windows.length - 1]![1];
  assert.ok(lastVoice > (starts[1]!.t as number), `the user heard reply 2\n${why}`);
  assert.ok(lastVoice - (interrupt.t as number) < 1000, `the user's audio stops ${lastVoice - (interrupt.t as number)} ms after the interruption\n${why}`);
}

function roomReport(run: ClientRun): string {
  const starts = run.server('output_audio_buffer.started');
  const media = run.of('user_media')[0] as ClientLine;
  const windows = media.voiced_windows as [number, number][];
  const interrupt = run.of('interrupt')[0]!;
  const firstHeard = windows.find((w) => w[0] >= (starts[0]!.t as number));
  return [
    `avatar start ${run.of('avatar_started')[0]!.start_ms} ms`,
    `server started → user hears voice ${firstHeard ? Math.round(firstHeard[0] - (starts[0]!.t as number)) : '?'} ms`,
    `interrupt → user's voice ends ${Math.round(windows[windows.length - 1]![1] - (interrupt.t as number))} ms`,
    `${media.video_frames} frames received`,
    `${run.of('skipped')[0]?.video} frames / ${run.of('skipped')[0]?.audio} audio skipped to catch up`,
  ].join(', ');
}

interface LivekitServer {
  url: string;
  key: string;
  secret: string;
  log(): string;
  close(): Promise<void>;
}

/** livekit-server on loopback ports of its own (no --dev: its fixed ports could be taken). */
async function startLivekitServer(bin: string): Promise<LivekitServer> {
  const [port, tcpPort, udpPort] = [await freePort(), await freePort(), await freePort()];
  const key = 'testkey';
  const secret = 'test-secret-long-enough-for-hs256-0123456789abcdef';
  const config = [
    `port: ${port}`,
    'bind_addresses: ["127.0.0.1"]',
    'rtc:',
    `  tcp_port: ${tcpPort}`,
    `  udp_port: ${udpPort}`,
    '  node_ip: 127.0.0.1',
    '  use_external_ip: false',
    'keys:',
    `  ${key}: ${secret}`,
    'logging:',
    '  level: warn',
  ].join('\n');
  const child: ChildProcess = spawn(bin, ['--config-body', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await close();
      throw new Error(`livekit-server did not start:\n${out.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url: `ws://127.0.0.1:${port}`, key, secret, log: () => out, close };
}

Plugin.run();
