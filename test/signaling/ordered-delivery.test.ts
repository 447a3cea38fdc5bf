/**
 * OrderedDelivery: deliveries go out in order; one that waits for a usage commit holds every later
 * one behind it until the commit lands (or release()), and a commit started while one is pending
 * waits its turn; with nothing to commit to, it delivers at once.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { OrderedDelivery } from '../../src/signaling/ordered-delivery.js';

function commits() {
  const pending: Array<() => void> = [];
  let open = true;
  return {
    pending,
    close: () => (open = false),
    commitUsage: () => (open ? new Promise<void>((resolve) => pending.push(resolve)) : null),
  };
}

test('later deliveries wait behind a commit, in order, and go out when it lands', async () => {
  const c = commits();
  const out: string[] = [];
  const d = new OrderedDelivery({ commitUsage: c.commitUsage, failed: (err) => assert.unreachable(String(err)) });
  d.inOrder(() => out.push('a'));
  d.afterCommit(() => out.push('done'));
  d.inOrder(() => out.push('b'));
  d.afterCommit(() => out.push('done2'));
  d.inOrder(() => out.push('c'));
  assert.equal(out, ['a'], 'the settling event and everything after it wait for the commit');
  assert.is(c.pending.length, 1);
  c.pending.shift()!();
  await new Promise((r) => setImmediate(r));
  assert.equal(out, ['a', 'done', 'b'], 'the second settling event starts its own commit; what follows waits again');
  assert.is(c.pending.length, 1);
  c.pending.shift()!();
  await new Promise((r) => setImmediate(r));
  assert.equal(out, ['a', 'done', 'b', 'done2', 'c']);
});

test('release() lets everything out at once; with nothing to commit to, a settling event goes out at once; a throwing delivery is reported and the rest go on', () => {
  const c = commits();
  const out: string[] = [];
  const failures: unknown[] = [];
  const d = new OrderedDelivery({ commitUsage: c.commitUsage, failed: (err) => failures.push(err) });
  d.afterCommit(() => out.push('done'));
  d.inOrder(() => {
    throw new Error('boom');
  });
  d.inOrder(() => out.push('after'));
  c.close();
  d.release();
  assert.equal(out, ['done', 'after']);
  assert.is(failures.length, 1);
  d.afterCommit(() => out.push('done again'));
  assert.equal(out, ['done', 'after', 'done again']);
  c.pending.shift()!(); // the first commit landing late changes nothing
});

test.run();
