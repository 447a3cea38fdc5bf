/**
 * `npm run screenshots`: pictures of the playground for the README, docs/playground.md and reviewing the page,
 * taken in headless Chromium against the real server with the fake providers (known replies):
 * before connecting, mid-reply, after a demo tool call (the model makes the page teal), and after
 * an error (a wrong key). Written to docs/screenshots/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { buildPlayground } from '../../src/cli/build-playground.js';
import { launchChromium, waitInPage } from '../helpers/browser.js';
import { startRealtimeTestServer } from '../helpers/realtime-server.js';
import { REPO_ROOT } from '../helpers/server.js';

const OUT_DIR = path.join(REPO_ROOT, 'docs/screenshots');
const VIEWPORT = { width: 1280, height: 800 };

async function main(): Promise<void> {
  await buildPlayground();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const t = await startRealtimeTestServer();
  const chromium = await launchChromium({ microphone: 'silence' });
  try {
    const page = await chromium.browser.newPage({ viewport: VIEWPORT });
    await page.goto(`${t.url}/`);
    await page.fill('#api-key', t.key);
    await page.click('#key-form button');
    await waitInPage(page, `[...document.querySelectorAll('#faces img')].length >= 2 && [...document.querySelectorAll('#faces img')].every((i) => i.complete && i.naturalWidth > 0)`);
    await page.selectOption('#mic-mode', 'off');
    await shot(page, 'playground-start.png');

    await page.click('#connect');
    await waitInPage(page, `window.playground.snapshot().firstFrameMs !== null`, 30_000);
    t.llm.options.reply = 'Hello! I am your avatar. Ask me anything, or just say hello.';
    await page.fill('#text', 'Hi, who are you?');
    await page.click('#send');
    await waitInPage(page, `window.playground.snapshot().eventTypes.filter((e) => e === 'response.done').length === 1`, 30_000);
    t.llm.options.reply = 'I can talk, listen and show my face while I speak. The weather today is bright and mild, with a light breeze from the west, and the afternoon should stay dry.';
    await page.fill('#text', 'What can you do? And how is the weather?');
    await page.click('#send');
    await waitInPage(page, `window.playground.snapshot().firstAudioMs.length === 2`, 30_000);
    await page.waitForTimeout(2500);
    await shot(page, 'playground-reply.png');

    // A demo tool: the model calls set_background_color, the page runs it and the model says so.
    await waitInPage(page, `window.playground.snapshot().eventTypes.filter((e) => e === 'response.done').length === 2`, 30_000);
    const answered = (messages: { role: string }[]) => messages.at(-1)?.role === 'tool';
    t.llm.options = {
      reply: (r) => (answered(r.messages) ? 'Done. Your page is teal now.' : ''),
      toolCalls: (r) => (answered(r.messages) ? [] : [{ name: 'set_background_color', arguments: '{"color":"teal"}' }]),
      chunkDelayMs: 2,
    };
    await page.fill('#text', 'Make the page teal, please.');
    await page.click('#send');
    await waitInPage(page, `window.playground.snapshot().eventTypes.filter((e) => e === 'response.done').length === 4`, 30_000);
    await shot(page, 'playground-tools.png');
    await page.click('#hangup');
    await waitInPage(page, `window.playground.snapshot().state === 'ended'`);

    const wrong = await chromium.browser.newPage({ viewport: VIEWPORT });
    await wrong.goto(`${t.url}/`);
    await wrong.fill('#api-key', 'avs_this_key_does_not_exist');
    await wrong.click('#key-form button');
    await wrong.selectOption('#mic-mode', 'off');
    await wrong.click('#connect');
    await wrong.waitForSelector('#error:not([hidden])');
    await shot(wrong, 'playground-error.png');
  } finally {
    await chromium.close();
    await t.close();
  }
}

async function shot(page: import('playwright-core').Page, name: string): Promise<void> {
  const file = path.join(OUT_DIR, name);
  await page.screenshot({ path: file });
  console.log(`screenshots: ${path.relative(process.cwd(), file)}`);
}

main().catch((err: unknown) => {
  console.error(`screenshots: ${err instanceof Error ? err.stack : String(err)}`);
  process.exitCode = 1;
});
