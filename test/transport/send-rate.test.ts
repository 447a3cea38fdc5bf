/**
 * What keeps a call's video usable on a bad link, without a network: the send-rate control
 * (src/transport/send-rate.ts) on made-up receiver reports (loss that NACK resends repair does
 * not lower the rate, loss that stays does, a growing round trip does, an uncongested link climbs
 * back to the ceiling), the RTCP feedback reader it is fed by and the H.264 packetizer (rtp.ts),
 * and the bounded NACK resends (resend.ts).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ResendBuffer } from '../../src/transport/resend.js';
import { packetizeH264, readRtcp } from '../../src/transport/rtp.js';
import { SendRateControl, type RateReport } from '../../src/transport/send-rate.js';

const options = { maxVideoKbps: 1000, minVideoKbps: 100 };

/** Reports every 250 ms for `seconds`: `packetsPerS` sent, `lossOf(t)` of them lost for good, the round trip `rtt(t)` ms. */
function feed(control: SendRateControl, from: { t: number; seq: number; lost: number; nacked?: number }, seconds: number, packetsPerS: number, lossOf: (t: number) => number, rtt: (t: number) => number, sentKbps: number): number[] {
  const targets: number[] = [];
  for (let i = 0; i < seconds * 4; i++) {
    from.t += 250;
    const sent = packetsPerS / 4;
    from.seq += sent;
    from.lost += sent * lossOf(from.t);
    const report: RateReport = { highestSequence: Math.round(from.seq), cumulativeLost: Math.round(from.lost), packetsSent: Math.round(from.seq), packetsNacked: Math.round(from.nacked ?? 0), relativeRttMs: rtt(from.t) };
    const kbps = control.update(report, from.t, sentKbps);
    if (kbps !== null) targets.push(kbps);
  }
  return targets;
}

test('a clean link keeps the ceiling; loss that NACK repairs (not counted lost) changes nothing', () => {
  const control = new SendRateControl(options);
  const clock = { t: 0, seq: 0, lost: 0 };
  assert.equal(feed(control, clock, 10, 100, () => 0, () => 20, 900), []);
  assert.is(control.videoKbps, 1000);
  // Jitter of ±20 ms on the round trip is no queue.
  assert.equal(feed(control, clock, 10, 100, () => 0, (t) => 20 + 20 * Math.sin(t / 100), 900), []);
  assert.is(control.videoKbps, 1000);
});

test('loss that stays over 10% lowers the rate towards what got through; under 2% it climbs back', () => {
  const control = new SendRateControl(options);
  const clock = { t: 0, seq: 0, lost: 0 };
  feed(control, clock, 4, 100, () => 0.4, () => 20, 1000);
  assert.ok(control.videoKbps < 600, `${control.videoKbps} kbit/s after 4 s of 40% loss`);
  const low = control.videoKbps;
  feed(control, clock, 30, 100, () => 0, () => 20, low);
  assert.ok(control.videoKbps > low * 5 || control.videoKbps === 1000, `climbed back: ${low} -> ${control.videoKbps}`);
});

test('loss that resends repair but over 3% of packets are NACKed: the rate comes down to 300 kbit/s in all and stays there', () => {
  const control = new SendRateControl(options);
  const clock = { t: 0, seq: 0, lost: 0, nacked: 0 };
  for (let i = 0; i < 40; i++) {
    clock.nacked += 25 * 0.06;
    feed(control, clock, 0.25, 100, () => 0, () => 20, 1000);
  }
  assert.is(control.videoKbps, 250, `${control.videoKbps} kbit/s`);
});

test('a growing round trip (a queue at the bottleneck) lowers the rate within a few seconds; a single late report does not', () => {
  const control = new SendRateControl(options);
  const clock = { t: 0, seq: 0, lost: 0 };
  feed(control, clock, 5, 100, () => 0, () => 20, 900);
  // One late report: the server's event loop was busy.
  control.update({ highestSequence: clock.seq + 25, cumulativeLost: 0, packetsSent: clock.seq + 25, packetsNacked: 0, relativeRttMs: 400 }, (clock.t += 250), 900);
  clock.seq += 25;
  assert.is(control.videoKbps, 1000);
  feed(control, clock, 1, 100, () => 0, () => 20, 900);
  const start = clock.t;
  feed(control, clock, 3, 100, () => 0, (t) => 20 + (t - start) * 0.4, 900);
  assert.ok(control.videoKbps < 500, `${control.videoKbps} kbit/s after the queue grew to 1.2 s`);
  assert.ok(control.videoKbps >= 100, 'never under the floor');
});

test('readRtcp: report blocks of RR and SR, REMB, NACK with its packets, PLI, transport-cc; malformed input is null or stops the reading', () => {
  const rr = Buffer.alloc(32);
  rr.writeUInt8(0x81, 0); rr.writeUInt8(201, 1); rr.writeUInt16BE(7, 2); rr.writeUInt32BE(1, 4);
  rr.writeUInt32BE(0xabcdef01, 8); rr.writeUInt8(64, 12); rr.writeUIntBE(0xfffffe, 13, 3); rr.writeUInt32BE(70_000, 16); rr.writeUInt32BE(90, 20); rr.writeUInt32BE(0x12345678, 24); rr.writeUInt32BE(65_536, 28);
  const remb = Buffer.alloc(24);
  remb.writeUInt8(0x8f, 0); remb.writeUInt8(206, 1); remb.writeUInt16BE(5, 2); remb.write('REMB', 12, 'ascii'); remb.writeUInt8(1, 16); remb.writeUIntBE((3 << 18) | 1000, 17, 3);
  const nack = Buffer.alloc(16);
  nack.writeUInt8(0x81, 0); nack.writeUInt8(205, 1); nack.writeUInt16BE(3, 2); nack.writeUInt16BE(100, 12); nack.writeUInt16BE(0b101, 14);
  const pli = Buffer.from([0x81, 206, 0, 2, 0, 0, 0, 1, 0xab, 0xcd, 0xef, 0x01]);
  const twcc = Buffer.from([0x8f, 205, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0]);
  const fb = readRtcp(Buffer.concat([rr, remb, nack, pli, twcc]))!;
  assert.equal(fb.reports, [{ ssrc: 0xabcdef01, fractionLost: 0.25, cumulativeLost: -2, highestSequence: 70_000, jitter: 90, lastSr: 0x12345678, delaySinceLastSr: 65_536 }]);
  assert.is(fb.rembBps, 8000);
  assert.is(fb.nacks, 1);
  assert.is(fb.nackedPackets, 3);
  assert.ok(fb.keyframe);
  assert.is(fb.transportCc, 1);
  assert.is(readRtcp(Buffer.from([0x80, 96, 0, 1])), null, 'RTP is not RTCP');
  assert.is(readRtcp(Buffer.alloc(0)), null);
  // A length past the end stops the reading; what came before stands.
  const truncated = Buffer.concat([pli, Buffer.from([0x81, 201, 0, 40, 0, 0])]);
  assert.ok(readRtcp(truncated)!.keyframe);
  for (let i = 0; i < 2000; i++) {
    const junk = Buffer.from(Array.from({ length: (i % 64) + 1 }, (_, k) => (i * 31 + k * 17) & 0xff));
    readRtcp(junk); // never throws
  }
});

test('packetizeH264: small NAL units alone, a large one in FU-A fragments that rebuild it, marker on the last packet, sequence numbers wrap', () => {
  const sps = Buffer.from([0x67, 0x42, 0xc0, 0x1f, 0xaa]);
  const pps = Buffer.from([0x68, 0xce, 0x3c, 0x80]);
  const idr = Buffer.concat([Buffer.from([0x65]), Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7 + 1) & 0xff || 1))]);
  const au = Buffer.concat([Buffer.from([0, 0, 0, 1]), sps, Buffer.from([0, 0, 0, 1]), pps, Buffer.from([0, 0, 1]), idr]);
  const { packets, sequence } = packetizeH264(au, { payloadType: 102, ssrc: 0x01020304, sequence: 65534, timestamp: 90_000, maxPayload: 1188 });
  assert.is(packets.length, 2 + 3);
  assert.is(sequence, 3);
  assert.equal(packets.map((p) => p.readUInt16BE(2)), [65534, 65535, 0, 1, 2]);
  assert.equal(packets.map((p) => p[1]! >> 7), [0, 0, 0, 0, 1]);
  assert.ok(packets.every((p) => (p[1]! & 0x7f) === 102 && p.readUInt32BE(4) === 90_000 && p.readUInt32BE(8) === 0x01020304 && p.length <= 1200));
  assert.equal(packets[0]!.subarray(12), sps);
  assert.equal(packets[1]!.subarray(12), pps);
  const fragments = packets.slice(2).map((p) => p.subarray(12));
  assert.equal(fragments.map((f) => [f[0]! & 0x1f, f[1]! >> 6]), [[28, 2], [28, 0], [28, 1]]);
  assert.equal(Buffer.concat([Buffer.from([(fragments[0]![0]! & 0xe0) | (fragments[0]![1]! & 0x1f)]), ...fragments.map((f) => f.subarray(2))]), idr);
  assert.is(packetizeH264(Buffer.alloc(0), { payloadType: 102, ssrc: 1, sequence: 5, timestamp: 0, maxPayload: 1188 }).packets.length, 0);
});

test('ResendBuffer: resends young packets once per round within its budget; old, unknown and over-budget requests are counted, not sent', () => {
  const buffer = new ResendBuffer();
  for (let seq = 0; seq < 100; seq++) buffer.keep(seq, Buffer.alloc(1000, seq), seq * 10);
  assert.is(buffer.resend([50, 51], 1000, 1000).length, 2);
  assert.is(buffer.resend([50], 1050, 1000).length, 0, 'asked again within 100 ms');
  assert.is(buffer.resend([50], 1200, 1000).length, 1, 'asked again a round later');
  assert.is(buffer.resend([0, 1000], 1200, 1000).length, 0, 'too old (over 1 s) or never sent');
  // 64 kbit/s floor: 8000 bytes a second, 8 packets of 1000 bytes; 3 are spent already.
  assert.is(buffer.resend([60, 61, 62, 63, 64, 65, 66, 67, 68], 1250, 100).length, 5);
  assert.equal(buffer.stats, { kept: 100, askedOnce: 12, resent: 8, skipped: 3, overBudget: 4 });
});

test.run();
