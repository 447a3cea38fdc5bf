/**
 * API keys and ephemeral keys.
 *
 * API keys are `avs_` + 40 base62 characters, owned by a user_id, stored as SHA-256 hashes (the
 * keys are random and long, so a fast hash is the right tool: there is nothing to brute-force), and
 * shown exactly once at creation. Ephemeral keys (`ek_` + 40 characters, the prefix OpenAI's
 * browser SDK checks for) are minted by POST /v1/realtime/client_secrets, live 1..7200 s, carry the
 * user, the API key that minted them and the session config they were minted for, and are accepted
 * only on the realtime call and connection endpoints. Expired ephemeral keys, and those whose API
 * key was revoked, are rejected; expired ones are swept. Revocation reaching open connections and
 * live sessions is revocations.ts's part.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import { AppError } from '../core/errors.js';
import { newKeyId, randomBase62 } from '../core/ids.js';
import type { ApiKeyRecord, Store } from '../store/store.js';

export const API_KEY_PREFIX = 'avs_';
export const EPHEMERAL_KEY_PREFIX = 'ek_';
const SECRET_LENGTH = 40;
/** Characters of a key kept in clear for listings: the prefix plus 8, enough to tell keys apart. */
const DISPLAY_PREFIX_LENGTH = API_KEY_PREFIX.length + 8;
/** last_used_at is written at most this often per key, so auth does not write on every request. */
const TOUCH_INTERVAL_US = 60_000_000;

export type Principal =
  | { kind: 'api_key'; userId: string; keyId: string }
  | { kind: 'ephemeral'; userId: string; session: Record<string, unknown>; expiresAtUs: number; apiKeyId: string | null };

/** The API key behind a principal: its own, or the one that minted its ephemeral key (null for keys minted before that was recorded). */
export function apiKeyIdOf(principal: Principal): string | null {
  return principal.kind === 'api_key' ? principal.keyId : principal.apiKeyId;
}

export const hashKey = (secret: string): string => createHash('sha256').update(secret).digest('hex');

export class KeyService {
  private readonly lastTouched = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async createApiKey(userId: string, name = ''): Promise<{ key: string; record: ApiKeyRecord }> {
    if (!/^[\w.@-]{1,128}$/.test(userId)) {
      throw new AppError('invalid_user_id', 'user_id must be 1..128 letters, digits, or . _ @ -', { param: 'user_id' });
    }
    const key = API_KEY_PREFIX + randomBase62(SECRET_LENGTH);
    const record: ApiKeyRecord = {
      id: newKeyId(),
      userId,
      name,
      prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
      hash: hashKey(key),
      createdAtUs: this.clock.nowUs(),
      revokedAtUs: null,
      lastUsedAtUs: null,
    };
    await this.store.insertApiKey(record);
    return { key, record };
  }

  /** Mints an ephemeral key for the holder of API key `apiKeyId` (revoking that key revokes this one). */
  async createEphemeralKey(
    userId: string,
    apiKeyId: string,
    session: Record<string, unknown>,
    ttlSeconds: number,
  ): Promise<{ key: string; expiresAtUs: number }> {
    const key = EPHEMERAL_KEY_PREFIX + randomBase62(SECRET_LENGTH);
    const now = this.clock.nowUs();
    const expiresAtUs = now + ttlSeconds * 1_000_000;
    await this.store.insertEphemeralKey({ hash: hashKey(key), userId, apiKeyId, session, createdAtUs: now, expiresAtUs });
    return { key, expiresAtUs };
  }

  /**
   * Resolves a bearer token to its owner. Throws 401 AppErrors: missing, malformed, unknown,
   * revoked, expired.
   */
  async authenticate(token: string | undefined): Promise<Principal> {
    if (!token) {
      throw new AppError('missing_api_key', 'You did not provide an API key. Send it as Authorization: Bearer <API_KEY>.', {
        status: 401,
      });
    }
    if (token.startsWith(EPHEMERAL_KEY_PREFIX)) {
      const record = await this.store.findEphemeralKey(hashKey(token));
      if (!record) throw invalidKey();
      if (record.expiresAtUs <= this.clock.nowUs()) {
        throw new AppError('ephemeral_key_expired', 'This ephemeral key has expired; request a new client secret.', {
          status: 401,
        });
      }
      if (record.apiKeyId !== null && (await this.store.getApiKey(record.apiKeyId))?.revokedAtUs != null) {
        throw new AppError('api_key_revoked', 'The API key this ephemeral key was minted with has been revoked.', { status: 401 });
      }
      return { kind: 'ephemeral', userId: record.userId, session: record.session, expiresAtUs: record.expiresAtUs, apiKeyId: record.apiKeyId };
    }
    if (!token.startsWith(API_KEY_PREFIX)) throw invalidKey();
    const record = await this.store.findApiKeyByHash(hashKey(token));
    if (!record) throw invalidKey();
    if (record.revokedAtUs !== null) {
      throw new AppError('api_key_revoked', 'This API key has been revoked.', { status: 401 });
    }
    const now = this.clock.nowUs();
    if (now - (this.lastTouched.get(record.id) ?? 0) >= TOUCH_INTERVAL_US) {
      this.lastTouched.set(record.id, now);
      await this.store.touchApiKey(record.id, now);
    }
    return { kind: 'api_key', userId: record.userId, keyId: record.id };
  }

  async sweepExpired(): Promise<number> {
    return this.store.deleteExpiredEphemeralKeys(this.clock.nowUs());
  }
}

function invalidKey(): AppError {
  return new AppError('invalid_api_key', 'Incorrect API key provided.', { status: 401 });
}

/** `Authorization: Bearer <token>` -> token, tolerant of case and extra spaces. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : undefined;
}
