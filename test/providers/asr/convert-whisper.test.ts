/**
 * The CT2 → ggml Whisper converter (src/models/whisper-ggml.ts) on a tiny synthetic CT2 model:
 * the ggml file is parsed back and every tensor checked against the CT2 data it came from (split
 * attention projections, float16 kept, float32 sources rounded to float16, vectors widened to
 * float32), plus the header, mel filters, vocabulary bytes and determinism; the manifest's
 * conversions (Whisper base and tiny.en) and the names ASR_WHISPER_MODEL gives them. The real
 * models, when setup has fetched their CT2 files, are converted again and must have the sha256
 * the manifest records, with the vocabulary size that tells whisper.cpp multilingual (base) from
 * English-only (tiny.en).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  convertCt2ToGgml,
  convertWhisperModel,
  DEFAULT_WHISPER_MODEL,
  floatToHalf,
  halfToFloat,
  readCt2Model,
  vocabularyBytes,
  whisperConversions,
  WHISPER_MODEL_NAMES,
  WHISPER_MODELS,
  whisperModelPath,
  WhisperConvertError,
} from '../../../src/models/whisper-ggml.js';
import { REPO_MODELS_DIR, loadManifest, manifestPath, modelPath, weightsDir, type Manifest } from '../../../src/models/manifest.js';
import { melFilters } from '../../../src/audio/whisper-mel.js';
import { needs } from '../../helpers/skip.js';

/** Where the converted models live under weights/ (the manifest's asr-whisper-base-ggml and asr-whisper-tiny-en-ggml). */
const WHISPER_GGML_FILES = { base: 'asr/ggml-base.bin', 'tiny.en': 'asr/ggml-tiny.en.bin' } as const;
/** whisper.cpp's test: a vocabulary of 51865 or more is multilingual, 51864 is English-only. */
const N_VOCAB_OF = { base: 51865, 'tiny.en': 51864 } as const;

const F32 = 0;
const F16 = 4;
const I16 = 2;

/** Tiny dimensions: state 8, 2 heads, 1 encoder + 1 decoder layer, 4 mels, 6 audio / 5 text positions. */
const D = 8;
const N_VOCAB = 50260;
const N_MELS = 4;

interface Var {
  name: string;
  shape: number[];
  dtype: number;
  values: number[];
}

function vector(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => Math.round((Math.sin(seed * 7.1 + i * 1.3) * 4) * 64) / 64);
}

function tinyVars(weightDtype = F16): Var[] {
  const vars: Var[] = [];
  let seed = 1;
  const t = (name: string, shape: number[], dtype = weightDtype): void => {
    vars.push({ name, shape, dtype, values: vector(shape.reduce((a, b) => a * b, 1), seed++) });
  };
  const lin = (p: string, out: number, inp: number): void => {
    t(`${p}/weight`, [out, inp]);
    t(`${p}/bias`, [out]);
  };
  const ln = (p: string): void => {
    t(`${p}/gamma`, [D]);
    t(`${p}/beta`, [D]);
  };
  vars.push({ name: 'encoder/num_heads', shape: [], dtype: I16, values: [2] });
  vars.push({ name: 'decoder/num_heads', shape: [], dtype: I16, values: [2] });
  t('encoder/conv1/weight', [D, N_MELS, 3]);
  t('encoder/conv1/bias', [D]);
  t('encoder/conv2/weight', [D, D, 3]);
  t('encoder/conv2/bias', [D]);
  t('encoder/position_encodings/encodings', [6, D]);
  lin('encoder/layer_0/self_attention/linear_0', 3 * D, D);
  lin('encoder/layer_0/self_attention/linear_1', D, D);
  ln('encoder/layer_0/self_attention/layer_norm');
  lin('encoder/layer_0/ffn/linear_0', 2 * D, D);
  lin('encoder/layer_0/ffn/linear_1', D, 2 * D);
  ln('encoder/layer_0/ffn/layer_norm');
  ln('encoder/layer_norm');
  t('decoder/embeddings/weight', [N_VOCAB, D]);
  t('decoder/position_encodings/encodings', [5, D]);
  lin('decoder/layer_0/self_attention/linear_0', 3 * D, D);
  lin('decoder/layer_0/self_attention/linear_1', D, D);
  ln('decoder/layer_0/self_attention/layer_norm');
  lin('decoder/layer_0/attention/linear_0', D, D);
  lin('decoder/layer_0/attention/linear_1', 2 * D, D);
  lin('decoder/layer_0/attention/linear_2', D, D);
  ln('decoder/layer_0/attention/layer_norm');
  lin('decoder/layer_0/ffn/linear_0', 2 * D, D);
  lin('decoder/layer_0/ffn/linear_1', D, 2 * D);
  ln('decoder/layer_0/ffn/layer_norm');
  ln('decoder/layer_norm');
  return vars;
}

/** A CT2 model.bin (format 6) holding `vars`, with one alias as CT2 writes for tied embeddings. */
function ct2Bytes(vars: Var[]): Buffer {
  const parts: Buffer[] = [];
  const u32 = (v: number): void => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    parts.push(b);
  };
  const str = (s: string): void => {
    const b = Buffer.from(s + '\0', 'utf8');
    const n = Buffer.alloc(2);
    n.writeUInt16LE(b.length);
    parts.push(n, b);
  };
  u32(6);
  str('WhisperSpec');
  u32(3);
  u32(vars.length);
  for (const v of vars) {
    str(v.name);
    parts.push(Buffer.from([v.shape.length]));
    for (const d of v.shape) u32(d);
    parts.push(Buffer.from([v.dtype]));
    const size = v.dtype === F32 ? 4 : 2;
    const data = Buffer.alloc(v.values.length * size);
    v.values.forEach((x, i) => {
      if (v.dtype === F32) data.writeFloatLE(x, i * 4);
      else if (v.dtype === F16) data.writeUInt16LE(floatToHalf(x), i * 2);
      else data.writeInt16LE(x, i * 2);
    });
    u32(data.length);
    parts.push(data);
  }
  u32(1);
  str('decoder/projection/weight');
  str('decoder/embeddings/weight');
  return Buffer.concat(parts);
}

/** tokenizer.json with ids 0..50256 as `t<id>` (plus one byte-mapped token) and special tokens above. */
function tinyTokenizer(): string {
  const vocab: Record<string, number> = {};
  for (let i = 0; i < 50257; i++) vocab[`t${i}`] = i;
  delete vocab.t0;
  vocab['Ġhi'] = 0; // 'Ġ' is GPT-2's stand-in for the space byte
  vocab['<|endoftext|>'] = 50257;
  return JSON.stringify({ model: { vocab } });
}

interface GgmlTensor {
  dims: number[];
  type: number;
  data: Buffer;
}

function readGgml(b: Buffer): { hparams: number[]; filters: Float32Array; vocab: Buffer[]; tensors: Map<string, GgmlTensor> } {
  let at = 0;
  const i32 = (): number => ((at += 4), b.readInt32LE(at - 4));
  assert.is(i32(), 0x67676d6c, 'magic');
  const hparams = Array.from({ length: 11 }, i32);
  const [nMel, nFft] = [i32(), i32()];
  const filters = new Float32Array(nMel * nFft);
  for (let i = 0; i < filters.length; i++) filters[i] = b.readFloatLE(at + 4 * i);
  at += filters.length * 4;
  const vocab: Buffer[] = [];
  const nVocab = i32();
  for (let i = 0; i < nVocab; i++) {
    const n = i32();
    vocab.push(b.subarray(at, at + n));
    at += n;
  }
  const tensors = new Map<string, GgmlTensor>();
  while (at < b.length) {
    const [nd, nameLen, type] = [i32(), i32(), i32()];
    const dims = Array.from({ length: nd }, i32);
    const name = b.toString('utf8', at, at + nameLen);
    at += nameLen;
    const bytes = dims.reduce((a, c) => a * c, 1) * (type === 0 ? 4 : 2);
    tensors.set(name, { dims, type, data: b.subarray(at, at + bytes) });
    at += bytes;
  }
  return { hparams, filters, vocab, tensors };
}

function values(t: GgmlTensor): number[] {
  const out: number[] = [];
  for (let i = 0; i < t.data.length; i += t.type === 0 ? 4 : 2) out.push(t.type === 0 ? t.data.readFloatLE(i) : halfToFloat(t.data.readUInt16LE(i)));
  return out;
}

const Convert = suite('convert-whisper');

Convert('halfToFloat and floatToHalf round-trip every finite float16 value', () => {
  for (let h = 0; h < 0x10000; h++) {
    const x = halfToFloat(h);
    if (!Number.isFinite(x)) continue;
    const back = floatToHalf(x);
    // +0 and -0 are distinct bit patterns and both round-trip.
    assert.is(back, h, `0x${h.toString(16)} -> ${x} -> 0x${back.toString(16)}`);
  }
  assert.is(floatToHalf(1 + 2 ** -11), floatToHalf(1), 'a tie rounds to even');
  assert.is(floatToHalf(1 + 3 * 2 ** -11), floatToHalf(1 + 2 ** -9), 'a tie rounds to even (up)');
  assert.is(floatToHalf(70000), 0x7c00, 'overflow becomes infinity');
});

Convert('convertCt2ToGgml() writes the header whisper.cpp reads, taken from the model', () => {
  const { hparams } = readGgml(convertCt2ToGgml(ct2Bytes(tinyVars()), tinyTokenizer()));
  // n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state,
  // n_text_head, n_text_layer, n_mels, ftype (1 = float16)
  assert.equal(hparams, [N_VOCAB, 6, D, 2, 1, 5, D, 2, 1, N_MELS, 1]);
});

Convert('convertCt2ToGgml() splits fused attention projections and keeps every value', () => {
  const vars = tinyVars();
  const byName = new Map(vars.map((v) => [v.name, v]));
  const { tensors } = readGgml(convertCt2ToGgml(ct2Bytes(vars), tinyTokenizer()));
  const src = (name: string, from = 0, to?: number): number[] => {
    const v = byName.get(name);
    assert.ok(v, name);
    const row = v.values.length / (v.shape[0] ?? 1);
    return v.values.slice(from * row, to === undefined ? undefined : to * row);
  };
  const check = (name: string, expected: number[], type: number, dims: number[]): void => {
    const t = tensors.get(name);
    assert.ok(t, `missing ${name}`);
    assert.is(t.type, type, `${name} type`);
    assert.equal(t.dims, dims, `${name} dims (ggml order)`);
    assert.equal(values(t), expected, `${name} values`);
  };
  const sa = 'encoder/layer_0/self_attention/linear_0';
  check('encoder.blocks.0.attn.query.weight', src(`${sa}/weight`, 0, D), 1, [D, D]);
  check('encoder.blocks.0.attn.key.weight', src(`${sa}/weight`, D, 2 * D), 1, [D, D]);
  check('encoder.blocks.0.attn.value.weight', src(`${sa}/weight`, 2 * D, 3 * D), 1, [D, D]);
  check('encoder.blocks.0.attn.query.bias', src(`${sa}/bias`, 0, D), 0, [D]);
  check('encoder.blocks.0.attn.value.bias', src(`${sa}/bias`, 2 * D, 3 * D), 0, [D]);
  assert.not.ok(tensors.has('encoder.blocks.0.attn.key.bias'), "Whisper's key projection has no bias");
  const ca = 'decoder/layer_0/attention/linear_1';
  check('decoder.blocks.0.cross_attn.key.weight', src(`${ca}/weight`, 0, D), 1, [D, D]);
  check('decoder.blocks.0.cross_attn.value.weight', src(`${ca}/weight`, D, 2 * D), 1, [D, D]);
  check('decoder.blocks.0.cross_attn.value.bias', src(`${ca}/bias`, D, 2 * D), 0, [D]);
  check('decoder.blocks.0.cross_attn.query.weight', src('decoder/layer_0/attention/linear_0/weight'), 1, [D, D]);
  check('decoder.blocks.0.cross_attn.out.weight', src('decoder/layer_0/attention/linear_2/weight'), 1, [D, D]);
  check('encoder.conv1.weight', src('encoder/conv1/weight'), 1, [3, N_MELS, D]);
  check('encoder.conv1.bias', src('encoder/conv1/bias'), 0, [1, D]);
  check('encoder.positional_embedding', src('encoder/position_encodings/encodings'), 0, [D, 6]);
  check('decoder.positional_embedding', src('decoder/position_encodings/encodings'), 0, [D, 5]);
  check('decoder.token_embedding.weight', src('decoder/embeddings/weight'), 1, [D, N_VOCAB]);
  check('encoder.blocks.0.mlp.2.weight', src('encoder/layer_0/ffn/linear_1/weight'), 1, [2 * D, D]);
  check('decoder.blocks.0.cross_attn_ln.weight', src('decoder/layer_0/attention/layer_norm/gamma'), 0, [D]);
  check('decoder.ln.bias', src('decoder/layer_norm/beta'), 0, [D]);
  // Encoder: positional + 2 convolutions (w, b) + 15 per layer + ln_post; decoder: positional +
  // token embedding + 24 per layer + ln.
  assert.is(tensors.size, 5 + 15 + 2 + (2 + 24 + 2));
});

Convert('convertCt2ToGgml() rounds float32 sources to float16 and is deterministic', () => {
  const vars = tinyVars(F32);
  vars[2]!.values[0] = 1 + 2 ** -11; // a float16 tie: rounds to even (1)
  const a = convertCt2ToGgml(ct2Bytes(vars), tinyTokenizer());
  const b = convertCt2ToGgml(ct2Bytes(vars), tinyTokenizer());
  assert.ok(a.equals(b), 'same input, same bytes');
  const conv1 = readGgml(a).tensors.get('encoder.conv1.weight');
  assert.ok(conv1);
  assert.is(conv1.type, 1);
  assert.is(values(conv1)[0], 1);
});

Convert('vocabularyBytes() turns byte-level BPE strings back into bytes and needs all 50257 ids', () => {
  const vocab = vocabularyBytes(tinyTokenizer());
  assert.is(vocab.length, 50257);
  assert.equal([...(vocab[0] ?? [])], [0x20, 0x68, 0x69], "'Ġhi' is ' hi'");
  assert.is(vocab[42]?.toString(), 't42');
  const missing = JSON.parse(tinyTokenizer()) as { model: { vocab: Record<string, number> } };
  delete missing.model.vocab.t7;
  assert.throws(() => vocabularyBytes(JSON.stringify(missing)), (e: Error) => e instanceof WhisperConvertError && /token id 7/.test(e.message));
});

Convert("melFilters() is librosa's Slaney mel bank, as whisper.cpp's own files carry", () => {
  const f = melFilters(80);
  assert.is(f.length, 80 * 201);
  // Values recorded from librosa.filters.mel(sr=16000, n_fft=400, n_mels=80) as float32.
  assert.is(f[1], Math.fround(0.02486259490251541));
  assert.is(f[79 * 201 + 195], Math.fround(0.0022437951993197203));
  assert.ok(Object.is(f[0], -0), 'librosa writes -0 at the first bin');
  // Each filter is a triangle: one peak, zero far from it.
  for (let m = 0; m < 80; m++) {
    const row = Array.from(f.subarray(m * 201, (m + 1) * 201));
    assert.ok(Math.max(...row) > 0, `filter ${m} is not empty`);
  }
});

Convert('readCt2Model() refuses other formats with a message', () => {
  const bad = Buffer.alloc(16);
  bad.writeUInt32LE(2, 0);
  assert.throws(() => readCt2Model(bad), /version 2/);
  const good = ct2Bytes(tinyVars());
  assert.throws(() => readCt2Model(good.subarray(0, 200)), /truncated/);
  const missing = ct2Bytes(tinyVars().filter((v) => v.name !== 'decoder/layer_norm/gamma'));
  assert.throws(() => convertCt2ToGgml(missing, tinyTokenizer()), /decoder\/layer_norm\/gamma/);
});

Convert("whisperConversions() makes every derived asr model of the manifest from its model.bin and tokenizer.json", () => {
  const conversions = whisperConversions(loadManifest(REPO_MODELS_DIR));
  assert.equal(
    conversions.map((c) => [c.target.name, c.model.name, c.tokenizer.name]),
    [
      ['asr-whisper-base-ggml', 'asr-whisper-base-ct2', 'asr-whisper-base-tokenizer'],
      ['asr-whisper-tiny-en-ggml', 'asr-whisper-tiny-en-ct2', 'asr-whisper-tiny-en-tokenizer'],
    ],
  );
  // ASR_WHISPER_MODEL's names are exactly the converted files, each named after its file.
  assert.equal(Object.values(WHISPER_MODELS), conversions.map((c) => c.target.name));
  for (const name of WHISPER_MODEL_NAMES) {
    assert.is(conversions.find((c) => c.target.name === WHISPER_MODELS[name])?.target.file, WHISPER_GGML_FILES[name]);
  }
  assert.ok(WHISPER_MODEL_NAMES.includes(DEFAULT_WHISPER_MODEL));
  const broken = JSON.parse(fs.readFileSync(manifestPath(REPO_MODELS_DIR), 'utf8')) as Manifest;
  const tiny = broken.models.find((m) => m.name === 'asr-whisper-tiny-en-ggml') as { derivedFrom: string[] };
  tiny.derivedFrom = ['asr-whisper-tiny-en-ct2'];
  assert.throws(() => whisperConversions(broken), (e: Error) => e instanceof WhisperConvertError && /asr-whisper-tiny-en-ggml/.test(e.message));
});

Convert('convertWhisperModel() writes the file once, stamps it, and refuses a hash mismatch', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asr-convert-'));
  fs.copyFileSync(manifestPath(REPO_MODELS_DIR), manifestPath(dir));
  const convert = (expected?: { sha256: string; bytes: number }) => convertWhisperModel(dir, 'asr-whisper-base-ggml', expected);
  try {
    assert.is(convert().state, 'missing');
    assert.is(convertWhisperModel(dir, 'asr-whisper-tiny-en-ggml').state, 'missing');
    assert.is(whisperModelPath(dir), null);
    assert.throws(() => convertWhisperModel(dir, 'asr-whisper-base-ct2'), /no Whisper model 'asr-whisper-base-ct2'/);
    const ct2 = path.join(dir, 'weights/asr/whisper-base-ct2');
    fs.mkdirSync(ct2, { recursive: true });
    fs.writeFileSync(path.join(ct2, 'model.bin'), ct2Bytes(tinyVars()));
    fs.writeFileSync(path.join(ct2, 'tokenizer.json'), tinyTokenizer());
    const bytes = convertCt2ToGgml(ct2Bytes(tinyVars()), tinyTokenizer());
    assert.throws(() => convert(), /sha256/);
    assert.not.ok(fs.existsSync(path.join(dir, 'weights', WHISPER_GGML_FILES.base)), 'nothing written on a mismatch');
    const expected = { bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
    assert.is(convert(expected).state, 'converted');
    assert.is(convert(expected).state, 'present');
    assert.ok(fs.readFileSync(path.join(dir, 'weights', WHISPER_GGML_FILES.base)).equals(bytes));
    assert.is(convertWhisperModel(dir, 'asr-whisper-tiny-en-ggml').state, 'missing', "tiny.en's CT2 files are elsewhere");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

for (const name of WHISPER_MODEL_NAMES) {
  const conversion = whisperConversions(loadManifest(REPO_MODELS_DIR)).find((c) => c.target.name === WHISPER_MODELS[name]);
  assert.ok(conversion, name);
  const { target, model, tokenizer } = conversion;
  const modelFile = modelPath(REPO_MODELS_DIR, model.name);
  const tokenizerFile = modelPath(REPO_MODELS_DIR, tokenizer.name);
  /** Registered as skipped (counted by uvu, the reason printed) until setup has fetched the CT2 files. */
  const fetchedTest = needs(Convert, 'convert-whisper', modelFile && tokenizerFile ? null : `${model.name} or ${tokenizer.name} is not fetched (npm run setup)`);
  fetchedTest(`convertCt2ToGgml() turns the fetched Whisper ${name} into the bytes the manifest records`, () => {
    const bytes = convertCt2ToGgml(fs.readFileSync(modelFile!), fs.readFileSync(tokenizerFile!, 'utf8'));
    assert.is(bytes.length, target.bytes);
    assert.is(createHash('sha256').update(bytes).digest('hex'), target.sha256);
    assert.is(bytes.readInt32LE(4), N_VOCAB_OF[name], 'n_vocab, after the magic');
  });

  /** Registered as skipped until setup has converted the model. */
  const madeTest = needs(Convert, 'convert-whisper', whisperModelPath(REPO_MODELS_DIR, name) ? null : `models/weights/${WHISPER_GGML_FILES[name]} is not made (npm run setup)`);
  madeTest(`whisperModelPath() finds the converted Whisper ${name} when setup made it`, () => {
    assert.is(whisperModelPath(REPO_MODELS_DIR, name), path.join(weightsDir(REPO_MODELS_DIR), WHISPER_GGML_FILES[name]));
    assert.is(convertWhisperModel(REPO_MODELS_DIR, target.name).state, 'present');
  });
}

Convert.run();
