/**
 * Converts the fetched CTranslate2 Whisper models into whisper.cpp's ggml files, which the
 * whisper-cpp recogniser loads: every derived asr model of models/manifest.json is one conversion,
 * made from the CT2 model.bin and tokenizer.json its `derivedFrom` names (today Whisper base,
 * models/weights/asr/ggml-base.bin, and Whisper tiny.en, models/weights/asr/ggml-tiny.en.bin).
 * WHISPER_MODELS names the converted files by the names ASR_WHISPER_MODEL takes.
 *
 * The conversion is byte shuffling, done here so set-up needs no Python: CT2's fused attention
 * projections (q|k|v for self-attention, k|v for cross-attention) are split into the separate
 * tensors whisper.cpp names after OpenAI's PyTorch checkpoint; tensors of two or more dimensions
 * stay float16 (float32 sources are rounded to it), vectors, convolution biases and positional
 * embeddings become float32, as whisper.cpp's own converter writes them. The 80 mel filters
 * (librosa's Slaney mel filter bank for 16 kHz, n_fft 400) are computed, and the vocabulary's
 * byte-level BPE strings are turned back into raw bytes (GPT-2's 50257 ordinary tokens;
 * whisper.cpp adds the special ones, and reads the model's vocabulary size, 51865 or more for a
 * multilingual model, 51864 for an English-only one, to know which kind it has). Nothing depends
 * on time or iteration order, so the output is byte-identical on every run; set-up checks it
 * against the sha256 models/manifest.json records for the derived model and writes its
 * verification record, so later runs and whisperModelPath() only stat files.
 *
 * The command line is src/cli/convert-whisper.ts (run by setup.sh after the model fetch).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isFetched, loadManifest, modelPath, ModelError, weightsDir, type DerivedModel, type FetchedModel, type Manifest } from './manifest.js';
import { isVerified, recordVerified } from './verified.js';
import { melFilters, WHISPER_N_FFT } from '../audio/whisper-mel.js';

/**
 * The Whisper models the whisper-cpp recogniser can load, by the name ASR_WHISPER_MODEL takes:
 * each is the manifest entry of its converted ggml file (the converter makes every derived asr
 * model of the manifest; this table only names them for the configuration).
 */
export const WHISPER_MODELS = {
  base: 'asr-whisper-base-ggml',
  'tiny.en': 'asr-whisper-tiny-en-ggml',
} as const;
export type WhisperModelName = keyof typeof WHISPER_MODELS;
export const WHISPER_MODEL_NAMES = Object.keys(WHISPER_MODELS) as WhisperModelName[];
/**
 * The model loaded when ASR_WHISPER_MODEL is unset (and whisperModelPath()'s default): tiny.en,
 * chosen on the benchmarks of 2026-12-02: a pause's transcript in 194 ms against base's 413 ms
 * (median over 681 pauses), so with a live microphone's noise the embedded models answered a voice
 * turn in 915 ms p50 against 1,665 ms (npm run bench -- realtime, same sitting); its word error rate
 * was 18.1 % against 15.1 %, and at the judge's default confidence it cut off 5.7 % of the
 * turn-end benchmark's utterances against 2.6 % (docs/benchmarks.md). Other languages go to base
 * (providers/asr/index.ts).
 */
export const DEFAULT_WHISPER_MODEL: WhisperModelName = 'tiny.en';

/** whisper.cpp's file magic, "ggml" as a little-endian u32. */
const GGML_MAGIC = 0x67676d6c;
/** ggml tensor types. */
const GGML_TYPE_F32 = 0;
const GGML_TYPE_F16 = 1;
/** GPT-2 vocabulary size: the ordinary tokens; whisper.cpp adds the special tokens itself. */
const BASE_VOCAB_TOKENS = 50257;
export class WhisperConvertError extends ModelError {
  override name = 'WhisperConvertError';
}

// ---------------------------------------------------------------------------------------------
// CTranslate2 model.bin reader

/** CT2 variable dtypes (ctranslate2/types.h). */
const CT2_DTYPE = { float32: 0, int8: 1, int16: 2, int32: 3, float16: 4 } as const;

export interface Ct2Variable {
  name: string;
  shape: number[];
  dtype: number;
  data: Buffer;
}

/** Parses a CTranslate2 model.bin (format version 5 or 6): variables by name; aliases resolved. */
export function readCt2Model(bytes: Buffer): Map<string, Ct2Variable> {
  let at = 0;
  const need = (n: number): void => {
    if (at + n > bytes.length) throw new WhisperConvertError(`CT2 model truncated at byte ${at}`);
  };
  const u8 = (): number => (need(1), bytes.readUInt8(at++));
  const u16 = (): number => (need(2), (at += 2), bytes.readUInt16LE(at - 2));
  const u32 = (): number => (need(4), (at += 4), bytes.readUInt32LE(at - 4));
  const str = (): string => {
    const n = u16();
    need(n);
    const s = bytes.toString('utf8', at, at + n - 1); // stored with its NUL
    at += n;
    return s;
  };
  const version = u32();
  if (version < 5 || version > 6) throw new WhisperConvertError(`unsupported CT2 model format version ${version} (expected 5 or 6)`);
  const spec = str();
  if (spec !== 'WhisperSpec') throw new WhisperConvertError(`not a Whisper CT2 model (spec '${spec}')`);
  u32(); // spec revision
  const vars = new Map<string, Ct2Variable>();
  const count = u32();
  for (let i = 0; i < count; i++) {
    const name = str();
    const rank = u8();
    const shape: number[] = [];
    for (let d = 0; d < rank; d++) shape.push(u32());
    const dtype = u8();
    const nbytes = u32();
    need(nbytes);
    vars.set(name, { name, shape, dtype, data: bytes.subarray(at, at + nbytes) });
    at += nbytes;
  }
  if (at < bytes.length) {
    const aliases = u32();
    for (let i = 0; i < aliases; i++) {
      const alias = str();
      const target = vars.get(str());
      if (target) vars.set(alias, { ...target, name: alias });
    }
  }
  return vars;
}

// ---------------------------------------------------------------------------------------------
// float16 <-> float32

const f32 = new Float32Array(1);
const u32View = new Uint32Array(f32.buffer);

export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** float32 -> float16 bits, round to nearest even (as numpy's astype(float16)). */
export function floatToHalf(value: number): number {
  f32[0] = value;
  const x = u32View[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    return sign | (half + (rem > mid || (rem === mid && half & 1) ? 1 : 0));
  }
  const half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  return sign | (half + (rem > 0x1000 || (rem === 0x1000 && half & 1) ? 1 : 0));
}

/** A tensor's values as little-endian float32 bytes. */
function asF32(v: Ct2Variable, data = v.data): Buffer {
  if (v.dtype === CT2_DTYPE.float32) return Buffer.from(data);
  if (v.dtype !== CT2_DTYPE.float16) throw new WhisperConvertError(`${v.name}: unsupported dtype ${v.dtype}`);
  const out = Buffer.alloc(data.length * 2);
  for (let i = 0; i < data.length / 2; i++) out.writeFloatLE(halfToFloat(data.readUInt16LE(i * 2)), i * 4);
  return out;
}

/** A tensor's values as little-endian float16 bytes. */
function asF16(v: Ct2Variable, data = v.data): Buffer {
  if (v.dtype === CT2_DTYPE.float16) return Buffer.from(data);
  if (v.dtype !== CT2_DTYPE.float32) throw new WhisperConvertError(`${v.name}: unsupported dtype ${v.dtype}`);
  const out = Buffer.alloc(data.length / 2);
  for (let i = 0; i < data.length / 4; i++) out.writeUInt16LE(floatToHalf(data.readFloatLE(i * 4)), i * 2);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Vocabulary

/** GPT-2's byte <-> printable character table, inverted: character -> byte. */
function unicodeToByte(): Map<string, number> {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return new Map(bs.map((b, i) => [String.fromCharCode(cs[i] ?? 0), b]));
}

/** The first 50257 tokens of a Hugging Face tokenizer.json, each as its raw bytes, by id. */
export function vocabularyBytes(tokenizerJson: string): Buffer[] {
  let vocab: Record<string, number>;
  try {
    vocab = (JSON.parse(tokenizerJson) as { model: { vocab: Record<string, number> } }).model.vocab;
  } catch (err) {
    throw new WhisperConvertError(`tokenizer.json has no model.vocab: ${String(err)}`);
  }
  const map = unicodeToByte();
  const tokens: Array<Buffer | undefined> = new Array(BASE_VOCAB_TOKENS);
  for (const [token, id] of Object.entries(vocab)) {
    if (id >= BASE_VOCAB_TOKENS) continue;
    const bytes = [...token].map((c) => {
      const b = map.get(c);
      if (b === undefined) throw new WhisperConvertError(`token ${id} has a character outside the byte table`);
      return b;
    });
    tokens[id] = Buffer.from(bytes);
  }
  const missing = tokens.findIndex((t) => t === undefined);
  if (missing >= 0 || tokens.length !== BASE_VOCAB_TOKENS) throw new WhisperConvertError(`tokenizer.json lacks token id ${missing}`);
  return tokens as Buffer[];
}

// ---------------------------------------------------------------------------------------------
// Conversion

interface OutTensor {
  name: string;
  /** Dimensions in numpy order (outermost first). */
  shape: number[];
  type: typeof GGML_TYPE_F32 | typeof GGML_TYPE_F16;
  data: Buffer;
}

/** Bytes per element of a CT2 dtype that a tensor may have. */
function elementBytes(v: Ct2Variable): number {
  if (v.dtype === CT2_DTYPE.float16) return 2;
  if (v.dtype === CT2_DTYPE.float32) return 4;
  throw new WhisperConvertError(`${v.name}: unsupported dtype ${v.dtype} (float16 or float32 expected)`);
}

function scalarInt(vars: Map<string, Ct2Variable>, name: string): number {
  const v = vars.get(name);
  if (!v || v.shape.length !== 0) throw new WhisperConvertError(`CT2 model lacks the scalar ${name}`);
  if (v.dtype === CT2_DTYPE.int16) return v.data.readInt16LE(0);
  if (v.dtype === CT2_DTYPE.int32) return v.data.readInt32LE(0);
  if (v.dtype === CT2_DTYPE.int8) return v.data.readInt8(0);
  throw new WhisperConvertError(`${name}: not an integer`);
}

function countLayers(vars: Map<string, Ct2Variable>, prefix: string): number {
  let n = 0;
  while (vars.has(`${prefix}/layer_${n}/ffn/linear_0/weight`)) n++;
  return n;
}

/** Converts CT2 model.bin bytes + tokenizer.json text into ggml file bytes. */
export function convertCt2ToGgml(modelBin: Buffer, tokenizerJson: string): Buffer {
  const vars = readCt2Model(modelBin);
  const get = (name: string): Ct2Variable => {
    const v = vars.get(name);
    if (!v) throw new WhisperConvertError(`CT2 model lacks ${name}`);
    return v;
  };
  const out: OutTensor[] = [];
  /** Rows [from, to) of a tensor (first dimension). */
  const rows = (v: Ct2Variable, from: number, to: number): { v: Ct2Variable; data: Buffer; shape: number[] } => {
    const rowBytes = (v.data.length / (v.shape[0] ?? 1)) | 0;
    return { v, data: v.data.subarray(from * rowBytes, to * rowBytes), shape: [to - from, ...v.shape.slice(1)] };
  };
  const add = (name: string, src: { v: Ct2Variable; data: Buffer; shape: number[] }, forceF32 = false): void => {
    elementBytes(src.v);
    const f16 = src.shape.length >= 2 && !forceF32;
    out.push({ name, shape: src.shape, type: f16 ? GGML_TYPE_F16 : GGML_TYPE_F32, data: f16 ? asF16(src.v, src.data) : asF32(src.v, src.data) });
  };
  const whole = (v: Ct2Variable) => ({ v, data: v.data, shape: v.shape });
  const linear = (dst: string, src: string, bias = true): void => {
    add(`${dst}.weight`, whole(get(`${src}/weight`)));
    if (bias) add(`${dst}.bias`, whole(get(`${src}/bias`)));
  };
  const norm = (dst: string, src: string): void => {
    add(`${dst}.weight`, whole(get(`${src}/gamma`)));
    add(`${dst}.bias`, whole(get(`${src}/beta`)));
  };
  const selfAttention = (dst: string, src: string, d: number): void => {
    const w = get(`${src}/linear_0/weight`);
    const b = get(`${src}/linear_0/bias`);
    ['query', 'key', 'value'].forEach((n, k) => {
      add(`${dst}.${n}.weight`, rows(w, k * d, (k + 1) * d));
      if (n !== 'key') add(`${dst}.${n}.bias`, rows(b, k * d, (k + 1) * d)); // Whisper's key has no bias
    });
    linear(`${dst}.out`, `${src}/linear_1`);
  };
  const crossAttention = (dst: string, src: string, d: number): void => {
    linear(`${dst}.query`, `${src}/linear_0`);
    const w = get(`${src}/linear_1/weight`);
    const b = get(`${src}/linear_1/bias`);
    add(`${dst}.key.weight`, rows(w, 0, d));
    add(`${dst}.value.weight`, rows(w, d, 2 * d));
    add(`${dst}.value.bias`, rows(b, d, 2 * d));
    linear(`${dst}.out`, `${src}/linear_2`);
  };

  const encPos = get('encoder/position_encodings/encodings');
  const decPos = get('decoder/position_encodings/encodings');
  const embed = get('decoder/embeddings/weight');
  const conv1 = get('encoder/conv1/weight');
  const [nAudioCtx = 0, nAudioState = 0] = encPos.shape;
  const [nTextCtx = 0, nTextState = 0] = decPos.shape;
  const nVocab = embed.shape[0] ?? 0;
  const nMels = conv1.shape[1] ?? 0;
  const nAudioLayer = countLayers(vars, 'encoder');
  const nTextLayer = countLayers(vars, 'decoder');
  const nAudioHead = scalarInt(vars, 'encoder/num_heads');
  const nTextHead = scalarInt(vars, 'decoder/num_heads');

  add('encoder.positional_embedding', whole(encPos), true);
  linear('encoder.conv1', 'encoder/conv1');
  linear('encoder.conv2', 'encoder/conv2');
  for (let l = 0; l < nAudioLayer; l++) {
    const [s, d] = [`encoder/layer_${l}`, `encoder.blocks.${l}`];
    selfAttention(`${d}.attn`, `${s}/self_attention`, nAudioState);
    norm(`${d}.attn_ln`, `${s}/self_attention/layer_norm`);
    linear(`${d}.mlp.0`, `${s}/ffn/linear_0`);
    linear(`${d}.mlp.2`, `${s}/ffn/linear_1`);
    norm(`${d}.mlp_ln`, `${s}/ffn/layer_norm`);
  }
  norm('encoder.ln_post', 'encoder/layer_norm');
  add('decoder.positional_embedding', whole(decPos), true);
  add('decoder.token_embedding.weight', whole(embed));
  for (let l = 0; l < nTextLayer; l++) {
    const [s, d] = [`decoder/layer_${l}`, `decoder.blocks.${l}`];
    selfAttention(`${d}.attn`, `${s}/self_attention`, nTextState);
    norm(`${d}.attn_ln`, `${s}/self_attention/layer_norm`);
    crossAttention(`${d}.cross_attn`, `${s}/attention`, nTextState);
    norm(`${d}.cross_attn_ln`, `${s}/attention/layer_norm`);
    linear(`${d}.mlp.0`, `${s}/ffn/linear_0`);
    linear(`${d}.mlp.2`, `${s}/ffn/linear_1`);
    norm(`${d}.mlp_ln`, `${s}/ffn/layer_norm`);
  }
  norm('decoder.ln', 'decoder/layer_norm');
  // whisper.cpp wants the convolution biases as [channels, 1] float32 columns.
  for (const t of out) if (t.name === 'encoder.conv1.bias' || t.name === 'encoder.conv2.bias') t.shape = [t.shape[0] ?? 0, 1];

  const chunks: Buffer[] = [];
  const ints = (...values: number[]): void => {
    const b = Buffer.alloc(4 * values.length);
    values.forEach((v, i) => b.writeInt32LE(v, 4 * i));
    chunks.push(b);
  };
  ints(GGML_MAGIC, nVocab, nAudioCtx, nAudioState, nAudioHead, nAudioLayer, nTextCtx, nTextState, nTextHead, nTextLayer, nMels, GGML_TYPE_F16);
  const filters = melFilters(nMels);
  ints(nMels, WHISPER_N_FFT / 2 + 1);
  chunks.push(Buffer.from(filters.buffer, filters.byteOffset, filters.byteLength));
  const vocabulary = vocabularyBytes(tokenizerJson);
  ints(vocabulary.length);
  for (const token of vocabulary) {
    ints(token.length);
    chunks.push(token);
  }
  for (const t of out) {
    const name = Buffer.from(t.name, 'utf8');
    ints(t.shape.length, name.length, t.type, ...[...t.shape].reverse());
    chunks.push(name, t.data);
  }
  return Buffer.concat(chunks);
}

// ---------------------------------------------------------------------------------------------
// The converted files in the models folder

/**
 * The converted Whisper model `model` when it is present and verified (by its verification
 * record: two stats, no hashing), else null.
 */
export function whisperModelPath(modelsDir: string, model: WhisperModelName = DEFAULT_WHISPER_MODEL): string | null {
  return modelPath(modelsDir, WHISPER_MODELS[model]);
}

/** One conversion the manifest asks for: a derived asr model and the CT2 files it is made from. */
export interface WhisperConversion {
  /** The ggml file. */
  target: DerivedModel;
  /** The CTranslate2 model.bin. */
  model: FetchedModel;
  /** Its Hugging Face tokenizer.json. */
  tokenizer: FetchedModel;
}

/**
 * Every Whisper conversion of the manifest, in its order: each derived model of kind asr, with
 * the fetched model.bin and tokenizer.json its `derivedFrom` names. Throws WhisperConvertError
 * for a derived asr model that does not name both.
 */
export function whisperConversions(manifest: Manifest): WhisperConversion[] {
  const fetched = (name: string): FetchedModel | undefined => {
    const entry = manifest.models.find((m) => m.name === name);
    return entry && isFetched(entry) ? entry : undefined;
  };
  return manifest.models
    .filter((m): m is DerivedModel => m.kind === 'asr' && !isFetched(m))
    .map((target) => {
      const sources = target.derivedFrom.map(fetched);
      const model = sources.find((m) => m && path.basename(m.file) === 'model.bin');
      const tokenizer = sources.find((m) => m && path.basename(m.file) === 'tokenizer.json');
      if (!model || !tokenizer) {
        throw new WhisperConvertError(`models/manifest.json: ${target.name} must be derived from a fetched CT2 model.bin and its tokenizer.json`);
      }
      return { target, model, tokenizer };
    });
}

export type ConvertState = 'present' | 'converted' | 'missing';

/**
 * Makes the manifest's derived Whisper model `target` (e.g. asr-whisper-base-ggml) from its
 * fetched CT2 files unless it is already there and verified; 'missing' when those files are not
 * fetched. Throws WhisperConvertError when the result does not have the manifest's hash
 * (`expected` overrides it, for tests of the converter on a synthetic model).
 */
export function convertWhisperModel(modelsDir: string, target: string, expected?: { sha256: string; bytes: number }): { state: ConvertState; file: string } {
  const conversion = whisperConversions(loadManifest(modelsDir)).find((c) => c.target.name === target);
  if (!conversion) throw new WhisperConvertError(`models/manifest.json has no Whisper model '${target}' to convert`);
  const want = expected ?? { sha256: conversion.target.sha256, bytes: conversion.target.bytes };
  const weights = weightsDir(modelsDir);
  const file = path.join(weights, conversion.target.file);
  if (isVerified(file, want.sha256, want.bytes)) return { state: 'present', file };
  const modelFile = path.join(weights, conversion.model.file);
  const tokenizerFile = path.join(weights, conversion.tokenizer.file);
  if (!fs.existsSync(modelFile) || !fs.existsSync(tokenizerFile)) return { state: 'missing', file };
  const bytes = convertCt2ToGgml(fs.readFileSync(modelFile), fs.readFileSync(tokenizerFile, 'utf8'));
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== want.sha256 || bytes.length !== want.bytes) {
    throw new WhisperConvertError(
      `converted ${target} has sha256 ${sha256} (${bytes.length} bytes), expected ${want.sha256} (${want.bytes} bytes); ` +
        'the CT2 files or the converter changed',
    );
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file); // a killed run never leaves a half-written model
  recordVerified(file, sha256);
  return { state: 'converted', file };
}
