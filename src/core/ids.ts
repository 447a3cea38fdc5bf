/**
 * Identifiers and secrets. Session ids look like OpenAI's (`sess_` + 24 base62 characters) so the
 * same id serves REST and the realtime `session.created` event. Custom assets are UUIDs, as the
 * interface says. Secrets are 40 base62 characters (~238 bits) from the CSPRNG.
 */
import { randomBytes, randomUUID } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function randomBase62(length: number): string {
  // Rejection sampling keeps every character equally likely (256 is not a multiple of 62).
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

export const newSessionId = (): string => `sess_${randomBase62(24)}`;
export const newEventId = (): string => `evt_${randomBase62(20)}`;
export const newUsageId = (): string => `usage_${randomBase62(20)}`;
export const newKeyId = (): string => `key_${randomBase62(16)}`;
export const newAssetId = (): string => randomUUID();

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (text: string): boolean => UUID_RE.test(text);
