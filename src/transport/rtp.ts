/**
 * The RTP/RTCP the call transport reads and writes itself (node-datachannel only carries packets:
 * no media handler is set on its tracks): RTP packets around Opus packets and H.264 access units
 * (FU-A), sender reports with their SDES CNAME, the RTP header of the client's microphone packets,
 * PLI and FIR in RTCP (keyframe requests), the receiver's feedback that the sender's rate control
 * reads (report blocks, REMB, NACK and transport-cc counts), RTP-vs-RTCP demultiplexing (RFC 5761),
 * and the payload type, SSRC and timestamp of packets forwarded as they were made (VP8 from
 * GStreamer's payloader).
 *
 * Every reader takes untrusted bytes: it returns null / false on anything malformed, never throws,
 * and never reads past the buffer.
 */

export interface RtpPacket {
  payloadType: number;
  sequence: number;
  timestamp: number;
  ssrc: number;
  marker: boolean;
  /** The payload, padding removed (a view into the packet). */
  payload: Buffer;
}

/** RFC 5761: with RTP and RTCP on one port, second-byte values 192..223 (PT 64..95 with the marker bit) are RTCP. */
export function isRtcp(packet: Uint8Array): boolean {
  if (packet.length < 2) return false;
  const pt = packet[1]! & 0x7f;
  return pt >= 64 && pt <= 95;
}

export function parseRtp(packet: Buffer): RtpPacket | null {
  if (packet.length < 12 || packet[0]! >> 6 !== 2 || isRtcp(packet)) return null;
  const offset = rtpHeaderLength(packet);
  if (offset === 0) return null;
  let end = packet.length;
  if ((packet[0]! & 0x20) !== 0) {
    const pad = packet[packet.length - 1]!;
    if (pad === 0) return null;
    end -= pad;
  }
  if (offset > end) return null;
  return {
    payloadType: packet[1]! & 0x7f,
    sequence: packet.readUInt16BE(2),
    timestamp: packet.readUInt32BE(4),
    ssrc: packet.readUInt32BE(8),
    marker: (packet[1]! & 0x80) !== 0,
    payload: packet.subarray(offset, end),
  };
}

/** Whether a (compound) RTCP packet asks for a keyframe: PLI (PT 206, FMT 1) or FIR (PT 206, FMT 4). */
export function requestsKeyframe(packet: Uint8Array): boolean {
  let offset = 0;
  while (offset + 4 <= packet.length) {
    const first = packet[offset]!;
    if (first >> 6 !== 2) return false;
    const type = packet[offset + 1]!;
    const words = (packet[offset + 2]! << 8) | packet[offset + 3]!;
    const fmt = first & 0x1f;
    if (type === 206 && (fmt === 1 || fmt === 4)) return true;
    offset += 4 * (words + 1);
  }
  return false;
}

/** Sets the payload type (keeping the marker bit), SSRC and timestamp of an RTP packet, in place. */
export function rewriteRtp(packet: Buffer, payloadType: number, ssrc: number, timestamp: number): void {
  packet[1] = (packet[1]! & 0x80) | (payloadType & 0x7f);
  packet.writeUInt32BE(timestamp >>> 0, 4);
  packet.writeUInt32BE(ssrc >>> 0, 8);
}

/** The header fields of an RTP packet this server makes (version 2, no padding or CSRC; a header extension when given). */
export interface RtpHeaderFields {
  payloadType: number;
  ssrc: number;
  sequence: number;
  timestamp: number;
  marker: boolean;
  /** A header extension block (`headerExtension()`), written after the fixed header with the X bit set. */
  extension?: Buffer | null;
}

/** An RTP packet around `payload` (an Opus packet, a NAL unit or FU-A fragment). */
export function rtpPacket(payload: Uint8Array, h: RtpHeaderFields): Buffer {
  const ext = h.extension ?? null;
  const header = 12 + (ext?.length ?? 0);
  const packet = Buffer.allocUnsafe(header + payload.length);
  packet[0] = ext ? 0x90 : 0x80;
  packet[1] = (h.marker ? 0x80 : 0) | (h.payloadType & 0x7f);
  packet.writeUInt16BE(h.sequence & 0xffff, 2);
  packet.writeUInt32BE(h.timestamp >>> 0, 4);
  packet.writeUInt32BE(h.ssrc >>> 0, 8);
  ext?.copy(packet, 12);
  packet.set(payload, header);
  return packet;
}

/**
 * `packet` (one made elsewhere: GStreamer's VP8 payloader) with `extension` inserted after its
 * fixed header and CSRCs, the X bit set. A packet that already has an extension is returned as it
 * is (two blocks cannot be merged without parsing the first).
 */
export function withHeaderExtension(packet: Buffer, extension: Buffer): Buffer {
  if (packet.length < 12 || (packet[0]! & 0x10) !== 0) return packet;
  const fixed = 12 + 4 * (packet[0]! & 0x0f);
  if (packet.length < fixed) return packet;
  const out = Buffer.concat([packet.subarray(0, fixed), extension, packet.subarray(fixed)]);
  out[0] = out[0]! | 0x10;
  return out;
}

/** The length of an RTP packet's header: fixed part, CSRCs and header extension (0 when malformed). */
export function rtpHeaderLength(packet: Uint8Array): number {
  if (packet.length < 12) return 0;
  let length = 12 + 4 * (packet[0]! & 0x0f);
  if ((packet[0]! & 0x10) !== 0) {
    if (packet.length < length + 4) return 0;
    length += 4 + 4 * ((packet[length + 2]! << 8) | packet[length + 3]!);
  }
  return length <= packet.length ? length : 0;
}

/** The playout-delay header extension's URI (libwebrtc; Chromium offers it for video). */
export const PLAYOUT_DELAY_URI = 'http://www.webrtc.org/experiments/rtp-hdrext/playout-delay';

/**
 * A one-byte-header extension block (RFC 8285: 0xBEDE, its length in words, then the element,
 * padded to a word) carrying one playout-delay element with id `id` (1-14): the smallest and
 * largest delay the receiver should hold the frames for, in 10 ms units on 12 bits each
 * (0-40 950 ms).
 */
export function playoutDelayExtension(id: number, minMs: number, maxMs: number): Buffer {
  if (!Number.isInteger(id) || id < 1 || id > 14) throw new RangeError(`a one-byte header extension id is 1-14, not ${id}`);
  const units = (ms: number) => Math.max(0, Math.min(0xfff, Math.round(ms / 10)));
  const [min, max] = [units(minMs), units(maxMs)];
  return Buffer.from([0xbe, 0xde, 0x00, 0x01, (id << 4) | 2, min >> 4, ((min & 0x0f) << 4) | (max >> 8), max & 0xff]);
}

/** The playout delay (ms) a packet's header extension block carries under `id`; null when it has none. */
export function readPlayoutDelay(packet: Buffer, id: number): { minMs: number; maxMs: number } | null {
  if (packet.length < 12 || (packet[0]! & 0x10) === 0) return null;
  let at = 12 + 4 * (packet[0]! & 0x0f);
  if (packet.length < at + 4 || packet.readUInt16BE(at) !== 0xbede) return null;
  const end = at + 4 + 4 * packet.readUInt16BE(at + 2);
  if (end > packet.length) return null;
  at += 4;
  while (at < end) {
    const head = packet[at]!;
    if (head === 0) {
      at++; // padding
      continue;
    }
    const [elementId, length] = [head >> 4, (head & 0x0f) + 1];
    if (elementId === 15 || at + 1 + length > end) return null;
    if (elementId === id && length === 3) {
      const [a, b, c] = [packet[at + 1]!, packet[at + 2]!, packet[at + 3]!];
      return { minMs: ((a << 4) | (b >> 4)) * 10, maxMs: (((b & 0x0f) << 8) | c) * 10 };
    }
    at += 1 + length;
  }
  return null;
}

/** Seconds from the NTP epoch (1900) to the Unix epoch (1970). */
const NTP_UNIX_OFFSET_S = 2_208_988_800;

/** What a sender report says of one stream (RFC 3550 6.4.1). */
export interface SenderReport {
  ssrc: number;
  /** Its NTP timestamp as Unix-epoch milliseconds (fractions kept to the NTP format's 2^-32 s). */
  ntpMs: number;
  /** The RTP timestamp that corresponds to that instant. */
  rtpTimestamp: number;
  /** Packets and payload octets sent since the stream began. */
  packets: number;
  octets: number;
}

/** The NTP timestamp of Unix-epoch `ntpMs`: its seconds (from 1900) and 2^-32 fractions, each 32 bits. */
function ntpTime(ntpMs: number): { seconds: number; fraction: number } {
  const unix = Math.floor(ntpMs / 1000);
  return { seconds: (unix + NTP_UNIX_OFFSET_S) >>> 0, fraction: Math.floor(((ntpMs - unix * 1000) / 1000) * 2 ** 32) >>> 0 };
}

/** The middle 32 bits of the NTP timestamp of `ntpMs`: what a report block's lastSr echoes. */
export function ntpMiddle32(ntpMs: number): number {
  const { seconds, fraction } = ntpTime(ntpMs);
  return (((seconds & 0xffff) << 16) | (fraction >>> 16)) >>> 0;
}

/**
 * A compound RTCP packet: the sender report of one stream (no report blocks: this server receives
 * nothing it reports on, the microphone is not reported) and an SDES with its CNAME, as RFC 3550
 * 6.1 requires every compound packet to carry.
 */
export function senderReport(r: SenderReport, cname: string): Buffer {
  const name = Buffer.from(cname, 'utf8').subarray(0, 255);
  // SDES chunk: SSRC, CNAME item (type, length, text), then at least one zero octet to the next word.
  const chunk = 4 + 2 + name.length;
  const sdesLength = 4 + chunk + (4 - (chunk % 4));
  const packet = Buffer.alloc(28 + sdesLength);
  packet[0] = 0x80;
  packet[1] = 200;
  packet.writeUInt16BE(28 / 4 - 1, 2);
  packet.writeUInt32BE(r.ssrc >>> 0, 4);
  const ntp = ntpTime(r.ntpMs);
  packet.writeUInt32BE(ntp.seconds, 8);
  packet.writeUInt32BE(ntp.fraction, 12);
  packet.writeUInt32BE(r.rtpTimestamp >>> 0, 16);
  packet.writeUInt32BE(r.packets >>> 0, 20);
  packet.writeUInt32BE(r.octets >>> 0, 24);
  packet[28] = 0x81;
  packet[29] = 202;
  packet.writeUInt16BE(sdesLength / 4 - 1, 30);
  packet.writeUInt32BE(r.ssrc >>> 0, 32);
  packet[36] = 1;
  packet[37] = name.length;
  name.copy(packet, 38);
  return packet;
}

/** The first sender report in a compound RTCP packet; null when it holds none or is malformed. */
export function parseSenderReport(packet: Uint8Array): SenderReport | null {
  const view = new DataView(packet.buffer, packet.byteOffset, packet.byteLength);
  let offset = 0;
  while (offset + 4 <= packet.length) {
    if (packet[offset]! >> 6 !== 2) return null;
    const end = offset + 4 * (view.getUint16(offset + 2) + 1);
    if (end > packet.length) return null;
    if (packet[offset + 1] === 200) {
      if (end - offset < 28) return null;
      const seconds = view.getUint32(offset + 8) - NTP_UNIX_OFFSET_S;
      return {
        ssrc: view.getUint32(offset + 4),
        ntpMs: seconds * 1000 + (view.getUint32(offset + 12) / 2 ** 32) * 1000,
        rtpTimestamp: view.getUint32(offset + 16),
        packets: view.getUint32(offset + 20),
        octets: view.getUint32(offset + 24),
      };
    }
    offset = end;
  }
  return null;
}

/** One report block of a receiver (or sender) report: how one of our streams reaches the peer (RFC 3550 6.4). */
export interface ReportBlock {
  /** The stream it is about (ours). */
  ssrc: number;
  /** Share of packets lost since the previous report, 0..1. */
  fractionLost: number;
  /** Packets lost since the stream began (may go negative with duplicates). */
  cumulativeLost: number;
  /** Extended highest sequence number received. */
  highestSequence: number;
  /** Interarrival jitter, in RTP clock units. */
  jitter: number;
  /** Middle 32 bits of the NTP time of the last sender report the peer received (0: none yet). */
  lastSr: number;
  /** Time since that sender report, 1/65536 s. */
  delaySinceLastSr: number;
}

/** What a (compound) RTCP packet from the receiver of our media says. */
export interface RtcpFeedback {
  reports: ReportBlock[];
  /** The peer's receive-side bandwidth estimate (REMB, bit/s), when it sent one. */
  rembBps: number | null;
  /** Generic NACKs (RTPFB FMT 1), the packets they ask for again, and those packets' media SSRC and sequence numbers. */
  nacks: number;
  nackedPackets: number;
  nacked: Array<{ ssrc: number; sequence: number }>;
  /** PLI or FIR. */
  keyframe: boolean;
  /** Transport-wide congestion control feedback (RTPFB FMT 15). */
  transportCc: number;
}

/**
 * Reads the feedback in a compound RTCP packet: report blocks of SR (200) and RR (201), REMB
 * (PSFB 206 FMT 15 'REMB'), NACK (RTPFB 205 FMT 1), PLI/FIR, transport-cc. Packets it does not
 * know are skipped by their length; a malformed one ends the reading (what came before stands).
 * Null when nothing in it is RTCP.
 */
export function readRtcp(packet: Uint8Array): RtcpFeedback | null {
  const out: RtcpFeedback = { reports: [], rembBps: null, nacks: 0, nackedPackets: 0, nacked: [], keyframe: false, transportCc: 0 };
  const view = new DataView(packet.buffer, packet.byteOffset, packet.byteLength);
  let offset = 0;
  let any = false;
  while (offset + 4 <= packet.length) {
    const first = packet[offset]!;
    if (first >> 6 !== 2) break;
    const type = packet[offset + 1]!;
    const length = 4 * (view.getUint16(offset + 2) + 1);
    const end = offset + length;
    if (end > packet.length || type < 192 || type > 223) break;
    any = true;
    const count = first & 0x1f;
    if (type === 200 || type === 201) {
      let block = offset + (type === 200 ? 28 : 8);
      for (let i = 0; i < count && block + 24 <= end; i++, block += 24) {
        const lost = (view.getUint32(block + 4) & 0xffffff) << 8 >> 8;
        out.reports.push({
          ssrc: view.getUint32(block),
          fractionLost: packet[block + 4]! / 256,
          cumulativeLost: lost,
          highestSequence: view.getUint32(block + 8),
          jitter: view.getUint32(block + 12),
          lastSr: view.getUint32(block + 16),
          delaySinceLastSr: view.getUint32(block + 20),
        });
      }
    } else if (type === 205 && count === 1 && end - offset >= 12) {
      out.nacks++;
      const ssrc = view.getUint32(offset + 8);
      for (let fci = offset + 12; fci + 4 <= end; fci += 4) {
        const pid = view.getUint16(fci);
        const blp = view.getUint16(fci + 2);
        out.nacked.push({ ssrc, sequence: pid });
        for (let bit = 0; bit < 16; bit++) if (blp & (1 << bit)) out.nacked.push({ ssrc, sequence: (pid + bit + 1) & 0xffff });
      }
      out.nackedPackets = out.nacked.length;
    } else if (type === 205 && count === 15) {
      out.transportCc++;
    } else if (type === 206 && (count === 1 || count === 4)) {
      out.keyframe = true;
    } else if (type === 206 && count === 15 && end - offset >= 20 && view.getUint32(offset + 12) === 0x52454d42 /* 'REMB' */) {
      const word = view.getUint32(offset + 16);
      const exponent = (word >>> 18) & 0x3f;
      const mantissa = word & 0x3ffff;
      out.rembBps = mantissa * 2 ** exponent;
    }
    offset = end;
  }
  return any ? out : null;
}

/** What packetizeH264 needs: the stream's payload type and SSRC, the next sequence number, the RTP timestamp. */
export interface H264Packetization {
  payloadType: number;
  ssrc: number;
  sequence: number;
  timestamp: number;
  /** Largest payload per packet (the NAL unit or fragment with its headers). */
  maxPayload: number;
  /** A header extension block for every packet (`playoutDelayExtension()`). */
  extension?: Buffer | null;
}

/**
 * One H.264 access unit (Annex-B: NAL units behind 00 00 01 or 00 00 00 01 start codes) as RTP
 * packets (RFC 6184, packetization-mode 1): a NAL unit that fits goes alone, a larger one in FU-A
 * fragments; the marker bit is set on the access unit's last packet. Returns the packets and the
 * next sequence number. An access unit with no NAL unit gives no packet.
 */
export function packetizeH264(au: Buffer, p: H264Packetization): { packets: Buffer[]; sequence: number } {
  const nals: Buffer[] = [];
  let start = -1;
  let i = 0;
  while (i + 2 < au.length) {
    if (au[i] === 0 && au[i + 1] === 0 && au[i + 2] === 1) {
      if (start >= 0) nals.push(trimTrailingZeros(au.subarray(start, i)));
      i += 3;
      start = i;
    } else i++;
  }
  if (start >= 0 && start < au.length) nals.push(au.subarray(start));
  const payloads: Buffer[] = [];
  for (const nal of nals) {
    if (nal.length === 0) continue;
    if (nal.length <= p.maxPayload) {
      payloads.push(nal);
      continue;
    }
    const indicator = (nal[0]! & 0xe0) | 28;
    const type = nal[0]! & 0x1f;
    const chunk = p.maxPayload - 2;
    for (let at = 1; at < nal.length; at += chunk) {
      const part = nal.subarray(at, Math.min(nal.length, at + chunk));
      const header = (at === 1 ? 0x80 : 0) | (at + chunk >= nal.length ? 0x40 : 0) | type;
      payloads.push(Buffer.concat([Buffer.from([indicator, header]), part]));
    }
  }
  let sequence = p.sequence;
  const packets = payloads.map((payload, k) => {
    const packet = rtpPacket(payload, { payloadType: p.payloadType, ssrc: p.ssrc, sequence, timestamp: p.timestamp, marker: k === payloads.length - 1, extension: p.extension });
    sequence = (sequence + 1) & 0xffff;
    return packet;
  });
  return { packets, sequence };
}

/** A 4-byte start code's leading zero belongs to no NAL unit (and trailing_zero_8bits neither). */
function trimTrailingZeros(nal: Buffer): Buffer {
  let end = nal.length;
  while (end > 0 && nal[end - 1] === 0) end--;
  return nal.subarray(0, end);
}
