/** Assertions for the error body every endpoint uses: {"error":{"message","type","code","param"}}. */
import * as assert from 'uvu/assert';
import type { TestResponse } from '../../harness/servers/server.js';

export function assertError(res: TestResponse, status: number, code: string, param?: string | null): void {
  assert.is(res.status, status, `expected HTTP ${status} ${code}, got ${res.status}: ${res.text}`);
  const error = res.body?.error;
  assert.ok(error, `no error object in: ${res.text}`);
  assert.equal(Object.keys(error).sort(), ['code', 'message', 'param', 'type']);
  assert.is(error.code, code);
  assert.type(error.message, 'string');
  assert.ok(error.message.length > 0);
  assert.type(error.type, 'string');
  if (param !== undefined) assert.is(error.param, param);
}

/** What `p` rejects with; fails the test when it resolves. */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  assert.unreachable('expected a rejection');
  return undefined;
}
