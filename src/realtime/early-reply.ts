/**
 * A reply started before its turn is known to have ended. When a voice turn pauses, the engine
 * transcribes it speculatively (session-engine.ts); as soon as that transcript is ready it also
 * asks the model for the reply the turn would get, here, while the end-of-turn decision is still
 * being made. Nothing of it reaches the client: the model's text is only buffered. Then either
 *  - the turn ends in that pause and its response asks for exactly the same request (same model,
 *    same messages, same output limit, same tools: anything else, e.g. a session.update in
 *    between, and the early reply is discarded): `take()` hands the response a LanguageModel whose stream is the
 *    buffered text followed by the rest as it is generated, so the response's first clause is
 *    often ready at once; or
 *  - the user speaks on (or anything else makes it stale): `discard()` aborts the generation and
 *    drops the text. The response that comes later never sees it.
 * A reply that turns out to be a function call is buffered like text: its function_call item is
 * shown only by the response that takes it, after the turn is confirmed.
 * Only with a model running in this process (`LanguageModel.local`): a remote API would bill for
 * replies thrown away. The early reply holds one of the local model's sequences while it runs; a
 * discarded one frees it at once, and leaves that sequence holding the conversation's prompt, so
 * the next attempt evaluates only the words added since. Until it is taken it is speculative
 * (`GenerateRequest.speculation`): the model may stop it to serve another session's confirmed
 * turn, and a reply so preempted is never taken (its turn's response asks the model anew).
 *
 * Invariants: the model's stream is read by exactly one consumer (the pump here); `take()` is
 * allowed once, and the stream its model's first generate() returns replays every chunk in order,
 * then the live rest, and ends with the model's own `done` (or its error); a second generate() of
 * the same response (the step after its MCP calls) goes to the model itself. Aborting the taken stream's signal aborts the
 * generation, as for a direct request.
 */
import type { GenerateChunk, GenerateRequest, LanguageModel } from '../providers/llm/base.js';
import type { ModelRequest } from './response.js';

export class EarlyReply {
  private readonly abort = new AbortController();
  private readonly chunks: GenerateChunk[] = [];
  private failure: { err: unknown } | null = null;
  private ended = false;
  private wake: (() => void) | null = null;
  private taken = false;
  /** The model stopped it to serve another session's confirmed request: it cannot be taken. */
  private preempted = false;
  private readonly startedAt = performance.now();

  constructor(
    private readonly model: LanguageModel,
    private readonly request: ModelRequest,
  ) {
    void this.pump();
  }

  /** Text generated so far, in characters (for the log). */
  get readyChars(): number {
    let n = 0;
    for (const c of this.chunks) if (c.type === 'text') n += c.text.length;
    return n;
  }

  /** ms since the generation started. */
  get ageMs(): number {
    return Math.round(performance.now() - this.startedAt);
  }

  /** Whether a response asking `model` for `request` would get exactly this reply. */
  matches(model: LanguageModel, request: ModelRequest): boolean {
    return (
      !this.taken &&
      !this.preempted &&
      !this.abort.signal.aborted &&
      model.id === this.model.id &&
      request.maxOutputTokens === this.request.maxOutputTokens &&
      sameJson(request.messages, this.request.messages) &&
      sameJson([request.tools, request.toolChoice, request.parallelToolCalls], [this.request.tools, this.request.toolChoice, this.request.parallelToolCalls])
    );
  }

  /** The reply as a model stream (see the header); once. */
  take(): LanguageModel {
    if (this.taken) throw new Error('EarlyReply.take() called twice');
    this.taken = true;
    let replayed = false;
    return {
      id: this.model.id,
      local: this.model.local,
      speculative: false,
      // The response's first request is this reply; a later one (the step after an MCP call) is the model's.
      generate: (request: GenerateRequest) => {
        if (replayed) return this.model.generate(request);
        replayed = true;
        return this.replay(request.signal);
      },
      close: async () => {},
    };
  }

  /** Stops the generation and drops its text; nothing of it is ever used. */
  discard(): void {
    this.abort.abort();
    this.chunks.length = 0;
    this.notify();
  }

  private async pump(): Promise<void> {
    try {
      const { messages, maxOutputTokens, tools, toolChoice, parallelToolCalls } = this.request;
      const stream = this.model.generate({
        messages,
        maxOutputTokens,
        signal: this.abort.signal,
        speculation: { isSpeculative: () => !this.taken, preempted: () => (this.preempted = true) },
        ...(tools.length > 0 ? { tools, toolChoice, parallelToolCalls } : {}),
      });
      for await (const chunk of stream) {
        if (this.abort.signal.aborted && !this.taken) break;
        this.chunks.push(chunk);
        this.notify();
      }
    } catch (err) {
      this.failure = { err };
    } finally {
      this.ended = true;
      this.notify();
    }
  }

  private async *replay(signal: AbortSignal): AsyncGenerator<GenerateChunk> {
    const onAbort = (): void => this.abort.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) this.abort.abort();
    let complete = false;
    try {
      let next = 0;
      for (;;) {
        const chunk = this.chunks[next];
        if (chunk) {
          next++;
          complete = chunk.type === 'done';
          yield chunk;
          if (complete) return;
          continue;
        }
        if (this.ended) {
          complete = true;
          if (this.failure) throw this.failure.err;
          return;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      // The consumer stopped reading before the end (cancelled): the generation has no other reader.
      if (!complete) this.abort.abort();
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

/** Whether two request parts are the same (the messages, tool calls and images included). */
function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
