/**
 * npm run fleet -- <command>: fleet mode from the command line.
 *
 *   api | worker | all   start this process as a fleet node in that role (the server of
 *                        `npm start`, with NODE_ROLE set); the environment gives the rest:
 *                        DATABASE_URL=postgres://…, REDIS_URL=redis://…, FLEET_TOKEN, and for a
 *                        worker on another machine WORKER_URL (docs/fleet.md)
 *   status [--json]      the fleet as the registry in REDIS_URL sees it: each worker, live or not,
 *                        with its address and slots, and the totals
 */
import { parseArgs } from 'node:util';
import { RedisWorkerRegistry } from '../fleet/worker-registry.js';

const USAGE = `usage: npm run fleet -- api|worker|all     start a fleet node in that role
       npm run fleet -- status [--json]     workers and slots from REDIS_URL`;

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({ allowPositionals: true, options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } });
  const [command] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command || values.help ? 0 : 2;
  }
  if (command === 'api' || command === 'worker' || command === 'all') {
    process.env.NODE_ROLE = command;
    if (!process.env.REDIS_URL) {
      process.stderr.write('fleet: set REDIS_URL, DATABASE_URL (postgres://…) and FLEET_TOKEN first (docs/fleet.md)\n');
      return 2;
    }
    await import('../main.js'); // runs until SIGINT/SIGTERM
    return -1;
  }
  if (command === 'status') {
    const url = process.env.REDIS_URL;
    if (!url) {
      process.stderr.write('fleet: set REDIS_URL\n');
      return 2;
    }
    const registry = new RedisWorkerRegistry({ redis: url });
    try {
      const fleet = await registry.capacity();
      if (values.json) process.stdout.write(`${JSON.stringify(fleet, null, 2)}\n`);
      else {
        process.stdout.write(`${fleet.workers} live worker(s), ${fleet.used} of ${fleet.capacity} slots used\n`);
        for (const w of fleet.perWorker) process.stdout.write(`  ${w.id.padEnd(24)} ${w.live ? 'live' : 'DEAD'}  ${String(w.used).padStart(4)} / ${String(w.capacity).padEnd(4)} ${w.address}\n`);
      }
      return 0;
    } finally {
      await registry.close();
    }
  }
  process.stderr.write(`fleet: unknown command '${command}'\n${USAGE}\n`);
  return 2;
}

main().then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`fleet: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
