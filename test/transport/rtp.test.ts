import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { isRtcp, parseRtp, requestsKeyframe, rewriteRtp } from '../../src/transport/rtp.js';
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

Rtp('rewriteRtp sets payload type and SSRC and keeps the marker bit', () => {
  const p = rtp({ pt: 96, seq: 7, ts: 9, ssrc: 1, marker: true }, Buffer.from('vp8'));
  rewriteRtp(p, 120, 0xfeedface);
  const parsed = parseRtp(p)!;
  assert.equal([parsed.payloadType, parsed.ssrc, parsed.marker, parsed.sequence], [120, 0xfeedface, true, 7]);
});

Rtp('random bytes never throw and never read out of bounds', () => {
  const rng = new Rng(fuzzSeed());
  for (let i = 0; i < 20_000; i++) {
    const bytes = rng.bytes(rng.int(0, 64));
    if (rng.chance(0.5)) bytes[0] = 0x80 | (bytes[0]! & 0x3f);
    parseRtp(bytes);
    requestsKeyframe(bytes);
    isRtcp(bytes);
  }
});

Rtp.run();
