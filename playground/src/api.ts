/**
 * The REST calls the page makes, with the person's API key, and every failure turned into words
 * for a person (`Problem`): a key that is not accepted, no worker free (with when to retry), a
 * photo without a face, a server that cannot be reached.
 */

export type ProblemKind = 'key' | 'busy' | 'network' | 'input' | 'server';

export class Problem extends Error {
  constructor(
    message: string,
    readonly kind: ProblemKind,
    /** Seconds after which trying again may work (no worker free, rate limited). */
    readonly retryAfterS: number | null = null,
  ) {
    super(message);
  }
}

export interface AssetEntry {
  id: string;
  filename: string;
  description: string;
}

export interface SessionView {
  id: string;
  status: string;
  duration_seconds: number | null;
  ended_at: string | null;
}

/** A failed answer in words: what happened and what to do. */
export async function problemOf(res: Response, doing: string): Promise<Problem> {
  let code = '';
  let message = '';
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string } };
    code = body.error?.code ?? '';
    message = body.error?.message ?? '';
  } catch {
    // not JSON: the status says enough
  }
  const retry = Number(res.headers.get('Retry-After'));
  const retryAfterS = Number.isFinite(retry) && retry > 0 ? Math.ceil(retry) : null;
  if (res.status === 401) {
    const why = code === 'api_key_revoked' ? 'has been revoked' : code === 'missing_api_key' ? 'is missing' : 'was not accepted';
    return new Problem(`Your API key ${why}. Enter a valid key (npm start prints one; npm run keys -- create makes more).`, 'key');
  }
  if (res.status === 503 && code === 'no_worker_available') {
    return new Problem(`Every avatar worker is busy right now. Try again in ${retryAfterS ?? 5} seconds.`, 'busy', retryAfterS ?? 5);
  }
  if (res.status === 429) {
    return new Problem(`Too many requests with this key. Try again in ${retryAfterS ?? 10} seconds.`, 'busy', retryAfterS ?? 10);
  }
  if (res.status === 422 || res.status === 400 || res.status === 413 || res.status === 415) {
    return new Problem(message || `The server refused ${doing}.`, 'input');
  }
  return new Problem(`${doing[0]?.toUpperCase()}${doing.slice(1)} failed (${res.status}${message ? `: ${message}` : ''}).`, 'server');
}

export class Api {
  constructor(private readonly key: () => string | null) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const key = this.key();
    return key ? { Authorization: `Bearer ${key}`, ...extra } : extra;
  }

  private async call(path: string, init: RequestInit, doing: string): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(path, init);
    } catch {
      throw new Problem('The server cannot be reached. Check that it is running, then try again.', 'network');
    }
    if (!res.ok) throw await problemOf(res, doing);
    return res;
  }

  async list(plural: 'faces' | 'voices' | 'driving'): Promise<AssetEntry[]> {
    const res = await this.call(`/v1/${plural}`, { headers: this.headers() }, `listing ${plural}`);
    return ((await res.json()) as Record<string, AssetEntry[]>)[plural] ?? [];
  }

  /** A face's picture as an object URL (uploads need the key, so an <img src> alone cannot load them). */
  async faceImage(id: string): Promise<string> {
    const res = await this.call(`/v1/faces/${encodeURIComponent(id)}/content`, { headers: this.headers() }, 'loading a face');
    return URL.createObjectURL(await res.blob());
  }

  async uploadFace(file: File): Promise<AssetEntry> {
    const form = new FormData();
    form.append('file', file, file.name);
    form.append('name', file.name.replace(/\.[^.]+$/, '').slice(0, 100));
    const res = await this.call('/v1/faces', { method: 'POST', headers: this.headers(), body: form }, 'the upload');
    const asset = (await res.json()) as { id: string; filename: string; description: string };
    return { id: asset.id, filename: asset.filename, description: asset.description };
  }

  /** An ephemeral key for one connection, bound to this session config. */
  async clientSecret(session: Record<string, unknown>): Promise<string> {
    const res = await this.call(
      '/v1/realtime/client_secrets',
      { method: 'POST', headers: this.headers({ 'Content-Type': 'application/json' }), body: JSON.stringify({ session, expires_after: { anchor: 'created_at', seconds: 600 } }) },
      'starting a session',
    );
    return ((await res.json()) as { value: string }).value;
  }

  async session(id: string): Promise<SessionView> {
    const res = await this.call(`/v1/sessions/${encodeURIComponent(id)}`, { headers: this.headers() }, 'reading the session');
    return (await res.json()) as SessionView;
  }

  async hangup(callPath: string): Promise<void> {
    await this.call(`${callPath}/hangup`, { method: 'POST', headers: this.headers() }, 'hanging up');
  }
}
