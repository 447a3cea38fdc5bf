/**
 * Process entry: configuration from the environment, the server, the process safety net once it
 * serves (errors that escape every handler are logged and counted, not fatal: core/process-guard.ts),
 * and graceful shutdown on SIGINT/SIGTERM (live sessions are ended and billed, the store is closed
 * cleanly). A failure while starting is fatal (exit 1; a bad setting exits 2).
 */
import { ConfigError, loadConfig } from './config.js';
import { installProcessSafetyNet } from './core/process-guard.js';
import { startServer } from './server/server.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const server = await startServer(config, {
    onBootstrapKey: (key, userId) => {
      process.stdout.write(
        `\n  First start: created an API key for user '${userId}'. It is shown only this once:\n\n    ${key}\n\n` +
          `  Use it as: Authorization: Bearer ${key}\n  Manage keys with: npm run keys -- list|create|revoke\n\n`,
      );
    },
  });
  installProcessSafetyNet(server.services.log.child({ module: 'process' }));
  process.stdout.write(`avatar server listening on ${server.url}\n`);
  const ready = (): void => {
    const page = config.playground ? `: open ${server.url}/ to talk to the avatar` : '';
    process.stdout.write(`avatar server ready to talk${page}\n`);
  };
  if (config.preloadModels) void server.warmUp().then(ready);
  else ready();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    server.services.log.info('shutting down', { signal });
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        server.services.log.error('shutdown failed', { err });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
