/**
 * A PNG of a written report's headline: the "beside published figures" section, then the latency
 * distributions, as headless Chromium draws them (harness/clients/browser.ts launchChromium; the
 * page loads nothing from outside). For READMEs and issues: `npm run bench -- report --replot
 * --screenshot docs/benchmark-report.png`.
 */
import { pathToFileURL } from 'node:url';
import { launchChromium } from '../../../harness/clients/browser.js';

/** Sections drawn into the picture, in page order. */
const HEADLINE_SECTIONS = ['#beside', '#cdf'];

export async function screenshotReport(reportFile: string, pngFile: string): Promise<void> {
  const { browser, close } = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 }, deviceScaleFactor: 1 });
    await page.goto(pathToFileURL(reportFile).href);
    await page.waitForSelector('.plot canvas');
    const boxes = await Promise.all(HEADLINE_SECTIONS.map((s) => page.locator(s).boundingBox()));
    const shown = boxes.filter((b): b is NonNullable<typeof b> => b !== null);
    if (shown.length === 0) throw new Error(`the report has none of ${HEADLINE_SECTIONS.join(', ')}`);
    const top = Math.min(...shown.map((b) => b.y));
    // The distributions can run long: the first two plots of that section at most.
    const bottom = Math.min(Math.max(...shown.map((b) => b.y + b.height)), top + 1600);
    await page.screenshot({ path: pngFile, fullPage: true, clip: { x: 0, y: top, width: 1100, height: bottom - top } });
  } finally {
    await close();
  }
}
