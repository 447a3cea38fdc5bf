import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { isRtcp, ntpMiddle32, packetizeH264, parseRtp, parseSenderReport, playoutDelayExtension, readPlayoutDelay, readRtcp, requestsKeyframe, rewriteRtp, rtpHeaderLength, rtpPacket, senderReport, withHeaderExtension } from '../../src/transport/rtp.js';
import { Rng, fuzzSeed } from '../helpers/fuzz.js';

const Rtp = suite('RTP and RTCP');

function rtp(fields: { pt: number; seq: number; ts: number; ssrc: number; marker?: boolean; csrc?: number; ext?: number; pad?: number }, payload: Buffer): Buffer {
  const csrc = fields.csrc ?? 0;
  const header = Buffer.alloc(12 + 4 * csrc + (fields.ext !== undefined ? 4 + 4 * fields.ext : 0));
  header[0] = 0x80 | (fields.pad ? 0x20 : 0) | (fields.ext !== undefined ? 0x10 : 0) | csrc;
  header[1] = (fields.marker ? 0x80 : 0) | fields.pt;
  header.writeUInt16BE(fields.seq, 2);
  header.writeUInt32BE(fields.ts, 4);
  header.writeUInt32BE(fields.ssrc, 8);
  if (fields.ext !== undefined) header.writeUInt16BE(fields.ext, 12 + 4 * csrc + 2);
  const padding = fields.pad ? Buffer.alloc(fields.pad, 0) : Buffer.alloc(0);
  if (fields.pad) padding[fields.pad - 1] = fields.pad;
  return Buffer.concat([header, payload, padding]);
}

Rtp('parseRtp reads the header and finds the payload past CSRCs, an extension and padding', () => {
  const payload = Buffer.from('opus-frame');
  const p = parseRtp(rtp({ pt: 111, seq: 65535, ts: 4_000_000_000, ssrc: 0xdeadbeef, marker: true, csrc: 2, ext: 1, pad: 3 }, payload))!;
  assert.equal([p.payloadType, p.sequence, p.timestamp, p.ssrc, p.marker], [111, 65535, 4_000_000_000, 0xdeadbeef, true]);
  assert.ok(p.payload.equals(payload));
});

Rtp('RTCP is told from RTP (RFC 5761), and PLI / FIR in a compound packet ask for a keyframe', () => {
  const rr = Buffer.from([0x81, 201, 0, 7, ...new Array(28).fill(0)]);
  const pli = Buffer.from([0x81, 206, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2]);
  const fir = Buffer.from([0x84, 206, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0]);
  const nack = Buffer.from([0x81, 205, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 5, 0, 0]);
  assert.ok(isRtcp(rr) && isRtcp(pli));
  assert.not.ok(isRtcp(rtp({ pt: 111, seq: 1, ts: 1, ssrc: 1 }, Buffer.alloc(10))));
  assert.is(parseRtp(rr), null);
  assert.ok(requestsKeyframe(Buffer.concat([rr, pli])));
  assert.ok(requestsKeyframe(Buffer.concat([rr, fir])));
  assert.not.ok(requestsKeyframe(Buffer.concat([rr, nack])));
});

Rtp('rewriteRtp sets payload type, SSRC and timestamp and keeps the marker bit and sequence', () => {
  const p = rtp({ pt: 96, seq: 7, ts: 9, ssrc: 1, marker: true }, Buffer.from('vp8'));
  rewriteRtp(p, 120, 0xfeedface, 4_000_000_123);
  const parsed = parseRtp(p)!;
  assert.equal([parsed.payloadType, parsed.ssrc, parsed.marker, parsed.sequence, parsed.timestamp], [120, 0xfeedface, true, 7, 4_000_000_123]);
});

Rtp('rtpPacket wraps a payload in a version-2 header that parseRtp reads back', () => {
  const opus = Buffer.from([0xfc, 1, 2, 3, 4]);
  const p = parseRtp(rtpPacket(opus, { payloadType: 111, ssrc: 0x80000001, sequence: 65535, timestamp: 2 ** 32 - 1, marker: true }))!;
  assert.equal([p.payloadType, p.ssrc, p.sequence, p.timestamp, p.marker], [111, 0x80000001, 65535, 2 ** 32 - 1, true]);
  assert.ok(p.payload.equals(opus));
  assert.is(parseRtp(rtpPacket(opus, { payloadType: 111, ssrc: 1, sequence: 65536, timestamp: 0, marker: false }))!.sequence, 0, 'the sequence wraps');
});

Rtp('the playout-delay extension: RFC 8285 one-byte header, 12-bit min and max in 10 ms units, on every packet made here or forwarded', () => {
  const ext = playoutDelayExtension(5, 80, 10_000);
  // 0xBEDE, one word; id 5 with 3 bytes (length field 2); min 8, max 1000 (0x3e8) in 10 ms units.
  assert.equal([...ext], [0xbe, 0xde, 0x00, 0x01, 0x52, 0x00, 0x83, 0xe8]);
  assert.equal([...playoutDelayExtension(14, 1e9, -5)].slice(4), [0xe2, 0xff, 0xf0, 0x00], 'clamped to 0-40 950 ms');
  assert.throws(() => playoutDelayExtension(15, 0, 0), /1-14/);

  const opus = Buffer.from([0xfc, 1, 2, 3]);
  const made = rtpPacket(opus, { payloadType: 111, ssrc: 9, sequence: 1, timestamp: 2, marker: false, extension: ext });
  assert.is(rtpHeaderLength(made), 20);
  assert.ok(parseRtp(made)!.payload.equals(opus), 'parseRtp skips the extension');
  assert.equal(readPlayoutDelay(made, 5), { minMs: 80, maxMs: 10_000 });
  assert.is(readPlayoutDelay(made, 6), null, 'another id');
  assert.is(readPlayoutDelay(rtpPacket(opus, { payloadType: 111, ssrc: 9, sequence: 1, timestamp: 2, marker: false }), 5), null, 'no extension');

  const au = Buffer.concat([Buffer.from([0, 0, 0, 1, 0x67, 1, 2]), Buffer.from([0, 0, 1, 0x65]), Buffer.alloc(3000, 7)]);
  const { packets } = packetizeH264(au, { payloadType: 102, ssrc: 3, sequence: 10, timestamp: 0, maxPayload: 1188, extension: ext });
  assert.ok(packets.length >= 4 && packets.every((p) => readPlayoutDelay(p, 5)?.minMs === 80 && p.length <= 1188 + 20));

  const vp8 = rtp({ pt: 96, seq: 7, ts: 9, ssrc: 1, marker: true, csrc: 1 }, Buffer.from('vp8 payload'));
  const forwarded = withHeaderExtension(vp8, ext);
  const parsed = parseRtp(forwarded)!;
  assert.equal([parsed.payloadType, parsed.sequence, parsed.timestamp, parsed.marker, parsed.payload.toString()], [96, 7, 9, true, 'vp8 payload']);
  assert.equal(readPlayoutDelay(forwarded, 5), { minMs: 80, maxMs: 10_000 });
  const withOwn = rtp({ pt: 96, seq: 7, ts: 9, ssrc: 1, ext: 1 }, Buffer.from('x'));
  assert.is(withHeaderExtension(withOwn, ext), withOwn, 'a packet with its own extension is left as it is');
});

Rtp('a sender report and its SDES CNAME: one compound packet, read back exactly, and its LSR value', () => {
  const ntpMs = Date.UTC(2026, 10, 27, 22, 0, 0) + 123.456;
  const packet = senderReport({ ssrc: 0xdeadbeef, ntpMs, rtpTimestamp: 3_000_000_000, packets: 70_000, octets: 9_000_000 }, 'avatar');
  assert.is(packet.length % 4, 0, 'a whole number of 32-bit words');
  assert.ok(isRtcp(packet));
  const [sr, sdes] = [packet.subarray(0, 28), packet.subarray(28)];
  assert.equal([sr[0], sr[1], sr.readUInt16BE(2)], [0x80, 200, 6]);
  assert.equal([sdes[0], sdes[1], (sdes.readUInt16BE(2) + 1) * 4], [0x81, 202, sdes.length]);
  assert.is(sdes.readUInt32BE(4), 0xdeadbeef);
  assert.equal([sdes[8], sdes[9], sdes.subarray(10, 16).toString()], [1, 6, 'avatar']);
  assert.ok(sdes.subarray(16).every((b) => b === 0) && sdes.length - 16 >= 1, 'the chunk ends with zero octets');
  const back = parseSenderReport(packet)!;
  assert.equal([back.ssrc, back.rtpTimestamp, back.packets, back.octets], [0xdeadbeef, 3_000_000_000, 70_000, 9_000_000]);
  assert.ok(Math.abs(back.ntpMs - ntpMs) < 0.001, `NTP ${back.ntpMs} vs ${ntpMs}`);
  // readRtcp walks the same compound packet (an SR with no report blocks, then SDES).
  assert.equal(readRtcp(packet)!.reports, []);
  // A receiver echoes the NTP time's middle 32 bits: 16 bits of seconds, 16 of fraction.
  const seconds = Math.floor(ntpMs / 1000) + 2_208_988_800;
  assert.is(ntpMiddle32(ntpMs), (((seconds & 0xffff) << 16) | Math.floor((0.123456 * 65536))) >>> 0);
  assert.is(ntpMiddle32(ntpMs), ((packet.readUInt32BE(8) & 0xffff) * 65536 + (packet.readUInt32BE(12) >>> 16)) >>> 0);
  assert.is(parseSenderReport(Buffer.from([0x81, 201, 0, 7, ...new Array(28).fill(0)])), null, 'a receiver report is not one');
  assert.is(parseSenderReport(packet.subarray(0, 20)), null, 'a cut report is refused');
});

Rtp('random bytes: never a throw; a parsed packet is version 2, its fields the bytes\' own and its payload inside them, past the header', () => {
  const rng = new Rng(fuzzSeed());
  let parsed = 0;
  let refused = 0;
  let keyframes = 0;
  for (let i = 0; i < 20_000; i++) {
    const bytes = rng.bytes(rng.int(0, 64));
    if (rng.chance(0.5)) bytes[0] = 0x80 | (bytes[0]! & 0x3f);
    // Some RTCP: a sender report or a PLI's header (version 2, FMT 1).
    if (bytes.length >= 2 && rng.chance(0.1)) [bytes[0], bytes[1]] = rng.chance(0.5) ? [0x81, 206] : [0x80, 200];
    const p = parseRtp(bytes);
    if (p) {
      parsed++;
      assert.is(bytes[0]! >> 6, 2);
      assert.not.ok(isRtcp(bytes), 'RTCP is never parsed as RTP');
      assert.equal([p.payloadType, p.sequence, p.timestamp, p.ssrc, p.marker], [bytes[1]! & 0x7f, bytes.readUInt16BE(2), bytes.readUInt32BE(4), bytes.readUInt32BE(8), (bytes[1]! & 0x80) !== 0]);
      const start = p.payload.byteOffset - bytes.byteOffset;
      assert.ok(p.payload.buffer === bytes.buffer, 'the payload is a view of the packet');
      assert.is(start, rtpHeaderLength(bytes), 'the payload starts where the header ends');
      assert.ok(start >= 12 && start + p.payload.length <= bytes.length, `payload [${start}, ${start + p.payload.length}) of ${bytes.length} bytes`);
    } else refused++;
    if (requestsKeyframe(bytes)) {
      keyframes++;
      assert.is(bytes[0]! >> 6, 2, 'a keyframe request is version-2 RTCP');
    }
    assert.is(isRtcp(bytes), bytes.length >= 2 && (bytes[1]! & 0x7f) >= 64 && (bytes[1]! & 0x7f) <= 95);
    const sr = parseSenderReport(bytes);
    if (sr) assert.ok(bytes.length >= 28 && Number.isFinite(sr.ntpMs), 'a sender report is read only from 28 bytes or more');
  }
  // The random bytes reach both outcomes, and the keyframe path, or the checks above saw nothing.
  assert.ok(parsed > 400 && refused > 1000 && keyframes > 0, `parsed ${parsed}, refused ${refused}, keyframe requests ${keyframes}`);
});

Rtp.run();
