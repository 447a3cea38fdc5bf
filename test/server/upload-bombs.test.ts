/**
 * Hostile uploads against the real server in its own process: bodies cut off inside a part,
 * uploads over the limit sent by a client that keeps writing, files whose headers lie (an MP3 of
 * 19,000 s, a PNG claiming 16000x16000, a WAV claiming gigabytes), decompression and pickle bombs,
 * and audio of NaN/Inf. Each gets a clear 4xx; the server stays up, answers /healthz within
 * HEALTH_DEADLINE_MS during every upload, and counts no escaped error.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import zlib from 'node:zlib';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { request, tempDir, type TestResponse } from '../../harness/servers/server.js';
import { assertError } from '../helpers/assert-error.js';

/**
 * During any upload /healthz answers within this long. The issue asked for 100 ms; a prober on a
 * loaded 2-core CI machine once measured 160 ms with nothing blocked (its own process and the
 * connection set-up wait for a core), while a decode on the event loop would block for seconds.
 */
const HEALTH_DEADLINE_MS = 250;
const MAX_UPLOAD_BYTES = 20 * 1024 * 1024;

interface Ctx {
  proc: ServerProcess;
  dataDir: string;
  key: string;
}

const Bombs = suite<Ctx>('upload bombs', {} as Ctx);

Bombs.before(async (ctx) => {
  ctx.dataDir = tempDir('avatar-bombs-');
  ctx.proc = await spawnServer({ DATA_DIR: ctx.dataDir, LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: '0', MAX_UPLOAD_BYTES: String(MAX_UPLOAD_BYTES) });
  ctx.key = ctx.proc.bootstrapKey!;
  // Warm both workers up, so the measurements below are of the bombs, not of starting threads.
  await upload(ctx, '/v1/voices', wavFile(new Float32Array(16000).map((_, i) => 0.3 * Math.sin(i / 5)), 3, 32), 'audio/wav');
  await upload(ctx, '/v1/driving', Buffer.from([0x80, 0x04, 0x4e, 0x2e]), 'application/octet-stream');
});

Bombs.after(async (ctx) => {
  const metrics = await request(ctx.proc.url, 'GET', '/metrics');
  assert.match(metrics.text, /avatar_process_escaped_errors\{kind="uncaught_exception"\} 0/, 'nothing escaped its handler');
  assert.match(metrics.text, /avatar_process_escaped_errors\{kind="unhandled_rejection"\} 0/);
  ctx.proc.child.kill('SIGTERM');
  await ctx.proc.exited;
  fs.rmSync(ctx.dataDir, { recursive: true, force: true });
});

function upload(ctx: Ctx, path: string, body: Buffer, type: string): Promise<TestResponse> {
  return request(ctx.proc.url, 'POST', path, { key: ctx.key, body, headers: { 'content-type': type } });
}

/**
 * The /healthz prober: a separate Node process, so that what it measures is the server, not this
 * test process's own event loop (which is busy sending the upload). It asks /healthz back to back
 * until its stdin closes, then prints the count and the slowest answer.
 */
const PROBER = `
  const http = require('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let done = false, worst = 0, asked = 0, failed = 0;
  process.stdin.on('end', () => (done = true)).resume();
  (async () => {
    while (!done) {
      const started = performance.now();
      const status = await new Promise((resolve) => http.get(process.argv[1] + '/healthz', { agent }, (res) => res.resume().on('end', () => resolve(res.statusCode))).on('error', () => resolve(0)));
      if (status !== 200) failed++;
      worst = Math.max(worst, performance.now() - started);
      asked++;
      await new Promise((r) => setTimeout(r, 5));
    }
    process.stdout.write(JSON.stringify({ worst, asked, failed }));
    agent.destroy();
  })();
`;

/** Runs `work` while the prober asks /healthz; returns its result and the slowest /healthz. */
async function whileHealthChecked<T>(ctx: Ctx, work: () => Promise<T>): Promise<{ result: T; worstMs: number; asked: number }> {
  const prober = spawn(process.execPath, ['-e', PROBER, ctx.proc.url], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  prober.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise((resolve) => prober.on('exit', resolve));
  // The prober's first answers come before the work starts, so the whole upload is covered.
  await new Promise((r) => setTimeout(r, 100));
  try {
    const result = await work();
    prober.stdin.end();
    await exited;
    const { worst, asked, failed } = JSON.parse(out) as { worst: number; asked: number; failed: number };
    assert.is(failed, 0, '/healthz failed while the upload was processed');
    if (process.env.UPLOAD_BOMBS_REPORT) console.log(`  /healthz: ${asked} asked, worst ${worst.toFixed(1)} ms`);
    return { result, worstMs: worst, asked };
  } finally {
    prober.kill();
  }
}

// ── Files ─────────────────────────────────────────────────────────────────────

/** An MPEG-2.5 Layer III mono stream at 8 kHz / 8 kbit/s: 72-byte frames of 72 ms of silence, 1 s per kB. */
function mp3Silence(bytes: number): Buffer {
  const frame = Buffer.alloc(72);
  frame.set([0xff, 0xe3, 0x18, 0xc0]);
  const out = Buffer.alloc(Math.floor(bytes / 72) * 72);
  for (let at = 0; at < out.length; at += 72) frame.copy(out, at);
  return out;
}

/** A WAV of float samples (format 3), `bits` 32 or 64, with an optional lie in the data size. */
function wavFile(samples: Float32Array | number[], format: 1 | 3, bits: 16 | 32 | 64, claimedDataBytes?: number, rate = 16000): Buffer {
  const bytesPer = bits / 8;
  const data = Buffer.alloc(samples.length * bytesPer);
  samples.forEach((s, i) => {
    if (bits === 16) data.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(s * 32767))), i * 2);
    else if (bits === 32) data.writeFloatLE(s, i * 4);
    else data.writeDoubleLE(s, i * 8);
  });
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(format, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * bytesPer, 28);
  header.writeUInt16LE(bytesPer, 32);
  header.writeUInt16LE(bits, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(claimedDataBytes ?? data.length, 40);
  return Buffer.concat([header, data]);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}
/** A greyscale PNG of `width` x `height` zero pixels (rows given as `rows`, default all). */
function png(width: number, height: number, rows = height): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 0, 0, 0, 0], 8); // 8-bit greyscale
  const raw = Buffer.alloc(rows * (width + 1)); // filter byte 0 + zeros per row
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', zlib.deflateSync(raw, { level: 9 })),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

// ── Streams cut short ─────────────────────────────────────────────────────────

Bombs('a multipart body that ends inside the file part is a 400 on every upload route, and the server goes on', async (ctx) => {
  for (const route of ['/v1/faces', '/faces', '/v1/voices', '/voices', '/v1/driving', '/driving']) {
    const body = '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\nabcdef';
    const res = await upload(ctx, route, Buffer.from(body), 'multipart/form-data; boundary=XyZ');
    assertError(res, 400, 'invalid_multipart', 'file');
  }
  const text = '--XyZ\r\nContent-Disposition: form-data; name="name"\r\n\r\nabc';
  assertError(await upload(ctx, '/v1/faces', Buffer.from(text), 'multipart/form-data; boundary=XyZ'), 400, 'invalid_multipart', 'file');
  assert.is((await request(ctx.proc.url, 'GET', '/healthz')).status, 200);
});

Bombs('an upload over MAX_UPLOAD_BYTES from a client that keeps sending gets a 413 it can read, not a reset', async (ctx) => {
  const url = new URL(ctx.proc.url);
  for (const declared of [true, false]) {
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const headers: Record<string, string | number> = { authorization: `Bearer ${ctx.key}`, 'content-type': 'audio/wav' };
      const total = MAX_UPLOAD_BYTES + 4 * 1024 * 1024;
      if (declared) headers['content-length'] = total;
      const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path: '/v1/voices', headers }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on('error', reject);
      // Written in 64 KiB pieces, as a real client streams a file.
      const piece = Buffer.alloc(64 * 1024, 1);
      let sent = 0;
      const pump = () => {
        while (sent < total) {
          sent += piece.length;
          if (!req.write(piece)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    assert.is(status, 413, `declared length ${declared}: ${body}`);
    assert.is(JSON.parse(body).error.code, 'request_too_large');
  }
});

// ── Headers that lie ──────────────────────────────────────────────────────────

Bombs('a 19 MB MP3 of 19,000 s is refused from its frame headers, /healthz answering throughout', async (ctx) => {
  const bomb = mp3Silence(19 * 1000 * 1000);
  const { result, worstMs, asked } = await whileHealthChecked(ctx, () => upload(ctx, '/v1/voices', bomb, 'audio/mpeg'));
  assertError(result, 400, 'invalid_audio_duration', 'file');
  assert.match(result.body.error.message, /more than 600 s/);
  assert.ok(asked > 0 && worstMs < HEALTH_DEADLINE_MS, `/healthz took up to ${worstMs.toFixed(1)} ms (${asked} asked)`);
});

Bombs('an MP3 within the duration limit is decoded off the event loop (silent: refused), /healthz answering throughout', async (ctx) => {
  const silence = mp3Silence(500 * 1000); // 500 s
  const { result, worstMs, asked } = await whileHealthChecked(ctx, () => upload(ctx, '/v1/voices', silence, 'audio/mpeg'));
  assertError(result, 400, 'silent_audio', 'file');
  assert.ok(asked > 0 && worstMs < HEALTH_DEADLINE_MS, `/healthz took up to ${worstMs.toFixed(1)} ms (${asked} asked)`);
});

Bombs('a PNG whose header claims 16000x16000 is refused by its header, without decoding', async (ctx) => {
  const liar = png(16000, 16000, 1); // one row of data behind a 16000x16000 header
  assert.ok(liar.length < 1000);
  const { result, worstMs } = await whileHealthChecked(ctx, () => upload(ctx, '/v1/faces', liar, 'image/png'));
  assertError(result, 400, 'invalid_image_size', 'file');
  assert.match(result.body.error.message, /16000x16000/);
  assert.ok(worstMs < HEALTH_DEADLINE_MS, `/healthz took up to ${worstMs.toFixed(1)} ms`);
});

Bombs('a decompression bomb (a few kB of PNG for 64 megapixels) is refused by its pixel count before decoding', async (ctx) => {
  const bomb = png(8000, 8000);
  assert.ok(bomb.length < 200_000, `${bomb.length} bytes`);
  const { result, worstMs } = await whileHealthChecked(ctx, () => upload(ctx, '/v1/faces', bomb, 'image/png'));
  assertError(result, 400, 'invalid_image_size', 'file');
  assert.ok(worstMs < HEALTH_DEADLINE_MS, `/healthz took up to ${worstMs.toFixed(1)} ms`);
});

Bombs('a WAV whose data chunk claims 4 GB counts only the bytes it has', async (ctx) => {
  const short = wavFile(Array.from({ length: 8000 }, (_, i) => 0.3 * Math.sin(i / 5)), 1, 16, 0xfffffff0);
  const res = await upload(ctx, '/v1/voices', short, 'audio/wav');
  assertError(res, 400, 'invalid_audio_duration', 'file');
  assert.match(res.body.error.message, /0\.5 s/);
});

Bombs('WAVs of NaN or infinite samples are refused at upload', async (ctx) => {
  const speechLike = Array.from({ length: 32000 }, (_, i) => 0.3 * Math.sin(i / 7));
  for (const [bad, bits] of [[NaN, 32], [Infinity, 32], [-Infinity, 64], [NaN, 64]] as const) {
    const samples = [...speechLike];
    samples[1000] = bad;
    const res = await upload(ctx, '/v1/voices', wavFile(samples, 3, bits), 'audio/wav');
    assertError(res, 400, 'invalid_file', 'file');
    assert.match(res.body.error.message, /NaN or infinite/);
  }
  // The same file without the bad sample is a voice.
  assert.is((await upload(ctx, '/v1/voices', wavFile(speechLike, 3, 32), 'audio/wav')).status, 201);
});

// ── Pickles ───────────────────────────────────────────────────────────────────

Bombs('pickle bombs (deep nesting, a length that lies, an array shape that lies) are refused with 400', async (ctx) => {
  const deep = Buffer.concat([Buffer.from([0x80, 0x04]), Buffer.alloc(1_000_000, 0x5d /* EMPTY_LIST */), Buffer.from('.')]);
  const longLie = Buffer.concat([Buffer.from([0x80, 0x04, 0x8e /* BINBYTES8 */]), Buffer.from([0, 0, 0, 0, 0, 0, 0, 0x7f]), Buffer.from('xyz.')]);
  const unicodeLie = Buffer.concat([Buffer.from([0x80, 0x04, 0x8d /* BINUNICODE8 */]), Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0]), Buffer.from('.')]);
  for (const [name, bomb] of [['deep', deep], ['bytes length', longLie], ['unicode length', unicodeLie]] as const) {
    const { result, worstMs } = await whileHealthChecked(ctx, () => upload(ctx, '/v1/driving', bomb, 'application/octet-stream'));
    assertError(result, 400, 'invalid_file', 'file');
    assert.ok(worstMs < HEALTH_DEADLINE_MS, `${name}: /healthz took up to ${worstMs.toFixed(1)} ms`);
  }
});

Bombs.run();
