/**
 * Reads voice samples: WAV (PCM 8/16/24/32-bit, IEEE float 32/64, WAVE_FORMAT_EXTENSIBLE) parsed
 * here, MP3 decoded with mpg123 (WebAssembly, from npm). Throws AudioFileError with a message fit
 * for an end user.
 *
 * Cost is bounded by what the headers say before anything is decoded: `readAudioHeader` gives the
 * format and duration from the WAV chunks (against the real file size, not the size it claims) or
 * from the MPEG frame headers (walked without decoding, stopping once past a duration limit), so
 * a 19 MB MP3 of 19,000 s of silence is refused in milliseconds. `inspectAudio` then decodes in
 * slices, keeping only running sums (level, non-finite samples), and `decodeAudio` keeps the mono
 * signal for analysis (pitch, rate). These run on worker threads (assets/inspect-worker.ts), not
 * on the event loop. Samples that are NaN or infinite make a file invalid: no voice can use them.
 */
import { MPEGDecoder } from 'mpg123-decoder';

export class AudioFileError extends Error {
  override name = 'AudioFileError';
}

export interface DecodedAudio {
  format: 'wav' | 'mp3';
  sampleRate: number;
  channels: number;
  /** Bits per sample of the source (0 for MP3). */
  bitsPerSample: number;
  durationSeconds: number;
  /** Mono mix of the decoded samples, -1..1. */
  samples: Float32Array;
}

export function sniffAudio(buf: Uint8Array): 'wav' | 'mp3' | null {
  const ascii = (from: number, to: number) => Buffer.from(buf.subarray(from, to)).toString('latin1');
  if (buf.length >= 12 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WAVE') return 'wav';
  if (buf.length >= 3 && ascii(0, 3) === 'ID3') return 'mp3';
  // An MPEG audio frame header: 11 sync bits, a layer that is not "reserved".
  if (buf.length >= 2 && buf[0] === 0xff && ((buf[1] ?? 0) & 0xe0) === 0xe0 && ((buf[1] ?? 0) & 0x06) !== 0) return 'mp3';
  return null;
}

/** Format facts from the headers alone (no decoding). */
export interface AudioHeader {
  format: 'wav' | 'mp3';
  sampleRate: number;
  channels: number;
  /** Bits per sample of the source (0 for MP3). */
  bitsPerSample: number;
  /** From the WAV data actually present, or the MPEG frames counted (at most a little past `maxSeconds`). */
  durationSeconds: number;
}

/**
 * The format and duration from the headers. MP3 frames are counted only until the duration passes
 * `maxSeconds` (the caller refuses such a file anyway), so the walk is bounded too.
 */
export function readAudioHeader(buf: Uint8Array, maxSeconds = Infinity): AudioHeader {
  const kind = sniffAudio(buf);
  if (kind === 'wav') {
    const { fmt, data } = parseWavChunks(buf);
    return { format: 'wav', sampleRate: fmt.sampleRate, channels: fmt.channels, bitsPerSample: fmt.bits, durationSeconds: Math.floor(data.length / fmt.blockAlign) / fmt.sampleRate };
  }
  if (kind === 'mp3') return { format: 'mp3', ...walkMpegFrames(buf, maxSeconds), bitsPerSample: 0 };
  throw new AudioFileError('the file is neither a WAV (RIFF/WAVE) nor an MP3 stream');
}

/** What an upload check needs: the header facts and the level, from a decode that keeps no samples. */
export interface AudioInspection extends AudioHeader {
  /** Root mean square of the mono mix, 0..1. */
  rms: number;
}

/** Decodes the whole file slice by slice (a refusal by header comes first: see readAudioHeader). */
export async function inspectAudio(buf: Uint8Array): Promise<AudioInspection> {
  const header = readAudioHeader(buf);
  let energy = 0;
  let count = 0;
  await forEachMonoSlice(buf, (slice) => {
    for (const s of slice) energy += s * s;
    count += slice.length;
  });
  return { ...header, rms: Math.sqrt(energy / Math.max(1, count)) };
}

export async function decodeAudio(buf: Uint8Array): Promise<DecodedAudio> {
  const kind = sniffAudio(buf);
  if (kind === 'wav') return decodeWav(buf);
  if (kind === 'mp3') return decodeMp3(buf);
  throw new AudioFileError('the file is neither a WAV (RIFF/WAVE) nor an MP3 stream');
}

/** Feeds the decoded mono signal to `sink` in slices; throws on a non-finite sample. */
async function forEachMonoSlice(buf: Uint8Array, sink: (slice: Float32Array) => void): Promise<void> {
  const checked = (slice: Float32Array) => {
    requireFinite(slice);
    sink(slice);
  };
  if (sniffAudio(buf) === 'wav') {
    const { fmt, data } = parseWavChunks(buf);
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    const frames = Math.floor(data.length / fmt.blockAlign);
    for (let first = 0; first < frames; first += DECODE_SLICE_FRAMES) {
      checked(readWavFrames(view, data.start, fmt, first, Math.min(frames, first + DECODE_SLICE_FRAMES)));
    }
    return;
  }
  const decoder = new MPEGDecoder();
  await decoder.ready;
  try {
    for (let at = 0; at < buf.length; at += MP3_SLICE_BYTES) {
      const out = decoder.decode(buf.subarray(at, at + MP3_SLICE_BYTES));
      if (out.samplesDecoded > 0) checked(monoMix(out.channelData, out.samplesDecoded));
    }
  } finally {
    decoder.free();
  }
}

/** Decoding works through the signal this many frames (or MP3 bytes) at a time: bounded memory per step. */
const DECODE_SLICE_FRAMES = 1 << 16;
const MP3_SLICE_BYTES = 64 * 1024;

function monoMix(channels: Float32Array[], length: number): Float32Array {
  if (channels.length === 1 && channels[0]!.length === length) return channels[0]!;
  const mono = new Float32Array(length);
  for (const channel of channels) for (let i = 0; i < length; i++) mono[i] = (mono[i] ?? 0) + (channel[i] ?? 0) / channels.length;
  return mono;
}

// MPEG audio frame headers (ISO 11172-3 / 13818-3): enough to count frames and their duration.
const MPEG_BITRATES_KBPS: Record<string, number[]> = {
  'v1l1': [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  'v1l2': [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  'v1l3': [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  'v2l1': [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  'v2l2': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  'v2l3': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const MPEG_SAMPLE_RATES_HZ: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };
/** Bytes searched for the next frame header after garbage, before the stream is declared over. */
const MPEG_RESYNC_WINDOW_BYTES = 4096;

interface MpegFrame {
  length: number;
  samples: number;
  sampleRate: number;
  channels: number;
}

function mpegFrameAt(buf: Uint8Array, at: number): MpegFrame | null {
  if (at + 4 > buf.length) return null;
  const b1 = buf[at + 1]!;
  const b2 = buf[at + 2]!;
  const b3 = buf[at + 3]!;
  if (buf[at] !== 0xff || (b1 & 0xe0) !== 0xe0) return null;
  const version = (b1 >> 3) & 3; // 3 = MPEG-1, 2 = MPEG-2, 0 = MPEG-2.5, 1 reserved
  const layer = 4 - ((b1 >> 1) & 3); // 1..3; 4 = reserved
  const bitrateIndex = b2 >> 4;
  const rateIndex = (b2 >> 2) & 3;
  if (version === 1 || layer === 4 || bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return null;
  const kbps = MPEG_BITRATES_KBPS[`${version === 3 ? 'v1' : 'v2'}l${layer}`]![bitrateIndex]!;
  const sampleRate = MPEG_SAMPLE_RATES_HZ[version]![rateIndex]!;
  const padding = (b2 >> 1) & 1;
  const samples = layer === 1 ? 384 : layer === 3 && version !== 3 ? 576 : 1152;
  const length = layer === 1 ? (Math.floor((12_000 * kbps) / sampleRate) + padding) * 4 : Math.floor((samples / 8) * ((kbps * 1000) / sampleRate)) + padding;
  return { length, samples, sampleRate, channels: (b3 >> 6) === 3 ? 1 : 2 };
}

/** Counts MPEG frames (after an ID3v2 tag) until the end or past `maxSeconds`. */
function walkMpegFrames(buf: Uint8Array, maxSeconds: number): { sampleRate: number; channels: number; durationSeconds: number } {
  let at = 0;
  if (buf.length >= 10 && buf[0] === 0x49 && buf[1] === 0x44 && buf[2] === 0x33) {
    // ID3v2: 10-byte header, size in four 7-bit bytes (+10 for a footer).
    const size = ((buf[6]! & 0x7f) << 21) | ((buf[7]! & 0x7f) << 14) | ((buf[8]! & 0x7f) << 7) | (buf[9]! & 0x7f);
    at = 10 + size + ((buf[5]! & 0x10) !== 0 ? 10 : 0);
  }
  let seconds = 0;
  let first: MpegFrame | null = null;
  let frames = 0;
  while (at < buf.length && seconds <= maxSeconds) {
    const frame = mpegFrameAt(buf, at);
    if (frame && (first === null || frame.sampleRate === first.sampleRate)) {
      first ??= frame;
      seconds += frame.samples / frame.sampleRate;
      frames++;
      at += frame.length;
      continue;
    }
    // Garbage between frames (tags, damage): look for the next header nearby, else stop.
    const limit = Math.min(buf.length, at + MPEG_RESYNC_WINDOW_BYTES);
    let next = at + 1;
    while (next < limit && !mpegFrameAt(buf, next)) next++;
    if (next >= limit) break;
    at = next;
  }
  if (!first || frames === 0) throw new AudioFileError('no MPEG audio frames were found in the file');
  return { sampleRate: first.sampleRate, channels: first.channels, durationSeconds: seconds };
}

const WAVE_FORMAT_PCM = 1;
const WAVE_FORMAT_IEEE_FLOAT = 3;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;

interface WavFormat {
  format: number;
  channels: number;
  sampleRate: number;
  bits: number;
  blockAlign: number;
}

/** The fmt chunk (checked) and where the sample data is, within the bytes really present. */
function parseWavChunks(buf: Uint8Array): { fmt: WavFormat; data: { start: number; length: number } } {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let offset = 12;
  let fmt: WavFormat | null = null;
  let data: { start: number; length: number } | null = null;
  while (offset + 8 <= buf.length) {
    const id = Buffer.from(buf.subarray(offset, offset + 4)).toString('latin1');
    const size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + size > buf.length) throw new AudioFileError('WAV fmt chunk is truncated');
      let format = view.getUint16(body, true);
      if (format === WAVE_FORMAT_EXTENSIBLE && size >= 40) format = view.getUint16(body + 24, true);
      fmt = {
        format,
        channels: view.getUint16(body + 2, true),
        sampleRate: view.getUint32(body + 4, true),
        blockAlign: view.getUint16(body + 12, true),
        bits: view.getUint16(body + 14, true),
      };
    } else if (id === 'data') {
      // Streaming writers leave the size as 0 or 0xFFFFFFFF: the data then runs to the end of
      // file. A size larger than the file is a lie: only the bytes present count.
      const length = size === 0 || size === 0xffffffff ? buf.length - body : Math.min(size, buf.length - body);
      data = { start: body, length };
      break;
    }
    offset = body + size + (size % 2);
  }
  if (!fmt) throw new AudioFileError('WAV file has no fmt chunk');
  if (!data) throw new AudioFileError('WAV file has no data chunk');
  const { format, channels, sampleRate, bits, blockAlign } = fmt;
  const supported =
    (format === WAVE_FORMAT_PCM && [8, 16, 24, 32].includes(bits)) || (format === WAVE_FORMAT_IEEE_FLOAT && [32, 64].includes(bits));
  if (!supported) throw new AudioFileError(`unsupported WAV encoding (format ${format}, ${bits} bits); use PCM or float`);
  if (channels < 1 || channels > 8) throw new AudioFileError(`unsupported channel count ${channels}`);
  if (sampleRate < 8000 || sampleRate > 192000) throw new AudioFileError(`unsupported sample rate ${sampleRate} Hz`);
  if (blockAlign !== (bits / 8) * channels) throw new AudioFileError('WAV block alignment does not match its format');
  return { fmt, data };
}

/** Frames [from, to) of the data chunk as a mono mix, -1..1. */
function readWavFrames(view: DataView, dataStart: number, fmt: WavFormat, from: number, to: number): Float32Array {
  const bytesPerSample = fmt.bits / 8;
  const out = new Float32Array(to - from);
  for (let i = from; i < to; i++) {
    let sum = 0;
    for (let c = 0; c < fmt.channels; c++) sum += readSample(view, dataStart + i * fmt.blockAlign + c * bytesPerSample, fmt.format, fmt.bits);
    out[i - from] = sum / fmt.channels;
  }
  return out;
}

export function decodeWav(buf: Uint8Array): DecodedAudio {
  const { fmt, data } = parseWavChunks(buf);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const frames = Math.floor(data.length / fmt.blockAlign);
  const samples = readWavFrames(view, data.start, fmt, 0, frames);
  requireFinite(samples);
  return { format: 'wav', sampleRate: fmt.sampleRate, channels: fmt.channels, bitsPerSample: fmt.bits, durationSeconds: frames / fmt.sampleRate, samples };
}

function requireFinite(samples: Float32Array): void {
  for (const s of samples) if (!Number.isFinite(s)) throw new AudioFileError('the audio has samples that are not numbers (NaN or infinite)');
}

function readSample(view: DataView, at: number, format: number, bits: number): number {
  if (format === WAVE_FORMAT_IEEE_FLOAT) return bits === 32 ? view.getFloat32(at, true) : view.getFloat64(at, true);
  switch (bits) {
    case 8:
      return (view.getUint8(at) - 128) / 128;
    case 16:
      return view.getInt16(at, true) / 32768;
    case 24: {
      const v = view.getUint8(at) | (view.getUint8(at + 1) << 8) | (view.getInt8(at + 2) << 16);
      return v / 8388608;
    }
    default:
      return view.getInt32(at, true) / 2147483648;
  }
}

async function decodeMp3(buf: Uint8Array): Promise<DecodedAudio> {
  const decoder = new MPEGDecoder();
  await decoder.ready;
  try {
    const out = decoder.decode(buf);
    if (out.samplesDecoded === 0 || out.channelData.length === 0) {
      throw new AudioFileError('no MP3 audio frames could be decoded');
    }
    const samples = monoMix(out.channelData, out.samplesDecoded);
    requireFinite(samples);
    return {
      format: 'mp3',
      sampleRate: out.sampleRate,
      channels: out.channelData.length,
      bitsPerSample: 0,
      durationSeconds: out.samplesDecoded / out.sampleRate,
      samples,
    };
  } finally {
    decoder.free();
  }
}

/** A RIFF/WAVE file of 16-bit PCM, mono. */
export function encodeWav16(samples: Float32Array | Int16Array, sampleRate: number): Buffer {
  const pcm = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i] ?? 0;
    pcm.writeInt16LE(samples instanceof Int16Array ? s : Math.max(-32768, Math.min(32767, Math.round(s * 32767))), i * 2);
  }
  return Buffer.concat([wav16Header(pcm.length, sampleRate), pcm]);
}

/** The 44-byte header of a RIFF/WAVE file of `dataBytes` of 16-bit PCM, mono (for a file written as it goes). */
export function wav16Header(dataBytes: number, sampleRate: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(WAVE_FORMAT_PCM, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(dataBytes, 40);
  return header;
}
