/**
 * Evaluated prompt heads (instructions and tools, as prefill() and prepare() evaluate them) kept as
 * llama.cpp sequence state files, so any sequence can be given one in milliseconds instead of
 * evaluating it again: node-llama-cpp copies no sequence in memory, but saves and loads a
 * sequence's state (its tokens and their KV cache). Measured here on the 0.5B model: a 301-token
 * head is 3.7 MB, saved in 3 ms and loaded in 2 ms, where evaluating it takes 3.3 s.
 *
 * Without it a head was evaluated on a spare sequence (one holding no conversation), which every
 * sequence stops being once it has served a conversation, so on a server that has had as many
 * conversations as sequences a session's instructions and tools were evaluated in its first reply.
 * With it a request whose sequence holds less of its prompt than a kept head gets the head loaded
 * first (LlamaCppModel.generate(), endOfTurnProbability(), the call gate's reading of a question by
 * itself). The newest MAX_HEADS are kept, in a directory of the system's temporary one removed on
 * close(); the files only ever go back into the context that wrote them (node-llama-cpp's one
 * warning: a state from another model may crash the process).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { LlamaContextSequence, Token } from 'node-llama-cpp';

/** Heads kept (each a few MB: ~12 KB a token for the 0.5B model, ~28 KB for the 1.5B). */
export const MAX_HEADS = 16;
/** A head is loaded only when it holds at least this many more of the prompt than the sequence (below it, evaluating is as quick). */
const MIN_GAIN_TOKENS = 16;

interface Head {
  tokens: Token[];
  file: string;
}

export class HeadStates {
  /** Oldest first. */
  private readonly heads: Head[] = [];
  private dir: string | null = null;
  private files = 0;

  /** `onError`: a head that could not be loaded (forgotten, the prompt evaluated instead). */
  constructor(private readonly onError: (err: unknown) => void) {}

  /** Whether a kept head is exactly `tokens`. */
  has(tokens: readonly Token[]): boolean {
    return this.heads.some((h) => sameTokens(h.tokens, tokens));
  }

  /** Keeps what `sequence` holds (it must hold the head it was just given) as a head. */
  async save(sequence: LlamaContextSequence): Promise<void> {
    const tokens = sequence.contextTokens.slice();
    if (tokens.length === 0 || this.has(tokens)) return;
    this.dir ??= await fs.promises.mkdtemp(path.join(os.tmpdir(), 'avatar-server-llm-'));
    const file = path.join(this.dir, `head-${++this.files}.state`);
    await sequence.saveStateToFile(file);
    this.heads.push({ tokens, file });
    for (const old of this.heads.splice(0, Math.max(0, this.heads.length - MAX_HEADS))) await fs.promises.rm(old.file, { force: true });
  }

  /**
   * Gives `sequence` the kept head that holds most of `prompt`, when it holds MIN_GAIN_TOKENS more
   * than the sequence does; returns whether it did. The sequence's tokens are replaced; what of
   * the head the prompt does not share is erased by the evaluation that follows.
   */
  async load(sequence: LlamaContextSequence, prompt: readonly Token[]): Promise<boolean> {
    const held = sharedPrefix(sequence.contextTokens, prompt);
    let best: Head | null = null;
    let bestShared = held + MIN_GAIN_TOKENS - 1;
    for (const head of this.heads) {
      const shared = sharedPrefix(head.tokens, prompt);
      if (shared > bestShared) [best, bestShared] = [head, shared];
    }
    if (!best) return false;
    // Newest last: a head in use is the last to go.
    this.heads.splice(this.heads.indexOf(best), 1);
    this.heads.push(best);
    try {
      await sequence.clearHistory();
      await sequence.loadStateFromFile(best.file, { acceptRisk: true });
      return true;
    } catch (err) {
      // The file is gone or unreadable: forget it; the prompt is evaluated instead.
      this.heads.splice(this.heads.indexOf(best), 1);
      this.onError(err);
      await sequence.clearHistory();
      return false;
    }
  }

  async close(): Promise<void> {
    this.heads.length = 0;
    if (this.dir) await fs.promises.rm(this.dir, { recursive: true, force: true });
    this.dir = null;
  }
}

/** Whether `a` and `b` are the same tokens. */
export function sameTokens(a: readonly Token[], b: readonly Token[]): boolean {
  return a.length === b.length && sharedPrefix(a, b) === a.length;
}

/** How many leading tokens `a` and `b` share. */
export function sharedPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
