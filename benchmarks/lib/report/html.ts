/**
 * The report page: one self-contained HTML file (uPlot's script and stylesheet inlined, no font,
 * no network) with a section per kind of plot. The plots are drawn in the browser by a small
 * script from the PlotSpecs of data.ts, embedded as JSON; the tables and SVG sparklines are written
 * here.
 *
 * Invariants: every string from a results file goes through escapeHtml (text and attributes) or
 * into the JSON block with `<` escaped, so no result can close a tag or run script; each plot is
 * an element `<div id="plot-…" class="plot">` holding one uPlot canvas, and a plot that fails to
 * draw says so on the console (console.error) without stopping the others; a section with nothing
 * to draw says why in words, not with an empty canvas.
 */
import type { HistoryRow, LipSyncFigures, PlotSpec, ReportData } from './data.js';
import { fmt, historyName } from './data.js';

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Every plot the page draws, in page order. */
export function allPlots(d: ReportData): PlotSpec[] {
  return [...(d.published.plot ? [d.published.plot] : []), ...d.cdfs, ...d.breakdowns.map((b) => b.plot), ...d.histograms, ...d.capacity, ...d.turnEnd, ...d.lipSync.map((l) => l.plot), ...d.historyPlots];
}

export function renderPage(d: ReportData, uplot: { js: string; css: string }): string {
  const plots = allPlots(d);
  const json = JSON.stringify(plots).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Avatar server benchmark report</title>
<style>${uplot.css}</style>
<style>${PAGE_CSS}</style>
</head>
<body>
<main>
${header(d)}
${section('beside', 'Beside published figures', publishedSection(d))}
${section('cdf', 'Latency distributions', d.cdfs.length ? `<p>Empirical CDFs of every latency with its samples recorded, from the newest result of each benchmark and target: a line per target and mode. The further left and the steeper, the better; the right-hand tail is the slow turns.</p>${d.cdfs.map(plotBox).join('\n')}` : none('No result has the samples of a latency yet (results recorded before 2026-11-27 keep only their percentiles).'))}
${section('breakdown', 'Per-step breakdown', d.breakdowns.length ? d.breakdowns.map((b) => plotBox(b.plot) + breakdownTable(b.table)).join('\n') : none('No result names the steps of a turn yet (metrics named “group › step”).'))}
${section('histograms', 'A/V offset and frame pacing', d.histograms.length ? `<p>Share of samples per bin, newest result of each benchmark and target.</p>${d.histograms.map(plotBox).join('\n')}` : none('No result has the samples of an A/V offset or of frame intervals yet.'))}
${section('capacity', 'Capacity', d.capacity.length ? `<p>Each step adds sessions at once and holds them for the benchmark’s window; a step keeps time when no frame is late.</p>${d.capacity.map(plotBox).join('\n')}` : none('No capacity steps are recorded yet: the endpoint benchmark records them on a server it starts (npm run bench -- report, without --target), and so do the capacity runs of the avatar and webrtc benchmarks (params.capacity_steps).'))}
${section('turn-end', 'End of turn', d.turnEnd.length ? `<p>The turn-end benchmark (npm run bench -- turn-end): every judge replayed on the same utterances, the share cut off before they ended against how long after a finished one it decided.</p>${d.turnEnd.map(plotBox).join('\n')}` : none('No turn-end curve is recorded yet: npm run bench -- turn-end records one (params.turn_end_curves).'))}
${section('lipsync', 'Lip sync', d.lipSync.length || d.lipSyncTables.length ? [...d.lipSync.map((l) => plotBox(l.plot) + lipSyncFigures(l.figures) + frameStrip(l.frames)), ...d.lipSyncTables.map(lipSyncTable)].join('\n') : none('No lip sync is recorded yet: the endpoint benchmark records a trace when it makes a WebRTC call (ENDPOINT_WEBRTC not 0) to a target that sends video, and the figures by transport, face and method with its lip-sync turns (ENDPOINT_LIP_FACES).'))}
${section('history', 'History', historySection(d))}
<footer>Generated ${escapeHtml(d.generated)} from ${d.results.length} result file(s). Plots drawn with uPlot (MIT), inlined: the page needs no network.</footer>
</main>
<script>${uplot.js}</script>
<script type="application/json" id="report-data">${json}</script>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

/** The trace's figures in a line: r at its lag, the closed and open shares, the control and the face tracking. */
function lipSyncFigures(f: LipSyncFigures | null): string {
  if (!f) return '';
  const pct = (x: number | null) => (x === null ? '–' : `${Math.round(100 * x)} %`);
  const parts = [
    `<strong>r ${fmt(f.r)}</strong> at a lag of <strong>${f.lag_ms > 0 ? '+' : ''}${Math.round(f.lag_ms)} ms</strong> (best within ±40 ms; positive: the mouth trails the sound)`,
    `closed in ${pct(f.closed_share)} of ${f.silent_frames ?? '–'} silent frames, open in ${pct(f.open_share)} of ${f.loud_frames ?? '–'} loud frames`,
    ...(f.wide === null ? [] : [`best within ±300 ms: r ${fmt(f.wide.r)} at ${f.wide.lag_ms > 0 ? '+' : ''}${Math.round(f.wide.lag_ms)} ms`]),
    ...(f.r_audio_shifted_400ms === null ? [] : [`r ${fmt(f.r_audio_shifted_400ms)} against the audio shifted by 400 ms (a control: should be low)`]),
    ...(f.face_found_share === null ? [] : [`face found in ${pct(f.face_found_share)} of ${f.frames_measured ?? '–'} frames`]),
  ];
  return `<p class="lipsync-figures">${parts.join('; ')}.</p>`;
}

/** Lip sync by transport, face and method: r at its lag, closed and open shares, onsets, controls. */
function lipSyncTable(t: ReportData['lipSyncTables'][number]): string {
  const pct = (x: number | null) => (x === null ? '–' : `${Math.round(100 * x)} %`);
  const ms = (x: number | null) => (x === null ? '–' : `${x > 0 ? '+' : ''}${Math.round(x)}`);
  const num = (x: number | null) => (x === null ? '–' : fmt(x));
  const rows = t.rows.map((r) => {
    const head = `<td>${r.transport}</td><td>${escapeHtml(r.face)}</td><td>${r.method}</td>`;
    if (r.missing !== null) return `<tr>${head}<td colspan="7">${escapeHtml(r.missing)}</td></tr>`;
    const onset = (p50: number | null, p95: number | null) => `${ms(p50)}${p95 === null ? '' : ` (${Math.round(p95)})`}`;
    return `<tr>${head}<td class="num">${r.turns}</td><td class="num">${num(r.r)} (${ms(r.lag_ms)} ms)</td><td class="num">${pct(r.closed_share)}</td><td class="num">${pct(r.open_share)}</td><td class="num">${onset(r.first_sound_ms, r.first_sound_p95_distance_ms)}</td><td class="num">${onset(r.after_pause_ms, r.after_pause_p95_distance_ms)}</td><td class="num">${r.controls.map(num).join(' / ')}</td></tr>`;
  });
  return `<h3>By transport, face and method: ${escapeHtml(t.who)}</h3>
<p>Method A finds the face's landmarks anew on every decoded frame; method B follows the dark and teeth pixels of the mouth region placed on the first frame. Goals: r ≥ 0.7 within ±40 ms, closed in ≥ 95 % of silent frames, open in ≥ 90 % of loud ones, the mouth's onset within 40 ms of each first sound and each phrase after a pause, 80 ms at the 95th percentile (negative: the mouth first; in brackets the 95th percentile of the distance from 0 over the turns' onsets); r and the controls are medians over the turns, the shares pooled over their frames; each control, the audio 400 ms later, earlier and reversed, should fail (r low).</p>
<table class="small"><thead><tr><th>transport</th><th>face</th><th>method</th><th>turns</th><th>r (lag)</th><th>closed</th><th>open</th><th>onset at the first sound, ms: median (p95 distance)</th><th>after a pause, ms</th><th>controls r</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

/** The decoded frames around the mouth, each with its time from the first sound. */
function frameStrip(frames: Array<{ t: number; url: string }>): string {
  if (frames.length === 0) return '';
  const cells = frames.map((f) => `<figure class="strip-frame"><img src="${escapeHtml(f.url)}" alt="frame at ${f.t} ms" width="96" height="96"><figcaption>${f.t} ms</figcaption></figure>`);
  return `<div class="strip">${cells.join('')}</div>`;
}

function section(id: string, title: string, body: string): string {
  return `<section id="${id}">\n<h2>${escapeHtml(title)}</h2>\n${body}\n</section>`;
}

function none(text: string): string {
  return `<p class="none">${escapeHtml(text)}</p>`;
}

function plotBox(p: PlotSpec): string {
  return `<figure class="plot-box"><div id="${escapeHtml(p.id)}" class="plot" data-title="${escapeHtml(p.title)}"></div>${p.caption ? `<figcaption>${escapeHtml(p.caption)}</figcaption>` : ''}</figure>`;
}

function header(d: ReportData): string {
  const list = (items: string[]) => (items.length ? `<ul>${items.join('')}</ul>` : '<p class="none">none recorded</p>');
  const first = d.results[0]?.result.date;
  const last = d.results.at(-1)?.result.date;
  return `<header>
<h1>Avatar server benchmark report</h1>
<p class="lead">${d.results.length} result(s)${first ? `, ${escapeHtml(first.slice(0, 10))} to ${escapeHtml(last!.slice(0, 10))}` : ''}. Every figure is measured on the machine(s) below; re-plot with <code>npm run bench -- report --replot</code>.</p>
<div class="facts">
<div><h3>Machine</h3>${list(d.machines.map((m) => `<li class="machine">${escapeHtml(m.text)} <span class="dim">(${escapeHtml(m.benchmarks.join(', '))})</span></li>`))}</div>
<div><h3>Commit</h3>${list(d.commits.map((c) => `<li><code class="commit">${escapeHtml(c.commit)}</code> <span class="dim">(${escapeHtml(c.benchmarks.join(', '))})</span></li>`))}</div>
<div><h3>Models and targets</h3>${list(d.models.map((m) => `<li><b>${escapeHtml(m.benchmark)}${m.target ? ` [${escapeHtml(m.target)}]` : ''}</b>: ${escapeHtml(m.text)}</li>`))}</div>
</div>
${d.results.length ? `<details class="results"><summary>The ${d.results.length} result(s) drawn: date, benchmark, target, commit</summary>${resultsTable(d)}</details>` : none('No results in the results directory yet: run a benchmark first (npm run bench -- NAME).')}
${d.skipped.length ? `<p class="warn">Skipped: ${d.skipped.map((s) => `${escapeHtml(s.file)} (${escapeHtml(s.reason)})`).join('; ')}</p>` : ''}
</header>`;
}

function publishedSection(d: ReportData): string {
  const { plot, ours, figures } = d.published;
  if (!plot) return none('No headline latency and no published figure to show.');
  const oursList = ours.length
    ? `<h3>Ours</h3><ul class="ours">${ours.map((o) => `<li>${escapeHtml(o.label)} <span class="dim">from ${escapeHtml(o.source)}</span></li>`).join('')}</ul>`
    : none('No headline latency of ours is recorded yet (text turn, voice turn, first frame).');
  const sources = `<h3>Published figures and their sources</h3><ul class="sources">${figures
    .map(
      (f) =>
        `<li><b>${escapeHtml(f.product)}</b>: ${escapeHtml(f.stated)}, ${escapeHtml(f.measures)} <span class="claim">${escapeHtml(f.claim)}</span>${f.caveat ? ` <span class="dim">${escapeHtml(f.caveat)}</span>` : ''}<br>source: ${f.sources
          .map((s) => `<a href="${escapeHtml(s.url)}">${escapeHtml(s.label)}</a> <span class="url">${escapeHtml(s.url)}</span>`)
          .join('; ')}</li>`,
    )
    .join('')}</ul><p class="dim">The figures come from public docs and pages, collected in the project’s research notes; none was measured by us.</p>`;
  return plotBox(plot) + oursList + sources;
}

function breakdownTable(t: ReportData['breakdowns'][number]['table']): string {
  return `<table class="small"><thead><tr><th>target / mode</th>${t.steps.map((s, i) => `<th>${i + 1}. ${escapeHtml(s)}</th>`).join('')}<th>sum</th></tr></thead><tbody>${t.rows
    .map((r) => `<tr><td>${escapeHtml(r.key)}</td>${r.p50.map((v) => `<td class="num">${v === null ? '–' : fmt(v)}</td>`).join('')}<td class="num">${fmt(r.p50.reduce<number>((a, v) => a + (v ?? 0), 0))}</td></tr>`)
    .join('')}</tbody></table>`;
}

function historySection(d: ReportData): string {
  if (d.history.length === 0) return none('No metric has been recorded by two results yet: the history starts with the second run of a benchmark.');
  const plots = d.historyPlots.length ? d.historyPlots.map(plotBox).join('\n') : none('None of the headline figures has been recorded twice yet.');
  const rows = d.history
    .map((r) => {
      const last = r.points.at(-1)!;
      const prev = r.points.at(-2)!;
      const change = prev.p50 !== 0 ? (100 * (last.p50 - prev.p50)) / Math.abs(prev.p50) : 0;
      const jump = Math.abs(change) >= 20 && Math.abs(last.p50 - prev.p50) > 1e-9;
      return `<tr${jump ? ' class="jump"' : ''}><td>${escapeHtml(r.benchmark)}${r.target ? ` [${escapeHtml(r.target)}]` : ''}</td><td>${escapeHtml(r.metric)}</td><td>${escapeHtml(r.unit)}</td><td class="num">${r.points.length}</td><td class="num">${fmt(prev.p50)} → ${fmt(last.p50)}</td><td class="num">${change >= 0 ? '+' : ''}${change.toFixed(0)} %</td><td>${sparkline(r)}</td></tr>`;
    })
    .join('\n');
  return `<p>The p50 and p95 of each figure over the results recorded: a regression shows as a jump.</p>${plots}
<h3>Every figure recorded twice or more</h3>
<p class="dim">Sparkline: p50 (dark) and p95 (light) over the results, oldest left. Rows whose p50 moved 20 % or more since the previous result are marked.</p>
<table class="history"><thead><tr><th>benchmark</th><th>metric</th><th>unit</th><th>results</th><th>p50, previous → latest</th><th>change</th><th>trend</th></tr></thead><tbody>
${rows}
</tbody></table>`;
}

function sparkline(r: HistoryRow): string {
  const [w, h, pad] = [120, 24, 2];
  const all = r.points.flatMap((p) => [p.p50, p.p95]).filter(Number.isFinite);
  const [lo, hi] = [Math.min(...all), Math.max(...all)];
  const x = (i: number) => pad + (i * (w - 2 * pad)) / Math.max(1, r.points.length - 1);
  const y = (v: number) => (hi === lo ? h / 2 : h - pad - ((v - lo) * (h - 2 * pad)) / (hi - lo));
  const line = (field: 'p50' | 'p95') =>
    r.points
      .map((p, i) => (Number.isFinite(p[field]) ? `${x(i).toFixed(1)},${y(p[field]).toFixed(1)}` : null))
      .filter(Boolean)
      .join(' ');
  const title = r.points.map((p) => `${p.date.slice(0, 16)} ${p.commit}: p50 ${fmt(p.p50)}, p95 ${fmt(p.p95)}`).join('\n');
  return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img" aria-label="${escapeHtml(historyName(r))}"><title>${escapeHtml(title)}</title><polyline points="${line('p95')}" fill="none" stroke="#9ecae1" stroke-width="1.5"/><polyline points="${line('p50')}" fill="none" stroke="#1f77b4" stroke-width="1.5"/></svg>`;
}

function resultsTable(d: ReportData): string {
  return `<table class="small"><thead><tr><th>date (UTC)</th><th>benchmark</th><th>target</th><th>commit</th><th>metrics</th><th>file</th></tr></thead><tbody>${d.results
    .map(
      (r) =>
        `<tr><td>${escapeHtml(r.result.date.replace('T', ' ').slice(0, 19))}</td><td>${escapeHtml(r.result.benchmark)}</td><td>${escapeHtml(r.target ?? '')}</td><td><code>${escapeHtml(r.result.commit)}</code></td><td class="num">${r.result.metrics.length}</td><td>${escapeHtml(r.file)}</td></tr>`,
    )
    .join('')}</tbody></table>`;
}

const PAGE_CSS = `
.strip { display: flex; flex-wrap: wrap; gap: 4px; margin: 8px 0 16px; } .strip-frame { margin: 0; text-align: center; font-size: 11px; color: #555; } .strip-frame img { display: block; border: 1px solid #ccc; }
body { margin: 0; background: #fafafa; color: #222; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 24px; margin: 8px 0; } h2 { font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; } h3 { font-size: 15px; margin: 12px 0 4px; }
.lead { color: #444; } .dim { color: #777; } .none { color: #777; font-style: italic; } .warn { color: #a15c00; }
.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: 4px 24px; }
.facts ul { margin: 0; padding-left: 18px; }
figure.plot-box { margin: 16px 0; background: #fff; border: 1px solid #e3e3e3; border-radius: 6px; padding: 8px; }
figcaption { color: #666; font-size: 12px; margin-top: 4px; }
.plot { width: 100%; min-height: 40px; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 12px; margin: 8px 0; }
th, td { border-bottom: 1px solid #eee; padding: 3px 6px; text-align: left; vertical-align: middle; }
th { background: #f3f3f3; } td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.jump td { background: #fff3e0; }
.u-legend th, .u-legend td { background: none; border: 0; padding: 1px 4px; }
.sources li, .ours li { margin: 4px 0; } .url { color: #999; font-size: 11px; word-break: break-all; }
.claim { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 3px; background: #eee; color: #555; }
code { font-size: 12px; } a { color: #1f5fa8; }
details.results { margin: 8px 0; } details.results summary { cursor: pointer; color: #1f5fa8; }
footer { margin-top: 32px; color: #888; font-size: 12px; }
.uplot .u-title { font-size: 14px; font-weight: 600; }
`;

/** Draws every PlotSpec of the JSON block with uPlot (plain browser JavaScript). */
const PAGE_SCRIPT = `
(function () {
  'use strict';
  var specs = JSON.parse(document.getElementById('report-data').textContent);
  var yFrom0 = function (u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; };
  function alpha(c, a) { return c + a; }
  function categorical(spec, opts, catAxis) {
    var n = spec.categories.length;
    opts.scales.x = Object.assign(opts.scales.x || {}, { time: false, range: [-0.5, n - 0.5] });
    Object.assign(catAxis, {
      splits: function () { return spec.categories.map(function (_, i) { return i; }); },
      values: function (u, splits) { return splits.map(function (i) { return spec.categories[i] || ''; }); },
    });
    opts.series[0].value = function (u, v) { return v == null ? '' : (spec.categories[v] || ''); };
  }
  function draw(spec) {
    var el = document.getElementById(spec.id);
    var width = Math.max(320, Math.min(980, el.clientWidth || 960));
    var height = 320;
    var data = spec.data;
    var xAxis = { label: spec.xLabel, labelSize: 22 };
    var yAxis = { label: spec.yLabel, labelSize: 22, size: 60 };
    var opts = { title: spec.title, width: width, height: height, scales: { x: { time: !!spec.time } }, series: [{ label: spec.time ? 'date' : spec.xLabel }], axes: [xAxis, yAxis] };
    if (spec.time) opts.tzDate = function (ts) { return uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'); };
    if (spec.kind === 'lines' || spec.kind === 'steps') {
      spec.series.forEach(function (s) {
        opts.series.push({ label: s.label, stroke: s.color, width: 2, spanGaps: true, dash: s.dash ? [6, 4] : undefined,
          points: { show: !!s.points, size: 6 }, paths: spec.kind === 'steps' ? uPlot.paths.stepped({ align: 1 }) : undefined });
      });
      if (spec.kind === 'steps') opts.scales.y = { range: [0, 1.02] };
    } else if (spec.kind === 'bars') {
      opts.scales.x.time = false;
      opts.scales.y = { range: yFrom0 };
      spec.series.forEach(function (s) {
        opts.series.push({ label: s.label, stroke: s.color, fill: alpha(s.color, '55'), width: 1, paths: uPlot.paths.bars({ align: 1, size: [1, Infinity] }), points: { show: false } });
      });
    } else if (spec.kind === 'stacked') {
      opts.scales.y = { range: yFrom0 };
      categorical(spec, opts, xAxis);
      // Drawn tallest first: series k holds the sum of steps 1..k and is drawn before the shorter ones.
      var own = data.slice(1);
      var cum = own.map(function (_, k) { return data[0].map(function (_, i) { var t = 0, any = false; for (var j = 0; j <= k; j++) { if (own[j][i] != null) { t += own[j][i]; any = true; } } return any ? t : null; }); });
      var order = spec.series.map(function (_, k) { return k; }).reverse();
      data = [data[0]].concat(order.map(function (k) { return cum[k]; }));
      order.forEach(function (k) {
        var s = spec.series[k];
        opts.series.push({ label: s.label, stroke: s.color, fill: alpha(s.color, 'cc'), width: 1, points: { show: false },
          paths: uPlot.paths.bars({ size: [0.6, 90] }), value: function (u, v, si, i) { return i == null || own[k][i] == null ? '–' : own[k][i] + ' ms'; } });
      });
    } else if (spec.kind === 'hbars') {
      var n = spec.categories.length;
      height = Math.max(200, 30 * n + 110);
      // The category axis as wide as its longest label, up to 45 % of the plot; longer labels are cut (…).
      var font = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
      var ctx = document.createElement('canvas').getContext('2d');
      ctx.font = font;
      var room = Math.floor(width * 0.45);
      var fit = function (label) {
        if (ctx.measureText(label).width <= room - 16) return label;
        var t = label;
        while (t.length > 1 && ctx.measureText(t + '…').width > room - 16) t = t.slice(0, -1);
        return t + '…';
      };
      spec = Object.assign({}, spec, { categories: spec.categories.map(fit) });
      var widest = spec.categories.reduce(function (a, c) { return Math.max(a, ctx.measureText(c).width); }, 0);
      opts.height = height;
      opts.legend = { live: false };
      opts.scales.x = { time: false, ori: 1, dir: -1 };
      opts.scales.y = { ori: 0, range: yFrom0 };
      categorical(spec, opts, xAxis);
      xAxis.side = 3; xAxis.size = Math.ceil(widest) + 16; xAxis.font = font; xAxis.label = undefined; xAxis.gap = 4;
      yAxis.side = 2; yAxis.size = 40; yAxis.space = 70;
      spec.series.forEach(function (s) {
        opts.series.push({ label: s.label, stroke: s.color, fill: s.color, width: 0, points: { show: false }, paths: uPlot.paths.bars({ size: [0.75, 22] }) });
      });
    }
    new uPlot(opts, data, el);
  }
  specs.forEach(function (spec) {
    try { draw(spec); } catch (err) { console.error('plot ' + spec.id + ' failed: ' + (err && err.stack || err)); }
  });
  document.body.setAttribute('data-plots-drawn', String(specs.length));
})();
`;
