/**
 * A promise per key, made once: the first caller's load is shared by every caller of that key
 * while it runs and after it has resolved, and a load that fails is forgotten, so the next caller
 * tries again (a file missing until set-up runs, a model still downloading). With `max`, the
 * oldest key goes when the map grows past it (insertion order, not use: the callers cache things
 * that every session of a face or voice wants, where the oldest is also the least wanted).
 */
export class LoadOnce<T> {
  private readonly loads = new Map<string, Promise<T>>();

  constructor(private readonly max = Infinity) {}

  get(key: string, load: () => Promise<T>): Promise<T> {
    const hit = this.loads.get(key);
    if (hit) return hit;
    const pending = load();
    this.loads.set(key, pending);
    pending.catch(() => {
      if (this.loads.get(key) === pending) this.loads.delete(key);
    });
    if (this.loads.size > this.max) this.loads.delete(this.loads.keys().next().value as string);
    return pending;
  }

  get size(): number {
    return this.loads.size;
  }
}
