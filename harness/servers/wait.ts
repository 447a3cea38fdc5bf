/** Polling for tests: wait for a state, never sleep a fixed time (CI machines are loaded). */

/** Calls `read` every 100 ms until `done` accepts its value; throws naming `what` (with the last value) after `timeoutMs`. */
export async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
