/**
 * Reads voice samples: WAV (PCM 8/16/24/32-bit, IEEE float 32/64, WAVE_FORMAT_EXTENSIBLE) parsed
 * here, MP3 decoded with mpg123 (WebAssembly, from npm). Returns the format facts and the decoded
 * mono samples, so uploads are checked for real decodability and later analysis (pitch, rate) has
 * the signal. Throws AudioFileError with a message fit for an end user.
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

export async function decodeAudio(buf: Uint8Array): Promise<DecodedAudio> {
  const kind = sniffAudio(buf);
  if (kind === 'wav') return decodeWav(buf);
  if (kind === 'mp3') return decodeMp3(buf);
  throw new AudioFileError('the file is neither a WAV (RIFF/WAVE) nor an MP3 stream');
}

const WAVE_FORMAT_PCM = 1;
const WAVE_FORMAT_IEEE_FLOAT = 3;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;

export function decodeWav(buf: Uint8Array): DecodedAudio {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let offset = 12;
  let fmt: { format: number; channels: number; sampleRate: number; bits: number; blockAlign: number } | null = null;
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
      // Streaming writers leave the size as 0 or 0xFFFFFFFF: the data then runs to the end of file.
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
  const bytesPerSample = bits / 8;
  if (blockAlign !== bytesPerSample * channels) throw new AudioFileError('WAV block alignment does not match its format');
  const frames = Math.floor(data.length / blockAlign);
  const samples = new Float32Array(frames);
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) {
      const at = data.start + i * blockAlign + c * bytesPerSample;
      sum += readSample(view, at, format, bits);
    }
    samples[i] = sum / channels;
  }
  return { format: 'wav', sampleRate, channels, bitsPerSample: bits, durationSeconds: frames / sampleRate, samples };
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
    const channels = out.channelData.length;
    const samples = new Float32Array(out.samplesDecoded);
    for (const channel of out.channelData) {
      for (let i = 0; i < samples.length; i++) samples[i] = (samples[i] ?? 0) + (channel[i] ?? 0) / channels;
    }
    return {
      format: 'mp3',
      sampleRate: out.sampleRate,
      channels,
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
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(WAVE_FORMAT_PCM, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([header, pcm]);
}
