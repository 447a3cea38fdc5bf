/**
 * The playground page as the tests drive it: opened with a key and a microphone mode, read through
 * `window.playground.snapshot()` (playground/src/main.ts), and polled until a condition holds.
 */
import type { Browser, Page } from 'playwright-core';

/** What `window.playground.snapshot()` returns. */
export interface PlaygroundSnapshot {
  state: string;
  transport: 'webrtc' | 'websocket' | null;
  /** Where the face is drawn: in the page (video_render: client) or by the server; null before connecting. */
  render: 'client' | 'server' | null;
  /** The frames the page drew itself: when, which, its mouth opening, how late after it was due (null: not timed by the audio). */
  drawn: Array<{ at: number; ptsMs: number; mouthOpen: number; lateMs: number | null }>;
  sessionId: string | null;
  firstFrameMs: number | null;
  firstAudioMs: number[];
  stats: { fps: number | null; kbps: number | null; avOffsetMs: number | null; frames: number; audioEnergy: number } | null;
  eventTypes: string[];
  lastError: string | null;
  endedSession: { id: string; status: string; durationSeconds: number | null } | null;
  toolCalls: { callId: string; name: string; arguments: string; output: string | null }[];
  /** The page's computed background colour. */
  background: string;
}

export const snapshot = (page: Page): Promise<PlaygroundSnapshot> => page.evaluate('window.playground.snapshot()') as Promise<PlaygroundSnapshot>;

/** Polls the page (its stats refreshed each time) until `done`; the error says what was awaited and the page's state then. */
export async function until(page: Page, done: (s: PlaygroundSnapshot) => boolean, what: string, timeoutMs = 30_000): Promise<PlaygroundSnapshot> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await page.evaluate('window.playground.refreshStats()');
    const s = await snapshot(page);
    if (done(s)) return s;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify({ ...s, drawn: s.drawn.length, eventTypes: s.eventTypes.slice(-15) })}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** The page of `server`, its key entered and the microphone mode chosen. */
export async function openPlayground(browser: Browser, server: { url: string; key: string }, mic: 'off' | 'ptt' | 'vad', key = server.key): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
  await page.goto(`${server.url}/`);
  await page.fill('#api-key', key);
  await page.click('#key-form button');
  await page.selectOption('#mic-mode', mic);
  return page;
}
