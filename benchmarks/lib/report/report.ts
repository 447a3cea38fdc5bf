/**
 * `npm run bench -- report`: writes the benchmark report, one self-contained HTML page drawn from
 * every results file in a results directory (data.ts reads them, html.ts writes the page). The
 * page inlines uPlot's script and stylesheet from node_modules, so it opens offline.
 *
 * Invariants: measures nothing (a run is re-plotted from its files); the page is written whole to
 * a temporary file beside `outFile` and renamed, so a reader never sees half a page; `plots` lists
 * the ids of every plot element written, in page order.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { buildReport } from './data.js';
import { allPlots, renderPage } from './html.js';

export interface ReportOptions {
  resultsDir: string;
  outFile: string;
}

export async function writeReport(options: ReportOptions): Promise<{ plots: string[]; results: number }> {
  const data = buildReport(options.resultsDir);
  const html = renderPage(data, readUplot());
  fs.mkdirSync(path.dirname(options.outFile), { recursive: true });
  const temp = `${options.outFile}.${process.pid}.tmp`;
  await fs.promises.writeFile(temp, html);
  await fs.promises.rename(temp, options.outFile);
  return { plots: allPlots(data).map((p) => p.id), results: data.results.length };
}

/** uPlot's minified browser build and its stylesheet (the `uplot` dev dependency). */
function readUplot(): { js: string; css: string } {
  const require = createRequire(import.meta.url);
  const read = (file: string) => fs.readFileSync(require.resolve(`uplot/dist/${file}`), 'utf8');
  return { js: read('uPlot.iife.min.js'), css: read('uPlot.min.css') };
}
