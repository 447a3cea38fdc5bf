/**
 * The report's data: reads every results file (*.json, a BenchResult each) of a results directory
 * and builds what the page draws, as plain plot specifications (PlotSpec) and tables that html.ts
 * renders. Nothing here measures; a run is re-plotted from its file.
 *
 * Conventions read from the results:
 *  - an endpoint result (`benchmark: 'endpoint'`) names its target in `params.target.label` and its
 *    metrics `mode · measure` ("websocket · text turn → first audio"); latency CDFs of one measure
 *    from every target and mode share a plot, a line per `target / mode`. Other benchmarks'
 *    metrics named `[variant] measure` share a plot per measure, a line per variant.
 *  - a metric named `group › step` is a step of a breakdown (p50 per step, stacked per target).
 *  - metrics naming an A/V offset or frame interval / pacing get a histogram.
 *  - `params.turn_end_curves` ({judge, knob, falseCutPercent, latencyP50}[], the turn-end benchmark)
 *    gives the curve of false cut-offs against decision latency, a line per judge;
 *  - `params.capacity_steps` ({load, sessions, cpu_percent, late_frames, rss_mb?}[]) gives capacity
 *    curves; with rss_mb, a memory curve too (starting at params.capacity_idle.rss_mb, 0 sessions).
 *  - history: a metric (benchmark, target, name) recorded by two results or more.
 * A metric without samples (its p50 null) is left out; a result without metrics still counts.
 *
 * Invariants: a file that is not a BenchResult is listed as skipped, never fatal; only metrics
 * with `values` (results from 2026-11-27 on) give distributions; every plot id is unique and
 * stable for the same results; no value from params named like a secret (key, token) is shown.
 */
import fs from 'node:fs';
import path from 'node:path';
import { percentile, type BenchResult, type Metric } from '../harness.js';
import { PUBLISHED_FIGURES, type PublishedFigure } from './published.js';

export interface LoadedResult {
  file: string;
  result: BenchResult;
  /** params.target.label of an endpoint result, else null. */
  target: string | null;
  /** Seconds since the epoch, from result.date. */
  time: number;
}

export interface PlotSeries {
  label: string;
  color: string;
  dash?: boolean;
  /** Draw the points (history, sparse lines). */
  points?: boolean;
}

/**
 * One plot, drawn by the page's script with uPlot. `data[0]` is x (numbers; category indices for
 * categorical plots; seconds for time), `data[i]` the y of series i-1 (null: no point).
 *  - lines / steps: lines (steps: an empirical CDF, drawn as a staircase);
 *  - bars: vertical bars (a histogram: x is each bin's left edge);
 *  - stacked: vertical bars over `categories`, the series stacked in order (data: each series' own value);
 *  - hbars: horizontal bars over `categories`, top to bottom.
 */
export interface PlotSpec {
  id: string;
  kind: 'lines' | 'steps' | 'bars' | 'stacked' | 'hbars';
  title: string;
  xLabel: string;
  yLabel: string;
  time?: boolean;
  categories?: string[];
  series: PlotSeries[];
  data: Array<Array<number | null>>;
  /** A line of text under the plot. */
  caption?: string;
}

export interface HistoryRow {
  benchmark: string;
  target: string | null;
  metric: string;
  unit: string;
  points: Array<{ time: number; date: string; commit: string; p50: number; p95: number }>;
}

export interface BreakdownTable {
  plotId: string;
  steps: string[];
  rows: Array<{ key: string; p50: Array<number | null> }>;
}

export interface PublishedRow {
  label: string;
  figure: PublishedFigure | null;
  ms: number;
}

export interface ReportData {
  generated: string;
  results: LoadedResult[];
  skipped: Array<{ file: string; reason: string }>;
  machines: Array<{ text: string; benchmarks: string[] }>;
  commits: Array<{ commit: string; benchmarks: string[] }>;
  models: Array<{ benchmark: string; target: string | null; text: string }>;
  published: { plot: PlotSpec | null; ours: Array<{ label: string; source: string }>; figures: PublishedFigure[] };
  cdfs: PlotSpec[];
  breakdowns: Array<{ plot: PlotSpec; table: BreakdownTable }>;
  histograms: PlotSpec[];
  capacity: PlotSpec[];
  /** False cut-offs against decision latency, a line per end-of-turn judge (the turn-end benchmark's params.turn_end_curves). */
  turnEnd: PlotSpec[];
  /** A turn's mouth opening against its speech power at a receiver, with a strip of frames (endpoint results' params.lip_sync_trace). */
  lipSync: Array<{ plot: PlotSpec; frames: Array<{ t: number; url: string }>; figures: LipSyncFigures | null }>;
  /** Lip sync by transport, face and method, from the newest endpoint result of each target that has them. */
  lipSyncTables: Array<{ who: string; rows: LipSyncRow[] }>;
  historyPlots: PlotSpec[];
  history: HistoryRow[];
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
export const color = (i: number): string => PALETTE[i % PALETTE.length]!;

/** Reads every *.json of `dir` that is a BenchResult, oldest first. */
export function loadResults(dir: string): { results: LoadedResult[]; skipped: Array<{ file: string; reason: string }> } {
  const results: LoadedResult[] = [];
  const skipped: Array<{ file: string; reason: string }> = [];
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort() : [];
  for (const file of files) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    } catch (err) {
      skipped.push({ file, reason: `not JSON (${(err as Error).message})` });
      continue;
    }
    const reason = notAResult(parsed);
    if (reason) {
      skipped.push({ file, reason });
      continue;
    }
    // A metric with no samples has no percentiles (NaN, written as null): nothing to draw.
    const result = { ...(parsed as BenchResult) };
    result.metrics = result.metrics.filter((m) => typeof m.p50 === 'number' && Number.isFinite(m.p50));
    const time = Date.parse(result.date) / 1000;
    results.push({ file, result, target: targetLabel(result), time });
  }
  results.sort((a, b) => a.time - b.time || a.file.localeCompare(b.file));
  return { results, skipped };
}

function notAResult(x: unknown): string | null {
  if (typeof x !== 'object' || x === null) return 'not an object';
  const r = x as Partial<BenchResult>;
  if (typeof r.benchmark !== 'string') return 'no benchmark name';
  if (typeof r.date !== 'string' || Number.isNaN(Date.parse(r.date))) return 'no date';
  if (!Array.isArray(r.metrics)) return 'no metrics';
  if (r.metrics.some((m) => typeof m?.name !== 'string' || typeof m.unit !== 'string')) return 'a metric without name or unit';
  return null;
}

function targetLabel(r: BenchResult): string | null {
  const target = r.params?.['target'];
  if (typeof target === 'object' && target !== null && typeof (target as { label?: unknown }).label === 'string') return (target as { label: string }).label;
  return null;
}

/** A metric's name taken apart: the line it belongs to (endpoint mode or [variant]) and its measure. */
function splitName(r: LoadedResult, name: string): { line: string; measure: string } {
  if (r.result.benchmark === 'endpoint') {
    const at = name.indexOf(' · ');
    const mode = at >= 0 ? name.slice(0, at) : '';
    const measure = at >= 0 ? name.slice(at + 3) : name;
    return { line: [r.target ?? 'endpoint', mode].filter(Boolean).join(' / '), measure };
  }
  const m = /^\[([^\]]+)\]\s*(.*)$/.exec(name);
  if (m) return { line: m[1]!, measure: m[2]! };
  return { line: r.result.benchmark, measure: name };
}

/** The newest result of each (benchmark, target). */
function latestResults(results: LoadedResult[]): LoadedResult[] {
  const latest = new Map<string, LoadedResult>();
  for (const r of results) latest.set(`${r.result.benchmark}\u0000${r.target ?? ''}`, r); // oldest first: the last one wins
  return [...latest.values()];
}

const hasValues = (m: Metric): m is Metric & { values: number[] } => Array.isArray(m.values) && m.values.filter(Number.isFinite).length >= 2;

/** Plots grouped by a key, in the order their keys were first seen. */
class Groups<T> {
  readonly map = new Map<string, { title: string; items: T[] }>();
  add(key: string, title: string, item: T): void {
    const g = this.map.get(key) ?? { title, items: [] };
    g.items.push(item);
    this.map.set(key, g);
  }
}

interface Line {
  line: string;
  values: number[];
  unit: string;
}

function groupKey(r: LoadedResult, measure: string): string {
  return r.result.benchmark === 'endpoint' ? `endpoint\u0000${measure}` : `${r.result.benchmark}\u0000${measure}`;
}

function groupTitle(r: LoadedResult, measure: string): string {
  return r.result.benchmark === 'endpoint' ? measure : `${measure} (${r.result.benchmark})`;
}

/** Empirical CDFs of every latency metric with samples, a plot per measure, a line per target / mode. */
function cdfPlots(latest: LoadedResult[]): PlotSpec[] {
  const groups = new Groups<Line>();
  for (const r of latest) {
    for (const m of r.result.metrics) {
      if (m.unit !== 'ms' || !hasValues(m)) continue;
      const { line, measure } = splitName(r, m.name);
      groups.add(groupKey(r, measure), groupTitle(r, measure), { line, values: m.values.filter(Number.isFinite), unit: m.unit });
    }
  }
  let n = 0;
  return [...groups.map.values()].map(({ title, items }) => {
    const xs = [...new Set(items.flatMap((l) => l.values))].sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const ys = items.map((l) => {
      const sorted = [...l.values].sort((a, b) => a - b);
      const y: Array<number | null> = new Array(xs.length).fill(null);
      // The share of samples ≤ x at each sample (the last of equal samples holds the step's top).
      sorted.forEach((v, i) => (y[index.get(v)!] = round((i + 1) / sorted.length, 4)));
      return y;
    });
    return {
      id: `plot-cdf-${++n}`,
      kind: 'steps' as const,
      title: `${title}: distribution`,
      xLabel: /offset|interval|pacing/i.test(title) ? 'milliseconds' : 'latency (ms)',
      yLabel: 'share of samples ≤ x',
      series: items.map((l, i) => ({ label: `${l.line} (n=${l.values.length}, p50 ${fmt(percentileOf(l.values, 50))} ms)`, color: color(i) })),
      data: [xs, ...ys],
    };
  });
}

/** Stacked p50 bars per target of every breakdown (`group › step`). */
function breakdownPlots(latest: LoadedResult[]): Array<{ plot: PlotSpec; table: BreakdownTable }> {
  const groups = new Groups<{ key: string; step: string; p50: number; unit: string }>();
  for (const r of latest) {
    for (const m of r.result.metrics) {
      const { line, measure } = splitName(r, m.name);
      const at = measure.indexOf(' › ');
      if (at < 0 || m.unit !== 'ms' || !Number.isFinite(m.p50)) continue;
      const group = measure.slice(0, at);
      groups.add(groupKey(r, group), groupTitle(r, group), { key: line, step: measure.slice(at + 3), p50: m.p50, unit: m.unit });
    }
  }
  let n = 0;
  return [...groups.map.values()].map(({ title, items }) => {
    const steps = [...new Set(items.map((i) => i.step))];
    const keys = [...new Set(items.map((i) => i.key))];
    const value = (key: string, step: string) => items.find((i) => i.key === key && i.step === step)?.p50 ?? null;
    const id = `plot-breakdown-${++n}`;
    const plot: PlotSpec = {
      id,
      kind: 'stacked',
      title: `${title}: where the time goes (p50 per step)`,
      xLabel: 'target / mode',
      yLabel: 'p50 per step, stacked (ms)',
      categories: keys,
      series: steps.map((s, i) => ({ label: `${i + 1}. ${s}`, color: color(i) })),
      data: [keys.map((_, i) => i), ...steps.map((s) => keys.map((k) => value(k, s)))],
      caption: 'Each segment is one step’s p50; a stack’s height is the sum of the steps’ p50s, not the p50 of the whole turn.',
    };
    return { plot, table: { plotId: id, steps, rows: keys.map((key) => ({ key, p50: steps.map((s) => value(key, s)) })) } };
  });
}

const HISTOGRAM_NAME = /A\/V offset|frame interval|frame pacing/i;

/** Histograms (share of samples per bin) of A/V offsets and frame intervals, a plot per measure. */
function histogramPlots(latest: LoadedResult[]): PlotSpec[] {
  const groups = new Groups<Line>();
  for (const r of latest) {
    for (const m of r.result.metrics) {
      if (!HISTOGRAM_NAME.test(m.name) || !hasValues(m)) continue;
      const { line, measure } = splitName(r, m.name);
      groups.add(groupKey(r, measure), groupTitle(r, measure), { line, values: m.values.filter(Number.isFinite), unit: m.unit });
    }
  }
  let n = 0;
  return [...groups.map.values()].map(({ title, items }) => {
    const all = items.flatMap((l) => l.values);
    const [lo, hi] = [Math.min(...all), Math.max(...all)];
    const width = niceBin((hi - lo) / 30 || 1);
    const first = Math.floor(lo / width) * width;
    const bins = Math.max(1, Math.floor((hi - first) / width) + 1);
    const xs = Array.from({ length: bins + 1 }, (_, i) => round(first + i * width, 6));
    const ys = items.map((l) => {
      const counts = new Array<number>(bins + 1).fill(0);
      for (const v of l.values) counts[Math.min(bins - 1, Math.floor((v - first) / width))]!++;
      return counts.map((c, i) => (i === bins ? null : round((100 * c) / l.values.length, 2)));
    });
    const unit = items[0]!.unit;
    return {
      id: `plot-histogram-${++n}`,
      kind: 'bars' as const,
      title: `${title}: histogram`,
      xLabel: `${unitLabel(unit)} (bins of ${fmt(width)} ${unit})`,
      yLabel: 'share of samples (%)',
      series: items.map((l, i) => ({ label: `${l.line} (n=${l.values.length}, p50 ${fmt(percentileOf(l.values, 50))} ${l.unit})`, color: color(i) })),
      data: [xs, ...ys],
    };
  });
}

export interface CapacityPoint {
  load: string;
  sessions: number;
  cpu_percent: number;
  late_frames: number;
  /** Server resident memory, MB (results from 2026-11-27 on). */
  rss_mb?: number;
}

function capacitySteps(r: BenchResult): CapacityPoint[] {
  const steps = r.params?.['capacity_steps'];
  if (!Array.isArray(steps)) return [];
  return steps.filter(
    (s): s is CapacityPoint =>
      typeof s === 'object' && s !== null && typeof s.load === 'string' && Number.isFinite(s.sessions) && Number.isFinite(s.cpu_percent) && Number.isFinite(s.late_frames),
  );
}

/** Sessions vs server CPU, vs late frames and (where recorded) vs resident memory, a line per load, for the newest capacity run of each benchmark. */
function capacityPlots(latest: LoadedResult[]): PlotSpec[] {
  const plots: PlotSpec[] = [];
  let n = 0;
  for (const r of latest) {
    const steps = capacitySteps(r.result);
    if (steps.length === 0) continue;
    const loads = [...new Set(steps.map((s) => s.load))];
    const xs = [...new Set(steps.map((s) => s.sessions))].sort((a, b) => a - b);
    const column = (field: 'cpu_percent' | 'late_frames' | 'rss_mb') =>
      loads.map((load) => xs.map((x) => steps.find((s) => s.load === load && s.sessions === x)?.[field] ?? null));
    const who = `${r.result.benchmark}${r.target ? ` (${r.target})` : ''}, ${r.result.date.slice(0, 10)}`;
    const series = loads.map((load, i) => ({ label: load, color: color(i), points: true }));
    plots.push(
      { id: `plot-capacity-${++n}`, kind: 'lines', title: `Capacity, ${who}: server CPU as sessions are added`, xLabel: 'sessions at once', yLabel: 'server CPU (% of one core)', series, data: [xs, ...column('cpu_percent')] },
      { id: `plot-capacity-${++n}`, kind: 'lines', title: `Capacity, ${who}: late frames as sessions are added`, xLabel: 'sessions at once', yLabel: 'late frames in the window (count)', series, data: [xs, ...column('late_frames')] },
    );
    if (steps.some((s) => Number.isFinite(s.rss_mb))) {
      // The idle baseline (params.capacity_idle.rss_mb), where recorded, at 0 sessions on every line.
      const idle = (r.result.params?.['capacity_idle'] as { rss_mb?: unknown } | undefined)?.rss_mb;
      const at0 = typeof idle === 'number' && Number.isFinite(idle) && !xs.includes(0);
      const rss = column('rss_mb').map((ys) => (at0 ? [idle, ...ys] : ys));
      plots.push({ id: `plot-capacity-${++n}`, kind: 'lines', title: `Capacity, ${who}: server resident memory as sessions are added`, xLabel: 'sessions at once', yLabel: 'server resident memory (MB)', series, data: [at0 ? [0, ...xs] : xs, ...rss] });
    }
  }
  return plots;
}

interface TurnEndPoint {
  judge: string;
  knob: number;
  falseCutPercent: number;
  latencyP50: number;
}

/**
 * The turn-end benchmark's curve (eot-bench's): each judge setting a point at its median decision
 * latency and its false cut-off rate, a line per judge through its settings, for the newest run.
 * Where one judge has two settings at the same latency, the one with fewer cut-offs is drawn.
 */
function turnEndPlots(latest: LoadedResult[]): PlotSpec[] {
  const plots: PlotSpec[] = [];
  for (const r of latest) {
    const raw = r.result.params?.['turn_end_curves'];
    if (!Array.isArray(raw)) continue;
    const points = raw.filter(
      (p): p is TurnEndPoint => typeof p === 'object' && p !== null && typeof p.judge === 'string' && Number.isFinite(p.falseCutPercent) && Number.isFinite(p.latencyP50),
    );
    if (points.length === 0) continue;
    const judges = [...new Set(points.map((p) => p.judge))];
    const xs = [...new Set(points.map((p) => p.latencyP50))].sort((a, b) => a - b);
    const ys = judges.map((judge) =>
      xs.map((x) => {
        const at = points.filter((p) => p.judge === judge && p.latencyP50 === x).map((p) => p.falseCutPercent);
        return at.length > 0 ? Math.min(...at) : null;
      }),
    );
    plots.push({
      id: `plot-turn-end-${plots.length + 1}`,
      kind: 'lines',
      title: `End of turn, ${r.result.date.slice(0, 10)}: false cut-offs against the decision's latency (${r.result.params?.['utterances'] ?? '?'} utterances)`,
      xLabel: 'decision after a finished utterance, p50 (ms)',
      yLabel: 'utterances cut off (%)',
      series: judges.map((label, i) => ({ label, color: color(i), points: true })),
      data: [xs, ...ys],
      caption: 'Each point is one setting of a judge (a silence for server_vad, a threshold or confidence otherwise); lower and further left is better.',
    });
  }
  return plots;
}

interface LipSyncTraceParam {
  mouth: Array<[number, number]>;
  speech: Array<[number, number]>;
  frames: Array<{ t: number; url: string }>;
  /** How the mouth was measured (results from 2026-11-27 on). */
  method?: string;
}

/** The lip-sync figures beside a trace (endpoint results' params.lip_sync; numbers only, the rest dropped). */
export interface LipSyncFigures {
  r: number;
  lag_ms: number;
  closed_share: number | null;
  open_share: number | null;
  silent_frames: number | null;
  loud_frames: number | null;
  r_audio_shifted_400ms: number | null;
  frames_measured: number | null;
  face_found_share: number | null;
  /** The best r within ±300 ms and its lag (where a picture out of sync finds its sound). */
  wide: { r: number; lag_ms: number } | null;
}

function lipSyncFigures(x: unknown): LipSyncFigures | null {
  const f = x as Record<string, unknown> | null;
  if (f === null || typeof f !== 'object' || typeof f.r !== 'number' || typeof f.lag_ms !== 'number') return null;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  return {
    r: f.r,
    lag_ms: f.lag_ms,
    closed_share: num(f.closed_share),
    open_share: num(f.open_share),
    silent_frames: num(f.silent_frames),
    loud_frames: num(f.loud_frames),
    r_audio_shifted_400ms: num(f.r_audio_shifted_400ms),
    frames_measured: num(f.frames_measured),
    face_found_share: num(f.face_found_share),
    wide: (() => {
      const w = f.wide as Record<string, unknown> | null | undefined;
      const r = num(w?.r);
      const lag = num(w?.lag_ms);
      return r === null || lag === null ? null : { r, lag_ms: lag };
    })(),
  };
}

function isLipSyncTrace(x: unknown): x is LipSyncTraceParam {
  const t = x as LipSyncTraceParam | null;
  return t !== null && typeof t === 'object' && Array.isArray(t.mouth) && Array.isArray(t.speech) && Array.isArray(t.frames);
}

/**
 * The newest trace of each target, with its figures (params.lip_sync) where recorded: mouth opening and speech power (each scaled to 0..1) over ms
 * from the first sound, on one time axis (the union of both series' times, the other null), and
 * the frames of its strip (only JPEG data URLs are kept: the page loads nothing from outside).
 */
function lipSyncPlots(latest: LoadedResult[]): ReportData['lipSync'] {
  const out: ReportData['lipSync'] = [];
  for (const r of latest) {
    const params = r.result.params as Record<string, unknown> | undefined;
    const trace = params?.lip_sync_trace;
    if (!isLipSyncTrace(trace) || trace.mouth.length < 2) continue;
    const xs = [...new Set([...trace.mouth.map(([t]) => t), ...trace.speech.map(([t]) => t)])].sort((a, b) => a - b);
    const at = (series: Array<[number, number]>) => {
      const byT = new Map(series);
      return xs.map((x) => byT.get(x) ?? null);
    };
    const who = `${r.result.benchmark}${r.target ? ` (${r.target})` : ''}, ${r.result.date.slice(0, 10)}`;
    out.push({
      plot: {
        id: `plot-lipsync-${out.length + 1}`,
        kind: 'lines',
        title: `Lip sync at a WebRTC receiver, ${who}: mouth opening against speech power`,
        xLabel: 'ms from the first sound heard',
        yLabel: 'scaled to the turn’s largest (0..1)',
        series: [
          { label: 'mouth opening (decoded frames)', color: color(0) },
          { label: 'speech power (played audio)', color: color(1) },
        ],
        data: [xs, at(trace.mouth), at(trace.speech)],
        caption:
          typeof trace.method === 'string' && trace.method.startsWith('face landmarks')
            ? 'The mouth’s opening in each presented frame (the face found and tracked on the decoded frames: dark area between the lips over the mouth’s width squared, less its closed level: the lowest tenth of the window), and the received audio’s power per 10 ms; the mouth should rise with the sound.'
            : `The mouth box’s darkening from its resting level in each presented frame, and the received audio’s power per 10 ms; the mouth should rise with the sound.${typeof trace.method === 'string' ? ` (${shorten(trace.method, 200)})` : ''}`,
      },
      frames: trace.frames.filter((f) => typeof f.url === 'string' && f.url.startsWith('data:image/jpeg;base64,') && Number.isFinite(f.t)),
      figures: lipSyncFigures(params?.lip_sync),
    });
  }
  return out;
}

/** One face over one transport by one method (endpoint results' params.websocket_lip_sync / webrtc_lip_sync). */
export interface LipSyncRow {
  transport: 'WebSocket' | 'WebRTC';
  face: string;
  /** A: landmarks found anew on every frame; B: the tracked region's dark and teeth pixels. */
  method: 'A' | 'B';
  /** Why the face was not measured; null when it was. */
  missing: string | null;
  r: number | null;
  lag_ms: number | null;
  closed_share: number | null;
  open_share: number | null;
  /** Turns measured (a face has one per --runs). */
  turns: number;
  /** Mouth onset − speech onset, ms, pooled over the turns: the median, and the 95th percentile of its distance from 0, at the first sound and after pauses. */
  first_sound_ms: number | null;
  first_sound_p95_distance_ms: number | null;
  after_pause_ms: number | null;
  after_pause_p95_distance_ms: number | null;
  /** r against the audio 400 ms later, 400 ms earlier and reversed: controls, should be low. */
  controls: [number | null, number | null, number | null];
}

function lipSyncTables(latest: LoadedResult[]): ReportData['lipSyncTables'] {
  const out: ReportData['lipSyncTables'] = [];
  for (const r of latest) {
    const params = r.result.params as Record<string, unknown> | undefined;
    const rows = [
      ...lipSyncRows('WebSocket', params?.websocket_lip_sync),
      ...lipSyncRows('WebRTC', params?.webrtc_lip_sync),
    ];
    if (rows.length > 0) out.push({ who: `${r.result.benchmark}${r.target ? ` (${r.target})` : ''}, ${r.result.date.slice(0, 10)}`, rows });
  }
  return out;
}

/**
 * The rows of one transport's per-face list (each { face, missing, figures: method A's with
 * method_b }; a face listed more than once had more than one turn): per face and method, r, lag
 * and controls are the median over its turns, the closed and open shares pooled over their
 * frames, and the onsets pooled over the turns. A face none of whose turns was measured shows why
 * its first was not. Anything malformed is left out.
 */
function lipSyncRows(transport: LipSyncRow['transport'], list: unknown): LipSyncRow[] {
  if (!Array.isArray(list)) return [];
  const byFace = new Map<string, { A: Array<Record<string, unknown>>; B: Array<Record<string, unknown>>; missingA: string | null; missingB: string | null }>();
  for (const x of list) {
    const entry = x as Record<string, unknown> | null;
    if (entry === null || typeof entry !== 'object' || typeof entry.face !== 'string') continue;
    const a = typeof entry.figures === 'object' && entry.figures !== null ? (entry.figures as Record<string, unknown>) : null;
    const b = a && typeof a.method_b === 'object' && a.method_b !== null ? (a.method_b as Record<string, unknown>) : null;
    const missing = typeof entry.missing === 'string' ? entry.missing : null;
    const face = byFace.get(entry.face) ?? { A: [], B: [], missingA: null, missingB: null };
    if (a) face.A.push(a);
    else face.missingA ??= missing;
    if (b) face.B.push(b);
    else face.missingB ??= a ? 'method B found no face to place its region on' : missing;
    byFace.set(entry.face, face);
  }
  const out: LipSyncRow[] = [];
  for (const [face, x] of byFace) out.push(lipSyncRow(transport, face, 'A', x.A, x.missingA), lipSyncRow(transport, face, 'B', x.B, x.missingB));
  return out;
}

/** One face's row by one method over its measured turns' figures `turns` (see lipSyncRows). */
function lipSyncRow(transport: LipSyncRow['transport'], face: string, method: LipSyncRow['method'], turns: Array<Record<string, unknown>>, missing: string | null): LipSyncRow {
  const nums = (v: unknown): number[] => (Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number' && Number.isFinite(x)) : []);
  const field = (key: string) => nums(turns.map((t) => t[key]));
  const pooled = (share: string, frames: string) => {
    const parts = turns.flatMap((t) => (typeof t[share] === 'number' && typeof t[frames] === 'number' ? [{ share: t[share] as number, n: t[frames] as number }] : []));
    const n = parts.reduce((a, p) => a + p.n, 0);
    return n > 0 ? Math.round((1000 * parts.reduce((a, p) => a + p.share * p.n, 0)) / n) / 1000 : null;
  };
  const onsets = (kind: string) => turns.flatMap((t) => nums((t.onsets as Record<string, unknown> | undefined)?.[kind]));
  const p95Distance = (xs: number[]) => percentileOrNull(xs.map(Math.abs), 95);
  const first = onsets('firstSound');
  const pause = onsets('afterPause');
  return {
    transport,
    face,
    method,
    missing: turns.length > 0 ? null : (missing ?? 'not measured'),
    turns: turns.length,
    r: percentileOrNull(field('r'), 50),
    lag_ms: percentileOrNull(field('lag_ms'), 50),
    closed_share: pooled('closed_share', 'silent_frames'),
    open_share: pooled('open_share', 'loud_frames'),
    first_sound_ms: percentileOrNull(first, 50),
    first_sound_p95_distance_ms: p95Distance(first),
    after_pause_ms: percentileOrNull(pause, 50),
    after_pause_p95_distance_ms: p95Distance(pause),
    controls: [percentileOrNull(field('r_audio_shifted_400ms'), 50), percentileOrNull(field('r_audio_earlier_400ms'), 50), percentileOrNull(field('r_audio_reversed'), 50)],
  };
}

/** The nearest-rank percentile `p` (0–100) of `xs`; null when empty. */
function percentileOrNull(xs: number[], p: number): number | null {
  return xs.length > 0 ? percentile(xs, p) : null;
}

/** Every metric recorded by two results or more: p50 and p95 over the results' dates. */
function historyRows(results: LoadedResult[]): HistoryRow[] {
  const rows = new Map<string, HistoryRow>();
  for (const r of results) {
    for (const m of r.result.metrics) {
      if (!Number.isFinite(m.p50)) continue;
      const key = `${r.result.benchmark}\u0000${r.target ?? ''}\u0000${m.name}\u0000${m.unit}`;
      const row = rows.get(key) ?? { benchmark: r.result.benchmark, target: r.target, metric: m.name, unit: m.unit, points: [] };
      row.points.push({ time: r.time, date: r.result.date, commit: r.result.commit, p50: m.p50, p95: m.p95 });
      rows.set(key, row);
    }
  }
  return [...rows.values()].filter((row) => row.points.length >= 2);
}

/** The headline figures whose history is drawn in full (the table has every metric). */
const HEADLINES: Array<{ title: string; test: (row: HistoryRow) => boolean }> = [
  { title: 'Text turn → first audio', test: (r) => r.unit === 'ms' && /text/i.test(r.metric) && /first (output_)?audio|first avatar audio|output_audio\.delta/i.test(r.metric) && !r.metric.includes(' › ') },
  { title: 'Voice turn → first audio', test: (r) => r.unit === 'ms' && /voice turn|end of (user )?speech/i.test(r.metric) && /first (avatar )?audio|first audio delta|output_audio\.delta/i.test(r.metric) && !/answers to be cut/i.test(r.metric) && !r.metric.includes(' › ') },
  { title: 'First frame', test: (r) => r.unit === 'ms' && /first (decoded )?frame/i.test(r.metric) && !r.metric.includes(' › ') },
  { title: 'Capacity: most calls or sessions at once', test: (r) => r.unit === 'calls' || r.unit === 'sessions' || /^most .*(calls|sessions)/i.test(r.metric) },
  { title: 'Server CPU per call or session', test: (r) => /CPU per/i.test(r.metric) },
];

const MAX_LINES_PER_HISTORY_PLOT = 5;

function historyPlots(rows: HistoryRow[]): PlotSpec[] {
  const plots: PlotSpec[] = [];
  HEADLINES.forEach((headline, h) => {
    const matching = rows.filter(headline.test).sort((a, b) => b.points.length - a.points.length || b.points.at(-1)!.time - a.points.at(-1)!.time);
    if (matching.length === 0) return;
    const shown = matching.slice(0, MAX_LINES_PER_HISTORY_PLOT);
    const xs = [...new Set(shown.flatMap((r) => r.points.map((p) => p.time)))].sort((a, b) => a - b);
    const at = (row: HistoryRow, field: 'p50' | 'p95') => xs.map((x) => row.points.find((p) => p.time === x)?.[field] ?? null);
    const units = [...new Set(shown.map((r) => r.unit))];
    plots.push({
      id: `plot-history-${h + 1}`,
      kind: 'lines',
      time: true,
      title: `History: ${headline.title}`,
      xLabel: 'date of the result (UTC)',
      yLabel: `p50 (solid) and p95 (dashed) (${units.join(', ')})`,
      // A figure measured once per run (a count of calls) has p95 = p50: one line.
      series: shown.flatMap((row, i) => [
        { label: `${historyName(row)} p50`, color: color(i), points: true },
        ...(onePerRun(row) ? [] : [{ label: `${historyName(row)} p95`, color: color(i), dash: true, points: true }]),
      ]),
      data: [xs, ...shown.flatMap((row) => [at(row, 'p50'), ...(onePerRun(row) ? [] : [at(row, 'p95')])])],
      ...(matching.length > shown.length ? { caption: `${matching.length - shown.length} more metric(s) of this kind in the table below.` } : {}),
    });
  });
  return plots;
}

const onePerRun = (row: HistoryRow) => row.points.every((p) => p.p95 === p.p50);

export function historyName(row: HistoryRow): string {
  return `${row.benchmark}${row.target ? ` [${row.target}]` : ''}: ${row.metric}`;
}

/** Our headline latencies (newest results) and the published figures, as one horizontal bar plot. */
function publishedPlot(latest: LoadedResult[]): ReportData['published'] {
  const measures: Array<{ label: string; endpoint: RegExp; other: RegExp }> = [
    { label: 'text turn → first audio', endpoint: /^text turn → first audio/i, other: /text( turn)?:.*(response\.create → first output_audio\.delta|first avatar audio played)/i },
    { label: 'voice turn → first audio', endpoint: /^voice turn → first audio/i, other: /(voice turn: end of user speech → first avatar audio played|end of speech → first audio delta)/i },
    { label: 'first frame', endpoint: /first frame/i, other: /first (decoded )?frame/i },
  ];
  const ours: Array<{ label: string; p50: number; p95: number; source: string }> = [];
  const endpoint = latest.filter((r) => r.result.benchmark === 'endpoint');
  for (const measure of measures) {
    let found = false;
    for (const r of endpoint) {
      for (const m of r.result.metrics) {
        const { line, measure: name } = splitName(r, m.name);
        if (m.unit !== 'ms' || name.includes(' › ') || !measure.endpoint.test(name)) continue;
        ours.push({ label: `ours: ${line}, ${name}`, p50: m.p50, p95: m.p95, source: `${r.file} (${r.result.date.slice(0, 10)}, ${r.result.commit})` });
        found = true;
      }
    }
    if (found) continue;
    // No endpoint result yet: the first matching metric of each other benchmark's newest result.
    for (const r of latest) {
      if (r.result.benchmark === 'endpoint') continue;
      const m = r.result.metrics.find((x) => x.unit === 'ms' && !x.name.includes(' › ') && measure.other.test(x.name));
      if (m) ours.push({ label: `ours: ${r.result.benchmark} ${m.name}`, p50: m.p50, p95: m.p95, source: `${r.file} (${r.result.date.slice(0, 10)}, ${r.result.commit})` });
    }
  }
  const figures = PUBLISHED_FIGURES;
  if (ours.length === 0 && figures.length === 0) return { plot: null, ours: [], figures };
  const rows: Array<{ label: string; ours?: [number, number]; published?: PublishedFigure }> = [
    ...ours.map((o) => ({ label: shorten(o.label, 70), ours: [o.p50, o.p95] as [number, number] })),
    ...[...figures].sort((a, b) => a.ms - b.ms).map((f) => ({ label: `${f.product}: ${f.stated} (${f.claim})`, published: f })),
  ];
  const claims: Array<PublishedFigure['claim']> = ['vendor claim', 'authors’ claim', '3rd-party', 'unverified'];
  const claimColors = ['#ff7f0e', '#e6a23c', '#7f7f7f', '#bbbbbb'];
  const plot: PlotSpec = {
    id: 'plot-published',
    kind: 'hbars',
    title: 'Our headline latencies beside published figures of other products',
    xLabel: '',
    yLabel: 'latency (ms)',
    categories: rows.map((r) => r.label),
    series: [
      { label: 'ours p95', color: '#9ecae1' },
      { label: 'ours p50', color: '#1f77b4' },
      { label: 'published: upper end of a stated range', color: '#fdd0a2' },
      ...claims.map((c, i) => ({ label: `published (${c})`, color: claimColors[i]! })),
    ],
    data: [
      rows.map((_, i) => i),
      rows.map((r) => r.ours?.[1] ?? null),
      rows.map((r) => r.ours?.[0] ?? null),
      rows.map((r) => r.published?.upperMs ?? null),
      ...claims.map((c) => rows.map((r) => (r.published?.claim === c ? r.published.ms : null))),
    ],
    caption:
      'Not like for like: each published figure measures what its note below says, on its vendor’s hardware and network; ours were measured on the machine named above. A bar drawn from “< 200 ms” is at 200.',
  };
  return { plot, ours: ours.map((o) => ({ label: `${o.label}: p50 ${fmt(o.p50)} ms, p95 ${fmt(o.p95)} ms`, source: o.source })), figures };
}

const SECRET = /key|token|secret|password|authorization/i;
const MODEL_PARAM = /^(models?|llm|tts|asr|stt|vad|turn_detection|voice|target)$/i;

/** The models and targets named in the newest results' params. */
function modelsOf(latest: LoadedResult[]): ReportData['models'] {
  const out: ReportData['models'] = [];
  for (const r of latest) {
    const parts = Object.entries(r.result.params ?? {})
      .filter(([k]) => MODEL_PARAM.test(k))
      .map(([k, v]) => `${k}: ${describe(v)}`)
      .filter((s) => s.length > 0);
    if (parts.length > 0) out.push({ benchmark: r.result.benchmark, target: r.target, text: shorten(parts.join('; '), 400) });
  }
  return out;
}

function describe(v: unknown, depth = 0): string {
  if (v === null || v === undefined) return 'none';
  if (Array.isArray(v)) return v.map((x) => describe(x, depth + 1)).join(', ');
  if (typeof v === 'object') {
    if (depth > 2) return '…';
    return Object.entries(v as Record<string, unknown>)
      .filter(([k]) => !SECRET.test(k))
      .map(([k, x]) => `${k} ${describe(x, depth + 1)}`)
      .join(', ');
  }
  return String(v);
}

export function machineText(m: BenchResult['machine'] | undefined): string {
  if (!m) return 'unknown machine';
  return `${m.cpus} CPUs (${m.cpu_model}), ${m.memory_gib} GiB memory, ${m.os}, Node ${m.node}`;
}

/** Everything the page shows, from the results in `dir`. */
export function buildReport(dir: string): ReportData {
  const { results, skipped } = loadResults(dir);
  const latest = latestResults(results);
  const machines = new Map<string, Set<string>>();
  const commits = new Map<string, Set<string>>();
  for (const r of results) {
    const text = machineText(r.result.machine);
    machines.set(text, (machines.get(text) ?? new Set()).add(r.result.benchmark));
    commits.set(r.result.commit, (commits.get(r.result.commit) ?? new Set()).add(r.result.benchmark));
  }
  const history = historyRows(results);
  return {
    generated: new Date().toISOString(),
    results,
    skipped,
    machines: [...machines].map(([text, b]) => ({ text, benchmarks: [...b] })),
    commits: [...commits].map(([commit, b]) => ({ commit, benchmarks: [...b] })),
    models: modelsOf(latest),
    published: publishedPlot(latest),
    cdfs: cdfPlots(latest),
    breakdowns: breakdownPlots(latest),
    histograms: histogramPlots(latest),
    capacity: capacityPlots(latest),
    turnEnd: turnEndPlots(latest),
    lipSync: lipSyncPlots(latest),
    lipSyncTables: lipSyncTables(latest),
    historyPlots: historyPlots(history),
    history,
  };
}

function niceBin(raw: number): number {
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
  return 10 * p;
}

function percentileOf(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function unitLabel(unit: string): string {
  return unit === 'ms' ? 'milliseconds' : unit;
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

export function fmt(x: number): string {
  if (!Number.isFinite(x)) return '–';
  const a = Math.abs(x);
  return a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : String(round(x, 2));
}

function shorten(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}
