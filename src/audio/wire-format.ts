/**
 * The audio formats a realtime client may put on the wire (`session.audio.input.format`,
 * `session.audio.output.format`; the beta names `pcm16`, `g711_ulaw`, `g711_alaw` are mapped to
 * these by the session code) and the conversion between them and the engine's own audio, which is
 * always PCM16 mono 24 kHz (`pcm.ts`):
 *
 * - `audio/pcm`:  PCM16 little-endian mono 24 kHz, 2 bytes a sample; passed through untouched.
 * - `audio/pcmu`: G.711 μ-law 8 kHz, 1 byte a sample (Twilio Media Streams' format).
 * - `audio/pcma`: G.711 A-law 8 kHz, 1 byte a sample.
 *
 * `InputAudioDecoder` turns one stream of appended wire bytes into 24 kHz PCM16; for G.711 it
 * decodes and upsamples 8 → 24 kHz with the streaming `Resampler`, whose state lives as long as
 * the decoder, so appends may split the stream anywhere (even mid-sample for `audio/pcm`) without
 * a click or a lost sample. `OutputAudioEncoder` does the reverse for the audio the server speaks:
 * 24 kHz PCM16LE bytes are low-passed (cut-off 3.5 kHz, below the 4 kHz Nyquist of the wire rate)
 * and decimated 24 → 8 kHz by the same resampler, then companded; `flush()` at the end of a
 * stream (a response's audio) lets the filter's tail out and starts the next stream afresh.
 *
 * Response (measured with tones at −6 dBFS through μ-law): 24 → 8 kHz is flat (±0.1 dB) to 2.5 kHz,
 * −1.2 dB at 3 kHz, −4.7 dB at 3.4 kHz, and folds 4.2 kHz to 3.8 kHz 25 dB down, 4.5 kHz 41 dB
 * down, 5 kHz and above below G.711's own noise; 8 → 24 kHz is flat to 3 kHz, −2.6 dB at 3.4 kHz,
 * its images ≥ 87 dB down. The decimating filter is the resampler's 48 taps, hence its wide
 * transition band; a 1 kHz tone out and back in keeps an SNR of 35–38 dB (G.711's own limit).
 *
 * Latency: the resampler is causal, so every chunk's samples come out at once, but its linear-phase
 * filter delays the signal by its group delay: ≈ 3.0 ms on input (8 → 24 kHz) and ≈ 1.0 ms on
 * output (24 → 8 kHz), reported as `delayMs` on each converter. The output's last ≈ 1 ms (8 wire
 * samples) therefore only leaves with `flush()`. `audio/pcm` adds nothing either way.
 *
 * Cost: G.711 input is filtered at 144 multiply-adds a wire byte, so the largest event a client may
 * send (16 MiB of base64, 25 minutes of 8 kHz audio) is seconds of work: `decodeYielding` does it
 * one second of audio at a time and lets the event loop run between seconds, so one client's
 * append never stalls the others' sessions. PCM is a view or a copy, with nothing to yield for.
 *
 * Not here: validating a client's format object (the session code does that and then calls
 * `wireFormat()`), and the base64 of the protocol. Samples are read and written little-endian
 * whatever the host's byte order.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ALAW_DECODE_TABLE, G711_RATE_HZ, linearToAlaw, linearToUlaw, ULAW_DECODE_TABLE } from './g711.js';
import { PCM_RATE_HZ } from './pcm.js';
import { Resampler } from './resample.js';

export type WireAudioFormat = { type: 'audio/pcm'; rate: 24000 } | { type: 'audio/pcmu'; rate: 8000 } | { type: 'audio/pcma'; rate: 8000 };

/** Every wire format's `type`, in the protocol's spelling. */
export const WIRE_FORMAT_TYPES = ['audio/pcm', 'audio/pcmu', 'audio/pcma'] as const;
export type WireAudioFormatType = (typeof WIRE_FORMAT_TYPES)[number];

/** The format a `type` names, with its (only) rate. */
export function wireFormat(type: WireAudioFormatType): WireAudioFormat {
  switch (type) {
    case 'audio/pcm':
      return { type, rate: PCM_RATE_HZ };
    case 'audio/pcmu':
    case 'audio/pcma':
      return { type, rate: G711_RATE_HZ };
    default:
      throw new TypeError(`wireFormat: unknown audio format type ${JSON.stringify(type)}`);
  }
}

/** Bytes of wire audio per millisecond: 48 for `audio/pcm`, 8 for G.711. */
export function bytesPerMs(format: WireAudioFormat): number {
  return format.type === 'audio/pcm' ? (PCM_RATE_HZ * 2) / 1000 : G711_RATE_HZ / 1000;
}

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function checkFormat(format: WireAudioFormat, who: string): void {
  const known = (WIRE_FORMAT_TYPES as readonly string[]).includes(format?.type);
  if (!known || format.rate !== wireFormat(format.type).rate) {
    throw new TypeError(`${who}: unsupported audio format ${JSON.stringify(format)}`);
  }
}

/** Float samples (PCM16 scale) to PCM16: rounded, clipped (the filter may overshoot full scale). */
function clampRound(x: number): number {
  const r = Math.round(x);
  return r > 32767 ? 32767 : r < -32768 ? -32768 : r;
}

/**
 * Reads PCM16LE `bytes`, preceded by `pendingByte` (the low byte of a split sample; -1 for none),
 * into `out`, which holds exactly the whole samples; returns the new pending byte.
 */
function readPcm16le(bytes: Buffer, pendingByte: number, out: Int16Array | Float32Array): number {
  let at = 0;
  let i = 0;
  if (pendingByte >= 0) {
    if (bytes.length === 0) return pendingByte;
    const word = pendingByte | ((bytes[0] ?? 0) << 8);
    out[at++] = word >= 0x8000 ? word - 0x10000 : word;
    i = 1;
  }
  for (; i + 1 < bytes.length; i += 2) out[at++] = bytes.readInt16LE(i);
  return i < bytes.length ? (bytes[i] ?? 0) : -1;
}

/** G.711 bytes decoded between two turns of the event loop: one second of 8 kHz audio (a few ms of work). */
const G711_SLICE_BYTES = G711_RATE_HZ;

/**
 * One input stream (an `input_audio_buffer`'s appends) from its wire format to PCM16 mono 24 kHz.
 * Stateful: the resampler's history and, for `audio/pcm`, half a sample carry over between calls.
 */
export class InputAudioDecoder {
  readonly format: WireAudioFormat;
  /** Delay the conversion adds to the signal, ms: the upsampling filter's group delay (0 for pcm). */
  readonly delayMs: number;
  /** G.711's decode table and the 8 → 24 kHz resampler; null for `audio/pcm`. */
  private readonly g711: { table: Readonly<Int16Array>; resampler: Resampler } | null;
  /** The odd last byte of an `audio/pcm` append, waiting for its partner; -1 if none. */
  private pendingByte = -1;

  constructor(format: WireAudioFormat) {
    checkFormat(format, 'InputAudioDecoder');
    this.format = format;
    const table = format.type === 'audio/pcmu' ? ULAW_DECODE_TABLE : format.type === 'audio/pcma' ? ALAW_DECODE_TABLE : null;
    this.g711 = table === null ? null : { table, resampler: new Resampler(G711_RATE_HZ, PCM_RATE_HZ) };
    this.delayMs = this.g711?.resampler.delayMs ?? 0;
  }

  /**
   * The 24 kHz PCM16 samples these wire bytes complete. For `audio/pcm` the result is a view of
   * `bytes` (no copy) when it is whole samples, suitably aligned, on a little-endian host; treat it
   * as read-only. For G.711 it is new memory, three samples per byte.
   */
  decode(bytes: Buffer): Int16Array {
    if (this.g711 === null) return this.decodePcm(bytes);
    const { table, resampler } = this.g711;
    const narrow = new Float32Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) narrow[i] = table[bytes[i] ?? 0] ?? 0;
    const wide = resampler.push(narrow);
    const out = new Int16Array(wide.length);
    for (let i = 0; i < wide.length; i++) out[i] = clampRound(wide[i] ?? 0);
    return out;
  }

  /**
   * `decode`, for an append of any size: G.711 is decoded one second of audio (8,000 bytes) at a
   * time, yielding to the event loop between seconds. The same samples as one `decode` call.
   */
  async decodeYielding(bytes: Buffer): Promise<Int16Array> {
    if (this.g711 === null || bytes.length <= G711_SLICE_BYTES) return this.decode(bytes);
    const slices: Int16Array[] = [];
    let length = 0;
    for (let at = 0; at < bytes.length; at += G711_SLICE_BYTES) {
      if (at > 0) await nextTurn();
      const slice = this.decode(bytes.subarray(at, at + G711_SLICE_BYTES));
      slices.push(slice);
      length += slice.length;
    }
    const out = new Int16Array(length);
    let offset = 0;
    for (const slice of slices) (out.set(slice, offset), (offset += slice.length));
    return out;
  }

  /** Forgets the stream so far (after `input_audio_buffer.clear`): the next byte starts afresh. */
  reset(): void {
    this.pendingByte = -1;
    this.g711?.resampler.reset();
  }

  private decodePcm(bytes: Buffer): Int16Array {
    if (this.pendingByte < 0 && bytes.length % 2 === 0 && bytes.byteOffset % 2 === 0 && HOST_LITTLE_ENDIAN) {
      return new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2);
    }
    const out = new Int16Array(Math.floor((bytes.length + (this.pendingByte < 0 ? 0 : 1)) / 2));
    this.pendingByte = readPcm16le(bytes, this.pendingByte, out);
    return out;
  }
}

/**
 * One output stream (a response's audio) from PCM16 mono 24 kHz to its wire format. Stateful:
 * the resampler's history and half a sample carry over between `encode` calls; `flush()` ends the
 * stream.
 */
export class OutputAudioEncoder {
  readonly format: WireAudioFormat;
  /** Delay the conversion adds to the signal, ms: the anti-alias filter's group delay (0 for pcm). */
  readonly delayMs: number;
  /** G.711's compander and the 24 → 8 kHz resampler; null for `audio/pcm`. */
  private readonly g711: { toCode: (sample: number) => number; resampler: Resampler } | null;
  /** Input samples of zeros that push the filter's delayed tail out: its group delay, rounded up. */
  private readonly tailSamples: number;
  /** The odd last byte of an `encode` call's input, waiting for its partner; -1 if none. */
  private pendingByte = -1;

  constructor(format: WireAudioFormat) {
    checkFormat(format, 'OutputAudioEncoder');
    this.format = format;
    const toCode = format.type === 'audio/pcmu' ? linearToUlaw : format.type === 'audio/pcma' ? linearToAlaw : null;
    this.g711 = toCode === null ? null : { toCode, resampler: new Resampler(PCM_RATE_HZ, G711_RATE_HZ) };
    this.delayMs = this.g711?.resampler.delayMs ?? 0;
    this.tailSamples = Math.ceil((this.delayMs * PCM_RATE_HZ) / 1000);
  }

  /**
   * The wire bytes for these 24 kHz PCM16LE bytes (any length; an odd byte waits for the next
   * call). `audio/pcm` returns `pcm24k` itself.
   */
  encode(pcm24k: Buffer): Buffer {
    if (this.g711 === null) return pcm24k;
    const wide = new Float32Array(Math.floor((pcm24k.length + (this.pendingByte < 0 ? 0 : 1)) / 2));
    this.pendingByte = readPcm16le(pcm24k, this.pendingByte, wide);
    return compand(this.g711, wide);
  }

  /**
   * Ends the stream: the filter's last ≈ 1 ms (as if followed by silence) as wire bytes, then a
   * fresh start for the next `encode`. A dangling odd byte is not audio and is dropped. Empty for
   * `audio/pcm`.
   */
  flush(): Buffer {
    if (this.g711 === null) return Buffer.alloc(0);
    const tail = compand(this.g711, new Float32Array(this.tailSamples));
    this.reset();
    return tail;
  }

  /** Forgets the stream without emitting its tail (the response was interrupted). */
  reset(): void {
    this.pendingByte = -1;
    this.g711?.resampler.reset();
  }
}

/** 24 kHz samples (PCM16 scale) through the anti-alias resampler to 8 kHz, then to G.711 codes. */
function compand(g711: { toCode: (sample: number) => number; resampler: Resampler }, wide: Float32Array): Buffer {
  const narrow = g711.resampler.push(wide);
  const out = Buffer.allocUnsafe(narrow.length);
  for (let i = 0; i < narrow.length; i++) out[i] = g711.toCode(clampRound(narrow[i] ?? 0));
  return out;
}
