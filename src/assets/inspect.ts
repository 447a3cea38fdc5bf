/**
 * The checks an uploaded voice sample or driving motion must pass, as plain functions of the file's
 * bytes. They decode the file, so they run on a worker thread (inspect-worker.ts, through
 * AssetService), never on the event loop; each returns the metadata recorded with the asset or
 * throws a 400 AppError (param `file`) whose message says what is wrong.
 *
 * Order, cheapest first: the header (format, duration from the WAV chunks or the MPEG frame
 * headers) is checked before any sample is decoded, so a file that lies about its size or lasts
 * hours is refused without decoding it.
 */
import { AppError } from '../core/errors.js';
import { AudioFileError, inspectAudio, readAudioHeader } from './audio-file.js';
import { MotionTemplateError, parseMotionTemplate, type MotionTemplate } from './motion-template.js';

/** A voice sample long enough to estimate pitch and rate, short enough to analyse quickly. */
export const VOICE_MIN_S = 1;
export const VOICE_MAX_S = 600;
/** Below this RMS (-60 dBFS) a sample is silence: there is no voice to analyse. */
const VOICE_SILENCE_RMS = 0.001;

export async function inspectVoice(data: Uint8Array): Promise<Record<string, unknown>> {
  return asInvalidFile(async () => {
    checkDuration(readAudioHeader(data, VOICE_MAX_S).durationSeconds);
    const audio = await inspectAudio(data);
    checkDuration(audio.durationSeconds);
    if (audio.rms < VOICE_SILENCE_RMS) {
      throw new AppError('silent_audio', 'The voice sample is silent; upload a recording of the voice speaking.', { status: 400, param: 'file' });
    }
    return {
      format: audio.format,
      sample_rate: audio.sampleRate,
      channels: audio.channels,
      bits_per_sample: audio.bitsPerSample,
      duration_seconds: round3(audio.durationSeconds),
      rms_dbfs: round3(20 * Math.log10(audio.rms)),
    };
  });
}

export async function inspectMotion(data: Uint8Array): Promise<Record<string, unknown>> {
  const motion = await readMotion(data);
  return { n_frames: motion.nFrames, output_fps: motion.outputFps, duration_seconds: round3(motion.nFrames / motion.outputFps) };
}

/** The motion template of a driving file (for the renderer), or a 400 invalid_file. */
export function readMotion(data: Uint8Array): Promise<MotionTemplate> {
  return asInvalidFile(async () => parseMotionTemplate(data));
}

function checkDuration(seconds: number): void {
  if (seconds < VOICE_MIN_S || seconds > VOICE_MAX_S) {
    const shown = seconds > VOICE_MAX_S ? `more than ${VOICE_MAX_S} s` : `${round3(seconds)} s`;
    throw new AppError('invalid_audio_duration', `Voice samples must last ${VOICE_MIN_S} to ${VOICE_MAX_S} seconds; this one lasts ${shown}.`, {
      status: 400,
      param: 'file',
    });
  }
}

/** Decoder errors become 400 invalid_file with the decoder's words; AppErrors pass as they are. */
async function asInvalidFile<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AppError) throw err;
    const detail = err instanceof AudioFileError || err instanceof MotionTemplateError ? err.message : `The file could not be decoded: ${(err as Error).message}`;
    throw new AppError('invalid_file', detail, { status: 400, param: 'file', cause: err });
  }
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;
