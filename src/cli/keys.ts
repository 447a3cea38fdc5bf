/**
 * API key management on the configured store (the same DATA_DIR / DATABASE_URL as the server; safe
 * while the server runs).
 *
 *   npm run keys -- create [--user USER_ID] [--name NAME] [--json]
 *   npm run keys -- list [--user USER_ID] [--json]
 *   npm run keys -- revoke <KEY_ID | PREFIX | FULL_KEY>
 *
 * The full key is printed once, by create; the store keeps only its hash.
 */
import { parseArgs } from 'node:util';
import { API_KEY_PREFIX, KeyService, hashKey } from '../auth/keys.js';
import { ConfigError, loadConfig } from '../config.js';
import { systemClock } from '../core/clock.js';
import { AppError } from '../core/errors.js';
import { openStore } from '../store/open-store.js';
import { apiKeyView } from '../server/views.js';

const USAGE = `usage:
  npm run keys -- create [--user USER_ID] [--name NAME] [--json]
  npm run keys -- list [--user USER_ID] [--json]
  npm run keys -- revoke <KEY_ID | PREFIX | FULL_KEY>`;

export async function runKeysCli(argv: string[], out: (line: string) => void): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      user: { type: 'string' },
      name: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [command, target] = positionals;
  if (values.help || !command) {
    out(USAGE);
    return command || values.help ? 0 : 2;
  }
  const config = loadConfig();
  const store = openStore(config.databaseUrl);
  try {
    await store.migrate();
    const keys = new KeyService(store, systemClock);
    switch (command) {
      case 'create': {
        const { key, record } = await keys.createApiKey(values.user ?? config.bootstrapUserId, values.name ?? '');
        if (values.json) out(JSON.stringify({ ...apiKeyView(record), key }));
        else out(`created ${record.id} for user '${record.userId}'. The key, shown only now:\n${key}`);
        return 0;
      }
      case 'list': {
        const rows = await store.listApiKeys(values.user);
        if (values.json) out(JSON.stringify(rows.map(apiKeyView)));
        else if (rows.length === 0) out('no API keys');
        else {
          for (const k of rows.map(apiKeyView)) {
            const state = k.revoked_at ? `revoked ${k.revoked_at}` : 'active';
            out(`${k.id}  ${k.prefix}…  user=${k.user_id}  ${state}  created=${k.created_at}  last_used=${k.last_used_at ?? 'never'}${k.name ? `  name=${k.name}` : ''}`);
          }
        }
        return 0;
      }
      case 'revoke': {
        if (!target) {
          out(USAGE);
          return 2;
        }
        // A full key is matched through its hash; an id or a listed prefix directly.
        let selector = target;
        if (target.startsWith(API_KEY_PREFIX) && target.length > 20) {
          const found = await store.findApiKeyByHash(hashKey(target));
          selector = found?.id ?? target;
        }
        const revoked = await store.revokeApiKey(selector, systemClock.nowUs());
        if (revoked.length === 0) {
          out(`no active key matches '${target}'`);
          return 1;
        }
        for (const k of revoked) out(`revoked ${k.id} (${k.prefix}…, user ${k.userId})`);
        return 0;
      }
      default:
        out(`unknown command '${command}'\n${USAGE}`);
        return 2;
    }
  } finally {
    await store.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runKeysCli(process.argv.slice(2), (line) => process.stdout.write(line + '\n')).then(
    (code) => process.exit(code),
    (err: unknown) => {
      if (err instanceof ConfigError || err instanceof AppError || (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
        process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
        process.exit(2);
      }
      throw err;
    },
  );
}
