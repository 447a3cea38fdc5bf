/**
 * Sender reports on the session clock: the unit (two streams, a round trip) and over a real call,
 * CallPeer answering a node-datachannel offerer that reads the reports it receives.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import ndc from 'node-datachannel';
import { Logger } from '../../src/core/log.js';
import { CallPeer, releaseClosedPeers } from '../../src/transport/call-peer.js';
import { isRtcp, parseRtp, parseSenderReport, type SenderReport } from '../../src/transport/rtp.js';
import { rtpTimestamp, SenderReports } from '../../src/transport/sender-reports.js';
import { until } from '../../harness/servers/wait.js';

const Reports = suite('sender reports on the session clock');

const AUDIO = { ssrc: 1111, clockHz: 48_000, origin: 123_456_789 };
const VIDEO = { ssrc: 2222, clockHz: 90_000, origin: 2_000_000_000 };

/** Where a report puts session pts 0 of its stream, Unix ms: NTP minus the RTP timestamp's time since the origin. */
function epochOf(packet: Buffer, s: { clockHz: number; origin: number }): number {
  const r = parseSenderReport(packet)!;
  const ticks = (r.rtpTimestamp - s.origin + 2 ** 32) % 2 ** 32;
  return r.ntpMs - (ticks / s.clockHz) * 1000;
}

function clocks() {
  const c = { wall: 1_800_000_000_000, mono: 5_000 };
  return { c, options: { wallMs: () => c.wall, monotonicMs: () => c.mono } };
}

Reports('two streams sent at different delays from their pts still map equal pts to one instant', () => {
  const { c, options } = clocks();
  const reports = new SenderReports('avatar', options);
  reports.addStream(AUDIO.ssrc, AUDIO.clockHz, AUDIO.origin);
  reports.addStream(VIDEO.ssrc, VIDEO.clockHz, VIDEO.origin);
  // Session time runs with the wall clock; video leaves 5 ms after its pts, audio 200 ms after
  // (the delay a wall-clock reporter would turn into a 195 ms A/V error at the receiver).
  for (let ptsMs = 0; ptsMs <= 3000; ptsMs += 20) {
    c.wall = 1_800_000_000_000 + ptsMs + 5;
    if (ptsMs % 40 === 0) reports.sent(VIDEO.ssrc, ptsMs * 1e6, 1000);
    c.wall = 1_800_000_000_000 + ptsMs + 200;
    if (ptsMs >= 200) reports.sent(AUDIO.ssrc, (ptsMs - 200) * 1e6, 80);
  }
  const out = reports.reports();
  assert.equal(out.map((r) => r.ssrc).sort(), [AUDIO.ssrc, VIDEO.ssrc].sort());
  const audio = out.find((r) => r.ssrc === AUDIO.ssrc)!.packet;
  const video = out.find((r) => r.ssrc === VIDEO.ssrc)!.packet;
  const error = epochOf(audio, AUDIO) - epochOf(video, VIDEO);
  assert.ok(Math.abs(error) < 0.1, `mapping error ${error} ms`);
  // The epoch is the wall clock at the first packet minus its pts: within the first send's delay of real time.
  assert.ok(Math.abs(epochOf(video, VIDEO) - (1_800_000_000_000 + 5)) < 0.1);
  // Each report describes the last packet its stream sent: pts 3000 ms for video, 2800 ms for audio.
  assert.is(parseSenderReport(video)!.rtpTimestamp, rtpTimestamp(3000e6, VIDEO.clockHz, VIDEO.origin));
  assert.is(parseSenderReport(audio)!.rtpTimestamp, rtpTimestamp(2800e6, AUDIO.clockHz, AUDIO.origin));
  assert.equal([parseSenderReport(video)!.packets, parseSenderReport(video)!.octets], [76, 76_000]);
  assert.equal([parseSenderReport(audio)!.packets, parseSenderReport(audio)!.octets], [141, 141 * 80]);
});

Reports('a stream that has sent nothing is not reported; nothing at all before the first packet', () => {
  const { options } = clocks();
  const reports = new SenderReports('avatar', options);
  reports.addStream(AUDIO.ssrc, AUDIO.clockHz, AUDIO.origin);
  reports.addStream(VIDEO.ssrc, VIDEO.clockHz, VIDEO.origin);
  assert.equal(reports.reports(), []);
  reports.sent(VIDEO.ssrc, 0, 500);
  reports.sent(9999, 0, 500);
  assert.equal(reports.reports().map((r) => r.ssrc), [VIDEO.ssrc]);
});

Reports('the round trip is read from an echoed report against when it was sent, not against the peer clock', () => {
  const { c, options } = clocks();
  const reports = new SenderReports('avatar', options);
  reports.addStream(VIDEO.ssrc, VIDEO.clockHz, VIDEO.origin);
  reports.sent(VIDEO.ssrc, 0, 500);
  const first = reports.reports()[0]!.packet;
  const lsr = ((first.readUInt32BE(8) & 0xffff) * 65536 + (first.readUInt32BE(12) >>> 16)) >>> 0;
  // The receiver held it 30 ms and its report arrives 75 ms after ours left: a 45 ms round trip.
  c.mono += 75;
  assert.ok(Math.abs(reports.roundTripMs(lsr, 30 * 65.536)! - 45) < 0.01);
  assert.is(reports.roundTripMs(0, 0), null, 'no report received yet');
  assert.is(reports.roundTripMs((lsr + 12345) >>> 0, 0), null, 'not one of ours');
});

Reports('rtpTimestamp is the pts on the codec clock from the origin, wrapping at 32 bits', () => {
  assert.is(rtpTimestamp(1e9, 90_000, 10), 90_010);
  assert.is(rtpTimestamp(20e6, 48_000, 2 ** 32 - 100), 860);
});

Reports.run();

const OverACall = suite('sender reports over a call');

OverACall('a call whose audio leaves 200 ms after its video still reports both on one clock', async () => {
  const pc = new ndc.PeerConnection('offerer', { iceServers: [], bindAddress: '127.0.0.1' });
  const audioDesc = new ndc.Audio('0', 'SendRecv');
  audioDesc.addOpusCodec(111);
  const videoDesc = new ndc.Video('1', 'RecvOnly');
  videoDesc.addH264Codec(102, 'profile-level-id=42e01f;packetization-mode=1;level-asymmetry-allowed=1');
  const tracks = { audio: pc.addTrack(audioDesc), video: pc.addTrack(videoDesc) };
  const received: Record<'audio' | 'video', { firstTs: number | null; reports: SenderReport[] }> = { audio: { firstTs: null, reports: [] }, video: { firstTs: null, reports: [] } };
  for (const kind of ['audio', 'video'] as const) {
    tracks[kind].onMessage((message) => {
      if (isRtcp(message)) {
        const sr = parseSenderReport(message);
        if (sr) received[kind].reports.push(sr);
      } else received[kind].firstTs ??= parseRtp(message)?.timestamp ?? null;
    });
  }
  pc.setLocalDescription();
  await until(async () => pc.gatheringState(), (state) => state === 'complete', 'ICE gathering');
  const { peer, answer } = await CallPeer.answer(pc.localDescription()!.sdp, { videoCodec: 'h264', bindAddress: '127.0.0.1', log: new Logger('silent') });
  pc.setRemoteDescription(answer, 'answer');
  await until(async () => tracks.video.isOpen() && tracks.audio.isOpen(), (open) => open, 'both tracks open');
  // Session time from now: a (fake) H.264 access unit every 40 ms on time, an Opus packet every
  // 20 ms sent 200 ms after its pts.
  const start = performance.now();
  const au = Buffer.concat([Buffer.from([0, 0, 0, 1, 0x65]), Buffer.alloc(300, 7)]);
  let videoPts = 0;
  let audioPts = 0;
  const timer = setInterval(() => {
    const elapsed = performance.now() - start;
    while (videoPts <= elapsed) peer.sendVideo(au, (videoPts += 40) * 1e6 - 40e6);
    while (audioPts <= elapsed - 200) peer.sendAudio(Buffer.from([0xfc, 0xff, 0xfe]), (audioPts += 20) * 1e6 - 20e6);
  }, 5);
  try {
    await until(async () => Math.min(received.audio.reports.length, received.video.reports.length), (n) => n >= 2, 'two sender reports of each stream', 10_000);
  } finally {
    clearInterval(timer);
    peer.close();
    pc.close();
  }
  // Both streams started at pts 0, so each stream's first RTP timestamp is its pts 0: where a
  // report puts that instant is the stream's epoch. The receiver lines the streams up by these.
  const epoch = (kind: 'audio' | 'video', clockHz: number) => {
    const r = received[kind].reports.at(-1)!;
    const ticks = (r.rtpTimestamp - received[kind].firstTs! + 2 ** 32) % 2 ** 32;
    return r.ntpMs - (ticks / clockHz) * 1000;
  };
  const error = epoch('audio', 48_000) - epoch('video', 90_000);
  assert.ok(Math.abs(error) <= 5, `audio and video reports disagree by ${error.toFixed(1)} ms (a wall-clock reporter: about 200)`);
  // And the reports' clock is the wall clock: the epoch is when the call's media began.
  assert.ok(Math.abs(epoch('video', 90_000) - (performance.timeOrigin + start)) < 1000);
  releaseClosedPeers();
});

OverACall.run();
