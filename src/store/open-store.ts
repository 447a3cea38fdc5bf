/**
 * DATABASE_URL to a Store: `sqlite:<path>` (the embedded default, one file) or
 * `postgres://user:password@host:port/database` (`postgresql://` too; fleet mode, shared by every
 * node). `redactDatabaseUrl` is what logs and errors may show: the password never.
 * PostgreSQL's options (postgres-store.ts) say where its outages are logged (`log`: one line per
 * change) and bound how long a connect or query may take; SQLite, in-process, has no outages.
 */
import { PostgresStore, type PostgresStoreOptions } from './postgres-store.js';
import { SqliteStore } from './sqlite-store.js';
import type { Store } from './store.js';

export type StoreKind = 'sqlite' | 'postgres';

export function storeKind(databaseUrl: string): StoreKind | null {
  if (databaseUrl.startsWith('sqlite:')) return 'sqlite';
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) return 'postgres';
  return null;
}

export function openStore(databaseUrl: string, options: PostgresStoreOptions = {}): Store {
  switch (storeKind(databaseUrl)) {
    case 'sqlite':
      return new SqliteStore(databaseUrl.slice('sqlite:'.length));
    case 'postgres':
      return new PostgresStore(databaseUrl, options);
    default:
      throw new Error(`unsupported DATABASE_URL scheme '${databaseUrl.split(':')[0]}:'`);
  }
}

/** The URL with any password replaced by `***`. */
export function redactDatabaseUrl(databaseUrl: string): string {
  if (storeKind(databaseUrl) !== 'postgres') return databaseUrl;
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return databaseUrl.replace(/\/\/[^@/]*@/, '//***@');
  }
}
