import fs from 'node:fs';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AppError } from '../../src/core/errors.js';
import { PLAYOUT_DELAY_URI } from '../../src/transport/rtp.js';
import { MAX_CANDIDATES, MAX_MEDIA_SECTIONS, MAX_OFFER_BYTES, negotiate, parseOffer, withExtmap } from '../../src/transport/sdp.js';
import { Rng, fuzzSeed, oddString } from '../helpers/fuzz.js';
import { REPO_ROOT } from '../../harness/servers/server.js';

const offer = (name: string) => fs.readFileSync(path.join(REPO_ROOT, 'test/fixtures/sdp', name), 'utf8');
const Sdp = suite('SDP offers');

function refusal(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    assert.instance(err, AppError);
    return err as AppError;
  }
  return assert.unreachable('expected a refusal') as never;
}

Sdp('a Chromium offer with audio, video and a data channel: Opus, H.264 constrained baseline (pm=1) by preference, the channel', () => {
  const n = negotiate(parseOffer(offer('chromium-audio-video-dc.sdp')), 'h264');
  assert.is(n.audio?.pt, 111);
  assert.is(n.audio?.direction, 'sendrecv');
  assert.is(n.video?.codec, 'h264');
  const h264 = parseOffer(offer('chromium-audio-video-dc.sdp')).media.find((m) => m.kind === 'video')!.codecs.find((c) => c.pt === n.video!.pt)!;
  assert.is(h264.fmtp['packetization-mode'], '1');
  assert.match(h264.fmtp['profile-level-id']!, /^42e0/);
  assert.is(n.videoFallback, false);
  assert.ok(n.dataChannel && n.dataChannel.maxMessageSize >= 65536);
  assert.is(negotiate(parseOffer(offer('chromium-audio-video-dc.sdp')), 'vp8').video?.codec, 'vp8');
});

Sdp('the playout-delay header extension is taken with the id the offer gives it, only where a one-byte header carries it (1-14), and the answer names it in the video section', () => {
  const chromium = offer('chromium-audio-video-dc.sdp');
  assert.is(negotiate(parseOffer(chromium), 'h264').video?.playoutDelayId, 5);
  assert.is(negotiate(parseOffer(chromium.replace(/^a=extmap:\d+ http:\/\/www\.webrtc\.org\/experiments\/rtp-hdrext\/playout-delay\r?\n/m, '')), 'h264').video?.playoutDelayId, null, 'not offered');
  assert.is(negotiate(parseOffer(chromium.replace('a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay', 'a=extmap:15 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay')), 'h264').video?.playoutDelayId, null, 'id 15 needs two-byte headers');
  assert.is(negotiate(parseOffer(chromium.replace('a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay', 'a=extmap:7/sendrecv http://www.webrtc.org/experiments/rtp-hdrext/playout-delay')), 'h264').video?.playoutDelayId, 7, 'with a direction');
  const answer = 'v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\nm=video 9 UDP/TLS/RTP/SAVPF 109\r\na=mid:1\r\na=sendonly\r\n';
  assert.is(withExtmap(answer, '1', 5, PLAYOUT_DELAY_URI), `v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\nm=video 9 UDP/TLS/RTP/SAVPF 109\r\na=mid:1\r\na=extmap:5 ${PLAYOUT_DELAY_URI}\r\na=sendonly\r\n`);
  assert.is(withExtmap(answer, '2', 5, PLAYOUT_DELAY_URI), answer, 'no such mid: unchanged');
});

Sdp('an offer that lists only VP8 gets VP8 even when H.264 is preferred (the fallback is reported)', () => {
  const n = negotiate(parseOffer(offer('chromium-vp8-only.sdp')), 'h264');
  assert.is(n.video?.codec, 'vp8');
  assert.is(n.videoFallback, true);
});

Sdp('a data-channel-only offer (what rtAV clients send) is usable: no audio, no video', () => {
  const n = negotiate(parseOffer(offer('chromium-dc-only.sdp')), 'h264');
  assert.equal([n.audio, n.video], [null, null]);
  assert.ok(n.dataChannel);
});

Sdp('offers that are not usable are refused with invalid_offer / no_usable_codec, naming what is wrong', () => {
  const good = offer('chromium-audio-video-dc.sdp');
  const cases: Array<[string, string, RegExp]> = [
    ['garbage', 'invalid_offer', /v=0/],
    ['v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n', 'invalid_offer', /no media section/],
    [good.replace(/a=ice-ufrag:.*\r?\n/g, ''), 'invalid_offer', /ICE credentials/],
    [good.replace(/a=fingerprint:.*\r?\n/g, ''), 'invalid_offer', /fingerprint/],
    [good.replace(/a=mid:1\r?\n/, ''), 'invalid_offer', /a=mid/],
    [good.replace(/opus\/48000\/2/g, 'PCMU/8000'), 'no_usable_codec', /Opus\/48000\/2/],
    [good.replace(/(H264|VP8)\/90000/g, 'AV1/90000'), 'no_usable_codec', /H\.264 .* or VP8/],
    ['v=0\r\n' + 'a=x\r\n'.repeat(MAX_OFFER_BYTES / 5), 'invalid_offer', /bytes/],
    [good + Array.from({ length: MAX_MEDIA_SECTIONS }, (_, i) => `m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:x${i}\r\n`).join(''), 'invalid_offer', /media sections/],
    [good.replace(/a=mid:0\r?\n/, (l) => l + 'a=candidate:1 1 UDP 2122260223 10.0.0.1 9 typ host\r\n'.repeat(MAX_CANDIDATES + 1)), 'invalid_offer', /candidates/],
    [good.replace(/a=mid:1/, 'a=mid:0'), 'invalid_offer', /same a=mid:0/],
  ];
  for (const [sdp, code, message] of cases) {
    const err = refusal(() => negotiate(parseOffer(sdp), 'h264'));
    assert.is(err.code, code, sdp.slice(0, 40));
    assert.is(err.status, 400);
    assert.is(err.param, 'sdp');
    assert.match(err.message, message);
  }
});

Sdp('H.264 with packetization-mode=0 only, or a profile other than (constrained) baseline, is not used; VP8 is then taken', () => {
  const good = offer('chromium-audio-video-dc.sdp');
  const noMode1 = good.replace(/packetization-mode=1/g, 'packetization-mode=0');
  assert.is(negotiate(parseOffer(noMode1), 'h264').video?.codec, 'vp8');
  const highOnly = good.replace(/profile-level-id=42[0-9a-f]{4}/g, 'profile-level-id=640034');
  assert.is(negotiate(parseOffer(highOnly), 'h264').video?.codec, 'vp8');
});

Sdp('random mutations of real offers never throw anything but a 400 AppError', () => {
  const seed = fuzzSeed();
  const rng = new Rng(seed);
  const sources = ['chromium-audio-video-dc.sdp', 'chromium-dc-only.sdp', 'chromium-vp8-only.sdp'].map(offer);
  for (let i = 0; i < 2000; i++) {
    const lines = rng.pick(sources).split('\r\n');
    for (let k = rng.int(1, 4); k > 0; k--) {
      const at = rng.int(0, lines.length - 1);
      const action = rng.int(0, 3);
      if (action === 0) lines.splice(at, 1);
      else if (action === 1) lines[at] = oddString(rng, 80);
      else if (action === 2) lines[at] = (lines[at] ?? '').slice(0, rng.int(0, 20));
      else lines.splice(at, 0, rng.pick(['m=audio 9 UDP/TLS/RTP/SAVPF 0', 'a=rtpmap:x y', 'a=fmtp:111', 'm=video', 'a=max-message-size:-1', 'a=mid:']));
    }
    try {
      negotiate(parseOffer(lines.join('\r\n')), rng.chance(0.5) ? 'h264' : 'vp8');
    } catch (err) {
      assert.ok(err instanceof AppError && err.status === 400, `seed ${seed}, case ${i}: ${String(err)}`);
    }
  }
});

Sdp.run();
