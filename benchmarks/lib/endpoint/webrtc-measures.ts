/**
 * The endpoint benchmark's measures over WebRTC, in headless Chromium (harness/clients/browser.ts),
 * against a target that takes POST /v1/realtime/calls (multipart offer with Opus both ways, an
 * H.264 receive-only video m-line and the `oai-events` channel, as lib/call-measures.ts
 * startAvatarCall sends it); what is measured is what the browser decoded and played:
 *
 *  - first frame: the call's POST sent → its first video frame presented (requestVideoFrameCallback):
 *    what a person waits from pressing call to seeing the face (the SDP answer included);
 *  - text turn → first audio played: a user text item, then response.create → the first block of
 *    the avatar's audio played out louder than silence at the receiver (call-measures audioOnset);
 *  - A/V offset, per speech onset (the reply's first sound, and each phrase after a pause of
 *    150 ms or more, over the SPEAK_MS the avatar speaks in each turn): onset of the mouth
 *    opening in the presented frames − the speech onset in the played-out audio (call-measures
 *    pageOnsets, harness/measures/onsets.ts: the mouth box's darkening from its level before the
 *    turn, paired from 400 ms early to 600 ms late), positive when the picture is late; reported
 *    apart for first sounds and phrases after a pause;
 *    the box is the one found on the call's decoded frames (a snapshot after its first frame, face
 *    models as below), or `mouthBox` where given (ENDPOINT_MOUTH_BOX), so a target's face need
 *    not be known;
 *  - frame pacing: the time between consecutive presented frames while the avatar listens and
 *    speaks (40 ms at 25 fps); a late frame is over 60 ms after the one before, a freeze over
 *    200 ms; not on the lip-sync turn below (encoding every frame in the page delays some);
 *  - lip sync, on the first call's first turn: every presented frame from half a second before the
 *    first sound to two seconds after is kept whole (a 256 px JPEG); after the call the face is
 *    found and tracked on each (harness/measures/mouth-opening.ts MouthTracker: FaceRegistry
 *    landmarks, the last frame's where one misses) and its mouth opening measured (cavity between
 *    the lips over the mouth width squared, less its lowest decile in the window: the closed
 *    level), against the received speech's RMS around each frame (the played-out samples within
 *    ±20 ms), and the onsets against the played-out blocks louder than silence: the figures of
 *    harness/measures/lip-figures.ts (r at the best lag within ±40 ms, closed and open shares,
 *    onsets, the shifted-audio controls), by method A and by the second, independent method
 *    (`method_b`: harness/measures/mouth-pixels.ts, the dark and teeth pixels of a mouth region
 *    placed once and moved with the upper face; no landmarks after the first frame), as the
 *    WebSocket client measures them too. With no face found the trace's mouth is the mouth box's
 *    darkening from its resting level (only where ENDPOINT_MOUTH_BOX gives a box), said in its
 *    `method`, and no r is given;
 *  - the lip-sync trace of that turn for the report: mouth opening and speech power (that RMS
 *    squared, every 10 ms) over the same window, each scaled to 0..1, with a strip of the frames
 *    around the mouth every 120 ms;
 *  - lip sync on each of the four faces of lip-faces.ts (`faces`, the uploads already sent), after
 *    the calls above: one call per face (the call's session names it in `face`), one text turn
 *    (websocket-lip-sync.ts's question, as over WebSocket), every frame kept whole from half a
 *    second before the first sound to the reply's cancel (FACE_TO_MS after it), the same figures
 *    by both methods as the trace turn's. Each is its call's first reply, as the trace turn is;
 *  - the A/V offset by turn index within a call as well (`onsetsByTurn`): Chromium starts a call's
 *    video nearer its audio's delay than it keeps it later, so the first replies differ.
 *
 * A target whose answer has no video (port 0 or no m=video) has no WebRTC first frame, A/V offset
 * or lip sync: reported as unsupported by the caller, like a missing Chromium or a refused call.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import sharp from 'sharp';
import { FaceRegistry } from '../../../src/media/face-registration.js';
import { callIn, chromiumAvailable, eventsIn, launchBrowser, PLAYOUT_BLOCK_MS, type PageSamples } from '../../../harness/clients/browser.js';
import { median, mouthBoxOf } from '../../../harness/measures/mouth-opening.js';
import { audioOnset, describeOnsets, pageOnsets, sleep, startAvatarCall, until, waitForEvent } from '../call-measures.js';
import { noOffsets, offsetsByKind, type OnsetOffsets } from '../../../harness/measures/onsets.js';
import { aboveRest, LIP_SYNC_METHOD, lipSyncFigures, round3, trackMouth, type LipSyncFigures } from '../../../harness/measures/lip-figures.js';
import { INSTRUCTIONS, SERVER_VAD, TEXT_QUESTIONS } from './websocket-measures.js';
import type { LipTurn } from './lip-faces.js';

export interface WebRtcResult {
  /** Why nothing was measured (no Chromium, the call refused); null when calls were made. */
  unsupported: string | null;
  firstFrameMs: number[];
  firstAudioPlayedMs: number[];
  /** Mouth onset − speech onset at the receiver, by kind of speech onset. */
  onsets: OnsetOffsets;
  /** The same by a turn's index within its call (every call's turns together). */
  onsetsByTurn: OnsetOffsets[];
  /** Time between consecutive presented frames, over every sampled stretch of every call but the lip-sync turn. */
  frameIntervalsMs: number[];
  lipSyncTrace: LipSyncTrace | null;
  /** The lip-sync figures of the trace turn; null where not measured (see `missing`). */
  lipSync: LipSyncFigures | null;
  /** The mouth box the A/V offset used, [x, y, w, h] in the 512x512 frame, and where it came from. */
  mouthBox: { box: number[]; from: 'ENDPOINT_MOUTH_BOX' | 'found on the decoded frames' } | null;
  /** Why a measure has no samples though calls were made (no video in the answer, no face found). */
  missing: Record<string, string>;
  notes: string[];
  /** The lip sync of one call on each face asked for, in their order. */
  faces: RtcLipSync[];
}

/** One face's lip-sync call at the receiver, shaped as websocket-lip-sync.ts WsLipSync is. */
export interface RtcLipSync {
  face: string;
  /** What the call asked (lip-faces.ts LIP_SYNC_QUESTIONS). */
  question: string;
  /** Why nothing was measured (the face not uploaded, the call refused, no face found); null when measured. */
  missing: string | null;
  figures: LipSyncFigures | null;
  /** Frames kept whole around the reply, and response.create → its first audio played, ms. */
  frames: number;
  first_audio_played_ms: number | null;
  /**
   * The A/V figure the playground shows (getStats: the audio's estimatedPlayoutTimestamp less its
   * output delay, minus the video's; positive: the picture behind its sound), median over the
   * samples from the first sound to FACE_TO_MS after it; null where Chromium gave none.
   */
  stats_av_ms: number | null;
}

/** One turn at the receiver, times in ms from the first sound heard; values scaled to 0..1. */
export interface LipSyncTrace {
  mouth: Array<[number, number]>;
  speech: Array<[number, number]>;
  /** JPEG data URLs of the region around the mouth. */
  frames: Array<{ t: number; url: string }>;
  /** How `mouth` was measured. */
  method: string;
}

/** The A/V offset's measures (endpoint METRIC names). */
export const AV_FIRST_SOUND = 'webrtc · A/V offset (first sound)';
export const AV_AFTER_PAUSE = 'webrtc · A/V offset (after a pause)';
/** How long the avatar speaks in each turn before it is cancelled, ms: a few phrases. */
const SPEAK_MS = 4000;
/** Speech RMS around a frame: the samples played within ±RMS_HALF_WINDOW_MS of it, in blocks of 256 at 48 kHz. */
const RMS_HALF_WINDOW_MS = 20;
/** Frames kept whole for the lip-sync measure: JPEGs of this side (px) of the 512x512 frame. */
const FULL_FRAME_SIDE_PX = 256;
const FULL_FRAMES = { everyMs: 0, box: [0, 0, 512, 512], side: FULL_FRAME_SIDE_PX, quality: 0.9 };
/** The snapshot the A/V offset's mouth box is found on, px; tries 400 ms apart. */
const SNAPSHOT_SIDE_PX = 512;
const SNAPSHOT_TRIES = 5;

/** The trace's window around the first sound, and the strip's spacing. */
const TRACE_FROM_MS = -500;
const TRACE_TO_MS = 2000;
/** A face call's frames are measured to this long after the first sound, ms: the reply until its cancel. */
const FACE_TO_MS = SPEAK_MS;
const STRIP_EVERY_MS = 120;
const STRIP_SIDE_PX = 96;

export interface WebRtcOptions {
  /** Base URL, http(s). */
  url: string;
  key: string;
  calls: number;
  textTurns: number;
  /** The face's mouth in the 512x512 frame, [x, y, w, h]; null: found on the decoded frames. */
  mouthBox: readonly number[] | null;
  /** Lip-sync turns (a face and its question), one call each after the `calls` ([]: none). */
  faces: LipTurn[];
  log: (line: string) => void;
}

/** A grey-level box somewhere in the frame: sampling needs one even where no mouth is known. */
const ANY_BOX = [0, 0, 16, 16];
/** The session every call asks for (a face call adds its `face`). */
const CALL_SESSION = { type: 'realtime', instructions: INSTRUCTIONS, audio: { input: { turn_detection: SERVER_VAD } } };

/** What the calls of one run share: the face models, and the mouth box found last. */
interface Faces {
  registry: FaceRegistry;
  found: number[] | null;
}

export async function measureWebRtc(o: WebRtcOptions): Promise<WebRtcResult> {
  const out: WebRtcResult = { unsupported: null, firstFrameMs: [], firstAudioPlayedMs: [], onsets: noOffsets(), onsetsByTurn: [], frameIntervalsMs: [], lipSyncTrace: null, lipSync: null, mouthBox: null, missing: {}, notes: [], faces: [] };
  if (!chromiumAvailable()) return { ...out, unsupported: 'Chromium is missing (/usr/bin/chromium; bash src/cli/setup.sh installs it)' };
  if (o.mouthBox) out.mouthBox = { box: [...o.mouthBox], from: 'ENDPOINT_MOUTH_BOX' };
  // The face models' per-image cache goes to a folder of this run's own.
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'endpoint-faces-'));
  const faces: Faces = { registry: new FaceRegistry(cacheDir), found: null };
  const browser = await launchBrowser({ microphone: 'silence' });
  try {
    for (let call = 0; call < o.calls; call++) {
      const page = await browser.newPage();
      try {
        const refused = await oneCall(page, o, out, faces, call === 0);
        if (refused) return { ...out, unsupported: refused };
      } catch (err) {
        // A call that went wrong part way (no session.created on its channel, a page error): the
        // target's doing as far as the client can tell; said, and the next call is tried.
        const what = `webrtc: call ${call + 1} failed: ${(err as Error).message.slice(0, 300)}`;
        if (out.firstFrameMs.length + out.firstAudioPlayedMs.length === 0 && call === o.calls - 1) return { ...out, unsupported: what };
        out.notes.push(what);
      } finally {
        await page.close();
      }
    }
    for (const face of o.faces) {
      const page = await browser.newPage();
      try {
        out.faces.push(await faceCall(page, o, face, faces.registry));
      } catch (err) {
        out.faces.push({ ...noFigures(face), missing: `the call failed: ${(err as Error).message.slice(0, 300)}` });
      } finally {
        await page.close();
      }
      const x = out.faces.at(-1)!;
      o.log(`  webrtc lip sync, ${face.label}: ${x.frames} frames kept, first audio played ${x.first_audio_played_ms ?? '-'} ms, the playground's A/V figure ${x.stats_av_ms ?? '-'} ms${x.missing ? ` (not measured: ${x.missing})` : ''}`);
    }
  } finally {
    await browser.close();
    await faces.registry.close();
    // A face found on a later call than one that found none: the A/V offset was measured.
    if (out.onsets.firstSound.length + out.onsets.afterPause.length > 0 && out.missing[AV_FIRST_SOUND]?.startsWith('no face')) delete out.missing[AV_FIRST_SOUND];
    if (out.onsets.afterPause.length > 0 && out.missing[AV_AFTER_PAUSE]?.startsWith('no face')) delete out.missing[AV_AFTER_PAUSE];
    await rm(cacheDir, { recursive: true, force: true });
  }
  return out;
}

/** One call: its first frame and text turns; returns why the target refused the call, or null. */
async function oneCall(page: Page, o: WebRtcOptions, out: WebRtcResult, faces: Faces, trace: boolean): Promise<string | null> {
  let started;
  try {
    started = await startAvatarCall(page, { url: o.url, bootstrapKey: o.key }, CALL_SESSION, { microphone: 'synth' });
  } catch (err) {
    // The first line only: a browser's fetch error carries the page's stack after it.
    return `POST /v1/realtime/calls did not make a call: ${(err as Error).message.split('\n')[0]!.slice(0, 200)}`;
  }
  const video = /^m=video (\d+)/m.exec(started.answer);
  const hasVideo = video !== null && video[1] !== '0';
  if (!hasVideo) out.missing['webrtc · first frame'] = out.missing[AV_FIRST_SOUND] = out.missing[AV_AFTER_PAUSE] = out.missing['webrtc · lip sync r'] = 'the SDP answer has no video';
  await waitForEvent(page, 'session.created', 0);
  await callIn(page, 'startSampling', o.mouthBox ?? faces.found ?? ANY_BOX);
  let box: readonly number[] | null = o.mouthBox;
  if (hasVideo) {
    const first = await until(() => callIn<PageSamples>(page, 'takeSamples'), (s) => s.firstFrameAt > 0, 'the first frame', 30_000).catch(() => null);
    if (first) out.firstFrameMs.push(Math.round(started.postMs + (first.firstFrameAt - first.answeredAt)));
    else out.notes.push('webrtc: a call presented no frame within 30 s');
    if (!box && first) {
      box = await findMouthBox(page, faces);
      if (box) out.mouthBox = { box: [...box], from: 'found on the decoded frames' };
      else out.notes.push('webrtc: no face found in snapshots of the decoded frames (A/V offset not measured on this call)');
    }
    if (!box) for (const m of [AV_FIRST_SOUND, AV_AFTER_PAUSE]) out.missing[m] ??= 'no face found in the decoded frames (ENDPOINT_MOUTH_BOX=x,y,w,h in a 512x512 frame gives the mouth box)';
    // Sampling again with the mouth box (and, for the trace turn, every frame kept whole).
    await callIn(page, 'startSampling', box ?? ANY_BOX, trace ? FULL_FRAMES : undefined);
    await sleep(1500); // idle frames before the first turn: the mouth's resting range
  }
  for (let i = 0; i < o.textTurns; i++) {
    const { t0, s } = await speakTurn(page, TEXT_QUESTIONS[i % TEXT_QUESTIONS.length]!);
    // The whole frames are kept for the trace turn only; encoding each one in the page delays some
    // frames, so that turn's frame intervals are left out of the pacing.
    const keptWhole = trace && i === 0 && hasVideo;
    if (keptWhole) await callIn(page, 'startSampling', box ?? ANY_BOX);
    else out.frameIntervalsMs.push(...frameIntervals(s));
    const heardAt = audioOnset(s, t0);
    if (heardAt === null) {
      out.notes.push(`webrtc: no audio heard within 2 s of the reply's start (turn ${i + 1})`);
      if (keptWhole) out.missing['webrtc · lip sync r'] = 'no audio heard in the first turn of the first call';
    } else {
      out.firstAudioPlayedMs.push(Math.round(heardAt - t0));
      if (keptWhole) {
        const measured = await lipSync(s, heardAt, faces.registry, o.mouthBox);
        if (measured) {
          out.lipSyncTrace = measured.trace;
          out.lipSync = measured.figures;
          if (!measured.figures) out.missing['webrtc · lip sync r'] = measured.trace.method;
        } else out.missing['webrtc · lip sync r'] = 'fewer than 10 frames presented around the first sound';
      }
      const onsets = hasVideo && box ? pageOnsets(s, t0) : null;
      out.onsetsByTurn[i] ??= noOffsets();
      if (onsets) {
        offsetsByKind(onsets, out.onsets);
        offsetsByKind(onsets, out.onsetsByTurn[i]);
      }
      if (hasVideo && box && (onsets === null || onsets.some((p) => p.offsetMs === null))) out.notes.push(`webrtc: turn ${i + 1} onsets (mouth − sound, ${s.audioClock} clock): ${describeOnsets(onsets)}`);
    }
    o.log(`  webrtc turn ${i + 1}: first audio played ${heardAt === null ? '-' : Math.round(heardAt - t0)} ms`);
    await sleep(1500); // back to idle before the next turn, whose baseline comes from these frames
  }
  await callIn(page, 'hangup');
  return null;
}

/**
 * One text turn on a call's channel: the user item, response.create, SPEAK_MS of the reply (a few
 * phrases: their audio and mouth onsets are in the samples), then response.cancel; the page's
 * samples since the last take, and when the reply was asked for (the page's clock).
 */
async function speakTurn(page: Page, question: string): Promise<{ t0: number; s: PageSamples }> {
  const from = (await eventsIn(page)).length;
  await callIn(page, 'send', { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: question }] } });
  const added = ['conversation.item.added', 'conversation.item.created', 'conversation.item.done'];
  await until(() => eventsIn(page), (ev) => ev.slice(from).some((e) => added.includes(e.type) || e.type === 'error'), 'the item added', 15_000);
  const t0 = await callIn<number>(page, 'send', { type: 'response.create' });
  await waitForEvent(page, 'output_audio_buffer.started', from, 60_000).catch(() => null);
  await sleep(SPEAK_MS);
  await callIn(page, 'send', { type: 'response.cancel' });
  await waitForEvent(page, 'response.done', from, 30_000).catch(() => null);
  return { t0, s: await callIn<PageSamples>(page, 'takeSamples') };
}

const noFigures = (face: LipTurn): RtcLipSync => ({ face: face.label, question: face.question, missing: face.missing, figures: null, frames: 0, first_audio_played_ms: null, stats_av_ms: null });

/** One face's lip-sync call (see the header): its figures by both methods, or why there are none. */
async function faceCall(page: Page, o: WebRtcOptions, face: LipTurn, registry: FaceRegistry): Promise<RtcLipSync> {
  const out = noFigures(face);
  if (face.id === null) return out;
  let started;
  try {
    started = await startAvatarCall(page, { url: o.url, bootstrapKey: o.key }, { ...CALL_SESSION, face: face.id }, { microphone: 'synth' });
  } catch (err) {
    return { ...out, missing: `a call with face '${face.id}' was refused: ${(err as Error).message.split('\n')[0]!.slice(0, 200)}` };
  }
  if (!/^m=video [1-9]/m.test(started.answer)) return { ...out, missing: 'the SDP answer has no video' };
  await waitForEvent(page, 'session.created', 0);
  await callIn(page, 'startSampling', ANY_BOX);
  const first = await until(() => callIn<PageSamples>(page, 'takeSamples'), (s) => s.firstFrameAt > 0, 'the first frame', 30_000).catch(() => null);
  if (!first) return { ...out, missing: 'no frame presented within 30 s' };
  await callIn(page, 'startSampling', ANY_BOX, FULL_FRAMES);
  await sleep(1500); // idle frames before the turn: the mouth at rest
  const { t0, s } = await speakTurn(page, face.question);
  await callIn(page, 'hangup');
  const heardAt = audioOnset(s, t0);
  if (heardAt === null) return { ...out, missing: 'no audio heard after response.create' };
  const measured = await lipSync(s, heardAt, registry, null, FACE_TO_MS);
  const frames = (s.thumbs ?? []).filter((f) => f.t - heardAt >= TRACE_FROM_MS && f.t - heardAt <= FACE_TO_MS).length;
  const statsAv = s.samples.filter((x) => x.t >= heardAt && x.t <= heardAt + FACE_TO_MS && x.statsAvMs !== null).map((x) => x.statsAvMs!).sort((a, b) => a - b);
  const base = { ...out, frames, first_audio_played_ms: Math.round(heardAt - t0), stats_av_ms: statsAv.length === 0 ? null : Math.round(statsAv[Math.floor(statsAv.length / 2)]!) };
  if (!measured?.figures) return { ...base, missing: measured ? measured.trace.method : 'fewer than 10 frames presented around the first sound' };
  return { ...base, figures: measured.figures };
}

/** Milliseconds between consecutive presented frames in one batch of samples (rounded to 0.1 ms). */
function frameIntervals(s: PageSamples): number[] {
  const out: number[] = [];
  for (let i = 1; i < s.frames.length; i++) out.push(Math.round((s.frames[i]!.t - s.frames[i - 1]!.t) * 10) / 10);
  return out;
}

/** A square around the mouth box (twice its larger side), inside a frame of `frameSide` pixels. */
function aroundMouth(box: readonly number[], frameSide: number): number[] {
  const [x, y, w, h] = box as [number, number, number, number];
  const side = Math.min(frameSide, Math.round(Math.max(w, h) * 2));
  const cx = x + w / 2;
  const cy = y + h / 2;
  const left = Math.max(0, Math.min(frameSide - side, Math.round(cx - side / 2)));
  const top = Math.max(0, Math.min(frameSide - side, Math.round(cy - side / 2)));
  return [left, top, side, side];
}

/**
 * The mouth box in a snapshot of the frame shown now (SNAPSHOT_SIDE_PX, the 512x512 frame's
 * pixels), tried SNAPSHOT_TRIES times 400 ms apart; the last one found (an earlier call's) where
 * none is; null where no face was ever found.
 */
async function findMouthBox(page: Page, faces: Faces): Promise<number[] | null> {
  const scale = 512 / SNAPSHOT_SIDE_PX;
  for (let i = 0; i < SNAPSHOT_TRIES; i++) {
    const url = await callIn<string | null>(page, 'snapshot', SNAPSHOT_SIDE_PX);
    if (url) {
      try {
        const face = await faces.registry.register(fromDataUrl(url));
        faces.found = mouthBoxOf(face.landmarks, SNAPSHOT_SIDE_PX, SNAPSHOT_SIDE_PX).map((v) => Math.round(v * scale));
        return faces.found;
      } catch {
        // No usable face in this frame (not yet drawn, a blur): the next snapshot.
      }
    }
    await sleep(400);
  }
  return faces.found;
}

function fromDataUrl(url: string): Buffer {
  return Buffer.from(url.slice(url.indexOf(',') + 1), 'base64');
}

/**
 * The received speech's RMS (full scale 1) within ±RMS_HALF_WINDOW_MS of a time, from the blocks of
 * 256 samples the page played out (PageSamples.loud: those louder than silence, the rest counted
 * as silent). These are the played-out samples themselves, on the clock of the audio onset; the
 * getStats totalAudioEnergy sampled every 10 ms moves in uneven steps (a 10 ms sample may show
 * no energy in the middle of a word) and is left for the trace's plot.
 */
function speechRms(loud: PageSamples['loud']): (t: number) => number {
  const ts = loud.map((b) => b.t);
  const firstAtOrAfter = (t: number) => {
    let lo = 0;
    let hi = ts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ts[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const blocksPerWindow = (2 * RMS_HALF_WINDOW_MS) / PLAYOUT_BLOCK_MS;
  return (t) => {
    let sum = 0;
    for (let i = firstAtOrAfter(t - RMS_HALF_WINDOW_MS); i < loud.length && loud[i]!.t < t + RMS_HALF_WINDOW_MS; i++) sum += loud[i]!.rms ** 2;
    return Math.sqrt(sum / blocksPerWindow);
  };
}

/**
 * A turn's lip sync around `heardAt`, from TRACE_FROM_MS before it to `toMs` after it (the trace
 * turn's window unless given; see the header): the figures and the trace with its strip; null
 * without 10 frames in the window. Without a face in any frame, the trace's mouth is
 * the box's greyness (where a box was given) and the figures null.
 */
async function lipSync(s: PageSamples, heardAt: number, registry: FaceRegistry, givenBox: readonly number[] | null, toMs = TRACE_TO_MS): Promise<{ trace: LipSyncTrace; figures: LipSyncFigures | null } | null> {
  const inWindow = (t: number) => t - heardAt >= TRACE_FROM_MS && t - heardAt <= toMs;
  const thumbs = (s.thumbs ?? []).filter((f) => inWindow(f.t));
  const rmsAt = speechRms(s.loud);
  // The speech's power every 10 ms over the window (as far as the samples go).
  const power: Array<[number, number]> = [];
  for (let t = heardAt + TRACE_FROM_MS; t <= Math.min(heardAt + toMs, s.now - RMS_HALF_WINDOW_MS); t += 10) power.push([t, rmsAt(t) ** 2]);
  const powerMax = Math.max(...power.map(([, p]) => p), 1e-12);
  const speech = power.map(([t, p]): [number, number] => [Math.round(t - heardAt), round3(p / powerMax)]);

  // Every kept frame of the window, in order (the first, before the sound, sets the cavity threshold).
  const tracked = await trackMouth(thumbs.map((f) => ({ t: f.t, jpeg: fromDataUrl(f.url) })), registry);
  const readings = tracked.readings;
  const figures = await lipSyncFigures(tracked, registry, { rmsAt, blocks: s.loud, blockMs: PLAYOUT_BLOCK_MS, from: heardAt + TRACE_FROM_MS });
  if (figures) {
    const opening = aboveRest(readings.map((x) => x.m.opening));
    const openMax = Math.max(...opening, 1e-9);
    // The strip is cropped around the median mouth box found (the thumbnails' pixels).
    const mouthBox = [0, 1, 2, 3].map((k) => median(readings.filter((x) => x.m.detected).map((x) => x.m.mouthBox[k]!)));
    return {
      trace: {
        mouth: readings.map((x, k) => [Math.round(x.t - heardAt), round3(Math.max(0, opening[k]!) / openMax)]),
        speech,
        frames: await strip(readings, heardAt, aroundMouth(mouthBox, FULL_FRAME_SIDE_PX)),
        method: LIP_SYNC_METHOD,
      },
      figures,
    };
  }

  // No face found: the mouth box's greyness, where a box was given.
  const why = thumbs.length === 0 ? 'no frames were kept' : `no face found in the ${thumbs.length} decoded frames around the first sound`;
  const frames = s.frames.filter((f) => inWindow(f.t));
  if (frames.length < 10) return null;
  const wholeFrames = thumbs.map((f) => ({ t: f.t, jpeg: fromDataUrl(f.url) }));
  const stripBox = givenBox ? aroundMouth(givenBox.map((v) => (v * FULL_FRAME_SIDE_PX) / 512), FULL_FRAME_SIDE_PX) : [0, 0, FULL_FRAME_SIDE_PX, FULL_FRAME_SIDE_PX];
  if (!givenBox) return { trace: { mouth: [], speech, frames: await strip(wholeFrames, heardAt, stripBox), method: `none: ${why}` }, figures: null };
  // Resting level: the brightest quarter of the frames before the first sound (a closed mouth is lighter).
  const before = frames.filter((f) => f.t < heardAt).map((f) => f.grey).sort((a, b) => b - a);
  const rest = before.length > 0 ? before[Math.floor(before.length / 4)]! : Math.max(...frames.map((f) => f.grey));
  const opening = frames.map((f) => Math.max(0, rest - f.grey));
  const mouthMax = Math.max(...opening, 1e-9);
  return {
    trace: {
      mouth: frames.map((f, k) => [Math.round(f.t - heardAt), round3(opening[k]! / mouthMax)]),
      speech,
      frames: await strip(wholeFrames, heardAt, stripBox),
      method: `mouth box (ENDPOINT_MOUTH_BOX) darkening from its resting level: ${why}`,
    },
    figures: null,
  };
}

/** A strip for the report: a frame every STRIP_EVERY_MS, `box` of it (the kept frames' pixels) as a STRIP_SIDE_PX JPEG. */
async function strip(frames: Array<{ t: number; jpeg: Buffer }>, heardAt: number, box: number[]): Promise<LipSyncTrace['frames']> {
  const out: LipSyncTrace['frames'] = [];
  let last = -Infinity;
  for (const f of frames) {
    if (f.t - last < STRIP_EVERY_MS) continue;
    last = f.t;
    const [left, top, width, height] = box.map(Math.round) as [number, number, number, number];
    const jpeg = await sharp(f.jpeg).extract({ left, top, width, height }).resize(STRIP_SIDE_PX, STRIP_SIDE_PX).jpeg({ quality: 80 }).toBuffer();
    out.push({ t: Math.round(f.t - heardAt), url: `data:image/jpeg;base64,${jpeg.toString('base64')}` });
  }
  return out;
}
