/**
 * The pipecat plugin (integrations/pipecat: avatar_server_pipecat.AvatarVideoService) against this
 * server's avatar-only sessions (docs/avatar-mode.md): test/integrations/py/pipecat_avatar.py runs
 * a real pipecat pipeline, a fake streaming TTS (a real recording in 20 ms chunks) → the service →
 * a sink, through four segments: one at the pipeline's 16 kHz paced at real time, one at
 * 22.05 kHz cut by a barge-in (UserStartedSpeakingFrame + InterruptionFrame, as pipecat's user
 * aggregator sends them), bad input (odd byte length, a refused rate) followed by speech that must
 * still play, and last words with the EndFrame right behind them, which play out before the
 * socket closes. Run with JPEG frames (the service's default) and with raw I420 frames plus the
 * idle audio (push_idle_audio). The service names each segment on its appends (segment_id) and
 * takes the frame size and rate from the session object: the server's events, played audio and
 * frames must carry its ids and that size. A third run gives the service a key the server
 * refuses: an ErrorFrame, and the TTS audio passes through.
 *
 * The server is the real one (media plane, renderer, encoders) started in this process; nothing
 * of a model runs in an avatar-only session. Needs target/clients-venv (src/cli/setup.sh --fleet)
 * with the plugin installed in it (`pip install ./integrations/pipecat`); without either the test
 * is registered as skipped and says why.
 */
import { spawnSync } from 'node:child_process';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CLIENTS_PYTHON, pythonClientsMissing, runPythonClient, type ClientLine, type ClientRun } from '../clients/client-harness.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';

/** runPythonClient reads scripts from test/clients/py; this one lives next to this test. */
const SCRIPT = '../../integrations/py/pipecat_avatar.py';
const CLIENT_TIMEOUT_S = 60;
const RUN_TIMEOUT_MS = (CLIENT_TIMEOUT_S + 40) * 1000;
/** Seconds of segment 2 played before the barge-in (the script's --interrupt-after). */
const INTERRUPT_AFTER_S = 0.8;
/** The recording's length: segments 1 and 2 are all of it, segment 3 its first second, segment 4 0.6 s. */
const SPEECH_MS = 2946;
/** The server's frame interval (25 fps by default): one audio delta and one frame per interval. */
const FRAME_MS = 40;

function pluginMissing(): string | null {
  const venv = pythonClientsMissing();
  if (venv) return venv;
  const found = spawnSync(CLIENTS_PYTHON, ['-c', 'import importlib.util, sys; sys.exit(importlib.util.find_spec("avatar_server_pipecat") is None)'], { stdio: 'ignore' });
  if (found.status !== 0) return 'the plugin is not installed in target/clients-venv (pip install ./integrations/pipecat; src/cli/setup.sh --fleet does it)';
  return null;
}

const missing = pluginMissing();
if (missing) process.stdout.write(`pipecat plugin: skipping: ${missing}\n`);

interface Ctx {
  server: RealtimeTestServer;
}

const Plugin = suite<Ctx>('pipecat plugin AvatarVideoService, avatar-only session', {} as Ctx);
const pluginTest = missing ? Plugin.skip : Plugin;

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
    ['--url', ctx.server.url, '--key', ctx.server.key, '--interrupt-after', String(INTERRUPT_AFTER_S), '--timeout', String(CLIENT_TIMEOUT_S), ...args],
    RUN_TIMEOUT_MS,
  );

for (const { format, idleAudio } of [
  { format: 'jpeg', idleAudio: false },
  { format: 'i420', idleAudio: true },
] as const) {
  pluginTest(`${format} frames${idleAudio ? ', idle audio' : ''}: played audio and frames come back on one clock, segments start and finish once, a barge-in cuts, bad input is an ErrorFrame, the last words play before the close`, async (ctx) => {
    const started = Date.now();
    const run = await runScript(ctx, '--video-format', format, ...(idleAudio ? ['--push-idle-audio'] : []));
    const why = run.describe();
    assert.is(run.code, 0, why);
    assert.is(run.of('done').length, 1, why);
    checkRun(run, idleAudio, why);
    report(format, run, Date.now() - started);
  });
}

pluginTest('a key the server refuses: an ErrorFrame, and the TTS audio passes through unchanged', async (ctx) => {
  const run = await runScript(ctx, '--bad-key');
  const why = run.describe();
  assert.is(run.code, 0, why);
  const errors = run.of('error');
  assert.is(errors.length, 1, why);
  assert.match(errors[0]!.error, /refused the session: invalid_api_key/, why);
  assert.equal(run.of('connected'), [], why);
  // The TTS's own frames, as they were: 16 kHz, 25 chunks of 20 ms, then its TTSStoppedFrame.
  const audio = run.of('audio');
  assert.is(audio.length, 25, why);
  for (const a of audio) {
    assert.is(a.rate, 16000, why);
    assert.is(a.bytes, 640, why);
    assert.is(a.context_id, 'ctx-1', why);
  }
  assert.equal(run.of('tts_stopped').map((s) => s.context_id), ['ctx-1'], why);
  assert.equal(run.of('image'), [], why);
});

function checkRun(run: ClientRun, idleAudio: boolean, why: string): void {
  // The four segments, in the order the server opened them.
  const sent = run.of('sent');
  assert.equal(sent.map((s) => s.context_id), ['ctx-1', 'ctx-2', 'ctx-3', 'ctx-4'], why);
  const starts = run.of('playback_started');
  const ends = run.of('playback_finished');
  const ids = [...new Set(starts.map((s) => s.segment_id as string))];
  assert.is(ids.length, 4, `four segments played\n${why}`);
  // Named by the service on its appends, and so by the server's events.
  const appends = run.of('append');
  assert.equal(appends.map((a) => a.segment_id), ids, `the segments are the ones the service named\n${why}`);
  assert.equal(run.server('output_audio_buffer.started').map((s) => s.segment_id), ids, why);
  for (const id of ids) {
    assert.match(id, /^pipecat_seg_\d+$/, why);
    assert.is(starts.filter((s) => s.segment_id === id).length, 1, `${id} started once\n${why}`);
    assert.is(ends.filter((s) => s.segment_id === id).length, 1, `${id} finished once\n${why}`);
    assert.is(run.server('output_audio_buffer.stopped').filter((s) => s.segment_id === id).length, 1, why);
  }
  assert.is(ends.length, 4, why);
  const [seg1, seg2, seg3, seg4] = ids as [string, string, string, string];
  const end = (id: string) => ends.find((e) => e.segment_id === id)!;
  const start = (id: string) => starts.find((s) => s.segment_id === id)!;
  const committed = run.server('output_audio_buffer.committed').map((c) => c.segment_id as string);
  assert.ok([seg1, seg3, seg4].every((id) => committed.includes(id)) && committed.every((id) => ids.includes(id)), `committed: ${committed.join(', ')}\n${why}`);
  // Segment 3's opening append (odd length) was refused; the name it carried is the one the
  // server gave the segment the next append opened.
  const refusedAppend = run.server('error').find((e) => e.error?.code === 'invalid_audio');
  assert.ok(refusedAppend, why);
  assert.is(refusedAppend.error.event_id, appends.find((a) => a.segment_id === seg3)!.event_id, why);

  // Played out whole: segment 1 (all of the recording), 3 (its first second, after the refused
  // chunks) and 4 (0.6 s, with the EndFrame right behind it).
  for (const [id, ms] of [
    [seg1, SPEECH_MS],
    [seg3, 1000],
    [seg4, 600],
  ] as const) {
    assert.is(end(id).interrupted, false, why);
    assert.ok(Math.abs(end(id).played_ms - ms) <= 60, `${id} played ${end(id).played_ms} ms of ${ms}\n${why}`);
  }

  // Segment 2: cut by the barge-in, part of it heard.
  const cut = end(seg2);
  assert.is(cut.interrupted, true, why);
  assert.ok(cut.played_ms >= INTERRUPT_AFTER_S * 1000 - 100 && cut.played_ms < SPEECH_MS - 500, `segment 2 played ${cut.played_ms} ms before the cut\n${why}`);
  const cleared = run.server('output_audio_buffer.cleared');
  assert.is(cleared.length, 1, why);
  assert.is(cleared[0]!.played_ms, cut.played_ms, why);
  // Where the cut fell on the session clock, against the newest audio the client had when the user barged in.
  const interrupt = run.of('interrupt')[0]!;
  const cutPts = (start(seg2).pts_ms as number) + (cut.played_ms as number);
  const lastSeenPts = interrupt.last_pts_ms as number;
  // (One frame later when nothing lags; the bound leaves room for a loaded machine.)
  assert.ok(cutPts >= lastSeenPts - FRAME_MS && cutPts <= lastSeenPts + 400, `the cut (pts ${cutPts}) follows what the client had heard (pts ${lastSeenPts})\n${why}`);

  // The server's played audio: one delta per frame interval, on the frames' clock, silent from
  // 100 ms after the cut until segment 3 starts.
  const audio = run.of('server_audio');
  const pts = audio.map((a) => a.pts_ms as number);
  for (let i = 1; i < pts.length; i++) assert.ok(pts[i]! > pts[i - 1]! && pts[i]! % FRAME_MS === 0, `server audio pts ${pts[i - 1]} then ${pts[i]}\n${why}`);
  const steps = pts.slice(1).filter((p, i) => p - pts[i]! !== FRAME_MS);
  assert.ok(steps.length <= 2, `server audio every ${FRAME_MS} ms (${steps.length} jumps)\n${why}`);
  const seg3Pts = start(seg3).pts_ms as number;
  const afterCut = audio.filter((a) => a.pts_ms >= cutPts + 100 && a.pts_ms < seg3Pts - FRAME_MS);
  assert.ok(afterCut.length > 0, why);
  const loud = afterCut.filter((a) => a.peak > 0 || a.segment_id !== null);
  assert.equal(loud, [], `audio after the cut is silence outside any segment\n${why}`);
  assert.ok(audio.some((a) => a.segment_id === seg1 && a.peak > 1000), `segment 1's played audio is the speech\n${why}`);
  assert.equal([...new Set(audio.map((a) => a.segment_id))].filter((id) => id !== null && !ids.includes(id)), [], `played audio names only the service's segments\n${why}`);

  // What the pipeline got: 24 kHz mono; the segments' audio as TTSAudioRawFrame carrying the TTS
  // context, the idle silence only with push_idle_audio (as SpeechOutputAudioRawFrame), none of
  // segment 2 after the cut, and a TTSStoppedFrame after each whole segment's last audio.
  const pushed = run.of('audio');
  assert.ok(pushed.length > 0, why);
  for (const a of pushed) {
    assert.is(a.rate, 24000, why);
    assert.is(a.channels, 1, why);
    if (a.segment_id === null) {
      assert.ok(idleAudio, `idle audio is pushed only with push_idle_audio\n${why}`);
      assert.is(a.kind, 'SpeechOutputAudioRawFrame', why);
      assert.is(a.context_id, null, why);
    } else {
      assert.is(a.kind, 'TTSAudioRawFrame', why);
    }
  }
  const speech = pushed.filter((a) => a.kind === 'TTSAudioRawFrame');
  assert.equal([...new Set(speech.map((a) => a.context_id))], ['ctx-1', 'ctx-2', 'ctx-3', 'ctx-4'], `played audio carries its TTS context\n${why}`);
  assert.equal([...new Set(speech.map((a) => `${a.context_id} ${a.segment_id}`))], ids.map((id, i) => `ctx-${i + 1} ${id}`), `and the service's segment id\n${why}`);
  const ctx2Late = speech.filter((a) => a.context_id === 'ctx-2' && a.pts_ns / 1e6 >= lastSeenPts + 100);
  assert.equal(ctx2Late, [], `no audio of the cut segment reaches the pipeline after the barge-in\n${why}`);
  const pushedMs = (ctx: string) => speech.filter((a) => a.context_id === ctx).reduce((s, a) => s + a.bytes / 48, 0);
  // All of segment 1 came back (more when the paced TTS fell behind the playout now and then:
  // the avatar then plays silence within the segment until the next chunk comes).
  assert.ok(pushedMs('ctx-1') >= SPEECH_MS - 80, `segment 1's audio pushed: ${pushedMs('ctx-1')} ms\n${why}`);
  if (idleAudio) {
    // A continuous track but for the cut segment's audio dropped between the clear and its answer.
    const gaps = pushed.slice(1).filter((a, i) => a.pts_ns - pushed[i]!.pts_ns !== FRAME_MS * 1e6);
    assert.ok(gaps.length <= 3, `pushed audio is continuous (${gaps.length} gaps)\n${why}`);
  }
  const stops = run.of('tts_stopped');
  assert.equal(stops.map((s) => s.context_id), ['ctx-1', 'ctx-3', 'ctx-4'], `the cut segment's TTSStoppedFrame is dropped\n${why}`);
  for (const ctxId of ['ctx-1', 'ctx-3', 'ctx-4']) {
    const lastAudio = run.lines.findLastIndex((l) => l.event === 'audio' && l.context_id === ctxId);
    const stop = run.indexOf((l) => l.event === 'tts_stopped' && l.context_id === ctxId);
    assert.ok(lastAudio >= 0 && stop > lastAudio, `${ctxId}: TTSStoppedFrame after its played audio\n${why}`);
  }

  // Frames: RGB of the session's size (the session object says it, and the service's frame_size
  // and frame_rate, before any frame came), pts increasing, all the time (idle and speaking).
  // (The server skips frames, never audio, for a client that reads too slowly: I420 on a loaded
  // machine.)
  const connected = run.of('connected')[0]!;
  const video = connected.session.video as { width: number; height: number; fps: number };
  assert.equal(connected.frame_size, [video.width, video.height], why);
  assert.is(connected.frame_rate, video.fps, why);
  assert.is(1000 / video.fps, FRAME_MS, why);
  const images = run.of('image');
  assert.ok(images.length >= 50, `${images.length} frames\n${why}`);
  const [w, h] = [video.width, video.height];
  assert.ok(w > 0 && h > 0, why);
  for (let i = 0; i < images.length; i++) {
    const img = images[i]!;
    assert.is(img.format, 'RGB', why);
    assert.equal(img.size, [w, h], why);
    assert.is(img.bytes, w * h * 3, why);
    if (i > 0) assert.ok(img.pts_ns > images[i - 1]!.pts_ns, `frame pts increase (${images[i - 1]!.pts_ns} then ${img.pts_ns})\n${why}`);
  }
  // Audio and frames on one clock: every frame has the pts of an interval of played audio.
  const audioPts = new Set(audio.map((a) => a.pts_ms * 1e6));
  const offClock = images.filter((i) => !audioPts.has(i.pts_ns));
  assert.equal(offClock, [], `frames with no audio interval of the same pts\n${why}`);

  // Bad input: two ErrorFrames (odd length, refused rate), and the pipeline went on (segment 3).
  const errors = run.of('error');
  assert.is(errors.length, 2, `exactly the two refusals\n${why}`);
  assert.ok(errors.some((e) => /invalid_audio/.test(e.error)), why);
  assert.ok(errors.some((e) => /session\.audio\.input\.format\.rate/.test(e.error)), why);

  // The EndFrame: the last words played out, then the socket closed.
  const closed = run.indexOf((l) => l.event === 'disconnected');
  assert.ok(closed > run.indexOf((l) => l.event === 'playback_finished' && l.segment_id === seg4), `closed after the last segment finished\n${why}`);
  assert.ok(closed > run.indexOf((l) => l.event === 'ending'), why);
}

/** The numbers worth seeing in a CI log: first played audio after the first append, frame rate. */
function report(format: string, run: ClientRun, wallMs: number): void {
  const first = run.of('sent')[0]!;
  const firstSpeech = run.of('audio').find((a) => a.kind === 'TTSAudioRawFrame');
  const images = run.of('image');
  const spanS = images.length > 1 ? (images.at(-1)!.pts_ns - images[0]!.pts_ns) / 1e9 : 0;
  const fps = spanS > 0 ? (images.length - 1) / spanS : 0;
  const ms = (line: ClientLine | undefined) => (line ? Math.round((line.t - first.t_first) * 1000) : NaN);
  process.stdout.write(
    `pipecat plugin (${format}): first played audio ${ms(firstSpeech)} ms after the first append (segment started ${ms(run.of('playback_started')[0])} ms); ${images.length} frames of ${images[0]?.size.join('x')} at ${fps.toFixed(1)} fps; run ${(wallMs / 1000).toFixed(1)} s\n`,
  );
}

Plugin.run();
