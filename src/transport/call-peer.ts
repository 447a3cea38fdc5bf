/**
 * One WebRTC peer of a call, over node-datachannel (libdatachannel), as the answerer: it takes the
 * client's SDP offer and answers with what this server sends (Opus, H.264 or VP8, a data
 * channel), then moves encoded media and JSON text. It knows nothing of sessions or conversations:
 * encoded buffers with session pts (ns) in, the client's microphone RTP and data-channel text out.
 *
 * Invariants:
 * - The answer is built in full before it is returned (loopback and host candidates gather at
 *   once; otherwise gathering is awaited up to GATHER_TIMEOUT_MS). A failure on the way closes
 *   the PeerConnection: nothing half-built is left.
 * - Media goes out only once its track is open; earlier buffers are dropped and counted, and so
 *   are buffers whose track closes under them (a send never throws for a closed track).
 *   The tracks carry packets made here (libdatachannel gets no media handler): Opus packets and
 *   H.264 access units (Annex-B, FU-A) are packetized by rtp.ts; VP8 arrives already packetized
 *   (GStreamer's rtpvp8pay) and is forwarded with the negotiated payload type and SSRC.
 * - Opus packets leave paced by their pts (audio-pacer.ts): a tick's two packets 20 ms apart, not
 *   together, which a receiver's jitter buffer would read as 20 ms of jitter.
 * - RTP timestamps are the session pts on the codec's clock, and each stream's RTCP sender reports
 *   map them to one wall-clock epoch (sender-reports.ts), not to when a packet happened to leave:
 *   the receiver plays the sound and the picture of one tick together, whichever left first.
 * - A keyframe is asked for ('keyframe_request') when the video track opens and on every PLI or
 *   FIR the client sends. Lost video packets the client NACKs are resent from a bounded buffer
 *   (resend.ts: young packets only, once per round, within a budget), not by libdatachannel's
 *   responder, whose unbounded resends fed retransmission storms on congested links.
 * - The client's receiver reports (loss, round trip) and NACKs feed a rate control
 *   (send-rate.ts) whose target the encoder follows ('video_bitrate'): on a narrow or lossy link
 *   the video shrinks instead of a queue growing or frames waiting for resends.
 * - 'closed' is emitted once, with a reason, however the call ends (client, ICE failure, close()).
 *   close() is idempotent and frees the native objects (open ones keep the process alive);
 *   `releaseClosedPeers()`, once none is open, frees what node-datachannel may still hold.
 */
import { EventEmitter } from 'node:events';
import { randomInt } from 'node:crypto';
import ndc from 'node-datachannel';
import { AppError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { AudioPacer } from './audio-pacer.js';
import { ResendBuffer } from './resend.js';
import { isRtcp, packetizeH264, parseRtp, PLAYOUT_DELAY_URI, playoutDelayExtension, readRtcp, rewriteRtp, rtpHeaderLength, rtpPacket, withHeaderExtension, type RtpPacket } from './rtp.js';
import { rtpTimestamp, SenderReports } from './sender-reports.js';
import { SendRateControl } from './send-rate.js';
import { negotiate, parseOffer, withExtmap, type Negotiated, type VideoCodec } from './sdp.js';

/** Waiting for ICE candidates to gather, when they do not all come at once. */
const GATHER_TIMEOUT_MS = 2000;
/** RTP clock rates. */
const VIDEO_CLOCK_HZ = 90_000;
export const OPUS_CLOCK_HZ = 48_000;
/**
 * ICE 'disconnected' can heal (a network blip); a peer still disconnected after this long is gone
 * (its page was killed, its network dropped) and the call ends.
 */
const DISCONNECTED_GRACE_MS = 5000;
/** The video encoder's bitrate at the start of a call and its ceiling (media-core's default), and its floor, kbit/s. */
const VIDEO_MAX_KBPS = 1000;
const VIDEO_MIN_KBPS = 100;
/** The send rate the rate control compares with is measured over about this long, ms. */
const SENT_RATE_WINDOW_MS = 1000;
/**
 * Bytes on the wire per RTP packet beyond its payload (RTP header and SRTP tag), for counting
 * what is sent (pc.bytesSent() counts none of the media); and the largest H.264 payload per packet
 * (with its 12-byte header, the 1200 bytes GStreamer's VP8 payloader makes: room for SRTP and
 * TURN inside IPv6's 1280-byte minimum MTU).
 */
const RTP_OVERHEAD_BYTES = 24;
const VIDEO_PACKET_PAYLOAD = 1188;
const CNAME = 'avatar';
/**
 * The least time a receiver that offered the playout-delay header extension (Chromium does) is
 * asked to hold the video before showing it, and the most (no ceiling in practice, so that its
 * own A/V sync is never capped). A receiver lines the picture up with the sound by our sender
 * reports, but Chromium's synchroniser moves a few tens of ms a second: measured at a Chromium
 * receiver on this server's calls, its video jitter buffer held 3-15 ms in a call's first
 * seconds against the audio's 60-130 ms, reaching the audio only 15-20 s in, so for a call's
 * first replies the mouth moved 100-240 ms before it was heard. Starting the video near the
 * audio's usual delay leaves the synchroniser a few tens of ms to correct instead. How much,
 * measured at headless Chromium in one sitting (mouth onset − sound onset; docs/webrtc.md): asked
 * for 80 ms, the picture led by 98, 51, 11 and 6 ms (medians) in a call's turns 1 to 4; 120 ms
 * put it at −94, +14, +53, +5 (settled, the sound came first); 100 ms at −99, −7, +23, +14, and
 * of the onsets other than a call's first sound 32 of 33 within 40 ms (24 of 31 with 80, 24 of 29
 * with 120). The first audio played is no later: the sound is not held back to meet the picture.
 */
const VIDEO_MIN_PLAYOUT_DELAY_MS = 100;
const VIDEO_MAX_PLAYOUT_DELAY_MS = 10_000;
/** Each sending stream's RTCP sender report goes out this often (RFC 3550's 5 s minimum scaled down, as browsers do). */
const REPORT_INTERVAL_MS = 1000;

export type CloseReason = 'peer_closed' | 'ice_failed' | 'disconnected' | 'server_closed';

export interface CallPeerEvents {
  /** ICE and DTLS are up. */
  connected: [];
  closed: [CloseReason];
  keyframe_request: [];
  /** The video encoder should aim at this bitrate (kbit/s): the link carries that much. */
  video_bitrate: [number];
  /** The client's microphone: one RTP packet of its audio track (RTCP is not passed on). */
  audio_rtp: [RtpPacket];
  channel_open: [string];
  channel_message: [string];
  /** A binary message on the data channel (events are JSON text). */
  channel_binary: [];
  channel_closed: [];
}

export interface CallPeerOptions {
  /** The session's video codec preference. */
  videoCodec: VideoCodec;
  /**
   * Whether the call sends media (default true). False (a transcription session): the answer takes
   * no video and only receives the caller's audio.
   */
  sendMedia?: boolean;
  /**
   * Whether the call sends video (default: as sendMedia). False (a face the client draws): the
   * offered video section is answered inactive; the audio goes on.
   */
  sendVideo?: boolean;
  /** Local address to gather candidates on (undefined: every interface). */
  bindAddress?: string;
  /** UDP port range, inclusive (undefined: any). */
  portRange?: { min: number; max: number };
  log: Logger;
}

export interface CallPeerStats {
  videoFramesSent: number;
  audioPacketsSent: number;
  /** Media dropped because its track was not open yet. */
  droppedBeforeOpen: number;
  /** Media dropped because its track closed between the check and the send (the client left). */
  droppedAfterClose: number;
  keyframeRequests: number;
  micPackets: number;
  channelMessagesSent: number;
  channelMessagesDropped: number;
  bytesSent: number;
  bytesReceived: number;
  rttMs: number | null;
  /** What the viewer reported about the video: NACKs and the packets they asked for again, and what was resent. */
  nacksReceived: number;
  nackedPackets: number;
  /** Receiver report blocks about the video, and the last one's loss fraction (0..1). */
  videoReports: number;
  videoLoss: number;
  /** The viewer's last REMB, kbit/s (null: none sent); reported, not followed (see send-rate.ts). */
  rembKbps: number | null;
  /** The video encoder's target now, kbit/s, and how many times the rate control lowered it. */
  videoBitrateKbps: number;
  rateDecreases: number;
  resent: number;
  resendsSkipped: number;
  resendsOverBudget: number;
}

export class CallPeer extends EventEmitter<CallPeerEvents> {
  readonly negotiated: Negotiated;
  private readonly sendMedia: boolean;
  /** The offer's video section when the call sends no media: answered inactive. */
  private readonly declinedVideo: Negotiated['video'];
  private readonly pc: ndc.PeerConnection;
  private readonly log: Logger;
  private audioTrack: ndc.Track | null = null;
  private videoTrack: ndc.Track | null = null;
  private declinedTrack: ndc.Track | null = null;
  private readonly videoSsrc = randomInt(1, 2 ** 31);
  private readonly audioSsrc = randomInt(1, 2 ** 31);
  /** Random RTP timestamp origins (RFC 3550 5.1). */
  private readonly videoTsOffset = randomInt(0, 2 ** 31);
  private readonly audioTsOffset = randomInt(0, 2 ** 31);
  private readonly reports = new SenderReports(CNAME);
  private reportTimer: NodeJS.Timeout | null = null;
  private channel: ndc.DataChannel | null = null;
  private closedWith: CloseReason | null = null;
  private disconnectTimer: NodeJS.Timeout | null = null;
  private readonly rate = new SendRateControl({ maxVideoKbps: VIDEO_MAX_KBPS, minVideoKbps: VIDEO_MIN_KBPS });
  private readonly feedback = { nacksReceived: 0, nackedPackets: 0, videoReports: 0, rembKbps: null as number | null };
  /** Media bytes handed to the tracks (with their RTP overhead), its samples for the send rate, and the last relative round trip (for unwrapping). */
  private mediaBytesSent = 0;
  /** The video packets kept for NACKs, and the next H.264 sequence number (random start, RFC 3550 5.1). */
  private readonly resends = new ResendBuffer();
  /** The playout-delay header extension every video packet carries, when the client offered it. */
  private readonly videoExtension: Buffer | null;
  private videoSequence = randomInt(0, 2 ** 16);
  /** The next Opus sequence number (random start); the first packet carries the marker bit (a talkspurt's start, RFC 3551 4.1). */
  private audioSequence = randomInt(0, 2 ** 16);
  private audioStarted = false;
  /** Spreads each tick's Opus packets 20 ms apart (audio-pacer.ts). */
  private readonly audioPacer = new AudioPacer<Buffer>((opus, ptsNs) => this.sendAudioPacket(opus, ptsNs));
  private sentSamples: Array<{ at: number; bytes: number }> = [];
  private readonly counters = { videoFramesSent: 0, audioPacketsSent: 0, droppedBeforeOpen: 0, droppedAfterClose: 0, keyframeRequests: 0, micPackets: 0, channelMessagesSent: 0, channelMessagesDropped: 0 };

  private constructor(offer: string, options: CallPeerOptions) {
    super();
    this.log = options.log;
    const negotiated = negotiate(parseOffer(offer), options.videoCodec);
    this.sendMedia = options.sendMedia ?? true;
    const sendVideo = this.sendMedia && (options.sendVideo ?? true);
    this.negotiated = sendVideo ? negotiated : { ...negotiated, video: null };
    this.declinedVideo = sendVideo ? null : negotiated.video;
    const delayId = this.negotiated.video?.playoutDelayId ?? null;
    this.videoExtension = delayId === null ? null : playoutDelayExtension(delayId, VIDEO_MIN_PLAYOUT_DELAY_MS, VIDEO_MAX_PLAYOUT_DELAY_MS);
    this.pc = new ndc.PeerConnection('call', {
      iceServers: [],
      bindAddress: options.bindAddress,
      portRangeBegin: options.portRange?.min,
      portRangeEnd: options.portRange?.max,
    });
    openPeers++;
  }

  /** Answers `offer`: the peer and its SDP answer. Throws a 400 AppError for an unusable offer. */
  static async answer(offer: string, options: CallPeerOptions): Promise<{ peer: CallPeer; answer: string }> {
    const peer = new CallPeer(offer, options);
    try {
      const answer = await peer.build(offer);
      return { peer, answer };
    } catch (err) {
      peer.close();
      if (err instanceof AppError) throw err;
      throw new AppError('invalid_offer', `The SDP offer could not be answered: ${(err as Error).message}`, { status: 400, param: 'sdp', cause: err });
    }
  }

  /** The largest text message the data channel takes (the peer's and ours). */
  get maxMessageSize(): number {
    const local = this.pc.maxMessageSize();
    const remote = this.negotiated.dataChannel?.maxMessageSize ?? local;
    return Math.min(local > 0 ? local : remote, remote);
  }

  /** Bytes queued on the data channel, not yet sent. */
  get channelBuffered(): number {
    return this.channel?.isOpen() ? this.channel.bufferedAmount() : 0;
  }

  get channelOpen(): boolean {
    return this.channel?.isOpen() ?? false;
  }

  get videoCodec(): VideoCodec | null {
    return this.negotiated.video?.codec ?? null;
  }

  /** The audio track's RTP timestamp of session pts 0 (on OPUS_CLOCK_HZ): a client maps what it plays back onto the session clock with it. */
  get audioRtpOrigin(): number {
    return this.audioTsOffset;
  }

  /** An encoded video frame: an H.264 access unit, or a VP8 RTP packet. */
  sendVideo(data: Buffer, ptsNs: number): void {
    const track = this.videoTrack;
    const video = this.negotiated.video;
    if (!track || !video) return;
    if (!track.isOpen()) {
      this.counters.droppedBeforeOpen++;
      return;
    }
    const timestamp = rtpTimestamp(ptsNs, VIDEO_CLOCK_HZ, this.videoTsOffset);
    let packets: Buffer[];
    if (video.codec === 'vp8') {
      rewriteRtp(data, video.pt, this.videoSsrc, timestamp);
      packets = [this.videoExtension ? withHeaderExtension(data, this.videoExtension) : data];
    } else {
      const out = packetizeH264(data, { payloadType: video.pt, ssrc: this.videoSsrc, sequence: this.videoSequence, timestamp, maxPayload: VIDEO_PACKET_PAYLOAD, extension: this.videoExtension });
      this.videoSequence = out.sequence;
      packets = out.packets;
    }
    const now = performance.now();
    for (const packet of packets) {
      if (!sentUnlessClosed(track, () => track.sendMessageBinary(packet))) {
        this.counters.droppedAfterClose++;
        return;
      }
      this.resends.keep(packet.readUInt16BE(2), packet, now);
      this.reports.sent(this.videoSsrc, ptsNs, packet.length - rtpHeaderLength(packet));
      this.mediaBytesSent += packet.length + RTP_OVERHEAD_BYTES - 12;
    }
    if (video.codec !== 'vp8') this.counters.videoFramesSent++;
  }

  /** One Opus packet (20 ms); it leaves paced by its pts (audio-pacer.ts), at most 20 ms later. */
  sendAudio(opus: Buffer, ptsNs: number): void {
    this.audioPacer.push(opus, ptsNs);
  }

  private sendAudioPacket(opus: Buffer, ptsNs: number): void {
    const track = this.audioTrack;
    const audio = this.negotiated.audio;
    if (!track || !audio || audio.direction === 'sendonly') return;
    if (!track.isOpen()) {
      this.counters.droppedBeforeOpen++;
      return;
    }
    const packet = rtpPacket(opus, { payloadType: audio.pt, ssrc: this.audioSsrc, sequence: this.audioSequence, timestamp: rtpTimestamp(ptsNs, OPUS_CLOCK_HZ, this.audioTsOffset), marker: !this.audioStarted });
    if (sentUnlessClosed(track, () => track.sendMessageBinary(packet))) {
      this.audioSequence = (this.audioSequence + 1) & 0xffff;
      this.audioStarted = true;
      this.reports.sent(this.audioSsrc, ptsNs, opus.length);
      this.counters.audioPacketsSent++;
      this.mediaBytesSent += opus.length + RTP_OVERHEAD_BYTES;
    } else this.counters.droppedAfterClose++;
  }

  /** Sends JSON text on the data channel; false (and counted) when it is not open or the text is too large. */
  sendText(text: string): boolean {
    const channel = this.channel;
    if (!channel?.isOpen() || Buffer.byteLength(text) > this.maxMessageSize) {
      this.counters.channelMessagesDropped++;
      return false;
    }
    if (!sentUnlessClosed(channel, () => channel.sendMessage(text))) {
      this.counters.channelMessagesDropped++;
      return false;
    }
    this.counters.channelMessagesSent++;
    return true;
  }

  stats(): CallPeerStats {
    const rtt = this.closedWith ? -1 : this.pc.rtt();
    return {
      ...this.counters,
      bytesSent: this.closedWith ? 0 : this.pc.bytesSent(),
      bytesReceived: this.closedWith ? 0 : this.pc.bytesReceived(),
      rttMs: rtt >= 0 ? rtt : null,
      ...this.feedback,
      videoLoss: this.rate.lastLoss,
      videoBitrateKbps: this.rate.videoKbps,
      rateDecreases: this.rate.decreases,
      resent: this.resends.stats.resent,
      resendsSkipped: this.resends.stats.skipped,
      resendsOverBudget: this.resends.stats.overBudget,
    };
  }

  /** Ends the call from this side. Idempotent; 'closed' (server_closed) is emitted if it was not yet. */
  close(): void {
    this.finish('server_closed');
  }

  private async build(offer: string): Promise<string> {
    const { audio, video } = this.negotiated;
    if (audio) {
      const receives = audio.direction !== 'recvonly';
      const direction = !this.sendMedia ? (receives ? 'RecvOnly' : 'Inactive') : !receives ? 'SendOnly' : audio.direction === 'sendonly' ? 'RecvOnly' : 'SendRecv';
      const description = new ndc.Audio(audio.mid, direction);
      description.addOpusCodec(audio.pt);
      const sends = direction === 'SendOnly' || direction === 'SendRecv';
      if (sends) description.addSSRC(this.audioSsrc, CNAME, `${CNAME}-stream`, `${CNAME}-audio`);
      const track = this.pc.addTrack(description);
      if (sends) this.reports.addStream(this.audioSsrc, OPUS_CLOCK_HZ, this.audioTsOffset);
      track.onMessage((message) => this.onAudioMessage(message));
      releaseOnClose(track);
      this.audioTrack = track;
    }
    if (video) {
      const description = new ndc.Video(video.mid, 'SendOnly');
      if (video.codec === 'h264') description.addH264Codec(video.pt);
      else description.addVP8Codec(video.pt);
      description.addSSRC(this.videoSsrc, CNAME, `${CNAME}-stream`, `${CNAME}-video`);
      const track = this.pc.addTrack(description);
      this.reports.addStream(this.videoSsrc, VIDEO_CLOCK_HZ, this.videoTsOffset);
      releaseOnClose(track);
      track.onOpen(() => this.requestKeyframe());
      track.onMessage((message) => this.onVideoFeedback(message));
      this.videoTrack = track;
    }
    if (this.declinedVideo) {
      // Without a track of its own libdatachannel would answer the section in the opposite direction.
      const declined = this.declinedVideo;
      const description = new ndc.Video(declined.mid, 'Inactive');
      if (declined.codec === 'h264') description.addH264Codec(declined.pt);
      else description.addVP8Codec(declined.pt);
      this.declinedTrack = this.pc.addTrack(description);
      releaseOnClose(this.declinedTrack);
    }
    this.reportTimer = setInterval(() => this.sendReports(), REPORT_INTERVAL_MS);
    this.reportTimer.unref();
    this.pc.onDataChannel((channel) => this.adoptChannel(channel));
    let connectedOnce = false;
    this.pc.onStateChange((state) => {
      if (state !== 'disconnected' && this.disconnectTimer) {
        clearTimeout(this.disconnectTimer);
        this.disconnectTimer = null;
      }
      if (state === 'connected' && !connectedOnce) {
        connectedOnce = true;
        this.emit('connected');
      } else if (state === 'disconnected') {
        this.disconnectTimer ??= setTimeout(() => this.finish('disconnected'), DISCONNECTED_GRACE_MS);
      } else if (state === 'failed') this.finish('ice_failed');
      else if (state === 'closed') this.finish('peer_closed');
    });
    this.pc.setRemoteDescription(offer, 'offer');
    if (this.pc.gatheringState() !== 'complete') await this.gathered();
    const local = this.pc.localDescription();
    if (!local?.sdp) throw new Error('no local description');
    // libdatachannel's descriptions have no header extensions: the answer names the one we write.
    return video?.playoutDelayId != null ? withExtmap(local.sdp, video.mid, video.playoutDelayId, PLAYOUT_DELAY_URI) : local.sdp;
  }

  private gathered(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, GATHER_TIMEOUT_MS);
      this.pc.onGatheringStateChange((state) => {
        if (state === 'complete') {
          clearTimeout(timer);
          resolve();
        }
      });
    });
  }

  /** The first data channel the client opens, whatever its label; later ones are closed. */
  private adoptChannel(channel: ndc.DataChannel): void {
    if (this.channel || this.closedWith) {
      releaseOnClose(channel);
      channel.close();
      return;
    }
    this.channel = channel;
    const label = channel.getLabel();
    const opened = () => this.emit('channel_open', label);
    channel.onMessage((message) => {
      if (typeof message === 'string') this.emit('channel_message', message);
      else this.emit('channel_binary');
    });
    channel.onClosed(() => this.emit('channel_closed'));
    channel.onError((err) => this.log.warn('data channel error', { err }));
    // A channel announced by the client is usually open already when it arrives.
    if (channel.isOpen()) setImmediate(opened);
    else channel.onOpen(opened);
  }

  private onAudioMessage(message: Buffer): void {
    if (isRtcp(message)) return;
    const packet = parseRtp(message);
    if (!packet || packet.payloadType !== this.negotiated.audio?.pt) return;
    this.counters.micPackets++;
    this.emit('audio_rtp', packet);
  }

  /**
   * RTCP from the viewer about the video: PLI/FIR ask for a keyframe, NACKs are counted (the NACK
   * responder in the chain resends), report blocks drive the rate control, REMB is noted.
   */
  private onVideoFeedback(message: Buffer): void {
    const feedback = readRtcp(message);
    if (!feedback) return;
    if (feedback.keyframe) this.requestKeyframe();
    this.feedback.nacksReceived += feedback.nacks;
    this.feedback.nackedPackets += feedback.nackedPackets;
    const asked = feedback.nacked.filter((n) => n.ssrc === this.videoSsrc).map((n) => n.sequence);
    if (asked.length > 0 && this.videoTrack) {
      const track = this.videoTrack;
      for (const packet of this.resends.resend(asked, performance.now(), this.rate.videoKbps + 50)) {
        if (!sentUnlessClosed(track, () => track.sendMessageBinary(packet))) break;
      }
    }
    if (feedback.rembBps !== null) this.feedback.rembKbps = Math.round(feedback.rembBps / 1000);
    const report = feedback.reports.find((r) => r.ssrc === this.videoSsrc);
    if (!report) return;
    this.feedback.videoReports++;
    const now = performance.now();
    const kbps = this.rate.update(
      { highestSequence: report.highestSequence, cumulativeLost: report.cumulativeLost, packetsSent: this.resends.stats.kept, packetsNacked: this.resends.stats.askedOnce, relativeRttMs: this.reports.roundTripMs(report.lastSr, report.delaySinceLastSr) },
      now,
      this.sentKbps(now),
    );
    if (kbps !== null) {
      this.log.debug('video bitrate changed', { kbps, loss: this.rate.lastLoss, queueDelayMs: Math.round(this.rate.queueDelayMs) });
      this.emit('video_bitrate', kbps);
    }
  }

  /** Each sending stream's sender report, on its own track (RTCP is demultiplexed by SSRC there). */
  private sendReports(): void {
    for (const { ssrc, packet } of this.reports.reports()) {
      const track = ssrc === this.audioSsrc ? this.audioTrack : this.videoTrack;
      if (track?.isOpen()) sentUnlessClosed(track, () => track.sendMessageBinary(packet));
    }
  }

  /** The media the call has been sending, kbit/s, over about SENT_RATE_WINDOW_MS (0 until known). */
  private sentKbps(now: number): number {
    this.sentSamples.push({ at: now, bytes: this.mediaBytesSent });
    while (this.sentSamples.length > 2 && this.sentSamples[1]!.at <= now - SENT_RATE_WINDOW_MS) this.sentSamples.shift();
    const first = this.sentSamples[0]!;
    return now - first.at < 200 ? 0 : ((this.mediaBytesSent - first.bytes) * 8) / (now - first.at);
  }

  private requestKeyframe(): void {
    this.counters.keyframeRequests++;
    this.emit('keyframe_request');
  }

  private finish(reason: CloseReason): void {
    if (this.closedWith) return;
    this.closedWith = reason;
    openPeers--;
    if (this.disconnectTimer) clearTimeout(this.disconnectTimer);
    if (this.reportTimer) clearInterval(this.reportTimer);
    this.audioPacer.close();
    try {
      // Every native object is closed on its own: a track or channel left open keeps its callbacks,
      // and with them the process, alive after the peer connection is gone.
      this.channel?.close();
      this.audioTrack?.close();
      this.videoTrack?.close();
      this.declinedTrack?.close();
      this.pc.close();
    } catch (err) {
      this.log.warn('closing the peer connection failed', { err });
    }
    this.emit('closed', reason);
  }
}

const NATIVE_LEVELS = { error: 'Error', warning: 'Warning', info: 'Info', debug: 'Debug', verbose: 'Verbose' } as const;

/**
 * Sends the WebRTC stack's own log (libdatachannel and what it bundles: libjuice for ICE, OpenSSL
 * for DTLS, usrsctp) to `log` as module webrtc-native, from `level` up; 'off' sends nothing. The
 * stack keeps one logger per process: the last call wins.
 */
export function logNativeRtc(level: keyof typeof NATIVE_LEVELS | 'off', log: Logger): void {
  if (level === 'off') return;
  const native = log.child({ module: 'webrtc-native' });
  ndc.initLogger(NATIVE_LEVELS[level], (severity, message) => {
    if (severity === 'Fatal' || severity === 'Error') native.error(message, { severity });
    else if (severity === 'Warning') native.warn(message, { severity });
    else native.info(message, { severity });
  });
}

/**
 * Runs `send` on an open track or channel; false when it closed meanwhile. libdatachannel closes
 * them on its own threads (the client left) and then throws on send, which must not reach the
 * media plane or the engine; any other failure is rethrown.
 */
function sentUnlessClosed(target: ndc.Track | ndc.DataChannel, send: () => void): boolean {
  try {
    send();
    return true;
  } catch (err) {
    if (target.isOpen()) throw err;
    return false;
  }
}

/** Peers of this process not yet closed (`releaseClosedPeers` must not touch them). */
let openPeers = 0;

/**
 * Frees what node-datachannel still holds for peers that have closed, when none is open (returns
 * false and does nothing otherwise). A peer connection keeps a referenced state callback until
 * its native 'closed' state reaches JavaScript; closed from this side, libdatachannel may tear the
 * connection down without delivering it, and the hold then lasts until the object is garbage
 * collected, which an idle process may never do: it would not exit. For a server's shutdown (or a
 * test's end). Blocks until libdatachannel's threads have stopped (milliseconds when all is
 * closed); the next peer starts them again.
 */
export function releaseClosedPeers(): boolean {
  if (openPeers > 0) return false;
  ndc.cleanup();
  return true;
}

/**
 * node-datachannel holds a referenced callback for every track and data channel (it keeps the
 * process alive) and lets it go only from the object's native 'closed' event, which it listens to
 * only once a close handler is set; without one the hold lasts until the object is garbage
 * collected, which an idle process may never do. So every track and channel gets a handler.
 */
function releaseOnClose(object: ndc.Track | ndc.DataChannel): void {
  object.onClosed(() => undefined);
}
