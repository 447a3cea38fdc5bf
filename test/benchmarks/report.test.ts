/**
 * The benchmark report (benchmarks/lib/report/): from a temporary results directory of fixture
 * results (an endpoint run against two targets over both modes, with samples, a per-step
 * breakdown, A/V offsets and frame intervals; a capacity run; a turn-end run's curves; older copies
 * on other dates for the history; a file that is not a result), writeReport writes one page that
 *  - lists a plot of each kind and the files it skipped, names the machine, commit, models and
 *    published figures with their sources, shows no secret from params and escapes every string;
 *  - renders in headless Chromium offline (every request but the file itself refused) with no
 *    console error or page error, every plot a uPlot canvas of non-zero size with something drawn.
 * A full-page screenshot goes to a temporary file (and to REPORT_SCREENSHOT when set: the lead
 * makes docs/benchmark-report.png with it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import * as assert from 'uvu/assert';
import { summarise, type BenchResult, type Metric } from '../../benchmarks/lib/harness.js';
import { writeReport } from '../../benchmarks/lib/report/report.js';
import { PUBLISHED_FIGURES } from '../../benchmarks/lib/report/published.js';
import { CHROMIUM_PATH, chromiumAvailable, launchBrowser } from '../../harness/clients/browser.js';
import { suiteNeeding } from '../helpers/skip.js';
import { suite } from 'uvu';

const MACHINE: BenchResult['machine'] = { cpus: 2, cpu_model: 'Test CPU 9000', memory_gib: 23.5, os: 'Linux 6.1-test', node: 'v20.0.0' };
const SECRET_KEY = 'sk-fixture-secret-key-0123';
const HOSTILE = 'evil </script><script>window.__pwned = 1</script>';
/** A 16x16 grey JPEG data URL (made with sharp in the suite's before hook: a real image the page must decode). */
let tinyJpeg = '';
/** A turn's trace as the endpoint benchmark records it: the mouth opening 40 ms after the sound. */
function lipSyncTrace() {
  return {
    mouth: Array.from({ length: 60 }, (_, i) => [-500 + i * 40, i * 40 - 500 > 40 ? 0.5 + 0.5 * Math.sin(i) ** 2 : 0.02]),
    speech: Array.from({ length: 250 }, (_, i) => [-500 + i * 10, i * 10 - 500 > 0 ? 0.4 + 0.6 * Math.cos(i / 7) ** 2 : 0]),
    frames: [-240, -120, 0, 120, 240].map((t) => ({ t, url: tinyJpeg })).concat([{ t: 360, url: 'https://example.com/not-inline.jpg' }]),
  };
}

/** Samples around `median` with a tail, from a fixed seed (deterministic). */
function samples(median: number, n: number, seed: number): number[] {
  let s = seed;
  const next = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  return Array.from({ length: n }, () => Math.round(median * (0.8 + 0.4 * next()) + (next() < 0.1 ? median * next() : 0)));
}

/** One method's figures of a face as the endpoint benchmark records them (harness/measures/lip-figures.ts). */
function faceFigures(r: number, firstSound: number[]) {
  return { r, lag_ms: -40, closed_share: 1, open_share: 0.9, silent_frames: 20, loud_frames: 40, r_audio_shifted_400ms: 0.1, r_audio_earlier_400ms: 0.05, r_audio_reversed: 0.2, wide: { r, lag_ms: -40 }, onsets: { firstSound, afterPause: [10, 30], missing: 0, bilabial: 0 }, onsets_audio_later_200ms: { firstSound: [], afterPause: [], missing: 0, bilabial: 0 }, method: 'm' };
}

function endpointResult(label: string, date: string, commit: string, scale: number): BenchResult {
  const m = (name: string, median: number, seed: number, unit = 'ms'): Metric => summarise(name, unit, samples(median * scale, 40, seed));
  return {
    benchmark: 'endpoint',
    description: 'an endpoint measured as a user feels it',
    date,
    commit,
    machine: MACHINE,
    params: {
      target: { label, url: 'http://127.0.0.1:9/', key: SECRET_KEY },
      models: { llm: 'Qwen2.5 0.5B GGUF', tts: 'Piper joe', asr: 'Whisper base' },
      seed: 7,
      lip_sync_trace: lipSyncTrace(),
      lip_sync: { r: 0.78 - 0.1 * (scale - 1), lag_ms: 40, closed_share: 0.96, open_share: 0.91, silent_frames: 12, loud_frames: 30, r_audio_shifted_400ms: 0.12, frames_measured: 60, face_found_share: 1, wide: { r: 0.8, lag_ms: 40 }, method: 'face landmarks on decoded frames' },
      websocket_lip_sync: [
        { face: 'default', missing: null, figures: { ...faceFigures(0.81, [-30, -20, -10]), method_b: faceFigures(0.74, [-30]) } },
        { face: HOSTILE, missing: null, figures: { ...faceFigures(0.7, [50]), method_b: null } },
        // The default face's second turn: its figures join the first's.
        { face: 'default', missing: null, figures: { ...faceFigures(0.75, [90]), open_share: 0.8, method_b: faceFigures(0.7, [0]) } },
      ],
      webrtc_lip_sync: [
        { face: 'upload: neutral', missing: 'the face was refused', figures: null },
        'not an entry',
        { face: 'upload: smiling', missing: 'the call failed', figures: null },
        { face: 'upload: smiling', missing: null, figures: { ...faceFigures(0.72, [20]), method_b: faceFigures(0.71, [30]) } },
      ],
    },
    metrics: [
      m('websocket · text turn → first audio', 240, 1),
      m('webrtc · text turn → first audio played', 330, 2),
      m('websocket · voice turn → first audio', 720, 3),
      m('webrtc · voice turn → first audio played', 900, 4),
      m('websocket · first frame after connect', 120, 5),
      m('websocket · voice turn › end-of-turn decision', 420, 6),
      m('websocket · voice turn › transcription tail', 90, 7),
      m('websocket · voice turn › reply to first audio', 250, 8),
      m('webrtc · voice turn › end-of-turn decision', 430, 9),
      m('webrtc · voice turn › transcription tail', 100, 10),
      m('webrtc · voice turn › reply to first audio', 330, 11),
      summarise('webrtc · A/V offset at the receiver', 'ms', samples(20, 60, Math.round(12 + 10 * scale)).map((v) => v - 35)),
      m('webrtc · frame interval at the receiver', 40, 13),
      summarise('websocket · turns answered', 'count', [10]),
    ],
    notes: [],
  };
}

function capacityResult(date: string): BenchResult {
  const steps = [1, 4, 8, 12, 16].flatMap((n) => [
    { load: 'idle (avatar listening)', sessions: n, cpu_percent: 8 * n + 5, late_frames: n >= 16 ? 7 : 0 },
    { load: 'all talking', sessions: n, cpu_percent: 10 * n + 6, late_frames: n >= 12 ? 3 * (n - 10) : 0 },
  ]);
  return {
    benchmark: 'webrtc',
    description: 'calls',
    date,
    commit: 'abc1234',
    machine: MACHINE,
    params: { capacity_window_s: 10, capacity_steps: steps },
    metrics: [
      summarise('most concurrent idle calls at 25 fps, no late frame', 'calls', [12]),
      summarise('server CPU per idle call (avatar listening, 25 fps H.264 + Opus)', '% of a core', [9.9]),
    ],
    notes: [],
  };
}

/** A turn-end run: two judges' settings (two of one judge at the same latency, the lower cut-off drawn). */
function turnEndResult(date: string): BenchResult {
  const point = (judge: string, knob: number, falseCutPercent: number, latencyP50: number) => ({ judge, setting: String(knob), knob, utterances: 384, falseCutPercent, pausedCutPercent: 2 * falseCutPercent, answeredInGapPercent: 50, latencyP50, latencyP95: latencyP50 + 300 });
  return {
    benchmark: 'turn-end',
    description: 'end-of-turn judges',
    date,
    commit: 'abc1236',
    machine: MACHINE,
    params: {
      utterances: 384,
      turn_end_curves: [point('server_vad', 500, 34.4, 561), point('server_vad', 1000, 2.6, 1075), point('default', 0.9, 9.6, 492), point('default', 0.97, 4.7, 720), point('default', 0.98, 3.1, 720)],
    },
    metrics: [summarise('[default 0.97] decision after a finished utterance', 'ms', [500, 720, 900])],
    notes: [],
  };
}

function writeFixtures(dir: string): void {
  const write = (name: string, r: unknown) => fs.writeFileSync(path.join(dir, name), typeof r === 'string' ? r : JSON.stringify(r));
  const dates = ['2026-11-20T10:00:00.000Z', '2026-11-24T10:00:00.000Z', '2026-11-27T10:00:00.000Z'];
  dates.forEach((date, i) => {
    const commit = ['1111111', '2222222', 'f00dfac'][i]!;
    // The middle run is a regression: the history must show the jump.
    const scale = i === 1 ? 1.6 : 1;
    write(`endpoint-local-${i}.json`, endpointResult('this server (local)', date, commit, scale));
    write(`endpoint-second-${i}.json`, endpointResult('second instance', date, commit, scale * 1.2));
  });
  write('webrtc-old.json', capacityResult('2026-11-25T10:00:00.000Z'));
  // Strings from a result are text on the page, never markup.
  const newest = capacityResult('2026-11-27T11:00:00.000Z');
  newest.metrics.push(summarise(`${HOSTILE} latency`, 'ms', [3, 4, 5]));
  write('webrtc-new.json', { ...newest, commit: 'abc1235', params: { ...newest.params, llm: HOSTILE } });
  write('turn-end.json', turnEndResult('2026-12-02T10:00:00.000Z'));
  write('broken.json', '{ not json');
  write('other.json', { hello: 'world' });
  write('SUMMARY.md', '# not read');
}

interface Ctx {
  dir: string;
  outFile: string;
  plots: string[];
  results: number;
}

const Report = suite<Ctx>('benchmark report', {} as Ctx);

Report.before(async (ctx) => {
  tinyJpeg = `data:image/jpeg;base64,${(await sharp({ create: { width: 16, height: 16, channels: 3, background: { r: 120, g: 90, b: 80 } } }).jpeg().toBuffer()).toString('base64')}`;
  ctx.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-report-'));
  writeFixtures(ctx.dir);
  ctx.outFile = path.join(ctx.dir, 'report.html');
  const written = await writeReport({ resultsDir: ctx.dir, outFile: ctx.outFile });
  ctx.plots = written.plots;
  ctx.results = written.results;
});

Report.after((ctx) => {
  fs.rmSync(ctx.dir, { recursive: true, force: true });
});

Report('writes a plot of every kind from the results, and skips what is not a result', (ctx) => {
  assert.is(ctx.results, 9);
  const kinds = ['published', 'cdf', 'breakdown', 'histogram', 'capacity', 'turn-end', 'lipsync', 'history'];
  for (const kind of kinds) assert.ok(ctx.plots.some((id) => id.startsWith(`plot-${kind}`)), `a ${kind} plot in ${ctx.plots.join(', ')}`);
  assert.is(new Set(ctx.plots).size, ctx.plots.length, 'plot ids are unique');
  const html = fs.readFileSync(ctx.outFile, 'utf8');
  for (const id of ctx.plots) assert.ok(html.includes(`id="${id}"`), `element ${id}`);
  assert.match(html, /broken\.json \(not JSON/);
  assert.match(html, /other\.json \(no benchmark name\)/);
  assert.not.match(html, /SUMMARY\.md/);
  assert.match(html, /<tr class="jump">/, 'a p50 that moved 20 % or more is marked in the history');
});

Report('one measure from every target and mode shares a CDF; histograms and capacity from their metrics', (ctx) => {
  const html = fs.readFileSync(ctx.outFile, 'utf8');
  const specs = JSON.parse(/<script type="application\/json" id="report-data">([\s\S]*?)<\/script>/.exec(html)![1]!) as Array<{ id: string; title: string; series: Array<{ label: string }> }>;
  const voice = specs.find((s) => s.id.startsWith('plot-cdf') && s.title.startsWith('voice turn → first audio:'));
  assert.ok(voice, 'a CDF of the voice turn');
  assert.equal(voice!.series.map((s) => s.label.replace(/ \(n=.*$/, '')).sort(), ['second instance / websocket', 'this server (local) / websocket'].sort());
  const played = specs.find((s) => s.title.startsWith('voice turn → first audio played:'))!;
  assert.is(played.series.length, 2);
  const breakdown = specs.find((s) => s.id.startsWith('plot-breakdown'))!;
  assert.equal(breakdown.series.map((s) => s.label), ['1. end-of-turn decision', '2. transcription tail', '3. reply to first audio']);
  assert.ok(specs.some((s) => s.id.startsWith('plot-histogram') && /A\/V offset/.test(s.title)));
  assert.ok(specs.some((s) => s.id.startsWith('plot-histogram') && /frame interval/.test(s.title)));
  const turnEnd = specs.filter((s) => s.id.startsWith('plot-turn-end')) as unknown as Array<{ series: Array<{ label: string }>; data: Array<Array<number | null>> }>;
  assert.is(turnEnd.length, 1, 'the turn-end curve');
  assert.equal(turnEnd[0]!.series.map((s) => s.label), ['server_vad', 'default']);
  assert.equal(turnEnd[0]!.data, [[492, 561, 720, 1075], [null, 34.4, null, 2.6], [9.6, null, 3.1, null]], 'x sorted; one point per judge and latency, the fewer cut-offs');
  const capacity = specs.filter((s) => s.id.startsWith('plot-capacity'));
  assert.is(capacity.length, 2, 'CPU and late frames of the newest capacity run');
  assert.equal(capacity[0]!.series.map((s) => s.label), ['idle (avatar listening)', 'all talking']);
});

Report('the header names machine, commits, models; published figures name their sources; no secret, every string escaped', (ctx) => {
  const html = fs.readFileSync(ctx.outFile, 'utf8');
  assert.match(html, /2 CPUs \(Test CPU 9000\), 23\.5 GiB memory, Linux 6\.1-test, Node v20\.0\.0/);
  for (const commit of ['1111111', 'f00dfac', 'abc1235']) assert.ok(html.includes(`<code class="commit">${commit}</code>`), commit);
  assert.match(html, /Qwen2\.5 0\.5B GGUF/);
  assert.match(html, /<td>2026-11-20 10:00:00<\/td><td>endpoint<\/td><td>this server \(local\)<\/td><td><code>1111111<\/code>/, 'the date of each result');
  for (const f of PUBLISHED_FIGURES) {
    assert.ok(html.includes(f.product), f.product);
    for (const s of f.sources) assert.ok(html.includes(`href="${s.url}"`), s.url);
  }
  assert.not.ok(html.includes(SECRET_KEY), 'the target key is not shown');
  assert.not.ok(html.includes('<script>window.__pwned'), 'a hostile label is escaped');
  assert.ok(html.includes('evil &lt;/script&gt;'), 'and shown as text');
});

Report('lip sync by transport, face and method: a row per face and method over its turns (r median, shares pooled, onsets pooled with the p95 distance); a face not measured says why', (ctx) => {
  const html = fs.readFileSync(ctx.outFile, 'utf8');
  assert.match(html, /By transport, face and method: endpoint \(this server \(local\)\), 2026-11-27/);
  // Two turns: r 0.81 and 0.75, open 90 % and 80 % of 40 loud frames each, first-sound onsets -30, -20, -10 and +90, after a pause 10, 30 twice.
  assert.ok(html.includes('<tr><td>WebSocket</td><td>default</td><td>A</td><td class="num">2</td><td class="num">0.75 (-40 ms)</td><td class="num">100 %</td><td class="num">85 %</td><td class="num">-20 (90)</td><td class="num">+10 (30)</td><td class="num">0.1 / 0.05 / 0.2</td></tr>'), 'method A of the default face, both turns');
  assert.match(html, /<td>WebSocket<\/td><td>default<\/td><td>B<\/td><td class="num">2<\/td><td class="num">0\.7 \(-40 ms\)<\/td>/);
  const tables = html.match(/By transport, face and method: /g)?.length ?? 0;
  assert.equal(html.match(/<td>WebSocket<\/td><td>default<\/td><td>A<\/td>/g)?.length, tables, 'one row per face and method in each table');
  assert.match(html, /<td>WebSocket<\/td><td>evil &lt;\/script&gt;.*?<\/td><td>B<\/td><td colspan="7">method B found no face to place its region on<\/td>/);
  assert.match(html, /<td>WebRTC<\/td><td>upload: neutral<\/td><td>A<\/td><td colspan="7">the face was refused<\/td>/);
  assert.ok(html.includes('<tr><td>WebRTC</td><td>upload: smiling</td><td>A</td><td class="num">1</td><td class="num">0.72 (-40 ms)</td>'), 'a failed call leaves the measured one');
  assert.not.ok(html.includes('not an entry'));
});

Report('an empty results directory gives a page that says so', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-report-empty-'));
  try {
    const outFile = path.join(dir, 'out', 'report.html');
    const { plots, results } = await writeReport({ resultsDir: dir, outFile });
    assert.is(results, 0);
    assert.equal(plots, ['plot-published'], 'only the published figures');
    const html = fs.readFileSync(outFile, 'utf8');
    assert.match(html, /No capacity steps are recorded yet/);
    assert.match(html, /No results in the results directory yet/);
  assert.match(html, /No result has the samples of a latency yet/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

Report.run();

const NO_CHROMIUM = chromiumAvailable() ? null : `${CHROMIUM_PATH} is missing (src/cli/setup.sh installs it)`;
const Rendered = suiteNeeding<Ctx>('benchmark report in Chromium', NO_CHROMIUM, {} as Ctx);

Rendered.before(async (ctx) => {
  ctx.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-report-'));
  writeFixtures(ctx.dir);
  ctx.outFile = path.join(ctx.dir, 'report.html');
  const written = await writeReport({ resultsDir: ctx.dir, outFile: ctx.outFile });
  ctx.plots = written.plots;
});

Rendered.after((ctx) => {
  fs.rmSync(ctx.dir, { recursive: true, force: true });
});

Rendered('renders offline with no error, every plot a drawn uPlot canvas; a full-page screenshot', async (ctx) => {
  const browser = await launchBrowser({ microphone: 'silence' });
  try {
    const page = await browser.browser.newPage({ viewport: { width: 1100, height: 900 } });
    const errors: string[] = [];
    const requests: string[] = [];
    page.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
    });
    page.on('pageerror', (err) => errors.push(`page: ${err.message}`));
    const fileUrl = pathToFileURL(ctx.outFile).href;
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url === fileUrl) return route.continue();
      requests.push(url);
      return route.abort();
    });
    await page.goto(fileUrl, { waitUntil: 'load' });
    await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
    assert.equal(errors, [], 'no console or page error');
    assert.equal(requests, [], 'no request beyond the page itself');
    assert.is(await page.evaluate('window.__pwned'), undefined, 'no script from a result ran');
    assert.is(await page.evaluate('document.body.getAttribute("data-plots-drawn")'), String(ctx.plots.length));
    const canvases = (await page.evaluate(`(${CANVAS_CHECK})(${JSON.stringify(ctx.plots)})`)) as Array<{ id: string; width: number; height: number; inked: number; title: string }>;
    for (const c of canvases) {
      assert.ok(c.width > 100 && c.height > 100, `${c.id} has a canvas of ${c.width}x${c.height}`);
      assert.ok(c.inked > 500, `${c.id} has something drawn (${c.inked} pixels)`);
      assert.ok(c.title.length > 0, `${c.id} has a title`);
    }
    const header = (await page.evaluate('document.querySelector("header").innerText')) as string;
    assert.match(header, /2 CPUs \(Test CPU 9000\)/, 'the header names the machine');
    assert.match(header, /f00dfac/, 'and the commit');
    assert.match(header, /Qwen2\.5 0\.5B GGUF/, 'and the models');
    const sources = (await page.evaluate('document.querySelector("#beside ul.sources").innerText')) as string;
    for (const f of PUBLISHED_FIGURES) assert.ok(sources.includes(f.sources[0]!.url), `the published figure of ${f.product} lists its source`);
    // The lip-sync strips (one per target): the inline frames decoded, the one that is not a data URL left out.
    const strips = (await page.evaluate('[...document.querySelectorAll("#lipsync .strip")].map((s) => [...s.querySelectorAll("img")].map((i) => i.complete && i.naturalWidth))')) as number[][];
    assert.equal(strips, [[16, 16, 16, 16, 16], [16, 16, 16, 16, 16]], 'five frames a target, each decoded');
    // Beside each trace, its figures in words: r at its lag, the shares, the control, the tracking.
    const figures = (await page.evaluate('[...document.querySelectorAll("#lipsync .lipsync-figures")].map((p) => p.innerText)')) as string[];
    assert.is(figures.length, 2, 'one line of figures a target');
    for (const line of figures) {
      assert.match(line, /r 0\.7\d* at a lag of \+40 ms/);
      assert.match(line, /closed in 96 % of 12 silent frames, open in 91 % of 30 loud frames/);
      assert.match(line, /r 0\.12 against the audio shifted by 400 ms/);
      assert.match(line, /face found in 100 % of 60 frames/);
    }
    const shot = path.join(ctx.dir, 'report.png');
    await page.screenshot({ path: shot, fullPage: true });
    const png = fs.readFileSync(shot);
    assert.ok(png.subarray(1, 4).toString() === 'PNG', 'a PNG');
    assert.ok(png.length > 50_000, `a screenshot with something in it (${png.length} bytes)`);
    const height = png.readUInt32BE(20);
    assert.ok(height > 2000, `the whole page (${height} px high)`);
    if (process.env.REPORT_SCREENSHOT) {
      fs.mkdirSync(path.dirname(path.resolve(process.env.REPORT_SCREENSHOT)), { recursive: true });
      fs.copyFileSync(shot, process.env.REPORT_SCREENSHOT);
    }
    await page.close();
  } finally {
    await browser.close();
  }
});

Rendered.run();

/** Page side: for each plot id, its uPlot canvas's size, how many pixels are drawn, and its title. */
const CANVAS_CHECK = `(ids) => ids.map((id) => {
  const el = document.getElementById(id);
  const canvas = el && el.querySelector('.uplot canvas');
  if (!canvas) return { id, width: 0, height: 0, inked: 0, title: '' };
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let inked = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) inked++;
  const title = el.querySelector('.u-title');
  return { id, width: canvas.width, height: canvas.height, inked, title: title ? title.textContent : '' };
})`;
