/**
 * The WebSocket connection (/v1/realtime, the ephemeral key as the `openai-insecure-api-key.`
 * subprotocol): the avatar's voice arrives as base64 PCM16 24 kHz (`response.output_audio.delta`)
 * and is scheduled on a Web Audio clock a little ahead; its frames arrive as base64 JPEG
 * (`response.output_image.delta`, with `pts_ms`), are decoded at once and drawn on a canvas when
 * their own sound is heard (frame-clock.ts: the audio's lead and the output device's latency
 * later than they came). The microphone goes the other way as PCM16 24 kHz
 * `input_audio_buffer.append`, silence while push to talk is released.
 *
 * A face the page draws (`?video_render=client`): no images come; the motion stream does, and
 * each frame is drawn when its sound is heard by the same clock, the audio deltas then carrying
 * their pts (face-view.ts).
 */
import { Problem } from './api.js';
import { fromBase64, toBase64, type Connection, type ConnectionHandlers, type LiveStats, type MediaElements, type ServerEvent } from './connection.js';
import { FaceView } from './face-view.js';
import { FrameClock, heardAt, type AudioClock } from './frame-clock.js';

const RATE_HZ = 24000;
/** Audio is scheduled this far ahead of now when playback (re)starts: absorbs network jitter. */
const AUDIO_LEAD_S = 0.06;
/** Frames decoded and waiting for their sound, at most (about 2 s): older ones are dropped (a hidden tab draws nothing). */
const MAX_QUEUED_FRAMES = 50;
/** The A/V figure is the median over this many of the last frames drawn with their sound. */
const AV_FRAMES = 25;
/** Microphone blocks: 4096 samples at 24 kHz, about 170 ms. */
const MIC_BLOCK = 4096;

/** Close codes and what they mean for the person (docs/realtime.md, Close codes). */
const CLOSE_REASONS: Record<number, [string, 'busy' | 'key' | 'network' | 'ended']> = {
  1001: ['The server is shutting down. Try again when it is back.', 'network'],
  1011: ['The avatar could not start on the server. Try again; if it keeps failing, the server log says why.', 'network'],
  1013: ['Every avatar worker is busy right now. Try again in a few seconds.', 'busy'],
  4001: ['The key was not accepted. Enter a valid API key.', 'key'],
  4003: ['Your API key has been revoked. Enter another key.', 'key'],
  4008: ['The server got no credentials in time.', 'key'],
  4009: ['The session is no longer usable.', 'ended'],
  4010: ['The session was ended on the server (by its owner or its maximum duration).', 'ended'],
  4029: ['Too many connection attempts. Wait a minute and try again.', 'busy'],
};

/** Plays PCM16 chunks gaplessly on an AudioContext, and can stop at once (interrupt, barge-in). */
class PcmPlayer {
  readonly context = new AudioContext({ sampleRate: RATE_HZ });
  private next = 0;
  private readonly playing = new Set<AudioBufferSourceNode>();
  /** Sum of squares of the samples scheduled (totalAudioEnergy's scale: per second of 1.0 ≈ 1). */
  energy = 0;

  /** Schedules a chunk after the ones before it; where it ends (context s), and whether playback (re)started with it. */
  play(pcm: Int16Array): { endS: number; restarted: boolean } {
    const buffer = this.context.createBuffer(1, pcm.length, RATE_HZ);
    const channel = buffer.getChannelData(0);
    let sum = 0;
    for (let i = 0; i < pcm.length; i++) {
      const v = (pcm[i] ?? 0) / 32768;
      channel[i] = v;
      sum += v * v;
    }
    this.energy += sum / RATE_HZ;
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const t = this.context.currentTime;
    const restarted = this.next < t;
    if (restarted) this.next = t + AUDIO_LEAD_S;
    source.start(this.next);
    this.next += buffer.duration;
    this.playing.add(source);
    source.onended = () => this.playing.delete(source);
    return { endS: this.next, restarted };
  }

  /** The context's clock: what is heard when (the output device's latency included), and currentTime. */
  clock(): AudioClock {
    const ts = this.context.getOutputTimestamp();
    const now = performance.now();
    if (ts.contextTime !== undefined && ts.performanceTime !== undefined && ts.performanceTime > 0) {
      return { contextTime: ts.contextTime, performanceTime: ts.performanceTime, currentTime: this.context.currentTime };
    }
    // Not rendering yet: the latencies the context states.
    const latencyS = this.context.baseLatency + (this.context.outputLatency || 0);
    return { contextTime: this.context.currentTime - latencyS, performanceTime: now, currentTime: this.context.currentTime };
  }

  /** Stops everything scheduled; returns how many ms of it had not been heard yet. */
  stop(): number {
    const clock = this.clock();
    const unplayed = Math.max(0, heardAt(this.next, clock) - performance.now());
    for (const s of this.playing) s.stop();
    this.playing.clear();
    this.next = 0;
    return unplayed;
  }

  close(): void {
    this.stop();
    void this.context.close();
  }
}

export class WsConnection implements Connection {
  readonly transport = 'websocket';
  sessionId: string | null = null;
  private readonly player = new PcmPlayer();
  private micOpen = true;
  private micContext: AudioContext | null = null;
  /** The microphone it sends from (its track is muted and opened with the mic, as a call does it). */
  private micStream: MediaStream | null = null;
  private closing = false;
  /** Set once the session is created: a close before that is the connect's own failure. */
  private ready = false;
  private frames = 0;
  private frameTimes: number[] = [];
  private bytes = 0;
  private lastBytes: { at: number; bytes: number } | null = null;
  private decoding = Promise.resolve();
  private readonly frameClock = new FrameClock(AUDIO_LEAD_S);
  /** Decoded frames waiting to be seen, in order, each with when (performance.now()). */
  private queued: Array<{ bitmap: ImageBitmap; dueMs: number; synced: boolean }> = [];
  private drawLoop: number | null = null;
  /** Drawn − due of the last frames placed by their sound (the picture's lateness behind it), ms. */
  private lateness: number[] = [];
  /** The item being spoken and how much of it has been scheduled, for truncate on interrupt. */
  private speaking: { itemId: string; responseId: string; scheduledMs: number; started: boolean } | null = null;
  face: FaceView | null = null;

  private constructor(
    private readonly ws: WebSocket,
    private readonly media: MediaElements,
    private readonly handlers: ConnectionHandlers,
  ) {
    ws.onmessage = (m) => {
      this.bytes += typeof m.data === 'string' ? m.data.length : 0;
      let event: ServerEvent;
      try {
        event = JSON.parse(String(m.data)) as ServerEvent;
      } catch {
        return;
      }
      this.onEvent(event);
    };
    ws.onclose = (e) => {
      if (this.closing || !this.ready) return;
      this.closing = true;
      this.stopMedia();
      const [why, kind] = CLOSE_REASONS[e.code] ?? [`The connection to the avatar was lost (code ${e.code}).`, 'network'];
      this.handlers.lost(why, kind);
    };
  }

  /** `drawFace`: the page draws the face from the motion stream (video_render=client). */
  static async connect(ephemeralKey: string, mic: MediaStream | null, media: MediaElements, handlers: ConnectionHandlers, drawFace = false): Promise<WsConnection> {
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/realtime?model=gpt-realtime${drawFace ? '&video_render=client' : ''}`;
    const ws = new WebSocket(url, ['realtime', `openai-insecure-api-key.${ephemeralKey}`]);
    const conn = new WsConnection(ws, media, handlers);
    if (drawFace) conn.face = new FaceView(media.face, (pts, arrived) => conn.frameClock.due(pts, arrived, conn.player.clock()), handlers.firstFrame, handlers.notice);
    await new Promise<void>((resolve, reject) => {
      const created = (m: MessageEvent): void => {
        const event = JSON.parse(String(m.data)) as ServerEvent;
        if (event.type === 'session.created') {
          ws.removeEventListener('message', created);
          conn.sessionId = String((event.session as { id?: string }).id ?? '') || null;
          resolve();
        }
      };
      ws.addEventListener('message', created);
      ws.addEventListener('close', (e) => {
        const [why, kind] = CLOSE_REASONS[e.code] ?? ['The server closed the connection.', 'network'];
        reject(new Problem(why, kind === 'ended' ? 'server' : kind));
      });
      ws.addEventListener('error', () => reject(new Problem('The server cannot be reached. Check that it is running, then try again.', 'network')));
    });
    if (mic) await conn.startMic(mic);
    await conn.player.context.resume();
    conn.ready = true;
    return conn;
  }

  private onEvent(event: ServerEvent): void {
    if (this.face?.event(event)) return;
    if (event.type === 'response.output_image.delta') this.decode(String(event.delta), typeof event.pts_ms === 'number' ? event.pts_ms : null);
    else if (event.type === 'response.output_audio.delta') {
      const bytes = fromBase64(String(event.delta));
      const pcm = new Int16Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / 2));
      const { endS, restarted } = this.player.play(pcm);
      const ptsEndMs = typeof event.pts_ms === 'number' ? event.pts_ms + (pcm.length / RATE_HZ) * 1000 : undefined;
      this.frameClock.audioScheduled(endS, restarted, ptsEndMs);
      const itemId = String(event.item_id ?? '');
      const responseId = String(event.response_id ?? '');
      if (this.speaking?.itemId !== itemId) this.speaking = { itemId, responseId, scheduledMs: 0, started: false };
      this.speaking.scheduledMs += (pcm.length / RATE_HZ) * 1000;
      if (!this.speaking.started) {
        this.speaking.started = true;
        this.handlers.audioStarted?.(responseId);
      }
    } else if (event.type === 'input_audio_buffer.speech_started') {
      // Barge-in: the server cancels the reply; stop what is already scheduled here, as a client must.
      this.cutSpeech(false);
    } else if (event.type === 'response.done') {
      const done = event.response as { id?: string };
      if (this.speaking?.responseId === done.id) this.speaking = null;
    }
    this.handlers.event(event);
  }

  /** Decodes a frame as it arrives and queues it for when its sound is heard (frame-clock.ts); a frame without pts is shown at once. */
  private decode(base64: string, ptsMs: number | null): void {
    const blob = new Blob([fromBase64(base64)], { type: 'image/jpeg' });
    const arrivedMs = performance.now();
    const due = ptsMs === null ? { atMs: arrivedMs, synced: false } : this.frameClock.due(ptsMs, arrivedMs, this.player.clock());
    // In order: each frame is decoded and queued after the one before.
    this.decoding = this.decoding.then(async () => {
      try {
        const bitmap = await createImageBitmap(blob);
        if (this.closing) return bitmap.close();
        this.queued.push({ bitmap, dueMs: due.atMs, synced: due.synced });
        while (this.queued.length > MAX_QUEUED_FRAMES) this.queued.shift()!.bitmap.close();
        this.drawLoop ??= requestAnimationFrame(() => this.drawDue());
      } catch {
        // an undecodable frame is skipped
      }
    });
  }

  /** Each display frame: draws the latest frame that is due (dropping older ones), until none wait. */
  private drawDue(): void {
    this.drawLoop = null;
    const now = performance.now();
    let shown: (typeof this.queued)[number] | null = null;
    while (this.queued.length > 0 && this.queued[0]!.dueMs <= now) {
      shown?.bitmap.close();
      shown = this.queued.shift()!;
    }
    if (shown) {
      const { canvas } = this.media;
      if (canvas.width !== shown.bitmap.width) canvas.width = shown.bitmap.width;
      if (canvas.height !== shown.bitmap.height) canvas.height = shown.bitmap.height;
      canvas.getContext('2d')?.drawImage(shown.bitmap, 0, 0);
      shown.bitmap.close();
      if (this.frames++ === 0) this.handlers.firstFrame();
      this.frameTimes.push(now);
      if (this.frameTimes.length > 50) this.frameTimes.shift();
      if (shown.synced) {
        this.lateness.push(now - shown.dueMs);
        if (this.lateness.length > AV_FRAMES) this.lateness.shift();
      }
    }
    if (this.queued.length > 0 && !this.closing) this.drawLoop = requestAnimationFrame(() => this.drawDue());
  }

  private async startMic(stream: MediaStream): Promise<void> {
    this.micStream = stream;
    const context = new AudioContext({ sampleRate: RATE_HZ });
    this.micContext = context;
    const source = context.createMediaStreamSource(stream);
    const processor = context.createScriptProcessor(MIC_BLOCK, 1, 1);
    const mute = context.createGain();
    mute.gain.value = 0; // the processor must reach the destination to run; nothing is heard
    processor.onaudioprocess = (e) => {
      if (this.ws.readyState !== WebSocket.OPEN) return;
      const input = e.inputBuffer.getChannelData(0);
      const pcm = new Int16Array(input.length);
      if (this.micOpen) for (let i = 0; i < input.length; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round((input[i] ?? 0) * 32767)));
      this.ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: toBase64(new Uint8Array(pcm.buffer)) }));
    };
    source.connect(processor);
    processor.connect(mute);
    mute.connect(context.destination);
    await context.resume();
  }

  /** Stops the scheduled speech; with `truncate`, tells the server what was heard. */
  private cutSpeech(truncate: boolean): void {
    const unplayedMs = this.player.stop();
    this.frameClock.audioStopped();
    const speaking = this.speaking;
    this.speaking = null;
    if (truncate && speaking) {
      const heardMs = Math.max(0, Math.round(speaking.scheduledMs - unplayedMs));
      this.send({ type: 'conversation.item.truncate', item_id: speaking.itemId, content_index: 0, audio_end_ms: heardMs });
    }
  }

  send(event: Record<string, unknown>): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(event));
  }

  setMicOpen(open: boolean): void {
    this.micOpen = open;
    // As a call mutes it (rtc.ts): a track the page started muted (push to talk) opens here too.
    for (const t of this.micStream?.getAudioTracks() ?? []) t.enabled = open;
  }

  interrupt(): void {
    this.send({ type: 'response.cancel' });
    this.cutSpeech(true);
  }

  async hangup(): Promise<void> {
    this.close();
  }

  private stopMedia(): void {
    this.face?.close();
    this.player.close();
    if (this.drawLoop !== null) cancelAnimationFrame(this.drawLoop);
    this.drawLoop = null;
    for (const f of this.queued.splice(0)) f.bitmap.close();
    void this.micContext?.close();
    this.micContext = null;
  }

  close(): void {
    if (this.closing) return;
    this.closing = true;
    this.stopMedia();
    this.ws.close(1000, 'hang up');
  }

  async stats(): Promise<LiveStats> {
    const at = performance.now();
    const recent = this.frameTimes.filter((t) => at - t < 2000);
    const fps = recent.length > 1 ? ((recent.length - 1) * 1000) / ((recent.at(-1) ?? at) - (recent[0] ?? at)) : null;
    const previous = this.lastBytes;
    this.lastBytes = { at, bytes: this.bytes };
    const kbps = previous && at > previous.at ? ((this.bytes - previous.bytes) * 8) / (at - previous.at) : null;
    // Each frame is drawn when its sound is heard; what is left is how late the drawing came (a display frame at most, unless the page is starved).
    if (this.face) return { fps: this.face.fps(), kbps, avOffsetMs: this.face.lateness(), frames: this.face.frames, audioEnergy: this.player.energy };
    const late = [...this.lateness].sort((a, b) => a - b);
    const avOffsetMs = late.length === 0 ? null : late[Math.floor(late.length / 2)]!;
    return { fps, kbps, avOffsetMs, frames: this.frames, audioEnergy: this.player.energy };
  }
}
