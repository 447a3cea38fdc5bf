/**
 * The WebRTC connection: the browser offers (Opus both ways, video to receive, the `oai-events`
 * data channel), posts the offer as `application/sdp` to /v1/realtime/calls with the ephemeral
 * key, and applies the answer. The avatar's video plays in <video>, its voice in <audio>; events
 * travel on the data channel. Statistics come from getStats().
 *
 * A face the page draws (video_render: client; the answer takes no video): the motion stream
 * comes on the data channel and each frame is drawn when its sound is heard, by the audio track's
 * own playout clock (face-view.ts, RtpPlayoutClock).
 */
import { Problem, problemOf, type Api } from './api.js';
import type { Connection, ConnectionHandlers, LiveStats, MediaElements, ServerEvent } from './connection.js';
import { CallFace, type FaceView } from './face-view.js';

/** ICE gathering on a direct connection takes milliseconds; past this the offer goes as it is. */
const GATHER_TIMEOUT_MS = 2000;
/** A call 'disconnected' this long is taken as lost (the server ends it after 5 s too). */
const DISCONNECTED_GRACE_MS = 5000;

interface Sample {
  at: number;
  bytes: number;
  frames: number;
}

export class RtcConnection implements Connection {
  readonly transport = 'webrtc';
  sessionId: string | null = null;
  private callPath: string | null = null;
  private readonly channel: RTCDataChannel;
  private readonly queue: string[] = [];
  private closing = false;
  private lastSample: Sample | null = null;
  private frames = 0;
  private disconnectTimer: number | undefined;
  private callFace: CallFace | null = null;

  private constructor(
    private readonly pc: RTCPeerConnection,
    private readonly mic: MediaStreamTrack | null,
    private readonly api: Api,
    private readonly handlers: ConnectionHandlers,
  ) {
    this.channel = pc.createDataChannel('oai-events');
    this.channel.onopen = () => {
      for (const text of this.queue.splice(0)) this.channel.send(text);
    };
    this.channel.onmessage = (m) => {
      let event: ServerEvent;
      try {
        event = JSON.parse(String(m.data)) as ServerEvent;
      } catch {
        return; // not JSON: nothing the page can show
      }
      if (!this.callFace?.event(event)) this.handlers.event(event);
    };
    this.channel.onclose = () => this.lostIfUnexpected('The connection to the avatar was lost.');
    pc.onconnectionstatechange = () => {
      const state = pc.connectionState;
      window.clearTimeout(this.disconnectTimer);
      if (state === 'failed') this.lostIfUnexpected('The media connection failed (network or firewall).');
      else if (state === 'disconnected') {
        this.disconnectTimer = window.setTimeout(() => this.lostIfUnexpected('The media connection was lost.'), DISCONNECTED_GRACE_MS);
      }
    };
  }

  /** `drawFace`: the key's session draws the face in the client (video_render: client). */
  static async connect(api: Api, ephemeralKey: string, mic: MediaStream | null, media: MediaElements, handlers: ConnectionHandlers, drawFace = false): Promise<RtcConnection> {
    const pc = new RTCPeerConnection();
    const micTrack = mic?.getAudioTracks()[0] ?? null;
    const audio = pc.addTransceiver('audio', { direction: 'sendrecv' });
    if (micTrack) await audio.sender.replaceTrack(micTrack);
    pc.addTransceiver('video', { direction: 'recvonly' });
    const conn = new RtcConnection(pc, micTrack, api, handlers);
    if (drawFace) conn.callFace = new CallFace(pc, audio.receiver, media.face, handlers.firstFrame, handlers.notice);
    pc.ontrack = (e) => {
      const stream = new MediaStream([e.track]);
      if (e.track.kind === 'video') {
        media.video.srcObject = stream;
        conn.watchFrames(media.video);
      } else {
        media.audio.srcObject = stream;
        void media.audio.play().catch(() => undefined); // autoplay is allowed after the click that connected
      }
    };
    try {
      await pc.setLocalDescription(await pc.createOffer());
      await gathered(pc);
      let res: Response;
      try {
        res = await fetch('/v1/realtime/calls', {
          method: 'POST',
          headers: { Authorization: `Bearer ${ephemeralKey}`, 'Content-Type': 'application/sdp' },
          body: pc.localDescription?.sdp ?? '',
        });
      } catch {
        throw new Problem('The server cannot be reached. Check that it is running, then try again.', 'network');
      }
      if (res.status !== 201) throw await problemOf(res, 'the call');
      conn.sessionId = res.headers.get('X-Session-Id');
      conn.callPath = res.headers.get('Location');
      await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
    } catch (err) {
      conn.closing = true;
      pc.close();
      throw err;
    }
    return conn;
  }

  private watchFrames(video: HTMLVideoElement): void {
    const onFrame = (): void => {
      if (this.closing) return;
      if (this.frames++ === 0) this.handlers.firstFrame();
      video.requestVideoFrameCallback(onFrame);
    };
    video.requestVideoFrameCallback(onFrame);
  }

  private lostIfUnexpected(why: string): void {
    if (this.closing) return;
    this.closing = true;
    this.closePeer();
    this.handlers.lost(why, 'network');
  }

  send(event: Record<string, unknown>): void {
    const text = JSON.stringify(event);
    if (this.channel.readyState === 'open') this.channel.send(text);
    else this.queue.push(text);
  }

  setMicOpen(open: boolean): void {
    if (this.mic) this.mic.enabled = open;
  }

  interrupt(): void {
    // Cuts the audio at the next frame and ends the reply (cancelled), keeping what was heard.
    this.send({ type: 'output_audio_buffer.clear' });
  }

  async hangup(): Promise<void> {
    this.closing = true;
    try {
      if (this.callPath) await this.api.hangup(this.callPath);
    } finally {
      this.closePeer();
    }
  }

  close(): void {
    this.closing = true;
    this.closePeer();
  }

  /** The face drawn here (video_render: client), null when the call brings video. */
  get face(): FaceView | null {
    return this.callFace?.view ?? null;
  }

  private closePeer(): void {
    this.callFace?.close();
    this.pc.close();
  }

  async stats(): Promise<LiveStats> {
    const report = await this.pc.getStats();
    let bytes = 0;
    let fps: number | null = null;
    let audioEnergy = 0;
    // Each track's "current time" on the server's clock (estimatedPlayoutTimestamp: the capture
    // time of what is being played out, by our sender reports), and the audio output's own delay
    // after that (media-playout: totalPlayoutDelay over totalSamplesCount).
    const playing: Record<string, number> = {};
    let outputDelayMs = 0;
    report.forEach((s: Record<string, unknown>) => {
      if (s.type === 'media-playout' && s.kind === 'audio' && Number(s.totalSamplesCount) > 0) outputDelayMs = (Number(s.totalPlayoutDelay ?? 0) / Number(s.totalSamplesCount)) * 1000;
      if (s.type !== 'inbound-rtp') return;
      bytes += Number(s.bytesReceived ?? 0);
      const kind = String(s.kind);
      if (kind === 'video' && typeof s.framesPerSecond === 'number') fps = s.framesPerSecond;
      if (kind === 'audio') audioEnergy = Number(s.totalAudioEnergy ?? 0);
      if (typeof s.estimatedPlayoutTimestamp === 'number') playing[kind] = s.estimatedPlayoutTimestamp;
    });
    const at = performance.now();
    const previous = this.lastSample;
    this.lastSample = { at, bytes, frames: this.frames };
    const kbps = previous && at > previous.at ? ((bytes - previous.bytes) * 8) / (at - previous.at) : null;
    // The sound heard now was captured outputDelayMs before the audio being played out; the
    // picture shows what the video is playing out. Positive: the picture is behind its sound.
    if (this.face) return { fps: this.face.fps(), kbps, avOffsetMs: this.face.lateness(), frames: this.face.frames, audioEnergy };
    const avOffsetMs = playing.audio !== undefined && playing.video !== undefined ? playing.audio - outputDelayMs - playing.video : null;
    return { fps, kbps, avOffsetMs, frames: this.frames, audioEnergy };
  }
}

function gathered(pc: RTCPeerConnection): Promise<void> {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const timer = window.setTimeout(resolve, GATHER_TIMEOUT_MS);
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') {
        window.clearTimeout(timer);
        resolve();
      }
    });
  });
}
