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
 *    positive when the picture is late.
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
  /** Why a measure has no samples though calls were made (no video in the answer, mouth box unknown). */
  missing: Record<string, string>;
  notes: string[];
}

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
  const out: WebRtcResult = { unsupported: null, firstFrameMs: [], firstAudioPlayedMs: [], avOffsetMs: [], missing: {}, notes: [] };
  if (!chromiumAvailable()) return { ...out, unsupported: 'Chromium is missing (/usr/bin/chromium; bash src/cli/setup.sh installs it)' };
  if (o.mouthBox === null) out.missing['webrtc · A/V offset'] = "the face's mouth position in the frame is not known for this target (ENDPOINT_MOUTH_BOX=x,y,w,h in a 512x512 frame)";
  const browser = await launchBrowser({ microphone: 'silence' });
  try {
    for (let call = 0; call < o.calls; call++) {
      const page = await browser.newPage();
      try {
        const refused = await oneCall(page, o, out);
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
async function oneCall(page: Page, o: WebRtcOptions, out: WebRtcResult): Promise<string | null> {
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
  await callIn(page, 'startSampling', o.mouthBox ?? ANY_BOX);
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
    const heardAt = audioOnset(s, t0);
    if (heardAt === null) out.notes.push(`webrtc: no audio heard within 2 s of the reply's start (turn ${i + 1})`);
    else {
      out.firstAudioPlayedMs.push(Math.round(heardAt - t0));
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
