/**
 * `npm run render:clip` (src/cli/render-clip.ts): a short espeak-ng reply at a small size becomes
 * an MP4 whose boxes, walked here, hold one H.264 track of every frame rendered and one AAC track,
 * both as long as the clip, the index first; GStreamer's demuxer reads it back. The box walker and
 * the demuxer are each shown a broken file too (the index renamed, the file cut short), so a check
 * that finds nothing fails. The command line's defaults and mistakes are checked without
 * rendering. Without gst-launch-1.0 (or an element the mux needs) the clip test is registered as
 * skipped, saying what is missing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_TEXT, gstLaunch, missingClipTools, parseClipArgs, renderClip } from '../../src/cli/render-clip.js';
import { suiteNeeding } from '../helpers/skip.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const FPS = 25;

interface Box {
  type: string;
  /** Where its body starts and where the box ends, in the file. */
  body: number;
  end: number;
}

/** The boxes between `start` and `end`; throws on a box that runs past `end`. */
function boxes(buf: Buffer, start: number, end: number): Box[] {
  const out: Box[] = [];
  for (let at = start; at < end; ) {
    if (at + 8 > end) throw new Error(`a box header at ${at} is cut off`);
    let size = buf.readUInt32BE(at);
    const type = buf.toString('latin1', at + 4, at + 8);
    let header = 8;
    if (size === 1) {
      size = Number(buf.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) size = end - at;
    if (size < header || at + size > end) throw new Error(`box '${type}' at ${at} (${size} bytes) runs past ${end}`);
    out.push({ type, body: at + header, end: at + size });
    at += size;
  }
  return out;
}

function child(buf: Buffer, parent: Box, type: string, skip = 0): Box {
  const found = boxes(buf, parent.body + skip, parent.end).find((b) => b.type === type);
  if (!found) throw new Error(`no '${type}' in '${parent.type}'`);
  return found;
}

interface Track {
  handler: string;
  /** The first sample entry's format: avc1 (H.264), mp4a (AAC). */
  codec: string;
  seconds: number;
  samples: number;
  /** A video entry's size. */
  width?: number;
  height?: number;
}

/** Every track of an MP4 file, from its moov box. */
function mp4Tracks(buf: Buffer): { first: string; tracks: Track[] } {
  const top = boxes(buf, 0, buf.length);
  const moov = top.find((b) => b.type === 'moov');
  if (!moov) throw new Error(`no moov box (top level: ${top.map((b) => b.type).join(', ')})`);
  const tracks = boxes(buf, moov.body, moov.end)
    .filter((b) => b.type === 'trak')
    .map((trak) => {
      const mdia = child(buf, trak, 'mdia');
      const mdhd = child(buf, mdia, 'mdhd');
      const v1 = buf[mdhd.body] === 1;
      const timescale = buf.readUInt32BE(mdhd.body + (v1 ? 20 : 12));
      const duration = v1 ? Number(buf.readBigUInt64BE(mdhd.body + 24)) : buf.readUInt32BE(mdhd.body + 16);
      const handler = buf.toString('latin1', child(buf, mdia, 'hdlr').body + 8, child(buf, mdia, 'hdlr').body + 12);
      const stbl = child(buf, child(buf, mdia, 'minf'), 'stbl');
      const entry = boxes(buf, child(buf, stbl, 'stsd').body + 8, child(buf, stbl, 'stsd').end)[0];
      if (!entry) throw new Error('a track without a sample entry');
      const stsz = child(buf, stbl, 'stsz');
      const track: Track = { handler, codec: entry.type, seconds: duration / timescale, samples: buf.readUInt32BE(stsz.body + 8) };
      if (handler === 'vide') Object.assign(track, { width: buf.readUInt16BE(entry.body + 24), height: buf.readUInt16BE(entry.body + 26) });
      return track;
    });
  return { first: top[0]?.type ?? '', tracks };
}

/** Whether GStreamer's demuxer reads both tracks of `file` to the end without an error. */
async function demuxes(file: string): Promise<boolean> {
  const args = ['filesrc', `location=${file}`, '!', 'qtdemux', 'name=d', 'd.video_0', '!', 'queue', '!', 'fakesink', 'd.audio_0', '!', 'queue', '!', 'fakesink'];
  return gstLaunch(args, 60_000).then(() => true, () => false);
}

const Args = suite('render:clip command line');

Args('defaults: the default face at 512x512, the default text, the voice chosen by what is installed, clips/default-512x512.mp4', () => {
  const o = parseClipArgs([]);
  assert.equal({ ...o, out: path.relative(REPO_ROOT, o.out) }, { face: 'default', width: 512, height: 512, text: DEFAULT_TEXT, voice: 'auto', out: 'clips/default-512x512.mp4', seed: 0 });
  assert.is(path.relative(REPO_ROOT, parseClipArgs(['--face', 'face1', '--size', '1280x720']).out), 'clips/face1-1280x720.mp4');
  assert.is(path.basename(parseClipArgs(['--face', '/photos/me.png']).out), 'me-512x512.mp4');
});

Args('mistakes are refused with the usage', () => {
  for (const [args, why] of [
    [['--size', '511x512'], /--size is WxH, each even/],
    [['--size', 'big'], /--size is WxH/],
    [['--voice', 'flite'], /--voice is one of auto, piper, espeak/],
    [['--text', '  '], /--text is empty/],
    [['--seed', '1.5'], /--seed is a whole number/],
    [['--fps', '30'], /Unknown option '--fps'/],
    [['stray'], /unexpected stray/],
  ] as const) {
    assert.throws(() => parseClipArgs([...args]), (err: Error) => why.test(err.message) && err.message.includes('usage: npm run render:clip'), args.join(' '));
  }
});

Args.run();

const missing = missingClipTools();
const Clip = suiteNeeding<{ dir: string }>('render:clip', missing, { dir: '' });
Clip.before((ctx) => {
  ctx.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'render-clip-test-'));
});
Clip.after((ctx) => fs.rmSync(ctx.dir, { recursive: true, force: true }));

Clip('a 2 s espeak reply at 128x128: one H.264 track of every frame and one AAC track, both as long as the clip', async ({ dir }) => {
  const out = path.join(dir, 'nested', 'clip.mp4');
  const r = await renderClip(parseClipArgs(['--size', '128x128', '--voice', 'espeak', '--text', 'Hello there, how are you?', '--out', out]));
  assert.is(r.out, out);
  assert.ok(r.speechS > 0.8 && r.speechS < 2.5, `the reply is spoken (${r.speechS.toFixed(2)} s)`);
  const clipS = r.frames / FPS;
  assert.ok(clipS > r.speechS && clipS < r.speechS + 1.5, `the clip (${clipS} s) holds the reply (${r.speechS.toFixed(2)} s) and a little silence`);

  const buf = fs.readFileSync(out);
  const { first, tracks } = mp4Tracks(buf);
  assert.is(first, 'ftyp');
  assert.is(boxes(buf, 0, buf.length)[1]?.type, 'moov', 'the index comes before the media (plays while it downloads)');
  assert.equal(tracks.map((t) => `${t.handler}:${t.codec}`).sort(), ['soun:mp4a', 'vide:avc1']);
  const video = tracks.find((t) => t.handler === 'vide')!;
  const audio = tracks.find((t) => t.handler === 'soun')!;
  assert.equal([video.width, video.height], [128, 128]);
  assert.is(video.samples, r.frames, 'every frame rendered is in the video track');
  assert.ok(Math.abs(video.seconds - clipS) < 0.05, `video ${video.seconds} s, clip ${clipS} s`);
  assert.ok(audio.seconds >= clipS - 0.01 && audio.seconds < clipS + 0.1, `audio ${audio.seconds} s, clip ${clipS} s: as long, to within an AAC frame`);
  assert.ok(await demuxes(out), 'GStreamer reads it back');

  // Negative controls: the same checks fail on a broken file.
  const renamed = Buffer.from(buf);
  renamed.write('xxxx', boxes(buf, 0, buf.length)[1]!.body - 4, 'latin1');
  const renamedFile = path.join(dir, 'renamed.mp4');
  fs.writeFileSync(renamedFile, renamed);
  assert.throws(() => mp4Tracks(renamed), /no moov box/);
  assert.not.ok(await demuxes(renamedFile), 'the demuxer refuses a file without its index');
  assert.throws(() => mp4Tracks(buf.subarray(0, buf.length - 1000)), /box 'mdat' .* runs past/);
});

Clip.run();
