/**
 * SDP offers from WebRTC clients: parsing (RFC 8866 lines, the media sections, their codecs and
 * ICE/DTLS attributes) and choosing what this server sends and receives. Pure functions: nothing
 * here touches a peer connection.
 *
 * What a usable offer has: `v=0`; ICE credentials and a DTLS fingerprint (session- or media-level);
 * for each non-rejected media section a `mid`; and codecs we can use:
 *   audio        Opus/48000/2                                   (required if audio is offered)
 *   video        H.264 packetization-mode=1, constrained baseline (profile-level-id 42e0xx, else
 *                42c0xx, else baseline 4200xx, which decodes constrained baseline), or VP8;
 *                the session's video_codec is preferred, the other taken when it is all there is
 *   application  SCTP data channel (its a=max-message-size, default 65536 per RFC 8841)
 * An offer with only a data channel is usable (rtAV clients send exactly that). Bounds, so that a
 * hostile offer costs little to refuse: at most MAX_MEDIA_SECTIONS media sections (with distinct
 * mids) and MAX_CANDIDATES candidates (each is an address the server would send checks to).
 * Anything else is a 400 AppError (`invalid_offer`, `no_usable_codec`, param `sdp`) whose message says what is
 * wrong and, for codecs, what was offered and what this server takes.
 */
import { AppError } from '../core/errors.js';
import { PLAYOUT_DELAY_URI } from './rtp.js';

/** Offers larger than this are refused before parsing (real ones are 2-10 KB). */
export const MAX_OFFER_BYTES = 64 * 1024;
/**
 * Media sections an offer may have: this server uses one audio, one video and one data channel,
 * and answers the others as rejected; browsers send a few more at most.
 */
export const MAX_MEDIA_SECTIONS = 16;
/** ICE candidates an offer may carry (all sections together; a browser sends a few per interface). */
export const MAX_CANDIDATES = 64;
/** RFC 8841's default when an offer names no a=max-message-size. */
const DEFAULT_MAX_MESSAGE_SIZE = 65_536;

export type Direction = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';

export interface SdpCodec {
  pt: number;
  name: string;
  clockRate: number;
  channels: number;
  fmtp: Record<string, string>;
  rtcpFb: string[];
}

export interface SdpMedia {
  kind: string;
  port: number;
  protocol: string;
  mid: string | null;
  direction: Direction;
  codecs: SdpCodec[];
  /** Application sections: the peer's largest data channel message. */
  maxMessageSize: number | null;
  /** The RTP header extensions offered (a=extmap): URI → id. */
  extmaps: Map<string, number>;
}

export interface SdpOffer {
  media: SdpMedia[];
}

export type VideoCodec = 'h264' | 'vp8';

/** What the answer sends and receives, in the offer's own terms (mids, payload types). */
export interface Negotiated {
  audio: { mid: string; pt: number; direction: Direction } | null;
  video: { mid: string; pt: number; codec: VideoCodec; playoutDelayId: number | null } | null;
  /** Set when the preferred video codec was not offered and the other was taken. */
  videoFallback: boolean;
  dataChannel: { mid: string; maxMessageSize: number } | null;
}

export function parseOffer(sdp: string): SdpOffer {
  if (Buffer.byteLength(sdp) > MAX_OFFER_BYTES) throw invalidOffer(`The SDP offer is over ${MAX_OFFER_BYTES} bytes.`);
  const lines = sdp.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '');
  if (lines[0] !== 'v=0') throw invalidOffer("This is not an SDP offer: it must start with the line 'v=0'.");
  const sessionLines: string[] = [];
  const sections: string[][] = [];
  for (const line of lines) {
    if (!/^[a-z]=/.test(line)) throw invalidOffer(`Malformed SDP line: '${line.slice(0, 60)}'.`);
    if (line.startsWith('m=')) sections.push([line]);
    else if (sections.length > 0) sections.at(-1)!.push(line);
    else sessionLines.push(line);
  }
  if (sections.length === 0) throw invalidOffer('The SDP offer has no media section (m= line): add a data channel, an audio or a video transceiver.');
  if (sections.length > MAX_MEDIA_SECTIONS) throw invalidOffer(`The SDP offer has ${sections.length} media sections; this server takes at most ${MAX_MEDIA_SECTIONS} (it uses one audio, one video and one data channel).`);
  const candidates = lines.filter((l) => l.startsWith('a=candidate:')).length;
  if (candidates > MAX_CANDIDATES) throw invalidOffer(`The SDP offer has ${candidates} ICE candidates; this server takes at most ${MAX_CANDIDATES}.`);
  const sessionAttr = (name: string) => sessionLines.some((l) => l.startsWith(`a=${name}`));
  const sessionDirection = directionOf(sessionLines) ?? 'sendrecv';
  const media = sections.map((section) => parseMedia(section, sessionDirection));
  for (const m of media) {
    if (m.port === 0) continue;
    const attr = (name: string) => sectionHas(sections[media.indexOf(m)]!, name) || sessionAttr(name);
    if (!attr('ice-ufrag') || !attr('ice-pwd')) throw invalidOffer(`The ${m.kind} section has no ICE credentials (a=ice-ufrag / a=ice-pwd).`);
    if (!attr('fingerprint')) throw invalidOffer(`The ${m.kind} section has no DTLS fingerprint (a=fingerprint).`);
    if (m.mid === null) throw invalidOffer(`The ${m.kind} section has no a=mid.`);
  }
  const mids = media.map((m) => m.mid).filter((mid) => mid !== null);
  const repeated = mids.find((mid, i) => mids.indexOf(mid) !== i);
  if (repeated !== undefined) throw invalidOffer(`Two media sections have the same a=mid:${repeated.slice(0, 60)}; each needs its own.`);
  return { media };
}

/** Picks what to send and receive; throws no_usable_codec when an offered audio/video section has nothing we use. */
export function negotiate(offer: SdpOffer, preferredVideo: VideoCodec): Negotiated {
  const live = offer.media.filter((m) => m.port !== 0);
  const audioM = live.find((m) => m.kind === 'audio');
  const videoM = live.find((m) => m.kind === 'video');
  const appM = live.find((m) => m.kind === 'application' && /SCTP/i.test(m.protocol));
  if (!audioM && !videoM && !appM) throw noCodec('The offer has no audio, video or data channel section this server can use.');

  let audio: Negotiated['audio'] = null;
  if (audioM) {
    const opus = audioM.codecs.find((c) => c.name.toLowerCase() === 'opus' && c.clockRate === 48000);
    if (!opus) throw noCodec(`The audio section offers ${listCodecs(audioM)}; this server speaks Opus/48000/2 only.`);
    audio = { mid: audioM.mid as string, pt: opus.pt, direction: audioM.direction };
  }
  let video: Negotiated['video'] = null;
  let videoFallback = false;
  if (videoM && videoM.direction !== 'sendonly' && videoM.direction !== 'inactive') {
    const h264 = pickH264(videoM.codecs);
    const vp8 = videoM.codecs.find((c) => c.name.toUpperCase() === 'VP8' && c.clockRate === 90000);
    const preferred = preferredVideo === 'h264' ? h264 : vp8;
    const other = preferredVideo === 'h264' ? vp8 : h264;
    const chosen = preferred ?? other;
    if (!chosen) {
      throw noCodec(`The video section offers ${listCodecs(videoM)}; this server sends H.264 (packetization-mode=1, constrained baseline) or VP8.`);
    }
    // The playout-delay extension, when offered with an id a one-byte header can carry (1-14).
    const delayId = videoM.extmaps.get(PLAYOUT_DELAY_URI) ?? null;
    const playoutDelayId = delayId !== null && delayId >= 1 && delayId <= 14 ? delayId : null;
    video = { mid: videoM.mid as string, pt: chosen.pt, codec: chosen === h264 ? 'h264' : 'vp8', playoutDelayId };
    videoFallback = !preferred;
  }
  const dataChannel = appM ? { mid: appM.mid as string, maxMessageSize: appM.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE } : null;
  return { audio, video, videoFallback, dataChannel };
}

/** H.264 with packetization-mode=1, the profile our encoder's stream decodes under, best first. */
function pickH264(codecs: SdpCodec[]): SdpCodec | undefined {
  const h264 = codecs.filter((c) => c.name.toUpperCase() === 'H264' && c.clockRate === 90000 && c.fmtp['packetization-mode'] === '1');
  const profile = (c: SdpCodec) => (c.fmtp['profile-level-id'] ?? '42e01f').toLowerCase();
  return (
    h264.find((c) => profile(c).startsWith('42e0')) ??
    h264.find((c) => profile(c).startsWith('42c0')) ??
    h264.find((c) => profile(c).startsWith('4200'))
  );
}

function parseMedia(lines: string[], sessionDirection: Direction): SdpMedia {
  const m = /^m=(\S+) (\d+)(?:\/\d+)? (\S+)(?: (.*))?$/.exec(lines[0] as string);
  if (!m) throw invalidOffer(`Malformed media line: '${(lines[0] as string).slice(0, 60)}'.`);
  const [, kind, port, protocol] = m as unknown as [string, string, string, string];
  const codecs = new Map<number, SdpCodec>();
  for (const line of lines) {
    const rtpmap = /^a=rtpmap:(\d+) ([^/\s]+)\/(\d+)(?:\/(\d+))?/.exec(line);
    if (rtpmap) {
      const pt = Number(rtpmap[1]);
      codecs.set(pt, { pt, name: rtpmap[2] as string, clockRate: Number(rtpmap[3]), channels: Number(rtpmap[4] ?? 1), fmtp: {}, rtcpFb: [] });
    }
  }
  for (const line of lines) {
    const fmtp = /^a=fmtp:(\d+) (.*)$/.exec(line);
    const codec = fmtp ? codecs.get(Number(fmtp[1])) : undefined;
    if (fmtp && codec) {
      for (const pair of (fmtp[2] as string).split(';')) {
        const [k, v] = pair.split('=');
        if (k) codec.fmtp[k.trim().toLowerCase()] = (v ?? '').trim();
      }
    }
    const fb = /^a=rtcp-fb:(\d+) (.*)$/.exec(line);
    const fbCodec = fb ? codecs.get(Number(fb[1])) : undefined;
    if (fb && fbCodec) fbCodec.rtcpFb.push(fb[2] as string);
  }
  const extmaps = new Map<string, number>();
  for (const line of lines) {
    const extmap = /^a=extmap:(\d+)(?:\/\w+)? (\S+)/.exec(line);
    if (extmap && !extmaps.has(extmap[2] as string)) extmaps.set(extmap[2] as string, Number(extmap[1]));
  }
  const mid = lines.find((l) => l.startsWith('a=mid:'))?.slice('a=mid:'.length) ?? null;
  const size = lines.find((l) => l.startsWith('a=max-message-size:'))?.slice('a=max-message-size:'.length);
  const maxMessageSize = size !== undefined && /^\d+$/.test(size) ? Number(size) || Number.MAX_SAFE_INTEGER : null; // 0 = no limit
  return { kind, port: Number(port), protocol, mid, direction: directionOf(lines) ?? sessionDirection, codecs: [...codecs.values()], maxMessageSize, extmaps };
}

/** `answer` with `a=extmap:<id> <uri>` in the media section of `mid` (after its a=mid line); unchanged when no section has that mid. */
export function withExtmap(answer: string, mid: string, id: number, uri: string): string {
  const eol = answer.includes('\r\n') ? '\r\n' : '\n';
  const lines = answer.split(eol);
  const at = lines.indexOf(`a=mid:${mid}`);
  if (at < 0) return answer;
  lines.splice(at + 1, 0, `a=extmap:${id} ${uri}`);
  return lines.join(eol);
}

function directionOf(lines: string[]): Direction | null {
  for (const d of ['sendrecv', 'sendonly', 'recvonly', 'inactive'] as const) if (lines.includes(`a=${d}`)) return d;
  return null;
}

function sectionHas(lines: string[], name: string): boolean {
  return lines.some((l) => l.startsWith(`a=${name}`));
}

function listCodecs(m: SdpMedia): string {
  const names = [...new Set(m.codecs.map((c) => `${c.name}/${c.clockRate}${c.fmtp['packetization-mode'] !== undefined ? ` (packetization-mode=${c.fmtp['packetization-mode']})` : ''}`))];
  return names.length ? names.slice(0, 12).join(', ') : 'no codec';
}

function invalidOffer(message: string): AppError {
  return new AppError('invalid_offer', message, { status: 400, param: 'sdp' });
}

function noCodec(message: string): AppError {
  return new AppError('no_usable_codec', message, { status: 400, param: 'sdp' });
}
