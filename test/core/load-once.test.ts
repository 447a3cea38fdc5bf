import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { LoadOnce } from '../../src/core/load-once.js';

async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('resolved where a rejection was expected');
}

test('callers of one key share the first load, while it runs and after', async () => {
  const cache = new LoadOnce<number>();
  let loads = 0;
  const load = async () => ++loads;
  const [a, b] = await Promise.all([cache.get('k', load), cache.get('k', load)]);
  assert.is(a, 1);
  assert.is(b, 1);
  assert.is(await cache.get('k', load), 1);
  assert.is(await cache.get('other', load), 2);
  assert.is(loads, 2);
});

test('a failed load is forgotten, so the next caller loads again', async () => {
  const cache = new LoadOnce<string>();
  let fail = true;
  const load = async () => {
    if (fail) throw new Error('not there yet');
    return 'there';
  };
  assert.is(await rejection(cache.get('k', load)), 'not there yet');
  assert.is(cache.size, 0);
  fail = false;
  assert.is(await cache.get('k', load), 'there');
});

test('past max the oldest key goes, and a late failure of an evicted load leaves its successor', async () => {
  const cache = new LoadOnce<string>(2);
  let rejectFirst!: (e: Error) => void;
  const first = cache.get('a', () => new Promise<string>((_, reject) => (rejectFirst = reject)));
  await cache.get('b', async () => 'b');
  await cache.get('c', async () => 'c');
  assert.is(cache.size, 2);
  let reloaded = 0;
  const again = cache.get('a', async () => `a${++reloaded}`);
  rejectFirst(new Error('late'));
  assert.is(await rejection(first), 'late');
  assert.is(await again, 'a1');
  assert.is(await cache.get('a', async () => 'not this'), 'a1');
});

test.run();
