/**
 * `npm run screenshots`: pictures of the playground for the README, docs/playground.md and reviewing
 * the page, taken in headless Chromium against the server as `npm start` runs it (its embedded
 * models: every word in the pictures is what they answered, nothing scripted), the page's defaults
 * untouched (demo tools on, hands-free on a silent microphone, WebRTC): before connecting; a first
 * question answered and the second one, which calls the demo tool get_local_time, being spoken; a
 * demo tool making the page teal; a wrong key. Written to docs/screenshots/. Needs the models
 * (npm run setup:models) and Chromium.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { buildPlayground } from '../../src/cli/build-playground.js';
import { launchChromium, waitInPage } from '../../harness/clients/browser.js';
import { spawnAsNpmStart } from '../../harness/servers/process.js';
import { REPO_ROOT, tempDir } from '../../harness/servers/server.js';

const OUT_DIR = path.join(REPO_ROOT, 'docs/screenshots');
const VIEWPORT = { width: 1280, height: 800 };
/** The local model answers a turn in seconds on a 2-core machine; a call and its answer take two. */
const REPLY_TIMEOUT_MS = 180_000;

async function main(): Promise<void> {
  await buildPlayground();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const dataDir = tempDir();
  const proc = await spawnAsNpmStart(dataDir);
  const key = proc.bootstrapKey!;
  // A newcomer's browser has WebGL2: the page draws the face itself, as it does by default.
  const chromium = await launchChromium({ microphone: 'silence', webgl: true });
  try {
    const page = await chromium.browser.newPage({ viewport: VIEWPORT });
    await page.goto(`${proc.url}/`);
    await page.fill('#api-key', key);
    await page.click('#key-form button');
    await waitInPage(page, `[...document.querySelectorAll('#faces img')].length >= 2 && [...document.querySelectorAll('#faces img')].every((i) => i.complete && i.naturalWidth > 0)`);
    await shot(page, 'playground-start.png');

    await page.click('#connect');
    await waitInPage(page, `window.playground.snapshot().firstFrameMs !== null`, 120_000);
    await waitInPage(page, `window.playground.snapshot().eventTypes.includes('session.updated')`, 30_000);
    await ask(page, 'What is the capital of France?', 1);
    // The second question calls get_local_time (the page answers it), then the answer is spoken: taken mid-sentence.
    await page.fill('#text', 'What time is it where I am?');
    await page.click('#send');
    await waitInPage(page, `window.playground.snapshot().toolCalls.length === 1 && window.playground.snapshot().firstAudioMs.length === 2`, REPLY_TIMEOUT_MS);
    await page.waitForTimeout(1200);
    await shot(page, 'playground-reply.png');
    await waitInPage(page, responsesDone(3), REPLY_TIMEOUT_MS);

    await ask(page, 'Make the background teal.', 5);
    await page.waitForTimeout(1000);
    await shot(page, 'playground-tools.png');
    await page.click('#hangup');
    await waitInPage(page, `window.playground.snapshot().state === 'ended'`);

    const wrong = await chromium.browser.newPage({ viewport: VIEWPORT });
    await wrong.goto(`${proc.url}/`);
    await wrong.fill('#api-key', 'avs_this_key_does_not_exist');
    await wrong.click('#key-form button');
    await wrong.selectOption('#mic-mode', 'off');
    await wrong.click('#connect');
    await wrong.waitForSelector('#error:not([hidden])');
    await shot(wrong, 'playground-error.png');
  } finally {
    await chromium.close();
    proc.child.kill('SIGTERM');
    await proc.exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A page expression: `n` responses done in the session so far. */
const responsesDone = (n: number) => `window.playground.snapshot().eventTypes.filter((e) => e === 'response.done').length === ${n}`;

/** Types a message and waits until the session has had `responses` responses in all (a call and its answer are two). */
async function ask(page: Page, text: string, responses: number): Promise<void> {
  await page.fill('#text', text);
  await page.click('#send');
  await waitInPage(page, responsesDone(responses), REPLY_TIMEOUT_MS);
}

async function shot(page: Page, name: string): Promise<void> {
  const file = path.join(OUT_DIR, name);
  await page.screenshot({ path: file });
  console.log(`screenshots: ${path.relative(process.cwd(), file)}`);
}

main().catch((err: unknown) => {
  console.error(`screenshots: ${err instanceof Error ? err.stack : String(err)}`);
  process.exitCode = 1;
});
