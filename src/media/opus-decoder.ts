/**
 * A WebRTC caller's microphone: Opus RTP packets (sequence, timestamp, payload) in, a continuous
 * stream of mono PCM16 at 24 kHz out, the format the engine's VAD and recogniser take. Decoding is
 * native (the addon's OpusDecoder over libopus, tens of microseconds a packet).
 *
 * Rules, in arrival order (no jitter buffer: a voice turn needs the audio as it comes, and
 * reordering on a LAN or loopback is rare):
 *  - a packet older than the newest one decoded, or the same again, is dropped (counted);
 *  - a gap of up to MAX_CONCEALED_PACKETS lost packets is filled: the last one from the next
 *    packet's in-band FEC, the others by concealment; a longer gap restarts the decoder;
 *  - silence the sender did not send (DTX: the RTP timestamp runs on while no packet comes) is
 *    given back as zeros, up to MAX_SILENCE_GAP_MS, so the VAD hears the pause that ends a turn;
 *  - a packet that does not decode is dropped (counted), never thrown out of push().
 */
import type { Logger } from '../core/log.js';
import { callNative, loadBinding } from './native.js';
import { PCM_RATE_HZ } from '../audio/pcm.js';

/** Lost packets filled in before the stream is taken as restarted (about 100 ms of 20 ms packets). */
const MAX_CONCEALED_PACKETS = 5;
/** The Opus RTP clock (RFC 7587: always 48 kHz); audio is decoded to the realtime rate, PCM_RATE_HZ. */
const RTP_CLOCK_HZ = 48_000;
/** Unsent silence (DTX) given back at most: enough for any turn-ending pause. */
const MAX_SILENCE_GAP_MS = 2000;

export interface MicPacket {
  sequence: number;
  timestamp: number;
  payload: Buffer;
}

export interface MicrophoneStats {
  decoded: number;
  concealed: number;
  recoveredFec: number;
  dropped: number;
  corrupt: number;
  silenceFilledMs: number;
}

export class MicrophoneDecoder {
  private readonly decoder: InstanceType<ReturnType<typeof loadBinding>['OpusDecoder']>;
  private lastSeq: number | null = null;
  /** RTP timestamp where the audio given out so far ends. */
  private endTs = 0;
  readonly stats: MicrophoneStats = { decoded: 0, concealed: 0, recoveredFec: 0, dropped: 0, corrupt: 0, silenceFilledMs: 0 };

  constructor(
    private readonly onPcm: (pcm: Int16Array) => void,
    private readonly log?: Logger,
  ) {
    const binding = loadBinding();
    this.decoder = callNative(() => new binding.OpusDecoder());
  }

  push(packet: MicPacket): void {
    if (this.lastSeq === null) {
      this.decodeInto(packet);
      return;
    }
    const delta = (packet.sequence - this.lastSeq) & 0xffff;
    if (delta === 0 || delta >= 0x8000) {
      this.stats.dropped++; // a duplicate, or late behind what was already given out
      return;
    }
    const lost = delta - 1;
    if (lost > MAX_CONCEALED_PACKETS) {
      this.decoder.reset();
      this.fillSilence(packet.timestamp);
    } else {
      for (let i = 0; i < lost; i++) {
        const last = i === lost - 1;
        const pcm = last ? this.decoder.recover(packet.payload) : this.decoder.conceal();
        if (last) this.stats.recoveredFec++;
        else this.stats.concealed++;
        this.emit(pcm, null);
      }
      if (lost === 0) this.fillSilence(packet.timestamp);
    }
    this.decodeInto(packet);
  }

  private decodeInto(packet: MicPacket): void {
    this.lastSeq = packet.sequence;
    let pcm: Int16Array;
    try {
      pcm = this.decoder.decode(packet.payload);
    } catch (err) {
      this.stats.corrupt++;
      if (this.stats.corrupt === 1) this.log?.warn('microphone packet does not decode', { err });
      return;
    }
    this.stats.decoded++;
    this.emit(pcm, packet.timestamp);
  }

  /** Gives back the silence between the audio given out and `timestamp` (DTX), bounded. */
  private fillSilence(timestamp: number): void {
    const gapTicks = (timestamp - this.endTs) >>> 0;
    if (gapTicks === 0 || gapTicks >= 0x80000000) return;
    const ms = Math.min((gapTicks * 1000) / RTP_CLOCK_HZ, MAX_SILENCE_GAP_MS);
    const samples = Math.round((ms * PCM_RATE_HZ) / 1000);
    if (samples === 0) return;
    this.stats.silenceFilledMs += ms;
    this.onPcm(new Int16Array(samples));
  }

  private emit(pcm: Int16Array, timestamp: number | null): void {
    const ticks = (pcm.length * RTP_CLOCK_HZ) / PCM_RATE_HZ;
    this.endTs = ((timestamp ?? this.endTs) + ticks) >>> 0;
    if (pcm.length > 0) this.onPcm(pcm);
  }
}
