/**
 * Function calling on the local GGUF model (llama-cpp.ts), the parts node-llama-cpp needs adapted:
 *  - toHistory(): the engine's messages as node-llama-cpp chat history, tool calls and their
 *    outputs inside the model turn that made them, and a note after the outputs (outputNote());
 *  - functionsFor(): which functions a request gives the model and whether it must call one
 *    (tool_choice), with their schemas cut to the subset node-llama-cpp's grammar supports
 *    (toGrammarSchema());
 *  - sequenceTemplate(): the chat template each sequence formats with, switched per request so a
 *    call can be forced and a call written without its special tokens is still recognised;
 *  - answeredCalls()/callKey(): a call repeated after its own output is recognised (the small
 *    model loops on it otherwise).
 * Why each exists is in llama-cpp.ts's header and beside each function.
 */
import type {
  ChatHistoryItem,
  ChatModelFunctionCall,
  ChatModelFunctions,
  ChatWrapper,
  ChatWrapperGeneratedContextState,
  ChatWrapperSettings,
  LlamaText,
  SpecialTokensText,
} from 'node-llama-cpp';
import type { ChatMessage, GenerateRequest, ToolChoice, ToolDefinition } from './base.js';
import { ProviderError } from './base.js';

/**
 * The engine's messages as node-llama-cpp chat history (see the header): consecutive turns of one
 * role merged, tool calls and their outputs inside the model turn that made them, images ignored
 * (the text carries a note for each).
 */
export function toHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const calls = new Map<string, ChatModelFunctionCall>();
  /** The calls given outputs since the last other message: the note that follows them (outputNote()). */
  let outputs: string[] = [];
  const noteOutputs = () => {
    if (outputs.length === 0) return;
    const last = history[history.length - 1];
    const note = outputNote(outputs);
    if (last?.type === 'user') last.text += '\n' + note;
    else {
      const item: ChatHistoryItem = { type: 'user', text: note };
      OUTPUT_NOTES.add(item);
      history.push(item);
    }
    outputs = [];
  };
  for (const m of messages) {
    if (m.role !== 'tool') noteOutputs();
    const last = history[history.length - 1];
    if (m.role === 'system') {
      if (last?.type === 'system') last.text += '\n\n' + m.content;
      else history.push({ type: 'system', text: m.content });
    } else if (m.role === 'user') {
      if (last?.type === 'user') last.text += '\n' + m.content;
      else history.push({ type: 'user', text: m.content });
    } else if (m.role === 'tool') {
      const call = calls.get(m.toolCallId);
      if (call && call.result === undefined) {
        call.result = toolResult(m.content);
        outputs.push(call.name);
      } else if (last?.type === 'user') last.text += '\nFunction output: ' + m.content;
      else history.push({ type: 'user', text: 'Function output: ' + m.content });
    } else {
      const toolCalls = m.toolCalls ?? [];
      const turn = last?.type === 'model' ? last : null;
      const response: ChatHistoryItem & { type: 'model' } = turn ?? { type: 'model', response: [] };
      if (!turn) history.push(response);
      const previous = response.response[response.response.length - 1];
      // After calls and their outputs the template has already opened the model's next turn.
      if (m.content !== '' || toolCalls.length === 0) {
        response.response.push(turn && typeof previous === 'string' ? '\n' + m.content : m.content);
      }
      for (const [i, c] of toolCalls.entries()) {
        const call: ChatModelFunctionCall = { type: 'functionCall', name: c.name, params: parseArguments(c.arguments), result: undefined };
        if (i === 0) call.startsNewChunk = true; // not one parallel section with an earlier turn's calls
        response.response.push(call);
        calls.set(c.id, call);
      }
    }
  }
  noteOutputs();
  return history;
}

/** The user turns toHistory() made of an output note alone. */
const OUTPUT_NOTES = new WeakSet<ChatHistoryItem>();

/** Whether the reply follows calls' outputs: the history ends with their note (outputNote()). */
export function followsOutputs(history: readonly ChatHistoryItem[]): boolean {
  const last = history.at(-1);
  return last !== undefined && OUTPUT_NOTES.has(last);
}

/**
 * The user's note after a model turn's outputs: which calls returned what the template's own turn
 * above it shows, and to answer with it. The template gives an output to the model in its own form
 * (Qwen: `<tool_response>` in a user turn), and the Qwen2.5-Coder 0.5B model read that as a coding
 * exercise: after it, 1 answer in 4 on the tool bench used the output ("Mark the answer as
 * correct.", "This response is a JSON object with the requested information."). Wordings measured
 * on the bench's 11 follow-ups (TOOL_BENCH_ONLY=follow-ups), CALLING_RULE in the prompt, first with
 * the default instructions alone: "(get_weather returned {…}. Answer my request with it in one
 * short spoken sentence.)" 10 (the miss: "Is it morning or afternoon there?" after 14:05); without
 * "request" (question) 9, the timer and colour outputs refused ("I'm sorry, but I can't assist with
 * that."); without "spoken sentence" 7 to 9; "Tool result: … Now answer my question in words." 6.
 * Then as a spoken session asks (the spoken-reply guidance in the instructions, replies after
 * outputs held to spoken sentences): that wording 8 (the translation answered "Good morning.");
 * with ", saying what it returned" 9 ("Buenos días."); that, the output not repeated in the note
 * ("returned the above"), 10 ("It is afternoon."; the miss: the timer, "The set_timer function
 * returned the above."), and the output's answer starts 290 ms sooner (1,114 ms p50: ~20 tokens
 * fewer to evaluate); "Tell me what it means for my request, …" 5; "Use it to answer my last
 * message …" 3. The probability of calling again (the call gate's reading) falls from 0.99 to under
 * 0.02. Part of the prompt only: the conversation's items are unchanged.
 */
export function outputNote(calls: readonly string[]): string {
  const names = calls.join(' and ');
  const [them, they] = calls.length > 1 ? ['them', 'they'] : ['it', 'it'];
  return `(${names} returned the above. Answer my request with ${them} in one short spoken sentence, saying what ${they} returned.)`;
}

/**
 * The user's newest message alone after the instructions (the leading system turn), when the
 * history has a model turn before it: the prompt on which the call gate reads the question by
 * itself. After a turn answered in words the 0.5B model's probability of calling collapses for
 * the next question whatever it asks ("What time is it where I am?" after "What is the capital of
 * France?" answered: 0.000, asked first: 0.90; reminders in the user's message or a system turn
 * before it did not bring it back). Null when the history is the question alone (the gate's own
 * reading is this one) or does not end with a user's message (an output note: the reply follows
 * a call).
 */
export function standaloneQuestion(history: readonly ChatHistoryItem[]): ChatHistoryItem[] | null {
  const last = history.at(-1);
  if (last?.type !== 'user' || OUTPUT_NOTES.has(last)) return null;
  if (!history.some((item) => item.type === 'model')) return null;
  const head = history[0]?.type === 'system' ? [history[0]] : [];
  return [...head, last];
}

/**
 * The calls whose outputs the reply follows (those of the model turn the history ends with, which
 * the reply continues), as callKey()s with arguments formatted by `jsonDumps`. Calls of earlier
 * turns are not counted: a user asking again may want a fresh output.
 */
export function answeredCalls(history: readonly ChatHistoryItem[], jsonDumps: (value: unknown) => string): Set<string> {
  const keys = new Set<string>();
  // The model turn the reply follows: the last item, or the one before the note on its outputs.
  const last = history.findLast((item) => !OUTPUT_NOTES.has(item));
  for (const part of last?.type === 'model' ? last.response : []) {
    if (typeof part === 'object' && part.type === 'functionCall' && part.result !== undefined) keys.add(callKey(part.name, jsonDumps(part.params ?? {})));
  }
  return keys;
}

export const callKey = (name: string, args: string) => `${name}\u0000${args}`;

/** A call's arguments as the value the template prints; text that is not JSON stays text. */
function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text; // the model (or a client's history) wrote something else: shown as it was
  }
}

/** A tool's output as the value the template prints: JSON as its value, anything else as a string. */
function toolResult(content: string): unknown {
  try {
    return JSON.parse(content) as unknown;
  } catch {
    return content; // plain text output (the usual case besides JSON)
  }
}

/**
 * Function calls one reply may make, whatever parallelToolCalls says. After a call this model
 * writes a line break and <|endoftext|>, where the Qwen template has <|im_end|>; node-llama-cpp
 * reads anything but <|im_end|> there as the start of another call and makes the model choose
 * one: with parallel calls allowed, every reply that called went on inventing calls until its
 * token limit (get_weather for London, then Paris, then Tokyo, ...). One call per reply is what
 * it can do; the client answers it and asks for the next response, which may call again.
 */
export const MAX_CALLS_PER_REPLY = 1;

/** What a request gives node-llama-cpp for tools: the functions, and whether a call is forced. */
export interface Calling {
  functions: ChatModelFunctions | undefined;
  force: boolean;
}

/** The functions a request offers under its tool_choice (see the header). */
export function functionsFor(request: Pick<GenerateRequest, 'tools' | 'toolChoice'>, modelId = 'llama-cpp'): Calling {
  const choice: ToolChoice = request.toolChoice ?? 'auto';
  let tools: ToolDefinition[] = request.tools ?? [];
  if (tools.length === 0 || choice === 'none') return { functions: undefined, force: false };
  if (typeof choice === 'object') {
    tools = tools.filter((t) => t.name === choice.name);
    if (tools.length === 0) {
      throw new ProviderError('llm_request_failed', `${modelId}: tool_choice names '${choice.name}', which is not among the tools`, { status: 400 });
    }
  }
  const functions: Record<string, ChatModelFunctions[string]> = {};
  for (const t of tools) {
    functions[t.name] = { description: t.description, params: toGrammarSchema(t.parameters) as ChatModelFunctions[string]['params'] };
  }
  return { functions, force: choice !== 'auto' };
}

type Schema = Record<string, unknown>;

/** Any JSON value, in node-llama-cpp's schema subset (it has no "anything" schema of its own). */
const ANY_JSON: Schema = {
  oneOf: [{ type: ['string', 'number', 'boolean', 'null'] }, { type: 'object', additionalProperties: true }, { type: 'array' }],
};

const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
const isLiteral = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/**
 * A tool's JSON Schema in the subset node-llama-cpp builds grammars from (GbnfJsonSchema), keeping
 * the descriptions the model reads. Without this, what the subset does not know reads as `null`
 * (a property typed by `anyOf`, a list of types naming object or array, a schema with no type), so
 * the model could only write null there: `anyOf` becomes `oneOf`, a list of types one alternative
 * per type, a schema without a type any JSON value, an object without `properties` or
 * `additionalProperties` any properties, string formats other than date/time plain strings.
 * Other keywords (pattern, minimum, allOf, ...) are dropped: not enforced.
 */
export function toGrammarSchema(schema: unknown): Schema {
  if (!isSchema(schema)) return ANY_JSON; // `true`, or nothing: any value
  const meta: Schema = {};
  if (typeof schema.description === 'string') meta.description = schema.description;
  if (isSchema(schema.$defs)) meta.$defs = mapValues(schema.$defs, toGrammarSchema);
  if (typeof schema.$ref === 'string') return { $ref: schema.$ref, ...meta };
  if (schema.const !== undefined && isLiteral(schema.const)) return { const: schema.const, ...meta };
  if (Array.isArray(schema.enum)) return { enum: schema.enum.filter(isLiteral), ...meta };
  const alternatives = schema.oneOf ?? schema.anyOf;
  if (Array.isArray(alternatives)) return { oneOf: alternatives.map(toGrammarSchema), ...meta };
  const types = typeof schema.type === 'string' ? [schema.type] : Array.isArray(schema.type) ? (schema.type as unknown[]) : [];
  if (types.length > 1) return { oneOf: types.map((type) => toGrammarSchema({ ...schema, type, description: undefined, $defs: undefined })), ...meta };
  const type = types[0] ?? (isSchema(schema.properties) ? 'object' : schema.items !== undefined ? 'array' : null);
  switch (type) {
    case 'object': {
      const out: Schema = { type, ...meta };
      if (isSchema(schema.properties)) out.properties = mapValues(schema.properties, toGrammarSchema);
      const extra = schema.additionalProperties;
      out.additionalProperties = extra === undefined ? out.properties === undefined : isSchema(extra) ? toGrammarSchema(extra) : extra === true;
      if (Array.isArray(schema.required)) out.required = schema.required;
      return out;
    }
    case 'array': {
      const out: Schema = { type, ...meta };
      if (schema.items !== undefined) out.items = toGrammarSchema(schema.items);
      if (Array.isArray(schema.prefixItems)) out.prefixItems = schema.prefixItems.map(toGrammarSchema);
      if (typeof schema.minItems === 'number') out.minItems = schema.minItems;
      if (typeof schema.maxItems === 'number') out.maxItems = schema.maxItems;
      return out;
    }
    case 'string': {
      if (['date-time', 'time', 'date'].includes(schema.format as string)) return { type, format: schema.format, ...meta };
      const out: Schema = { type, ...meta };
      if (typeof schema.minLength === 'number') out.minLength = schema.minLength;
      if (typeof schema.maxLength === 'number') out.maxLength = schema.maxLength;
      return out;
    }
    case 'number':
    case 'integer':
    case 'boolean':
    case 'null':
      return { type, ...meta };
    default:
      return { ...ANY_JSON, ...meta };
  }
}

function mapValues(o: Schema, f: (v: unknown) => Schema): Schema {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));
}

/** A chat template with switches, set per request (see sequenceTemplate()). */
export interface SequenceTemplate {
  wrapper: ChatWrapper;
  /** The reply must open with a function call. */
  forceCall: boolean;
  /** Functions the prompt describes while none is given to call (a reply in words after a repeated call). */
  documented: ChatModelFunctions | undefined;
}

/**
 * `base` as each sequence's chat uses it: an object whose prototype is `base`, so every member is
 * base's own (and the prompt is formatted by base itself) except what node-llama-cpp reads while
 * generating:
 *  - while `documented` holds functions and a request gives none, the prompt still describes them
 *    (so it is the prompt the sequence holds, not evaluated again);
 *  - while `forceCall` is on, the context state makes node-llama-cpp enter its function-calling
 *    mode right after the prompt (a template that uses prefix triggers gets `noPrefixTrigger:
 *    functionCall` and no other trigger; one that starts replies in that mode gets it engaged with
 *    nothing to leave it);
 *  - the call prefix without its special tokens (Qwen: `{"name": "` without `<tool_call>`, and the
 *    other ways callWritings() lists) also starts a call (`prefixAlternateMatches`, which detects
 *    but never formats; the call goes into the context in the template's own form): the
 *    Qwen2.5-Coder 0.5B model often writes the JSON without the tag, which was spoken text before.
 * A LlamaChat's template is fixed when it is made, so each sequence's chat has its own, switched
 * per request.
 */
export function sequenceTemplate(base: ChatWrapper, lib: { LlamaText: typeof LlamaText; SpecialTokensText: typeof SpecialTokensText }): SequenceTemplate {
  const template = { forceCall: false, documented: undefined } as SequenceTemplate;
  const wrapper = Object.create(base) as ChatWrapper & { settings: ChatWrapperSettings };
  const call = base.settings.functions.call;
  const prefix = lib.LlamaText(call.prefix);
  const bare = prefix.values.every((v) => typeof v === 'string' || v instanceof lib.SpecialTokensText)
    ? prefix.values.filter((v) => typeof v === 'string').join('').trimStart()
    : '';
  if (bare !== '' && bare !== prefix.toString()) {
    const prefixAlternateMatches = [...(call.prefixAlternateMatches ?? []), ...callWritings(bare)];
    wrapper.settings = { ...base.settings, functions: { ...base.settings.functions, call: { ...call, prefixAlternateMatches } } };
  }
  const empty = lib.LlamaText([]);
  wrapper.generateContextState = (options): ChatWrapperGeneratedContextState => {
    const state = base.generateContextState(options.availableFunctions ? options : { ...options, availableFunctions: template.documented });
    if (!template.forceCall) return state;
    if (state.functionCall) return { ...state, functionCall: { initiallyEngaged: true, disengageInitiallyEngaged: [] } };
    return { ...state, prefixTriggers: undefined, noPrefixTrigger: { type: 'functionCall', inject: empty } } as ChatWrapperGeneratedContextState;
  };
  template.wrapper = wrapper;
  return template;
}

/**
 * How the model writes the start of a call without the template's special tokens: `bare` itself,
 * and when it is JSON (Qwen: `{"name": "`) also pretty-printed and in a Markdown code block, as
 * the Qwen2.5-Coder 0.5B model writes calls about half the time it misses the tag (measured:
 * "```json\n{\n  \"name\": \"set_timer\", ..." for "Set a timer for ten minutes.").
 */
function callWritings(bare: string): string[] {
  if (!bare.startsWith('{')) return [bare];
  const pretty = '{\n  ' + bare.slice(1).trimStart();
  return [bare, pretty, '```json\n' + bare, '```json\n' + pretty];
}


/**
 * What the prompt says after the functions' description: to call only when a call is needed.
 * The template's own text ("You may call one or more functions to assist with the user query.")
 * is all the Qwen2.5-Coder models are told, and they call for questions no function fits. Measured
 * on the tool bench's call probabilities (0.5B): the lowest of a question a tool fits rose from
 * 0.61 to 0.72, "What is the capital of France?" with the playground's tools fell from 0.57 to
 * 0.24. A longer rule that listed what to answer directly ("facts, sums, advice, chat") raised
 * them instead ("Hello!" 0.40 → 0.95).
 */
export const CALLING_RULE = 'Call a function only when the user asks for what it does. Otherwise do not call any function: answer the user yourself.';

/** `wrapper` with CALLING_RULE after its description of the functions (none without functions). */
export function withCallingRule(wrapper: ChatWrapper, lib: { LlamaText: typeof LlamaText }): void {
  const describe = wrapper.generateAvailableFunctionsSystemText.bind(wrapper);
  wrapper.generateAvailableFunctionsSystemText = (functions, options) => {
    const text = describe(functions, options);
    return text.values.length === 0 ? text : lib.LlamaText([text, '\n\n', CALLING_RULE]);
  };
}

/**
 * An argument the model filled in rather than took from the conversation: a string value of a
 * parameter that gives an example (in its description, "e.g. French", "such as Europe/Paris", or
 * its schema's `examples`: a parameter whose value is a name the user gives), none of whose words
 * the conversation says. Given no value by the user, the 0.5B model fills the example in: "What is
 * two plus two?" → translate(text "Two plus two", target_language "French"), "What is the time in
 * Sydney?" → get_time("Australia/Paris"); or a value of the example's kind (on an Intel Xeon build
 * of the same weights, "What is two plus two?" → target_language "English" at once). Codes (two to
 * five letters or digits: "USD", "es") are not judged: the model derives them from words the
 * conversation spells differently.
 */
export interface CopiedExample {
  /** The argument's path in the call's arguments ("target_language", "trip.city"). */
  path: string;
  /** The words banned from a second try (lower case): the example's the value repeats, else the value's own. */
  words: string[];
}

/** The arguments of a call (`args`, parsed) copied from their examples in `schema` (the tool's parameters), given the words `heard` in the conversation. */
export function copiedExamples(args: unknown, schema: unknown, heard: ReadonlySet<string>): CopiedExample[] {
  const copied: CopiedExample[] = [];
  const visit = (value: unknown, s: unknown, path: string) => {
    if (!isSchema(s)) return;
    if (isSchema(value) && isSchema(s.properties)) {
      for (const [key, sub] of Object.entries(s.properties)) visit(value[key], sub, path === '' ? key : `${path}.${key}`);
      return;
    }
    if (typeof value !== 'string' || CODE.test(value.trim()) || said(value, heard)) return;
    const examples = new Set(exampleTexts(s).flatMap(wordsOf));
    if (examples.size === 0) return;
    const repeated = wordsOf(value).filter((w) => examples.has(w));
    const words = repeated.length > 0 ? repeated : wordsOf(value);
    if (words.length > 0) copied.push({ path, words: [...new Set(words)] });
  };
  visit(args, schema, '');
  return copied;
}

/** Whether some word of `value` is one the conversation says (or one a said word starts, or starts: "euro"/"euros"). */
export function said(value: string, heard: ReadonlySet<string>): boolean {
  const shares = (w: string, h: string) => Math.min(h.length, w.length) >= 4 && (h.startsWith(w) || w.startsWith(h));
  return wordsOf(value).some((w) => {
    if (heard.has(w)) return true;
    for (const h of heard) if (shares(w, h)) return true;
    return false;
  });
}

/** The words of a conversation (every message's text and the arguments of its calls), lower case: what the user and the model have said. */
export function heardWords(messages: readonly ChatMessage[]): Set<string> {
  const words = new Set<string>();
  for (const m of messages) {
    for (const w of wordsOf(m.content)) words.add(w);
    if (m.role === 'assistant') for (const c of m.toolCalls ?? []) for (const w of wordsOf(c.arguments)) words.add(w);
  }
  return words;
}

/** The value at `path` in parsed arguments (copiedExamples()'s paths). */
export function argumentAt(args: unknown, path: string): unknown {
  let value = args;
  for (const key of path.split('.')) value = isSchema(value) ? value[key] : undefined;
  return value;
}

/** A code rather than words: "USD", "es", "GBP", "4217". */
const CODE = /^[\p{L}\p{N}]{2,5}$/u;
/** Where a description gives an example: what follows, to the end of its sentence or parenthesis. */
const EXAMPLE_IN_DESCRIPTION = /\b(?:e\.g\.|eg\.|for example|for instance|such as|like)[,:]?\s*([^.;)]*(?:\.[^\s.;)][^.;)]*)*)/gi;

/** The examples a parameter's schema gives: in its description, and its `examples`. */
function exampleTexts(schema: Schema): string[] {
  const texts: string[] = [];
  if (typeof schema.description === 'string') for (const m of schema.description.matchAll(EXAMPLE_IN_DESCRIPTION)) texts.push(m[1] ?? '');
  if (Array.isArray(schema.examples)) for (const e of schema.examples) if (typeof e === 'string') texts.push(e);
  return texts;
}

/** Lower-case words of three or more letters or digits. */
function wordsOf(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? []);
}

/** The names in the user's last message: its capitalised words after the first ("Sydney", "London"). */
export function namesIn(messages: readonly ChatMessage[]): string[] {
  const text = messages.findLast((m) => m.role === 'user')?.content ?? '';
  return [...new Set(text.match(/(?<=\s)\p{Lu}\p{L}+/gu) ?? [])];
}
