import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DependencyHealth } from '../../src/core/dependency-health.js';
import { memoryLogger } from '../../src/core/log.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const lines = (records: Array<{ msg?: unknown }>) => records.filter((r) => String(r.msg).startsWith('dependency')).map((r) => r.msg);

test('an outage is one down line and one back line, however many attempts fail; up follows at once', async () => {
  const { logger, records } = memoryLogger('info');
  const health = new DependencyHealth('postgres', logger, Date.now, 30);
  for (let i = 0; i < 10; i++) health.failed(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
  assert.is(health.up, false);
  assert.equal(lines(records), ['dependency down']);
  assert.equal(records[0], { ...records[0], error: 'connect ECONNREFUSED', code: 'ECONNREFUSED' });
  health.succeeded();
  health.succeeded();
  assert.is(health.up, true, '/readyz sees it back at the first answer');
  assert.equal(lines(records), ['dependency down'], 'the back line waits until it has answered for a moment');
  await sleep(80);
  assert.equal(lines(records), ['dependency down', 'dependency back']);
});

test('a restart that flaps (a success between failures, as a fast shutdown ends connections one by one) is one outage', async () => {
  const { logger, records } = memoryLogger('info');
  let now = 1_000;
  const health = new DependencyHealth('postgres', logger, () => now, 40);
  health.failed(new Error('terminating connection due to administrator command'));
  now += 3;
  health.succeeded();
  now += 5;
  health.failed(new Error('terminating connection due to administrator command'));
  assert.is(health.up, false);
  assert.ok(health.downForMs() >= 8, 'down since the first failure');
  now += 150;
  health.succeeded();
  await sleep(100);
  assert.equal(lines(records), ['dependency down', 'dependency back']);
  assert.is((records.find((r) => r.msg === 'dependency back') as { downForMs?: number }).downForMs, 158, 'the whole outage, flap included');
  health.failed(new Error('gone again'));
  assert.equal(lines(records), ['dependency down', 'dependency back', 'dependency down'], 'a failure after it settled is a new outage');
});

test.run();
