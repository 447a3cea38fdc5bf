/**
 * A light WebRTC caller for capacity runs: node-datachannel as the offerer (Opus send/receive,
 * H.264 receive, an `oai-events` data channel), posting its offer to /v1/realtime/calls like any
 * client. It does not decode: it records when each video frame's last RTP packet (marker bit)
 * arrived and its RTP timestamp, so that a run can count frames per second and frames that came
 * late against the stream's own clock, at the receiver, for many calls at once without a
 * browser's decoding cost on the same two cores as the server. A call whose face the client
 * draws (video_render: client) has no video: its output_motion.delta events are its frames then
 * (each as one arrival of its frames, timed by its last frame's pts).
 *
 * The channel gets an onClosed handler, the tracks do not: on this offerer, a track's native close
 * event never comes after pc.close() (node-datachannel 0.33.4), so a track onClosed handler held
 * the bench's process open for good, even after cleanup(); without it the process exits once the
 * calls are closed and node-datachannel's cleanup() has run (benchmarks/lib/call-measures.ts
 * mostCallsEach does).
 */
import ndc from 'node-datachannel';
import { parseRtp } from '../../src/transport/rtp.js';

const VIDEO_CLOCK_HZ = 90_000;
const GATHER_TIMEOUT_MS = 5000;

export interface ReceivedFrame {
  /** RTP timestamp of the frame, 90 kHz, unwrapped from the first frame. */
  rtpTs: number;
  /** performance.now() when its last packet arrived. */
  arrivedMs: number;
  /** Frames that arrived together (a motion event's); 1 for video. */
  count?: number;
}

export class RtcCaller {
  readonly frames: ReceivedFrame[] = [];
  readonly events: Array<{ type: string; [field: string]: unknown }> = [];
  audioPackets = 0;
  sessionId = '';
  private firstTs: number | null = null;
  private lastTs = 0;
  private readonly opened: Promise<void>;

  private constructor(
    private readonly pc: ndc.PeerConnection,
    private readonly dc: ndc.DataChannel,
    tracks: ndc.Track[],
  ) {
    this.opened = new Promise((resolve) => dc.onOpen(() => resolve()));
    dc.onMessage((msg) => {
      if (typeof msg !== 'string') return;
      const event = JSON.parse(msg) as { type: string; [field: string]: unknown };
      if (event.type === 'output_motion.delta') this.onMotion(event);
      else this.events.push(event);
    });
    dc.onClosed(() => {});
    for (const track of tracks) {
      track.onMessage((packet) => this.onPacket(track.type(), packet));
    }
  }

  /** Posts an offer to `baseUrl` and applies the answer; resolves once the data channel is open. */
  static async call(baseUrl: string, key: string, session: Record<string, unknown>): Promise<RtcCaller> {
    const pc = new ndc.PeerConnection('bench-caller', { iceServers: [] });
    const audio = new ndc.Audio('0', 'SendRecv');
    audio.addOpusCodec(111);
    const video = new ndc.Video('1', 'RecvOnly');
    video.addH264Codec(102, 'profile-level-id=42e01f;packetization-mode=1;level-asymmetry-allowed=1');
    const tracks = [pc.addTrack(audio), pc.addTrack(video)];
    const dc = pc.createDataChannel('oai-events');
    const caller = new RtcCaller(pc, dc, tracks);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('ICE gathering did not complete')), GATHER_TIMEOUT_MS);
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        pc.onGatheringStateChange((state) => state === 'complete' && done());
        pc.setLocalDescription();
        if (pc.gatheringState() === 'complete') done();
      });
      const form = new FormData();
      form.set('sdp', pc.localDescription()!.sdp);
      form.set('session', JSON.stringify(session));
      const res = await fetch(`${baseUrl}/v1/realtime/calls`, { method: 'POST', body: form, headers: { authorization: `Bearer ${key}` } });
      const answer = await res.text();
      if (res.status !== 201) throw new Error(`call refused: ${res.status} ${answer.slice(0, 300)}`);
      caller.sessionId = res.headers.get('x-session-id') ?? '';
      pc.setRemoteDescription(answer, 'answer');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([caller.opened, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the data channel did not open in 20 s')), 20_000)))]).finally(() => clearTimeout(timer));
      return caller;
    } catch (err) {
      caller.close();
      throw err;
    }
  }

  send(event: Record<string, unknown>): void {
    this.dc.sendMessage(JSON.stringify(event));
  }

  close(): void {
    this.pc.close();
  }

  /** A client-drawn face's frames: due at the event's last frame (it leaves when that frame is made). */
  private onMotion(event: { [field: string]: unknown }): void {
    const count = (event.params as number[]).length / 14;
    const lastMs = Number(event.pts_ms) + (count - 1) * Number(event.frame_ms);
    this.frames.push({ rtpTs: Math.round(lastMs * (VIDEO_CLOCK_HZ / 1000)), arrivedMs: performance.now(), count });
  }

  private onPacket(kind: string, packet: Buffer): void {
    const rtp = parseRtp(packet);
    if (!rtp) return;
    if (kind === 'audio') {
      this.audioPackets++;
      return;
    }
    if (!rtp.marker) return;
    if (this.firstTs === null) this.firstTs = rtp.timestamp;
    // Unwrap the 32-bit timestamp relative to the first frame.
    let ts = (rtp.timestamp - this.firstTs) >>> 0;
    while (ts + 2 ** 31 < this.lastTs) ts += 2 ** 32;
    this.lastTs = ts;
    this.frames.push({ rtpTs: ts, arrivedMs: performance.now() });
  }
}

/**
 * Frames in [fromMs, toMs) and those that arrived more than `toleranceMs` after their due time,
 * where due time is the stream's clock (RTP timestamp) anchored at the earliest arrival relative
 * to it in the window: a frame is late when the server sent it late, whatever the fixed offset.
 */
export function frameTiming(frames: ReceivedFrame[], fromMs: number, toMs: number, toleranceMs: number): { frames: number; late: number; fps: number; worstMs: number } {
  const inWindow = frames.filter((f) => f.arrivedMs >= fromMs && f.arrivedMs < toMs);
  if (inWindow.length === 0) return { frames: 0, late: 0, fps: 0, worstMs: 0 };
  const offsets = inWindow.map((f) => f.arrivedMs - (f.rtpTs / VIDEO_CLOCK_HZ) * 1000);
  const base = Math.min(...offsets);
  const lateness = offsets.map((o) => o - base);
  const count = inWindow.reduce((n, f) => n + (f.count ?? 1), 0);
  return {
    frames: count,
    late: inWindow.filter((_, i) => lateness[i]! > toleranceMs).reduce((n, f) => n + (f.count ?? 1), 0),
    fps: (count / (toMs - fromMs)) * 1000,
    worstMs: Math.max(...lateness),
  };
}
