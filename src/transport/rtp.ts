/**
 * The few RTP/RTCP facts the call transport reads and writes itself (node-datachannel's handlers
 * packetize, report and answer NACKs): the RTP header of the client's microphone packets, PLI and
 * FIR in RTCP (keyframe requests), RTP-vs-RTCP demultiplexing (RFC 5761), and the payload type and
 * SSRC of packets forwarded as they were made (VP8 from GStreamer's payloader).
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
  const padding = (packet[0]! & 0x20) !== 0;
  const extension = (packet[0]! & 0x10) !== 0;
  const csrcCount = packet[0]! & 0x0f;
  let offset = 12 + 4 * csrcCount;
  if (extension) {
    if (packet.length < offset + 4) return null;
    offset += 4 + 4 * packet.readUInt16BE(offset + 2);
  }
  let end = packet.length;
  if (padding) {
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

/** Sets the payload type (keeping the marker bit) and SSRC of an RTP packet, in place. */
export function rewriteRtp(packet: Buffer, payloadType: number, ssrc: number): void {
  packet[1] = (packet[1]! & 0x80) | (payloadType & 0x7f);
  packet.writeUInt32BE(ssrc >>> 0, 8);
}
