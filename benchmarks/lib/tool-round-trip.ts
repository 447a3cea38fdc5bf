/**
 * The realtime benchmark's tool round trip (npm run bench -- realtime; REALTIME_BENCH_PARTS=tools
 * runs it alone), over a real WebSocket against the real server process, with OpenAI GA function
 * calling: a session with one `get_weather` function tool (tool_choice auto) is asked a weather
 * question in text; once the model's call is complete (`response.function_call_arguments.done`,
 * and that response's `response.done`: the server takes no response.create while one is active),
 * the bench answers with `conversation.item.create {function_call_output}` + `response.create` and
 * measures from sending them to the answer's first `response.output_audio.delta`. Also: the call
 * itself (response.create → arguments done) and the answer's model first token and first clause
 * (from the server's 'response timing' log). For:
 *  - `local`: the embedded local model as `npm start` runs it (the Qwen2.5 0.5B GGUF in
 *    models/weights/llm). A reply that does not call the tool is counted and reported (how many,
 *    what they said), and so is an answer that calls a tool again instead of speaking (a client
 *    would run it and ask again); neither gives a round trip. The same server is then asked with
 *    both forced, so the local round trip is measured even where the model does neither on its
 *    own: `response.tool_choice: 'required'` on the question's response.create, `'none'` on the
 *    answer's (the tools are then left out of the prompt, so the model evaluates the conversation
 *    anew: a cost of that choice);
 *  - `remote`: the server pointed at an OpenAI-compatible chat-completions server (LLM_BASE_URL)
 *    that this bench starts on 127.0.0.1 (harness/servers/remote-stand-in.ts), a stand-in for a
 *    hosted model, since no internet is reachable: with this bench's own replies (it always calls
 *    the tool, then speaks the weather), streamed at REMOTE_PACING (one word or argument piece a
 *    token).
 * REALTIME_BENCH_TOOL_LLM=local|remote|both (default both) chooses. Each run starts the server
 * anew and makes one unmeasured round trip (a warm-up) before TOOL_TURNS measured ones per
 * variant, each on a new connection (a new conversation). The notes carry the load average at
 * the start and the end: the figures are only as good as the machine was quiet.
 */
import os from 'node:os';
import type { ChatReply, ChatRequestBody } from '../../harness/servers/chat-completions-server.js';
import { responseTimings, spawnServer, waitWarm, type ResponseTiming } from '../../harness/servers/process.js';
import type { RealtimeTestClient, ServerEvent } from '../../harness/clients/realtime-client.js';
import { connect } from '../../harness/clients/realtime-session.js';
import { tempDir } from '../../harness/servers/server.js';
import { median, summarise, type BenchContext, type BenchOutput, type Metric } from './harness.js';
import { describePacing, startRemoteStandIn, type RemotePacing } from '../../harness/servers/remote-stand-in.js';

/** Measured tool round trips per run (each run a fresh server), after one unmeasured warm-up. */
const TOOL_TURNS = 5;
/** The stand-in remote model's pacing: a hosted model's usual time to first token, and its stream rate. */
const REMOTE_PACING: RemotePacing = { firstTokenMs: 300, tokensPerS: 30 };
/** How long a turn of the local model may take (a reply without a call is spoken to its end first). */
const TOOL_TURN_TIMEOUT_MS = 120_000;
export const TOOL_LLMS = ['local', 'remote'] as const;
export type ToolLlm = (typeof TOOL_LLMS)[number];

const WEATHER_TOOL = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather for a city. Call it whenever the user asks about the weather.',
  parameters: {
    type: 'object',
    properties: { location: { type: 'string', description: 'The city, e.g. Paris' } },
    required: ['location'],
  },
};
/** [question, the city in it]. */
const TOOL_QUESTIONS: Array<[string, string]> = [
  ["What's the weather like in Paris right now?", 'Paris'],
  ['Is it raining in London today?', 'London'],
  ['How warm is it in Tokyo at the moment?', 'Tokyo'],
  ['Do I need an umbrella in Berlin this afternoon?', 'Berlin'],
  ['What is the temperature in New York right now?', 'New York'],
];
const weatherOf = (city: string) => JSON.stringify({ location: city, temperature_c: 22, conditions: 'sunny', wind_kph: 8 });

/** tool_choice for the question's response and for the answer's (after the call's output); undefined: the session's (auto). */
interface ToolChoices {
  question?: 'required';
  answer?: 'none';
}

interface ToolTurn {
  called: boolean;
  /** The model spoke before calling: the round trip was sent after that speech's response.done. */
  spokeFirst: boolean;
  /** response.create → response.function_call_arguments.done. */
  callMs: number | null;
  /** function_call_output + response.create sent → the answer's first response.output_audio.delta. */
  roundTripMs: number | null;
  /** What the response after the call's output did: spoke, called a tool again, or neither (null: no call to answer). */
  answer: 'spoken' | 'called again' | 'silent' | null;
  answerResponseId: string | null;
  /** What the model said instead of calling (when it did not). */
  said: string;
  /** The answer's transcript up to its cancel (its first words). */
  answerBegan: string;
}

/** REALTIME_BENCH_VERBOSE=1: log every turn (the local model's are always logged, with what it said). */
const VERBOSE = process.env.REALTIME_BENCH_VERBOSE === '1';
/** The text turns' turn detection (text turns do not use it; kept the same so the sessions compare). */
const TURN_DETECTION = { type: 'server_vad', silence_duration_ms: 500 };

/** Tool round trips (see the header), for each of `llms`. */
export async function runTools(ctx: BenchContext, llms: ToolLlm[]): Promise<BenchOutput> {
  const metrics: Metric[] = [];
  const notes: string[] = [];
  const pacing = describePacing(REMOTE_PACING);
  const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' / ');
  notes.push(`tools: load average (1 / 5 / 15 min) at the start ${load()} on ${os.cpus().length} cores`);
  for (const llm of llms) {
    // The local model is also asked with a call forced and then a spoken answer forced, so its round trip is measured even where it does not do either on its own.
    const variants: Array<{ tag: string; choices: ToolChoices }> =
      llm === 'local'
        ? [
            { tag: '[local]', choices: {} },
            { tag: '[local, forced: call required, answer tool_choice none]', choices: { question: 'required', answer: 'none' } },
          ]
        : [{ tag: '[remote stand-in]', choices: {} }];
    const turns = new Map<string, ToolTurn[]>(variants.map((v) => [v.tag, []]));
    const timings = new Map<string, ResponseTiming>();
    const remote = llm === 'remote' ? (await startRemoteStandIn(REMOTE_PACING, standInModel)).server : null;
    if (remote) ctx.log(`remote stand-in at ${remote.baseUrl}: ${pacing}`);
    try {
      for (let run = 0; run < ctx.runs; run++) {
        const server = await spawnServer({
          DATA_DIR: tempDir('avatar-bench-'),
          ...(remote ? { LLM_PROVIDER: 'openai', LLM_BASE_URL: remote.baseUrl } : {}),
          LOG_LEVEL: 'info',
          PRELOAD_MODELS: 'true',
        });
        try {
          await waitWarm(server);
          if (!remote && server.stdout().includes('offline responder')) throw new Error('the local model is not installed (npm run setup:models): the server fell back to the offline responder');
          const key = server.bootstrapKey as string;
          const warm = await toolTurn(server.url, key, ...TOOL_QUESTIONS[0]!, variants[0]!.choices); // not measured: the first round trip of the process
          ctx.log(`${variants[0]!.tag} run ${run + 1} warm-up: ${warm.called ? `called; answer ${warm.answer}, round trip ${warm.roundTripMs} ms` : `no call: "${warm.said}"`}`);
          for (const { tag, choices } of variants) {
            const these: ToolTurn[] = [];
            for (let i = 0; i < TOOL_TURNS; i++) {
              const [question, city] = TOOL_QUESTIONS[i % TOOL_QUESTIONS.length]!;
              const turn = await toolTurn(server.url, key, question, city, choices);
              these.push(turn);
              if (!turn.called) ctx.log(`${tag} "${question}": no tool call; said "${turn.said}"`);
              else if (turn.answer !== 'spoken') ctx.log(`${tag} "${question}": call ${turn.callMs} ms; the answer ${turn.answer}${turn.answerBegan ? `: ${turn.answerBegan}` : ''}`);
              else if (VERBOSE || !remote) ctx.log(`${tag} "${question}": call ${turn.callMs} ms, round trip ${turn.roundTripMs} ms; the answer began "${turn.answerBegan}"`);
            }
            turns.get(tag)!.push(...these);
            const rt = these.map((t) => t.roundTripMs).filter((v): v is number => v !== null);
            ctx.log(`${tag} run ${run + 1}: tool called in ${these.filter((t) => t.called).length} of ${these.length}; round trip p50 ${rt.length > 0 ? `${median(rt)} ms` : 'none (no call)'}`);
          }
          for (const [id, t] of responseTimings(server)) timings.set(id, t);
        } catch (err) {
          throw new Error(`${(err as Error).message.slice(0, 3000)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
        } finally {
          server.child.kill('SIGTERM');
          await server.exited;
        }
      }
    } finally {
      await remote?.close();
    }
    for (const { tag, choices } of variants) {
      const all = turns.get(tag)!;
      const called = all.filter((t) => t.called);
      const spoken = called.filter((t) => t.answer === 'spoken');
      const answers = spoken.map((t) => (t.answerResponseId ? timings.get(t.answerResponseId) : undefined)).filter((x): x is ResponseTiming => x !== undefined);
      metrics.push(summarise(`${tag} tool round trip: function_call_output + response.create → first output_audio.delta`, 'ms', spoken.map((t) => t.roundTripMs!)));
      metrics.push(summarise(`${tag} tool call: response.create → function_call_arguments.done`, 'ms', called.map((t) => t.callMs!)));
      metrics.push(summarise(`${tag} tool answer: model first token`, 'ms', answers.map((a) => a.firstTextMs).filter((v): v is number => v !== null)));
      metrics.push(summarise(`${tag} tool answer: model first clause`, 'ms', answers.map((a) => a.firstClauseMs).filter((v): v is number => v !== null)));
      const missed = all.filter((t) => !t.called);
      const asText = missed.filter((t) => t.said.includes(WEATHER_TOOL.name)).length;
      notes.push(
        `${tag} tools: the model called get_weather in ${called.length} of ${all.length} measured turns (question: tool_choice ${choices.question ?? 'auto'})` +
          (missed.length > 0 ? `; ${asText} of the ${missed.length} without a call wrote the call out as text (spoken, not a function_call item); they said: ${missed.map((t) => `"${t.said}"`).join('; ')}` : ''),
      );
      const again = called.filter((t) => t.answer === 'called again');
      notes.push(
        `${tag} tools: after the call's output (answer: tool_choice ${choices.answer ?? 'auto'}) the model spoke in ${spoken.length} of ${called.length}, called a tool again in ${again.length}, did neither in ${called.filter((t) => t.answer === 'silent').length}; only spoken answers give a round trip` +
          (again.length > 0 ? `; the calls again: ${again.map((t) => t.answerBegan).join('; ')}` : ''),
      );
      const spoke = called.filter((t) => t.spokeFirst).length;
      if (spoke > 0) notes.push(`${tag} tools: ${spoke} calls came after spoken text; their round trip was sent after that speech ended (response.done)`);
      const callAgain = spoken.filter((t) => t.answerBegan.includes(WEATHER_TOOL.name)).length;
      if (callAgain > 0) notes.push(`${tag} tools: ${callAgain} of ${spoken.length} spoken answers began with the call written out as text (timed all the same: it is the first audio): ${[...new Set(spoken.map((t) => t.answerBegan))].slice(0, 3).map((x) => `"${x}"`).join('; ')}`);
    }
    if (remote) notes.push(`[remote stand-in] tools: a chat-completions server started by the bench on 127.0.0.1 in place of a hosted model (no internet here), paced: ${pacing}; ${remote.requests.length} requests to it (in each run the server's start-up warm-up, then a call and an answer a turn)`);
  }
  notes.push(`tools: load average (1 / 5 / 15 min) at the end ${load()}`);
  return {
    params: {
      runs: ctx.runs,
      tool_llms: llms.join(', '),
      tool_turns_per_run_and_variant: TOOL_TURNS,
      tool: WEATHER_TOOL,
      tool_questions: TOOL_QUESTIONS.map(([q]) => q),
      remote_stand_in_pacing: { first_token_ms: REMOTE_PACING.firstTokenMs, tokens_per_s: REMOTE_PACING.tokensPerS },
    },
    metrics,
    notes,
  };
}

/**
 * The stand-in remote model's replies (paced by harness/servers/remote-stand-in.ts): a weather
 * question gets a get_weather call, the call's output a spoken answer.
 */
function standInModel(body: ChatRequestBody): ChatReply {
  const last = body.messages[body.messages.length - 1];
  if (last?.role === 'tool') {
    const { location } = JSON.parse(String(last.content)) as { location: string };
    return { text: `It is sunny in ${location} right now, about 22 degrees with a light breeze, so a light jacket will do if you go out this evening.` };
  }
  const asked = JSON.stringify(last?.content ?? '');
  const city = TOOL_QUESTIONS.find(([, c]) => asked.includes(c))?.[1] ?? 'Paris';
  return { toolCalls: [{ name: WEATHER_TOOL.name, arguments: JSON.stringify({ location: city }) }] };
}

/**
 * One tool round trip on a new connection: the question, response.create, the model's call (or
 * none), then function_call_output + response.create and the answer's first audio delta; the
 * answer is cancelled there (only its start is measured).
 */
async function toolTurn(url: string, key: string, question: string, city: string, choices: ToolChoices): Promise<ToolTurn> {
  const s = await connect(url, key, TURN_DETECTION, { tools: [WEATHER_TOOL], tool_choice: 'auto' });
  const c = s.c;
  // Arrival time of an event: the session stamps each one as it comes.
  const at = (e: ServerEvent) => s.at[c.events.indexOf(e)]!;
  try {
    let from = c.events.length;
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: question }] } });
    await waitOrError(c, (e) => e.type === 'conversation.item.done', from, 10_000);
    from = c.events.length;
    const asked = performance.now();
    c.send({ type: 'response.create', ...(choices.question ? { response: { tool_choice: choices.question } } : {}) });
    const created = await waitOrError(c, (e) => e.type === 'response.created', from, 10_000);
    const id = (created.response as { id: string }).id;
    const done = await waitOrError(c, (e) => e.type === 'response.done' && e.response?.id === id, from, TOOL_TURN_TIMEOUT_MS);
    const output = (done.response as { output: Array<{ type: string; call_id?: string; content?: Array<{ transcript?: string; text?: string }> }> }).output;
    const callAt = output.findIndex((item) => item.type === 'function_call');
    if (callAt < 0) {
      const said = output.flatMap((item) => item.content ?? []).map((p) => p.transcript ?? p.text ?? '').join(' ').trim();
      return { called: false, spokeFirst: false, callMs: null, roundTripMs: null, answer: null, answerResponseId: null, said: clip(said), answerBegan: '' };
    }
    const argsDone = c.events.slice(from).find((e) => e.type === 'response.function_call_arguments.done' && e.response_id === id);
    if (!argsDone) throw new Error('a function_call item without response.function_call_arguments.done');
    from = c.events.length;
    const sent = performance.now();
    c.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: output[callAt]!.call_id, output: weatherOf(city) } });
    c.send({ type: 'response.create', ...(choices.answer ? { response: { tool_choice: choices.answer } } : {}) });
    const answer = await waitOrError(c, (e) => e.type === 'response.created', from, 10_000);
    const answerId = (answer.response as { id: string }).id;
    const callMs = Math.round(at(argsDone) - asked);
    const spokeFirst = callAt > 0;
    const audio = await waitOrError(c, (e) => (e.type === 'response.output_audio.delta' && e.response_id === answerId) || (e.type === 'response.done' && e.response?.id === answerId), from, TOOL_TURN_TIMEOUT_MS);
    if (audio.type === 'response.done') {
      // The model did not answer aloud: it called a tool again (a client would run it and ask again), or said nothing.
      const items = (audio.response as { output: Array<{ type: string; name?: string; arguments?: string }> }).output;
      const again = items.find((item) => item.type === 'function_call');
      return { called: true, spokeFirst, callMs, roundTripMs: null, answer: again ? 'called again' : 'silent', answerResponseId: answerId, said: '', answerBegan: again ? clip(`${again.name}(${again.arguments})`) : '' };
    }
    const roundTripMs = Math.round(at(audio) - sent);
    // Only the start is measured. The answer is still speaking (audio plays in real time): cancel it.
    c.send({ type: 'response.cancel' });
    const cut = await c.waitFor((e) => e.type === 'response.done' && e.response?.id === answerId, { from: c.events.indexOf(audio), timeoutMs: 60_000 });
    // What the answer said before the cancel (the transcript of the part played).
    const began = c.events.slice(from, c.events.indexOf(cut)).filter((e) => e.type === 'response.output_audio_transcript.delta' && e.response_id === answerId).map((e) => e.delta as string).join('');
    return { called: true, spokeFirst, callMs, roundTripMs, answer: 'spoken', answerResponseId: answerId, said: '', answerBegan: clip(began) };
  } finally {
    await c.close();
  }
}

const clip = (text: string) => (text.length > 100 ? `${text.slice(0, 100)}…` : text);

/** The first event from `from` matching `match`; an `error` event on the way fails instead. */
async function waitOrError(c: RealtimeTestClient, match: (e: ServerEvent) => boolean, from: number, timeoutMs: number): Promise<ServerEvent> {
  let e: ServerEvent;
  try {
    e = await c.waitFor((x) => x.type === 'error' || match(x), { from, timeoutMs });
  } catch (err) {
    // The client's message lists every event type of the connection; the last ones, with their items, say more.
    const tail = c.events.slice(-12).map((x) => `${x.type} ${JSON.stringify(x.item ?? x.delta ?? x.arguments ?? x.response?.status ?? '').slice(0, 120)}`);
    throw new Error(`${(err as Error).message.split(';')[0]} after ${timeoutMs} ms; the last events:\n  ${tail.join('\n  ')}`);
  }
  if (e.type === 'error') throw new Error(`error event: ${JSON.stringify(e.error)}`);
  return e;
}
