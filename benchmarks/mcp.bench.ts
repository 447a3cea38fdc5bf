/**
 * MCP tools the server runs, with the embedded models as `npm start` runs them (the local model,
 * the default voice and face): a session declares a real MCP server (the SDK's server side on
 * loopback, harness/servers/mcp-server.ts, allowed_tools get_weather, require_approval never) and
 * is asked weather questions (a call fits) and others (none fits), each in a new session, as text
 * with response.create over WebSocket. Measured from the client's side: the calls made (right,
 * wrong, spurious), and ms from response.create to the mcp_call in progress (the model has written
 * the call), the MCP call itself (in progress → completed), the first audio delta of the answer
 * after it, and for questions answered without a call their first audio.
 */
import WebSocket from 'ws';
import { startMcpServer } from '../harness/servers/mcp-server.js';
import { startTestServer } from '../harness/servers/server.js';
import { summarise, type Benchmark } from './lib/harness.js';

const CALLS: Array<{ q: string; city: string }> = [
  { q: 'What is the weather in Paris?', city: 'Paris' },
  { q: 'What is the weather like in Tokyo right now?', city: 'Tokyo' },
  { q: 'Is it raining in London?', city: 'London' },
  { q: 'How warm is it in Madrid today?', city: 'Madrid' },
];
const NONE = ['Tell me a joke.', 'What is two plus two?', 'Who wrote Hamlet?'];
const INSTRUCTIONS = 'You are a helpful assistant. Answer in one or two short sentences.';

type Seen = { type: string; at: number; [k: string]: any };

const bench: Benchmark = {
  name: 'mcp',
  description: 'MCP tools run by the server with the embedded models: calls made, time to the call, the call, the answer',
  async run(ctx) {
    const mcp = await startMcpServer();
    const t = await startTestServer({ env: { MCP_ALLOWED_HOSTS: '127.0.0.1', MCP_ALLOW_PRIVATE_ADDRESSES: 'true', PRELOAD_MODELS: 'true' } });
    const toCall: number[] = [];
    const call: number[] = [];
    const toAnswerAudio: number[] = [];
    const noCallAudio: number[] = [];
    let right = 0;
    let wrong = 0;
    let missed = 0;
    let spurious = 0;
    const ask = async (q: string): Promise<{ events: Seen[]; t0: number }> => {
      const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, { headers: { Authorization: `Bearer ${t.key}` } });
      const events: Seen[] = [];
      ws.on('message', (m) => events.push({ ...JSON.parse(String(m)), at: performance.now() }));
      await new Promise((r) => ws.once('open', r));
      const send = (e: unknown) => ws.send(JSON.stringify(e));
      const until = async (pred: (e: Seen) => boolean) => {
        const deadline = Date.now() + 60_000;
        while (!events.some(pred)) {
          if (Date.now() > deadline) throw new Error(`mcp bench: timed out; got ${events.map((e) => e.type).join(', ')}`);
          await new Promise((r) => setTimeout(r, 10));
        }
      };
      send({ type: 'session.update', session: { type: 'realtime', instructions: INSTRUCTIONS, tools: [{ type: 'mcp', server_label: 'weather', server_url: mcp.url, require_approval: 'never', allowed_tools: ['get_weather'] }] } });
      await until((e) => e.type === 'mcp_list_tools.completed');
      send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: q }] } });
      const t0 = performance.now();
      send({ type: 'response.create' });
      await until((e) => e.type === 'response.done');
      ws.close();
      return { events, t0 };
    };
    try {
      await ask('Hello.'); // the first session warms the model's sequences; not counted
      for (let run = 0; run < ctx.runs; run++) {
        for (const c of CALLS) {
          const { events, t0 } = await ask(c.q);
          const output = events.find((e) => e.type === 'response.done')!.response.output as Array<Record<string, any>>;
          const made = output.find((o) => o.type === 'mcp_call');
          if (!made) missed++;
          else if (made.name === 'get_weather' && String(made.arguments).includes(c.city)) right++;
          else wrong++;
          const at = (pred: (e: Seen) => boolean) => events.find((e) => e.at >= t0 && pred(e))?.at;
          const inProgress = at((e) => e.type === 'response.mcp_call.in_progress');
          const completed = at((e) => e.type === 'response.mcp_call.completed' || e.type === 'response.mcp_call.failed');
          const answer = output.findLast((o) => o.type === 'message');
          const audio = answer ? at((e) => e.type === 'response.output_audio.delta' && e.item_id === answer.id) : undefined;
          if (inProgress !== undefined) toCall.push(inProgress - t0);
          if (inProgress !== undefined && completed !== undefined) call.push(completed - inProgress);
          if (made && audio !== undefined) toAnswerAudio.push(audio - t0);
          ctx.log(`${c.q} → ${made ? `${made.name}(${made.arguments}) → ${made.output}` : 'no call'}; answer audio at ${audio === undefined ? '-' : Math.round(audio - t0)} ms`);
        }
        for (const q of NONE) {
          const { events, t0 } = await ask(q);
          const output = events.find((e) => e.type === 'response.done')!.response.output as Array<Record<string, any>>;
          const made = output.find((o) => o.type === 'mcp_call');
          if (made) spurious++;
          const audio = events.find((e) => e.at >= t0 && e.type === 'response.output_audio.delta')?.at;
          if (audio !== undefined) noCallAudio.push(audio - t0);
          ctx.log(`${q} → ${made ? `${made.name}(${made.arguments}) (spurious)` : 'answered in words'}`);
        }
      }
    } finally {
      await t.close();
      await mcp.close();
    }
    const asked = CALLS.length * ctx.runs;
    return {
      params: { runs: ctx.runs, questions_with_a_tool: CALLS.length, questions_without: NONE.length, model: 'the embedded local model (LLM_LOCAL_MODEL)' },
      metrics: [
        summarise('response.create → mcp_call in progress', 'ms', toCall),
        summarise('MCP call on loopback (in progress → completed)', 'ms', call),
        summarise('response.create → first audio of the answer after the call', 'ms', toAnswerAudio),
        summarise('response.create → first audio, no call (a question no tool fits)', 'ms', noCallAudio),
      ],
      notes: [
        `calls: ${right} right of ${asked} (${wrong} wrong tool or argument, ${missed} answered without a call); spurious calls: ${spurious} of ${NONE.length * ctx.runs}`,
      ],
    };
  },
};

export default bench;
