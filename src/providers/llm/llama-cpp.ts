/**
 * A local GGUF chat model through node-llama-cpp (llama.cpp, CPU). The model is loaded once, on the
 * first request, and shared by every session that routes here. One llama.cpp context holds
 * `parallel` sequences, each with its own `contextTokens` window: up to that many replies are
 * generated at the same time (llama.cpp evaluates them in one batch), and further requests wait in
 * arrival order for a free sequence (a waiting request that is aborted leaves the queue at once).
 * Each sequence keeps its evaluated tokens between requests, and a request takes the free sequence
 * that already holds the longest start of its prompt: a conversation's next turn lands where its
 * last turn was evaluated and evaluates only the new part (the prompt's evaluation costs about as
 * much per token as generating one, ~16 ms on one core of the 2-core machine, so landing on the
 * other sequence cost a 10-turn conversation 0.5-1 s per turn), and a new conversation lands where
 * its instructions already are: prefill() puts the default ones on every sequence at start-up, and
 * prepare() evaluates a session's own (and its tools) when the session sets them, on a spare
 * sequence (one that holds no conversation) or the call gate's own, so its first reply does not
 * evaluate them (a reply asked for while they are still being evaluated waits for that rather than
 * evaluating them again elsewhere). What they evaluate is kept as a sequence state file
 * (llama-cpp-states.ts): a request whose sequence holds less of its prompt than a kept head loads
 * it in milliseconds, so this holds on whichever sequence the reply lands, conversations or not.
 *
 * The prompt is formatted by the chat template the GGUF carries (node-llama-cpp's chat wrapper
 * resolution), so a system message is honoured as the model was trained to. Only the newest turns
 * that fit the context are formatted at all (context.ts: a character budget from `contextTokens`
 * less the reply's room, applied before anything is tokenized), so formatting and tokenizing on
 * the event loop cost the same for a conversation of a megabyte as for one of a page; llama.cpp's
 * context shift does the exact fit of that bounded text. Usage is computed by tokenizing: input =
 * the formatted prompt, output = the reply text and the calls it made. A request's output limit (or
 * the configured default) becomes llama.cpp's maxTokens; abort stops generation between tokens.
 *
 * Function calling uses the model's own template too (for Qwen2.5, node-llama-cpp's Qwen wrapper:
 * the tools as JSON signatures in the system turn, `<tool_call>{"name": ..., "arguments": ...}`
 * replies, outputs in `<tool_response>`), so the formatted prompt includes the tools, and the
 * affinity above compares prompts formatted with them.
 *  - History: an assistant message's tool calls become its model turn's function calls, and the
 *    `tool` messages answering them (by call id) become those calls' results. A call that has no
 *    output yet (a client may ask for a response before sending it) keeps an undefined result,
 *    which the template renders as node-llama-cpp's `void` (a call that returned nothing); an
 *    output whose call is not in the history (cut off with older turns) becomes a user turn.
 *    Outputs that are JSON are given to the template as values (it prints them as JSON), others as
 *    strings.
 *  - Reply: node-llama-cpp detects the call syntax (also the bare, pretty-printed or fenced
 *    JSON this model often writes without its `<tool_call>` tag: sequenceTemplate()), constrains
 *    the function name to the tools given and the arguments to a grammar from the tool's JSON
 *    Schema (toGrammarSchema(): the subset it supports; every declared property is generated,
 *    optional ones too), and hands each call over whole; it becomes one `tool_call_start` (id
 *    `call_` + 24 base62) and one `tool_call_arguments` with the arguments as JSON, formatted as
 *    the template prints them (so the next turn's prompt matches what the sequence holds up to
 *    the end of the arguments, where generation stopped). A reply that ends in a call
 *    finishes with 'tool_calls'; node-llama-cpp stops at the calls, so no text follows them. At
 *    most one call per reply, parallelToolCalls or not (MAX_CALLS_PER_REPLY says why). A call
 *    identical (name and arguments) to one whose output the reply follows is the model repeating
 *    itself, which this one does after nearly every output: under 'auto' it is dropped and the
 *    reply generated again, same prompt, under a grammar that admits only words (WORDS_GBNF), so
 *    a client that answers calls does not loop on the same call.
 *  - A call whose argument, for a parameter that gives an example ("e.g. French"), says nothing the
 *    conversation says (copiedExamples(): the example repeated, or a value of its kind) is the model
 *    filling in a value the user never gave: under 'auto' it is dropped and tried once more with
 *    the example's words (else the value's own) banned and the names
 *    the user said favoured (NAME_LOGIT_BIAS); a second value the conversation does not say either
 *    is dropped too and the reply is in words ("What is two plus two?" → translate(French), then
 *    translate(English): answered; "What is the time in Sydney?" → "Australia/Paris", then
 *    "Australia/Sydney": called). After outputs, a reply in words may not write " above": this
 *    model read the note back ("The set_timer function returned the above.").
 *  - Outputs are followed by a note in the user's words (outputNote(): which calls returned the outputs above it,
 *    and to answer with it): given only the template's `<tool_response>`, this model answered from
 *    an output 1 time in 4.
 *  - The call gate: under 'auto', the model's own probability of opening its reply with a call
 *    (the call tag, or the bare JSON or code block it writes for one) is read at the prompt's end
 *    (one token evaluated again, the rest is what the reply evaluates anyway); below CALL_GATE the
 *    reply is generated in words, the functions still described (the same prompt) and the tokens
 *    that would start a call banned. This model opens with a call for questions no tool fits, with
 *    less confidence than when one fits (the tool bench's curve). Later in a conversation the
 *    question is also read by itself after the instructions (standaloneQuestion(), on one more
 *    sequence kept for it): after a turn answered in words this model's reading collapses to 0.00
 *    for every question; the question alone at the gate makes the reply a call (forced, the model
 *    choosing which on the whole conversation).
 *  - tool_choice: 'none' gives the model no functions (nor their description); 'auto' gives them
 *    and lets it choose (past the gate); 'required' and a named function force a call: each sequence's chat
 *    template is wrapped (sequenceTemplate()) so that, for such a request, its context state says
 *    `noPrefixTrigger: functionCall`, node-llama-cpp's own mechanism that puts the call prefix in
 *    the context right after the prompt and makes the model choose a function name under the
 *    name grammar; a named function is the only one given, so it is the only name the grammar
 *    allows (and the only one described).
 * The history mapping, the tool schemas and the template switches live in llama-cpp-tools.ts.
 *
 * Only the CPU build is used (`gpu: false`): package.json's overrides replace the CUDA and Vulkan
 * prebuilt packages by the CPU one to keep the install small, and nothing is compiled or
 * downloaded at run time (`build: 'never'`, `skipDownload`).
 */
import path from 'node:path';
import type {
  ChatHistoryItem,
  ChatModelFunctions,
  ChatWrapper,
  LLamaChatGenerateResponseOptions,
  Llama,
  LlamaChat,
  LlamaContext,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaModel,
  LlamaText,
  Token,
  TokenBias,
} from 'node-llama-cpp';
import type { Logger } from '../../core/log.js';
import type { ChatMessage, FinishReason, GenerateChunk, GenerateRequest, LanguageModel, SpeculativeWork, TokenUsage } from './base.js';
import { ProviderError, llmUnavailable, newCallId } from './base.js';
import { fitMessages, promptCharBudget } from './context.js';
import { takeNext } from '../../core/confirmed-first.js';
import { HeadStates, sameTokens, sharedPrefix } from './llama-cpp-states.js';
import {
  MAX_CALLS_PER_REPLY,
  type CopiedExample,
  type SequenceTemplate,
  answeredCalls,
  argumentAt,
  callKey,
  copiedExamples,
  followsOutputs,
  functionsFor,
  heardWords,
  namesIn,
  said,
  sequenceTemplate,
  standaloneQuestion,
  toHistory,
  withCallingRule,
} from './llama-cpp-tools.js';

export { functionsFor, toGrammarSchema, toHistory } from './llama-cpp-tools.js';

export interface LlamaCppModelOptions {
  /** The GGUF file. */
  modelFile: string;
  threads: number;
  /** Context window of each sequence, in tokens. */
  contextTokens: number;
  /** Sequences (replies generated at the same time). */
  parallel: number;
  /** Output limit when a request gives none. */
  maxOutputTokens: number;
  log: Logger;
  /**
   * Under tool_choice 'auto', the model's probability of opening its reply with a call below which
   * the reply is generated in words (see CALL_GATE); 0 lets the model choose freely (the tool
   * bench's calibration runs so).
   */
  callGate?: number;
}

/**
 * The model's own probability of starting a call rather than an answer, read at the reply's first
 * token, below which a reply under tool_choice 'auto' is one in words: the Qwen2.5-Coder 0.5B
 * model, once functions are described, opens with a call for questions no tool fits ("What is the
 * capital of Italy?" → get_weather(Paris)) but with less confidence than when one fits. Chosen on
 * the tool bench (benchmarks/tool-calling.bench.ts; TOOL_BENCH_CALL_GATE=0 records every request's
 * probability and prints the gate's curve): with CALLING_RULE and the default instructions, the 26
 * questions a tool fits read 0.72-0.99, the 18 it does not 0.00-0.69 but one (0.99, "What is two
 * plus two?" → translate); with the spoken-reply guidance too (a voice session), 0.83-0.98 but one
 * (0.17) and 0.00-0.49 but the same one. After a turn answered in words it reads 0.00 even where
 * a tool fits, so later turns are also read by themselves (gateCall()).
 */
export const CALL_GATE = 0.7;

/**
 * The gate for the second reading, the question by itself after the instructions (gateCall()):
 * read without the conversation, a question that refers back to it ("Is it morning or afternoon
 * there?" after a call's answer for Tokyo) still leans to a call, less surely than one a tool
 * fits. On the tool bench, later in a conversation (the spoken-reply guidance): questions a tool
 * fits read 0.86-0.98 alone, those no tool fits 0.00-0.09 (but "What is two plus two?", 0.97 as a
 * first message too), and the follow-ups the earlier output answers 0.71 and 0.71 (and 0.15).
 */
export const CALL_GATE_ALONE = 0.8;

/** One context sequence: the chat that generates on it and the switches of its chat template. */
interface Slot {
  chat: LlamaChat;
  template: SequenceTemplate;
  /**
   * Holds no conversation: nothing, or only instructions evaluated ahead (prefill, prepare). A
   * spare sequence may be given another session's instructions; one a request has run on keeps
   * its conversation for that conversation's next turn.
   */
  spare: boolean;
}

interface Loaded {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  /** The chat template every sequence formats with (node-llama-cpp resolves it from the GGUF). */
  wrapper: ChatWrapper;
  /** node-llama-cpp's LlamaText (loaded with the module): counts the tokens of a call's raw text. */
  text: typeof LlamaText;
  /** node-llama-cpp's Python-style JSON formatting, as its templates print call arguments. */
  jsonDumps: (value: unknown) => string;
  /** Replies in words only (WORDS_GBNF), for a model that repeats an answered call. */
  wordsGrammar: LlamaGrammar;
  /** One slot per sequence; a slot is either free or serving exactly one request. */
  free: Slot[];
  /** The single tokens of END_TEXTS: a next token that ends the user's sentence. */
  endTokens: Set<Token>;
  /** node-llama-cpp's TokenBias (loaded with the module): keeps a reply in words from starting a call. */
  TokenBias: typeof TokenBias;
  /** Evaluated instructions and tools, kept for any sequence to load. */
  heads: HeadStates;
  /**
   * One more sequence, for the call gate's reading of a question by itself (readAlone()) and for
   * prepare() when no spare slot is free; it holds no conversation. One job at a time (`turn`
   * chains them).
   */
  gate: { sequence: LlamaContextSequence; turn: Promise<unknown> };
}

/** What the call gate decided for a reply under tool_choice 'auto'. */
type GateDecision =
  /** The model chooses (its probability of calling reached the gate). */
  | { kind: 'free' }
  /** A call, the model choosing which (the question by itself reached the gate, the conversation did not). */
  | { kind: 'call' }
  /** Words, with these tokens banned. */
  | { kind: 'words'; bias: TokenBias };

/**
 * Why a call was refused before it was given (generate()): it repeats a call whose output the
 * reply follows, or an argument was copied from its parameter's example (copiedExamples()).
 */
type RefusedCall = { kind: 'repeat' } | { kind: 'copied'; copied: CopiedExample[] };

/**
 * The logit added, on a call's second try after an argument copied from its example, to the
 * tokens that start the names in the user's last message (namesIn()): the value is most often one
 * of them. Measured: "What is the time in Sydney right now?" → "Australia/Paris" (copied), then
 * "Australia/Perth" unbiased, "Australia/Sydney" at 3 ("Sydney" on the tool bench's sequences),
 * "Sydney" at 6; "What is two plus two?" (no names) → "French", then "English": refused again,
 * answered in words ("Two plus two equals four.", 2.2 s: two calls written and dropped first).
 */
const NAME_LOGIT_BIAS = 3;

/** A reply's first token that starts a call: the template's tag, or the JSON or code block this model writes without it. */
const CALL_START = /^\s*(?:<tool_call>|\{|```)/;
/**
 * The note's own words (outputNote()) that a reply after outputs never needs: this model read the
 * note back, "The set_timer function returned the above." (the timer's follow-up, every run);
 * without them it answers "The set timer returned the time 10:15." (follow-ups 10 → 11 of 11).
 * Banned by their first tokens, after a space or not (startTokens()).
 */
const NOTE_ECHOES = ['above'];

/** A reply's first token that reads back the note on outputs (outputNote() is in parentheses): banned from a reply in words. */
const ECHO_START = /^\s*\(/;

/** Texts that end a sentence when they follow its last word (endOfTurnProbability()). */
const END_TEXTS = ['.', '?', '!', '.\n', '?\n', '!\n', '.\n\n', '?\n\n', '!\n\n'];

/**
 * Spoken sentences: no JSON, markup, code or a function's name (braces, brackets, angle brackets,
 * backticks, underscores: "The set_timer function returned …" was read out), not
 * starting with a quote or parenthesis, one line, ending as a sentence does. The Qwen2.5-Coder
 * 0.5B model given a function's output writes its call again as JSON (and the output after it)
 * instead of an answer; held to this it answers in words, not always well (greedy, measured:
 * "This response indicates that Cairo is currently experiencing a sunny day with a temperature of
 * 35 degrees Celsius.", "Here's a response for the given input: "14:05" (14:05 PM) for the
 * function call "get_time".", but also a reply that only repeats the question).
 */
const WORDS_GBNF = String.raw`root ::= [^{}<>\x60\[\]\n"( _] [^{}<>\x60\[\]\n_]* [.!?]`;

interface Waiter {
  resolve: (slot: Slot) => void;
  reject: (err: unknown) => void;
  speculative: () => boolean;
}

/** A generation in progress: whether it is speculative now, and how to stop it. */
interface Serving {
  speculation: SpeculativeWork | undefined;
  stop: AbortController;
}

export class LlamaCppModel implements LanguageModel {
  readonly id: string;
  readonly local = true;
  readonly speculative = true;
  /**
   * Prompt tokens of all requests so far, and how many of them a sequence already held (not
   * evaluated again): the affinity's effect, for tests and the log.
   */
  readonly promptStats = { requests: 0, promptTokens: 0, reusedTokens: 0 };
  private loading: Promise<Loaded> | null = null;
  private readonly waiters: Waiter[] = [];
  /** The slots generating now, with how to stop them (on close(); a speculative one for a confirmed request). endOfTurnProbability's short evaluations are not listed: they are not stopped. */
  private readonly serving = new Map<Slot, Serving>();
  /** Instructions being evaluated by prepare(), and when that ends. */
  private readonly preparing = new Map<Slot | Loaded['gate'], { tokens: Token[]; done: Promise<void> }>();
  /** Speculative generations stopped to free a sequence for a confirmed request (for tests and the log). */
  preempted = 0;
  /** The call gate's last reading: the probability that the reply opens with a call (null before any request with functions under 'auto'). */
  lastCallProbability: number | null = null;
  private closed = false;

  constructor(private readonly options: LlamaCppModelOptions) {
    this.id = `llama-cpp:${path.basename(options.modelFile).replace(/\.gguf$/i, '').toLowerCase()}`;
  }

  /** Loads the model now instead of on the first request (start-up warm-up); idempotent. */
  async load(): Promise<void> {
    await this.loaded();
  }

  async *generate(request: GenerateRequest): AsyncGenerator<GenerateChunk> {
    if (this.closed) throw llmUnavailable(`${this.id}: generate() after close()`);
    if (request.signal.aborted) {
      yield { type: 'done', finishReason: 'aborted', usage: null };
      return;
    }
    const calling = functionsFor(request, this.id);
    const loaded = await this.loaded();
    const limit = request.maxOutputTokens ?? this.options.maxOutputTokens;
    const history = toHistory(fitMessages(request.messages, promptCharBudget(this.options.contextTokens, limit)));
    const prompt = promptTokens(loaded, history, calling.functions);
    const { speculation } = request;
    await this.preparedFor(loaded, prompt);
    const slot = await this.acquire(loaded, request.signal, prompt, () => speculation?.isSpeculative() ?? false);
    if (slot === null) {
      yield { type: 'done', finishReason: 'aborted', usage: null };
      return;
    }
    const { chat } = slot;
    slot.spare = false;
    await loaded.heads.load(chat.sequence, prompt);
    const reused = sharedPrefix(chat.sequence.contextTokens, prompt);
    this.promptStats.requests++;
    this.promptStats.promptTokens += prompt.length;
    this.promptStats.reusedTokens += reused;
    this.options.log.debug('local model prompt', { model: this.id, promptTokens: prompt.length, reusedTokens: reused });
    // Stops generation on the request's abort and on close().
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    request.signal.addEventListener('abort', onAbort, { once: true });
    this.serving.set(slot, { speculation, stop });
    const queue = new ChunkQueue();
    slot.template.forceCall = calling.force;
    try {
      const inputTokens = prompt.length;
      // Under 'auto', a reply the model is not sure should call is one in words (CALL_GATE).
      const gate: GateDecision = calling.functions && !calling.force ? await this.gateCall(loaded, slot, prompt, history, calling.functions) : { kind: 'free' };
      const words = gate.kind === 'words' ? gate.bias : null;
      if (words) slot.template.documented = calling.functions; // the same prompt: the functions described, none to call
      if (gate.kind === 'call') slot.template.forceCall = true;
      let calls = 0;
      // A call identical to one whose output this reply follows: the model repeating itself.
      const answered = answeredCalls(history, loaded.jsonDumps);
      // A call refused before it was given (refuse() below), and the signal that stops its attempt.
      let refused: RefusedCall | null = null;
      let refusal = new AbortController();
      /** The arguments copied from their examples on a first try: a second must give them from the conversation. */
      let copiedBefore: CopiedExample[] = [];
      // The conversation's words, read once a call arrives (a long conversation is many words).
      let heard: Set<string> | null = null;
      const options: LLamaChatGenerateResponseOptions<ChatModelFunctions> = {
        maxTokens: limit,
        signal: AbortSignal.any([stop.signal, refusal.signal]),
        stopOnAbortSignal: true,
        ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
        onTextChunk: (text) => {
          if (text) queue.push({ type: 'text', text });
        },
      };
      // After outputs, a reply in words is held to spoken sentences (WORDS_GBNF): this model reads
      // an output back ("The function `set_timer` returned {...}.") rather than answer from it.
      if (words && followsOutputs(history)) {
        options.grammar = loaded.wordsGrammar;
        for (const token of startTokens(loaded, NOTE_ECHOES)) words.set(token, 'never');
        options.tokenBias = words;
      } else if (words) options.tokenBias = words;
      else if (calling.functions) {
        options.functions = calling.functions;
        options.documentFunctionParams = true;
        options.maxParallelFunctionCalls = MAX_CALLS_PER_REPLY;
        // A call arrives whole, its arguments parsed and checked against the grammar's schema.
        options.onFunctionCall = (call) => {
          if (stop.signal.aborted || refused) return;
          const args = loaded.jsonDumps(call.params ?? {});
          const refuse = (why: RefusedCall) => {
            this.options.log.debug('local model call refused', { model: this.id, name: call.functionName, arguments: args, why: why.kind });
            refused = why;
            refusal.abort();
          };
          if (!calling.force && answered.has(callKey(call.functionName, args))) return refuse({ kind: 'repeat' });
          if (!calling.force && calls === 0) {
            const words = (heard ??= heardWords(request.messages));
            const copied = copiedExamples(call.params, request.tools?.find((t) => t.name === call.functionName)?.parameters, words);
            const unsaid = copiedBefore.filter((c) => !said(String(argumentAt(call.params, c.path) ?? ''), words));
            if (copied.length > 0 || unsaid.length > 0) return refuse({ kind: 'copied', copied });
          }
          const index = calls++;
          queue.push({ type: 'tool_call_start', index, callId: newCallId(), name: call.functionName });
          queue.push({ type: 'tool_call_arguments', index, delta: args });
        };
      }
      // node-llama-cpp ends an aborted text reply with stopReason 'abort', but throws an AbortError
      // when the abort comes in function-calling mode: either way the reply was aborted (null).
      const attempt = (o: LLamaChatGenerateResponseOptions<ChatModelFunctions>) =>
        chat.generateResponse(history, o).catch((err: unknown) => {
          if (stop.signal.aborted || refused) return null;
          throw err;
        });
      const run = (async () => {
        let res = await attempt(options);
        const first = refused as RefusedCall | null;
        if (first?.kind === 'copied' && !stop.signal.aborted) {
          // Once more, the copied examples' words banned: the model gives the value the conversation
          // says, if it says one ("Australia/Sydney"); a value it does not say is refused again.
          copiedBefore = first.copied;
          refused = null;
          refusal = new AbortController();
          res = await attempt({ ...options, signal: AbortSignal.any([stop.signal, refusal.signal]), tokenBias: secondTryBias(loaded, first.copied, request.messages) });
        }
        if (refused && !stop.signal.aborted) {
          // Answer in words instead: the same prompt (the functions still described), none to call.
          slot.template.documented = calling.functions;
          res = await attempt({
            maxTokens: limit,
            signal: stop.signal,
            stopOnAbortSignal: true,
            ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
            onTextChunk: options.onTextChunk,
            grammar: loaded.wordsGrammar,
          });
        }
        if (res === null || stop.signal.aborted) return queue.end({ finishReason: 'aborted', usage: null });
        let outputTokens = loaded.model.tokenize(res.response).length;
        for (const call of res.functionCalls ?? []) outputTokens += loaded.text.fromJSON(call.raw).tokenize(loaded.model.tokenizer).length;
        const usage: TokenUsage = { inputTokens, outputTokens };
        const stopped = res.metadata.stopReason;
        const reason: FinishReason =
          stopped === 'abort' ? 'aborted' : stopped === 'maxTokens' ? 'length' : stopped === 'functionCalls' && calls > 0 ? 'tool_calls' : 'stop';
        queue.end({ finishReason: reason, usage });
      })().catch((err: unknown) => queue.fail(err));
      try {
        for await (const item of queue) {
          if (item.type !== 'done' && stop.signal.aborted) continue; // decoded before the abort was seen
          yield item;
        }
      } finally {
        // The consumer may stop reading early (break, return): stop generating and wait for
        // llama.cpp to let go of the sequence before it is handed to the next request.
        stop.abort();
        await run;
      }
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw new ProviderError('llm_request_failed', `${this.id}: generation failed: ${(err as Error).message}`, { cause: err });
    } finally {
      slot.template.forceCall = false;
      slot.template.documented = undefined;
      request.signal.removeEventListener('abort', onAbort);
      this.serving.delete(slot);
      this.release(loaded, slot);
    }
  }

  /**
   * The call gate (CALL_GATE): the model's probability of opening its reply with a call, read at
   * the prompt's end on the slot's sequence. At the gate or above, the model chooses. Below it,
   * when the conversation has turns before the question, the question is read again by itself
   * (standaloneQuestion(), on the gate's own sequence: only the question is evaluated when the
   * instructions and tools are those of the last reading): at CALL_GATE_ALONE there, a call (the
   * model choosing which, on the whole conversation); else a reply in words, the tokens among the
   * likeliest that would start a call (or read back an output note) banned.
   * `lastCallProbability` keeps the higher reading (the tool bench calibrates the gate on it).
   */
  private async gateCall(
    loaded: Loaded,
    slot: Slot,
    prompt: readonly Token[],
    history: ChatHistoryItem[],
    functions: ChatModelFunctions,
  ): Promise<GateDecision> {
    const gate = this.options.callGate ?? CALL_GATE;
    const next = await nextTokenProbabilities(slot.chat.sequence, prompt);
    if (!next) return { kind: 'free' };
    const reading = callReading(loaded, next);
    let probability = reading.probability;
    let alone: number | null = null;
    const question = probability < gate ? standaloneQuestion(history) : null;
    if (question) {
      const byItself = await this.readAlone(loaded, promptTokens(loaded, question, functions));
      alone = byItself ? callReading(loaded, byItself).probability : null;
      probability = Math.max(probability, alone ?? 0);
    }
    this.lastCallProbability = Math.min(1, probability);
    this.options.log.debug('local model call gate', {
      model: this.id,
      callProbability: Math.round(reading.probability * 1000) / 1000,
      ...(alone === null ? {} : { questionAlone: Math.round(alone * 1000) / 1000 }),
      gate,
    });
    if (reading.probability >= gate) return { kind: 'free' };
    if (alone !== null && alone >= Math.max(gate, CALL_GATE_ALONE)) return { kind: 'call' };
    const bias = new loaded.TokenBias(loaded.model.tokenizer);
    for (const token of reading.banned) bias.set(token, 'never');
    return { kind: 'words', bias };
  }

  /**
   * The next token's probabilities after a question by itself (the call gate's second reading), on
   * the gate's own sequence, given the kept head (HeadStates) that holds most of its prompt first:
   * only the question after the instructions and tools is evaluated.
   */
  private readAlone(loaded: Loaded, tokens: readonly Token[]): Promise<Map<Token, number> | null> {
    return onGateSequence(loaded, async (sequence) => {
      await loaded.heads.load(sequence, tokens);
      return nextTokenProbabilities(sequence, tokens);
    });
  }

  /**
   * Evaluates the prompt of `messages` on every idle sequence that does not already start with it
   * (replacing what it holds: meant for start-up, with the default instructions): once, then kept
   * as a head (HeadStates) the other sequences load; the requests that start with them then
   * evaluate only their own turns.
   */
  async prefill(messages: ChatMessage[]): Promise<void> {
    if (this.closed) throw llmUnavailable(`${this.id}: prefill() after close()`);
    const loaded = await this.loaded();
    const tokens = promptTokens(loaded, toHistory(messages), undefined);
    for (const slot of [...loaded.free]) {
      if (this.closed || !loaded.free.includes(slot)) continue;
      const { sequence } = slot.chat;
      if (sharedPrefix(sequence.contextTokens, tokens) === tokens.length) continue;
      loaded.free.splice(loaded.free.indexOf(slot), 1); // held: a request must not evaluate on it meanwhile
      try {
        await this.giveHead(loaded, sequence, tokens);
        slot.spare = true;
      } finally {
        this.release(loaded, slot);
      }
    }
  }

  /**
   * A session's instructions (and tools), evaluated ahead of its first reply and kept as a head
   * (HeadStates), unless one is kept already: a session that sets its own instructions does not
   * pay for them in its first turn (56 tokens, 0.5 s on the 2-core machine; with the playground's
   * two tools, 330 tokens, 3.5 s), whichever sequence that turn lands on. Evaluated on a spare
   * sequence (see Slot), where the reply is likeliest to land, or else on the gate's sequence; a
   * conversation is never replaced.
   */
  async prepare(request: Pick<GenerateRequest, 'messages' | 'tools' | 'toolChoice'>): Promise<void> {
    if (this.closed) return;
    const loaded = await this.loaded();
    const tokens = headTokens(loaded, toHistory(request.messages), functionsFor(request, this.id).functions);
    if (loaded.heads.has(tokens) || [...this.preparing.values()].some((p) => sameTokens(p.tokens, tokens))) return;
    const slot = loaded.free.find((s) => s.spare);
    if (this.closed) return;
    if (slot) loaded.free.splice(loaded.free.indexOf(slot), 1);
    const done = slot ? this.giveHead(loaded, slot.chat.sequence, tokens) : onGateSequence(loaded, (sequence) => this.giveHead(loaded, sequence, tokens));
    const key = slot ?? loaded.gate;
    this.preparing.set(key, { tokens, done: done.catch(() => undefined) });
    try {
      await done;
    } finally {
      this.preparing.delete(key);
      if (slot) this.release(loaded, slot);
    }
  }

  /** Makes `sequence` hold exactly `tokens` (a kept head loaded, the rest evaluated) and keeps them as a head. */
  private async giveHead(loaded: Loaded, sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<void> {
    await loaded.heads.load(sequence, tokens);
    const keep = await keepShared(sequence, tokens, tokens.length);
    if (keep < tokens.length) await sequence.evaluateWithoutGeneratingNewTokens(tokens.slice(keep));
    await loaded.heads.save(sequence);
  }

  /**
   * Waits for a preparation of the start of `prompt` still in progress when no free sequence
   * holds as much of it: the reply that follows at once (a text client's first message) then
   * evaluates only its own turn, not the instructions a second time beside the preparation.
   */
  private async preparedFor(loaded: Loaded, prompt: readonly Token[]): Promise<void> {
    const held = Math.max(0, ...loaded.free.map((slot) => sharedPrefix(slot.chat.sequence.contextTokens, prompt)));
    for (const { tokens, done } of this.preparing.values()) {
      if (sharedPrefix(tokens, prompt) > held) return done;
    }
  }

  /**
   * The probability that the user's message ends after its last word (LanguageModel's
   * contract): the prompt is formatted as for a reply, cut just before the end-of-turn token that
   * closes the user's message, and evaluated on the sequence that holds most of it (only the new
   * words are evaluated); the probabilities of the next token are read at the last word. The
   * candidates are the 40 likeliest tokens (reading the whole vocabulary's 151,936 costs ~150 ms
   * here, the top 40 nothing measurable); the message ends if the next token is one of
   * END_TEXTS or ends the turn. The sequence keeps these tokens, so the reply that follows
   * evaluates only the end of the message and the assistant's header.
   */
  async endOfTurnProbability(request: GenerateRequest): Promise<number | null> {
    if (this.closed) throw llmUnavailable(`${this.id}: endOfTurnProbability() after close()`);
    const { signal } = request;
    if (signal.aborted) return null;
    const last = request.messages.at(-1);
    if (last?.role !== 'user' || last.content.trim() === '') return null;
    const calling = functionsFor(request, this.id);
    const loaded = await this.loaded();
    const limit = request.maxOutputTokens ?? this.options.maxOutputTokens;
    const history = toHistory(fitMessages(request.messages, promptCharBudget(this.options.contextTokens, limit)));
    const prompt = promptTokens(loaded, history, calling.functions);
    let end = prompt.length - 1;
    while (end > 0 && !loaded.model.isEogToken(prompt[end])) end--;
    if (end <= 0) return null; // a template without an end-of-turn token: nothing to ask
    const words = prompt.slice(0, end);
    // Waits behind confirmed requests, but preempts nothing: the judge falls back to rules when it waits too long.
    const asked = performance.now();
    const slot = await this.acquire(loaded, signal, words, () => true);
    if (slot === null) return null;
    slot.spare = false;
    try {
      await loaded.heads.load(slot.chat.sequence, words);
      const next = await nextTokenProbabilities(slot.chat.sequence, words, (reused) =>
        this.options.log.debug('local model reads the words', { model: this.id, promptTokens: words.length, reusedTokens: reused, waitedMs: Math.round(performance.now() - asked) }),
      );
      if (!next) return null;
      let probability = 0;
      for (const [token, p] of next) if (loaded.endTokens.has(token) || loaded.model.isEogToken(token)) probability += p;
      return Math.min(1, probability);
    } finally {
      this.release(loaded, slot);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const { stop } of this.serving.values()) stop.abort();
    for (const waiter of this.waiters.splice(0)) waiter.reject(llmUnavailable(`${this.id}: closed`));
    if (!this.loading) return;
    const loaded = await this.loading.catch(() => null); // a failed load holds nothing to release
    if (!loaded) return;
    await loaded.context.dispose();
    await loaded.model.dispose();
    await loaded.heads.close();
  }

  private loaded(): Promise<Loaded> {
    if (!this.loading) {
      this.loading = this.loadNow().catch((err: unknown) => {
        this.loading = null; // let a later request try again (the file may be fetched meanwhile)
        throw err;
      });
    }
    return this.loading;
  }

  private async loadNow(): Promise<Loaded> {
    const started = performance.now();
    const o = this.options;
    try {
      const lib = await import('node-llama-cpp');
      const { getLlama, LlamaChat: Chat, LlamaLogLevel, jsonDumps, resolveChatWrapper } = lib;
      const llama = await getLlama({
        gpu: false,
        build: 'never',
        skipDownload: true,
        maxThreads: o.threads,
        logLevel: LlamaLogLevel.error,
        logger: (level, message) => o.log.warn('llama.cpp', { level, message: message.trim() }),
      });
      const model = await llama.loadModel({ modelPath: o.modelFile });
      // One sequence per reply generated at once, and the call gate's own (Loaded.gate).
      const context = await model.createContext({ contextSize: o.contextTokens, sequences: o.parallel + 1, threads: o.threads });
      const wrapper = resolveChatWrapper(model);
      withCallingRule(wrapper, lib);
      const wordsGrammar = await llama.createGrammar({ grammar: WORDS_GBNF });
      const free: Slot[] = [];
      for (let i = 0; i < o.parallel; i++) {
        const template = sequenceTemplate(wrapper, lib);
        free.push({ chat: new Chat({ contextSequence: context.getSequence(), chatWrapper: template.wrapper }), template, spare: true });
      }
      o.log.info('local language model loaded', {
        model: this.id,
        file: o.modelFile,
        template: wrapper.wrapperName,
        loadMs: Math.round(performance.now() - started),
        contextTokens: context.contextSize,
        sequences: o.parallel,
        threads: o.threads,
      });
      if (this.closed) {
        await context.dispose();
        await model.dispose();
        throw llmUnavailable(`${this.id}: closed`);
      }
      const endTokens = new Set<Token>();
      for (const text of END_TEXTS) {
        const tokens = model.tokenize(text);
        if (tokens.length === 1) endTokens.add(tokens[0] as Token);
      }
      const gate = { sequence: context.getSequence(), turn: Promise.resolve() as Promise<unknown> };
      const heads = new HeadStates((err) => o.log.warn('local model: a kept prompt head could not be loaded; evaluating it', { model: this.id, error: (err as Error).message }));
      return { llama, model, context, wrapper, text: lib.LlamaText, jsonDumps, wordsGrammar, free, endTokens, TokenBias: lib.TokenBias, gate, heads };
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw new ProviderError('llm_unavailable', `${this.id}: cannot load ${o.modelFile}: ${(err as Error).message}`, {
        status: 503,
        cause: err,
      });
    }
  }

  /**
   * A free slot (sequence): the one already holding the longest start of `prompt` (see the
   * header); when none is free, waiting: confirmed requests before speculative ones, each in
   * arrival order, and a confirmed request stops a speculative generation (another session's
   * early reply, whose turn may never come) so it does not wait for it. Null when the signal
   * aborts first.
   */
  private acquire(loaded: Loaded, signal: AbortSignal, prompt: readonly Token[], speculative: () => boolean): Promise<Slot | null> {
    let best = -1;
    let bestShared = -1;
    for (const [i, candidate] of loaded.free.entries()) {
      const shared = sharedPrefix(candidate.chat.sequence.contextTokens, prompt);
      if (shared > bestShared) [best, bestShared] = [i, shared];
    }
    if (best >= 0) return Promise.resolve(loaded.free.splice(best, 1)[0] as Slot);
    if (!speculative()) this.preemptSpeculative();
    return new Promise<Slot | null>((resolve, reject) => {
      const waiter: Waiter = {
        speculative,
        resolve: (s) => {
          signal.removeEventListener('abort', onAbort);
          resolve(s);
        },
        reject: (err) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(null);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private release(loaded: Loaded, slot: Slot): void {
    const next = takeNext(this.waiters);
    if (next) next.resolve(slot);
    else loaded.free.push(slot);
  }

  /** Stops one speculative generation, unless one already stopping frees a slot for every confirmed waiter. */
  private preemptSpeculative(): void {
    const stopping = [...this.serving.values()].filter((s) => s.stop.signal.aborted).length;
    const confirmedWaiting = this.waiters.filter((w) => !w.speculative()).length + 1;
    if (stopping >= confirmedWaiting) return;
    for (const s of this.serving.values()) {
      if (s.stop.signal.aborted || !s.speculation?.isSpeculative()) continue;
      this.preempted++;
      this.options.log.debug('speculative generation stopped for a confirmed request', { model: this.id });
      s.speculation.preempted();
      s.stop.abort();
      return;
    }
  }
}

/**
 * The 40 likeliest next tokens after `tokens` and their probabilities, `tokens` evaluated on the
 * sequence (only what it does not already hold, and at least the last token, whose output is
 * the prediction): reading the whole vocabulary's 151,936 costs ~150 ms here, the top 40 nothing
 * measurable. The sequence keeps the tokens, so a reply that follows evaluates nothing again.
 */
async function nextTokenProbabilities(sequence: LlamaContextSequence, tokens: readonly Token[], onReuse?: (reused: number) => void): Promise<Map<Token, number> | null> {
  const keep = await keepShared(sequence, tokens, tokens.length - 1);
  onReuse?.(keep);
  const rest = tokens.slice(keep);
  const ask = { generateNext: { probabilities: true, options: { topK: 40, topP: 1, minP: 0, temperature: 1 } } } as const;
  const output = await sequence.controlledEvaluate(rest.map((token, i) => (i === rest.length - 1 ? [token, ask] : token)));
  return output[rest.length - 1]?.next?.probabilities ?? null;
}

/**
 * Erases what `sequence` holds after the start it shares with `tokens` (at most `atMost` tokens
 * of it kept); returns how many it keeps: what is left to evaluate starts there.
 */
async function keepShared(sequence: LlamaContextSequence, tokens: readonly Token[], atMost: number): Promise<number> {
  const keep = Math.min(sharedPrefix(sequence.contextTokens, tokens), atMost);
  if (keep < sequence.nextTokenIndex) await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
  return keep;
}

/** Runs `job` on the call gate's sequence after the jobs queued there before it (Loaded.gate). */
function onGateSequence<T>(loaded: Loaded, job: (sequence: LlamaContextSequence) => Promise<T>): Promise<T> {
  const { gate } = loaded;
  const run = gate.turn.then(() => job(gate.sequence));
  gate.turn = run.catch(() => undefined);
  return run;
}

/**
 * The probability that a reply opens with a call, from the likeliest next tokens: those that start
 * one (CALL_START); `banned`: those and the ones that would read back an output note (ECHO_START),
 * which a reply in words must not start with.
 */
function callReading(loaded: Loaded, next: Map<Token, number>): { probability: number; banned: Token[] } {
  let probability = 0;
  const banned: Token[] = [];
  for (const [token, p] of next) {
    const text = loaded.model.detokenize([token], true);
    if (ECHO_START.test(text)) banned.push(token);
    if (!CALL_START.test(text)) continue;
    banned.push(token);
    probability += p;
  }
  return { probability, banned };
}

/** A call's second try after arguments copied from their examples: the examples' words banned, the user's names favoured (NAME_LOGIT_BIAS). */
function secondTryBias(loaded: Loaded, copied: readonly CopiedExample[], messages: readonly ChatMessage[]): TokenBias {
  const bias = new loaded.TokenBias(loaded.model.tokenizer);
  const spellings = copied.flatMap((c) => c.words).flatMap((w) => [w, w[0]!.toUpperCase() + w.slice(1), w.toUpperCase()]);
  for (const token of startTokens(loaded, spellings)) bias.set(token, 'never');
  for (const token of startTokens(loaded, namesIn(messages))) bias.set(token, { logit: NAME_LOGIT_BIAS });
  return bias;
}

/**
 * The tokens that start each of `forms` (one word's spellings) as the model writes it, after a
 * space or not: only a first token that is the word's own start (two letters or more), never a
 * quote or a space the word follows.
 */
function startTokens(loaded: Loaded, forms: Iterable<string>): Token[] {
  const tokens: Token[] = [];
  for (const form of forms) {
    for (const text of [form, ' ' + form]) {
      const token = loaded.model.tokenize(text)[0];
      if (token === undefined) continue;
      const start = loaded.model.detokenize([token]).trim().toLowerCase();
      if (start.length >= 2 && form.toLowerCase().startsWith(start)) tokens.push(token);
    }
  }
  return tokens;
}

/** The tokens a request's prompt evaluates to (what the usage reports as input), with the functions it offers. */
function promptTokens(loaded: Loaded, history: ChatHistoryItem[], functions: ChatModelFunctions | undefined): Token[] {
  return loaded.wrapper
    .generateContextState({ chatHistory: history, availableFunctions: functions, documentFunctionParams: true })
    .contextText.tokenize(loaded.model.tokenizer);
}

/**
 * The start of every prompt that begins with `history` (instructions alone, as prepare() is given
 * them): the prompt of `history` and a user's message, cut where the message's text begins. The
 * template cannot be asked for instructions alone when functions are offered: node-llama-cpp puts
 * their description after the system turns that come before the first other item, and before all
 * of them in a history of system turns only, so a prompt of the instructions alone does not start
 * any real one (prepare() evaluated 330 tokens that no reply used, and the first reply evaluated
 * them again: 3.5 s here).
 */
function headTokens(loaded: Loaded, history: ChatHistoryItem[], functions: ChatModelFunctions | undefined): Token[] {
  if (history.some((item) => item.type !== 'system')) return promptTokens(loaded, history, functions);
  const a = promptTokens(loaded, [...history, { type: 'user', text: 'a' }], functions);
  const b = promptTokens(loaded, [...history, { type: 'user', text: 'b' }], functions);
  return a.slice(0, sharedPrefix(a, b));
}

/** Bridges llama.cpp's callbacks to an async iterator: chunks in order, then one 'done' or an error. */
class ChunkQueue implements AsyncIterable<GenerateChunk> {
  private readonly items: GenerateChunk[] = [];
  private error: unknown = null;
  private finished = false;
  private wake: (() => void) | null = null;

  push(chunk: Exclude<GenerateChunk, { type: 'done' }>): void {
    this.items.push(chunk);
    this.notify();
  }

  end(done: { finishReason: FinishReason; usage: TokenUsage | null }): void {
    this.items.push({ type: 'done', ...done });
    this.finished = true;
    this.notify();
  }

  fail(err: unknown): void {
    this.error = err ?? new Error('generation failed');
    this.finished = true;
    this.notify();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<GenerateChunk> {
    for (;;) {
      const item = this.items.shift();
      if (item) {
        yield item;
        if (item.type === 'done') return;
        continue;
      }
      if (this.finished) {
        if (this.error !== null) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}
