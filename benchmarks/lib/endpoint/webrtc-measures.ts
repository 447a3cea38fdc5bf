/**
 * The endpoint benchmark's measures over WebRTC, in headless Chromium (test/helpers/browser.ts),
 * against a target that takes POST /v1/realtime/calls (multipart offer with Opus both ways, an
 * H.264 receive-only video m-line and the `oai-events` channel, as lib/call-measures.ts
 * startAvatarCall sends it); what is measured is what the browser decoded and played:
 *
 *  - first frame: the call's POST sent → its first video frame presented (requestVideoFrameCallback):
 *    what a person waits from pressing call to seeing the face (the SDP answer included);
 *  - text turn → first audio played: a user text item, then response.create → the first block of
 *    the avatar's audio played out louder than silence at the receiver (call-measures audioOnset);
 *  - A/V offset (only where the face's mouth box in the frame is known, `mouthBox`): onset of
 *    mouth motion in the presented frames − onset of the audio (call-measures mouthOnset),
 *    positive when the picture is late;
 *  - frame pacing: the time between consecutive presented frames while the avatar listens and
 *    speaks (40 ms at 25 fps); a late frame is over 60 ms after the one before, a freeze over
 *    200 ms;
 *  - a lip-sync trace of the first call's first turn (where the mouth box is known): the mouth's
 *    opening (its box darkening from the resting level) and the received speech's power from
 *    half a second before the first sound to two seconds after, with a strip of the decoded
 *    frames around the mouth every 120 ms, for the report to draw.
 *
 * A target whose answer has no video (port 0 or no m=video) has no WebRTC first frame or A/V
 * offset: reported as unsupported by the caller, like a missing Chromium or a refused call.
 */
import type { Page } from 'playwright-core';
import { callIn, chromiumAvailable, eventsIn, launchBrowser, type PageSamples } from '../../../test/helpers/browser.js';
import { audioOnset, mouthOnset, sleep, startAvatarCall, until, waitForEvent } from '../call-measures.js';
import { INSTRUCTIONS, SERVER_VAD, TEXT_QUESTIONS } from './websocket-measures.js';

export interface WebRtcResult {
  /** Why nothing was measured (no Chromium, the call refused); null when calls were made. */
  unsupported: string | null;
  firstFrameMs: number[];
  firstAudioPlayedMs: number[];
  avOffsetMs: number[];
  /** Time between consecutive presented frames, over every sampled stretch of every call. */
  frameIntervalsMs: number[];
  lipSyncTrace: LipSyncTrace | null;
  /** Why a measure has no samples though calls were made (no video in the answer, mouth box unknown). */
  missing: Record<string, string>;
  notes: string[];
}

/** One turn at the receiver, times in ms from the first sound heard; values scaled to 0..1. */
export interface LipSyncTrace {
  mouth: Array<[number, number]>;
  speech: Array<[number, number]>;
  /** JPEG data URLs of the region around the mouth. */
  frames: Array<{ t: number; url: string }>;
}

/** The trace's window around the first sound, and the strip's spacing. */
const TRACE_FROM_MS = -500;
const TRACE_TO_MS = 2000;
const STRIP_EVERY_MS = 120;
const STRIP_SIDE_PX = 96;

export interface WebRtcOptions {
  /** Base URL, http(s). */
  url: string;
  key: string;
  calls: number;
  textTurns: number;
  /** The face's mouth in the 512x512 frame, [x, y, w, h]; null: no A/V offset. */
  mouthBox: readonly number[] | null;
  log: (line: string) => void;
}

/** A grey-level box somewhere in the frame: sampling needs one even where no mouth is known. */
const ANY_BOX = [0, 0, 16, 16];

export async function measureWebRtc(o: WebRtcOptions): Promise<WebRtcResult> {
  const out: WebRtcResult = { unsupported: null, firstFrameMs: [], firstAudioPlayedMs: [], avOffsetMs: [], frameIntervalsMs: [], lipSyncTrace: null, missing: {}, notes: [] };
  if (!chromiumAvailable()) return { ...out, unsupported: 'Chromium is missing (/usr/bin/chromium; bash src/cli/setup.sh installs it)' };
  if (o.mouthBox === null) out.missing['webrtc · A/V offset'] = "the face's mouth position in the frame is not known for this target (ENDPOINT_MOUTH_BOX=x,y,w,h in a 512x512 frame)";
  const browser = await launchBrowser({ microphone: 'silence' });
  try {
    for (let call = 0; call < o.calls; call++) {
      const page = await browser.newPage();
      try {
        const refused = await oneCall(page, o, out, call === 0 && o.mouthBox !== null);
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
  } finally {
    await browser.close();
  }
  return out;
}

/** One call: its first frame and text turns; returns why the target refused the call, or null. */
async function oneCall(page: Page, o: WebRtcOptions, out: WebRtcResult, trace: boolean): Promise<string | null> {
  const session = { type: 'realtime', instructions: INSTRUCTIONS, audio: { input: { turn_detection: SERVER_VAD } } };
  let started;
  try {
    started = await startAvatarCall(page, { url: o.url, bootstrapKey: o.key }, session, { microphone: 'synth' });
  } catch (err) {
    return `POST /v1/realtime/calls did not make a call: ${(err as Error).message.slice(0, 200)}`;
  }
  const video = /^m=video (\d+)/m.exec(started.answer);
  const hasVideo = video !== null && video[1] !== '0';
  if (!hasVideo) out.missing['webrtc · first frame'] = out.missing['webrtc · A/V offset'] = 'the SDP answer has no video';
  await waitForEvent(page, 'session.created', 0);
  await callIn(page, 'startSampling', o.mouthBox ?? ANY_BOX, trace ? { everyMs: STRIP_EVERY_MS, box: aroundMouth(o.mouthBox!), side: STRIP_SIDE_PX } : undefined);
  if (hasVideo) {
    const first = await until(() => callIn<PageSamples>(page, 'takeSamples'), (s) => s.firstFrameAt > 0, 'the first frame', 30_000).catch(() => null);
    if (first) out.firstFrameMs.push(Math.round(started.postMs + (first.firstFrameAt - first.answeredAt)));
    else out.notes.push('webrtc: a call presented no frame within 30 s');
    await sleep(1500); // idle frames before the first turn: the mouth's resting range
  }
  for (let i = 0; i < o.textTurns; i++) {
    const from = (await eventsIn(page)).length;
    await callIn(page, 'send', { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: TEXT_QUESTIONS[i % TEXT_QUESTIONS.length] }] } });
    const added = ['conversation.item.added', 'conversation.item.created', 'conversation.item.done'];
    await until(() => eventsIn(page), (ev) => ev.slice(from).some((e) => added.includes(e.type) || e.type === 'error'), 'the item added', 15_000);
    const t0 = await callIn<number>(page, 'send', { type: 'response.create' });
    await waitForEvent(page, 'output_audio_buffer.started', from, 60_000).catch(() => null);
    await sleep(2000); // the avatar speaks a while: its audio and mouth onsets are in the samples
    await callIn(page, 'send', { type: 'response.cancel' });
    await waitForEvent(page, 'response.done', from, 30_000).catch(() => null);
    const s = await callIn<PageSamples>(page, 'takeSamples');
    out.frameIntervalsMs.push(...frameIntervals(s));
    const heardAt = audioOnset(s, t0);
    if (heardAt === null) out.notes.push(`webrtc: no audio heard within 2 s of the reply's start (turn ${i + 1})`);
    else {
      out.firstAudioPlayedMs.push(Math.round(heardAt - t0));
      if (trace && i === 0 && hasVideo) out.lipSyncTrace = lipSyncTrace(s, heardAt);
      const mouthAt = hasVideo && o.mouthBox ? mouthOnset(s, heardAt) : null;
      if (mouthAt !== null) out.avOffsetMs.push(Math.round(mouthAt - heardAt));
      else if (hasVideo && o.mouthBox) out.notes.push(`webrtc: no mouth motion onset found around the audio onset (turn ${i + 1})`);
    }
    o.log(`  webrtc turn ${i + 1}: first audio played ${heardAt === null ? '-' : Math.round(heardAt - t0)} ms`);
    await sleep(1500); // back to idle before the next turn, whose baseline comes from these frames
  }
  await callIn(page, 'hangup');
  return null;
}

/** Milliseconds between consecutive presented frames in one batch of samples (rounded to 0.1 ms). */
function frameIntervals(s: PageSamples): number[] {
  const out: number[] = [];
  for (let i = 1; i < s.frames.length; i++) out.push(Math.round((s.frames[i]!.t - s.frames[i - 1]!.t) * 10) / 10);
  return out;
}

/** A square around the mouth box (three mouths wide), inside the 512x512 frame. */
function aroundMouth(box: readonly number[]): number[] {
  const [x, y, w, h] = box as [number, number, number, number];
  const side = Math.min(512, Math.round(Math.max(w, h) * 3));
  const cx = x + w / 2;
  const cy = y + h / 2;
  const left = Math.max(0, Math.min(512 - side, Math.round(cx - side / 2)));
  const top = Math.max(0, Math.min(512 - side, Math.round(cy - side / 2)));
  return [left, top, side, side];
}

/** The turn's trace around `heardAt` (see the header), or null without frames in that window. */
function lipSyncTrace(s: PageSamples, heardAt: number): LipSyncTrace | null {
  const inWindow = (t: number) => t - heardAt >= TRACE_FROM_MS && t - heardAt <= TRACE_TO_MS;
  const frames = s.frames.filter((f) => inWindow(f.t));
  if (frames.length < 10) return null;
  // Resting level: the brightest quarter of the frames before the first sound (a closed mouth is lighter).
  const before = frames.filter((f) => f.t < heardAt).map((f) => f.grey).sort((a, b) => b - a);
  const rest = before.length > 0 ? before[Math.floor(before.length / 4)]! : Math.max(...frames.map((f) => f.grey));
  const opening = frames.map((f) => Math.max(0, rest - f.grey));
  const mouthMax = Math.max(...opening, 1e-9);
  const power: Array<[number, number]> = [];
  for (let k = 1; k < s.samples.length; k++) {
    const a = s.samples[k - 1]!;
    const b = s.samples[k]!;
    if (inWindow(b.t) && b.t > a.t) power.push([b.t, Math.max(0, b.energy - a.energy) / (b.t - a.t)]);
  }
  const powerMax = Math.max(...power.map(([, p]) => p), 1e-12);
  const round = (v: number) => Math.round(v * 1000) / 1000;
  return {
    mouth: frames.map((f, k) => [Math.round(f.t - heardAt), round(opening[k]! / mouthMax)]),
    speech: power.map(([t, p]) => [Math.round(t - heardAt), round(p / powerMax)]),
    frames: (s.thumbs ?? []).filter((f) => inWindow(f.t)).map((f) => ({ t: Math.round(f.t - heardAt), url: f.url })),
  };
}
