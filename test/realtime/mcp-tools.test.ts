/**
 * MCP tools run by the server (issue 41), against a real MCP server (the SDK's server side on
 * loopback, harness/servers/mcp-server.ts) through the real client (providers/mcp/streamable-http.ts),
 * over the engine with the src fakes: listing with OpenAI's items and events, the operator's
 * outbound policy, a call the server makes and the model's answer in the same response (a spoken
 * preamble, the mcp_call, the answer), approvals granted and declined, the error kinds (a tool's
 * error, a timeout, an unreachable server), a cancel while a call runs, and headers that reach
 * the server but never the client.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { engineHarness, type Harness, type SeenEvent } from '../helpers/engine-harness.js';
import { startMcpServer, type TestMcpServer } from '../../harness/servers/mcp-server.js';
import { FakeLanguageModels, type FakeLlmOptions } from '../../src/providers/llm/fake-llm.js';
import type { GenerateRequest } from '../../src/providers/llm/base.js';
import { StreamableHttpMcp } from '../../src/providers/mcp/streamable-http.js';
import { OutboundPolicy, isNonPublicAddress } from '../../src/providers/mcp/outbound.js';
import { RefusedTarget } from '../../src/providers/mcp/base.js';
import { Logger } from '../../src/core/log.js';

const ask = (text: string) => ({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
const types = (events: SeenEvent[]) => events.map((e) => e.type);
const loopback = (callTimeoutMs = 5000) =>
  new StreamableHttpMcp({ allowedHosts: [{ host: '127.0.0.1', port: null }], allowPrivateAddresses: true, listTimeoutMs: 3000, callTimeoutMs }, new Logger('silent'));

/** Calls `name` when the user has just spoken; after a tool's outcome, says what it read. */
function toolModel(name: string, args: string, preamble: string | null): FakeLlmOptions {
  return {
    reply: (r: GenerateRequest) => {
      const last = r.messages.at(-1)!;
      return last.role === 'tool' ? `The tool said: ${last.content}` : (preamble ?? '');
    },
    toolCalls: (r: GenerateRequest) => (r.messages.at(-1)?.role === 'user' ? [{ name, arguments: args }] : []),
  };
}

async function setup(server: TestMcpServer, reply: FakeLlmOptions, tool: Record<string, unknown> = {}, text = true, callTimeoutMs?: number) {
  const llm = new FakeLanguageModels(reply);
  const h = await engineHarness({ deps: { llm, mcp: loopback(callTimeoutMs) } });
  const from = h.events.length;
  h.send({
    type: 'session.update',
    event_id: 'ev_tools',
    session: {
      type: 'realtime',
      ...(text ? { output_modalities: ['text'] } : {}),
      tools: [{ type: 'mcp', server_label: 'tools', server_url: server.url, require_approval: 'never', headers: { 'X-Api-Key': 'secret-key-123' }, ...tool }],
    },
  });
  await h.waitFor((e) => e.type === 'conversation.item.done' && (e.item as { type: string }).type === 'mcp_list_tools', { from });
  return { h, llm, listing: h.events.slice(from) };
}

async function respond(h: Harness, question = 'What is the weather in Paris?'): Promise<SeenEvent[]> {
  const from = h.events.length;
  h.send(ask(question));
  h.send({ type: 'response.create', event_id: 'ev_create' });
  await h.waitFor((e) => e.type === 'response.done', { from, tick: true });
  const all = h.events.slice(from);
  return all.slice(all.findIndex((e) => e.type === 'response.created'));
}

const Mcp = suite('MCP tools run by the server');
let server: TestMcpServer;
Mcp.before.each(async () => {
  server = await startMcpServer();
});
Mcp.after.each(async () => {
  await server.close();
});

Mcp('a declared server is listed: mcp_list_tools item, in_progress, completed, item done; headers reach it, never the client', async () => {
  const { h, listing } = await setup(server, { reply: 'ok' }, { allowed_tools: ['get_weather', 'fail'], authorization: 'tok-456' });
  try {
    assert.equal(types(listing), ['session.updated', 'conversation.item.added', 'mcp_list_tools.in_progress', 'mcp_list_tools.completed', 'conversation.item.done']);
    const added = listing[1]!.item as Record<string, unknown>;
    assert.equal([added.type, added.server_label, added.tools], ['mcp_list_tools', 'tools', []]);
    assert.is(listing[2]!.item_id, added.id);
    const done = listing[4]!.item as { tools: Array<{ name: string; input_schema: unknown; annotations: unknown }> };
    assert.equal(done.tools.map((t) => t.name), ['get_weather', 'fail'], 'allowed_tools lets two through');
    assert.equal(done.tools[0]!.annotations, { readOnlyHint: true });
    // The session echoes the tool without its secrets; the server got them.
    const echoed = JSON.stringify(listing[0]!.session);
    assert.ok(echoed.includes('"server_label":"tools"'));
    assert.not.ok(echoed.includes('secret-key-123') || echoed.includes('tok-456'));
    assert.ok(server.headers.some((hd) => hd['x-api-key'] === 'secret-key-123' && hd.authorization === 'Bearer tok-456'));
    // The item is in the conversation.
    h.send({ type: 'conversation.item.retrieve', item_id: added.id });
    const got = await h.waitFor((e) => e.type === 'conversation.item.retrieved');
    assert.is((got.item as { type: string }).type, 'mcp_list_tools');
  } finally {
    await h.close();
  }
});

Mcp('a call without approval: the server calls the tool, and the model answers in the same response (preamble, mcp_call, answer)', async () => {
  const { h, llm } = await setup(server, toolModel('get_weather', '{"city":"Paris"}', 'Let me check.'));
  try {
    const events = await respond(h);
    const response = events.at(-1)!.response as { status: string; output: Array<Record<string, unknown>> };
    assert.is(response.status, 'completed');
    assert.equal(response.output.map((o) => o.type), ['message', 'mcp_call', 'message']);
    const call = response.output[1]!;
    assert.equal([call.server_label, call.name, call.arguments, call.output, call.error, call.approval_request_id], ['tools', 'get_weather', '{"city":"Paris"}', 'Sunny and 21 degrees in Paris.', null, null]);
    assert.equal(server.calls, [{ name: 'get_weather', arguments: { city: 'Paris' } }]);
    // The call's events, in OpenAI's order, on output_index 1.
    const callEvents = events.filter((e) => e.item_id === call.id || (e.item as { id?: string } | undefined)?.id === call.id);
    assert.equal(types(callEvents), [
      'response.output_item.added',
      'conversation.item.added',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.in_progress',
      'response.mcp_call.completed',
      'response.output_item.done',
      'conversation.item.done',
    ]);
    for (const e of callEvents) if (e.output_index !== undefined) assert.is(e.output_index, 1);
    // The second request read the outcome after the preamble and the call.
    const second = llm.requests.at(-1)!;
    assert.equal(second.messages.slice(-2).map((m) => m.role), ['assistant', 'tool']);
    assert.is(second.messages.at(-1)!.content, 'Sunny and 21 degrees in Paris.');
    assert.equal((response.output[2]!.content as Array<{ text: string }>)[0]!.text, 'The tool said: Sunny and 21 degrees in Paris.');
    // A later turn shows the model the call and its outcome from the conversation.
    llm.options = { reply: 'Anything else?' };
    await respond(h, 'Thanks.');
    const later = llm.requests.at(-1)!.messages;
    assert.ok(later.some((m) => m.role === 'tool' && m.content === 'Sunny and 21 degrees in Paris.'));
  } finally {
    await h.close();
  }
});

Mcp('spoken: the preamble plays while the call runs; each message has its own audio and the answer comes after the call', async () => {
  const { h } = await setup(server, toolModel('get_weather', '{"city":"Oslo"}', 'Let me look that up.'), {}, false);
  try {
    const events = await respond(h);
    const response = events.at(-1)!.response as { status: string; output: Array<Record<string, unknown>> };
    assert.is(response.status, 'completed');
    const [preamble, call, answer] = response.output as Array<{ id: string; content?: Array<{ transcript: string }> }>;
    assert.is(preamble!.content![0]!.transcript, 'Let me look that up.');
    assert.is(answer!.content![0]!.transcript, 'The tool said: Sunny and 21 degrees in Oslo.');
    const audioOf = (id: string) => events.filter((e) => e.type === 'response.output_audio.delta' && e.item_id === id).length;
    assert.ok(audioOf(preamble!.id) > 0 && audioOf(answer!.id) > 0, 'both messages are heard');
    const at = (pred: (e: SeenEvent) => boolean) => events.findIndex(pred);
    assert.ok(at((e) => e.type === 'response.mcp_call.completed') < at((e) => e.type === 'response.output_item.added' && (e.item as { id: string }).id === answer!.id));
    assert.ok(at((e) => e.type === 'response.output_audio.done' && e.item_id === preamble!.id) < at((e) => e.type === 'response.output_audio.done' && e.item_id === answer!.id));
    assert.is(call!.id !== undefined, true);
  } finally {
    await h.close();
  }
});

Mcp('require_approval: the response ends with an mcp_approval_request; approving runs the call in a response of its own', async () => {
  const { h, llm } = await setup(server, toolModel('send_email', '{"to":"ann@example.com"}', null), { require_approval: { never: { read_only: true } } });
  try {
    const events = await respond(h, 'Email Ann.');
    const response = events.at(-1)!.response as { output: Array<Record<string, unknown>> };
    assert.equal(response.output.map((o) => o.type), ['mcp_approval_request']);
    const request = response.output[0]!;
    assert.equal([request.server_label, request.name, request.arguments], ['tools', 'send_email', '{"to":"ann@example.com"}']);
    assert.equal(server.calls, [], 'nothing is sent before the approval');
    const from = h.events.length;
    h.send({ type: 'conversation.item.create', event_id: 'ev_ok', previous_item_id: request.id, item: { type: 'mcp_approval_response', approval_request_id: request.id, approve: true } });
    await h.waitFor((e) => e.type === 'response.done', { from, tick: true });
    const next = h.events.slice(from).find((e) => e.type === 'response.done')!.response as { status: string; output: Array<Record<string, unknown>> };
    assert.is(next.status, 'completed');
    assert.equal(next.output.map((o) => o.type), ['mcp_call', 'message']);
    assert.equal([next.output[0]!.approval_request_id, next.output[0]!.output], [request.id, 'Sent to ann@example.com.']);
    assert.equal(server.calls.map((c) => c.name), ['send_email']);
    assert.is(llm.requests.at(-1)!.messages.at(-1)!.content, 'Sent to ann@example.com.');
    // The same request cannot be answered twice.
    h.send({ type: 'conversation.item.create', event_id: 'ev_again', item: { type: 'mcp_approval_response', approval_request_id: request.id, approve: true } });
    const err = await h.waitFor((e) => e.type === 'error' && (e.error as { event_id?: string }).event_id === 'ev_again');
    assert.is((err.error as { code: string }).code, 'approval_already_answered');
  } finally {
    await h.close();
  }
});

Mcp('a declined request: no call, and the model is told the user did not approve', async () => {
  const { h, llm } = await setup(server, toolModel('send_email', '{"to":"bob@example.com"}', null), { require_approval: 'always' });
  try {
    const events = await respond(h, 'Email Bob.');
    const request = (events.at(-1)!.response as { output: Array<{ id: string }> }).output[0]!;
    llm.options = { reply: 'Alright, I will not send it.' };
    const from = h.events.length;
    h.send({ type: 'conversation.item.create', item: { type: 'mcp_approval_response', approval_request_id: request.id, approve: false, reason: 'not now' } });
    await h.waitFor((e) => e.type === 'response.done', { from, tick: true });
    const next = h.events.slice(from).find((e) => e.type === 'response.done')!.response as { output: Array<Record<string, unknown>> };
    assert.equal(next.output.map((o) => o.type), ['message']);
    assert.equal(server.calls, []);
    const tool = llm.requests.at(-1)!.messages.find((m) => m.role === 'tool');
    assert.is(tool?.content, 'The user did not approve this call: not now');
  } finally {
    await h.close();
  }
});

Mcp("a tool's error and a timeout fail the call with OpenAI's error kinds; the model still answers", async () => {
  const failing = await setup(server, toolModel('fail', '{}', null));
  try {
    const events = await respond(failing.h);
    assert.ok(types(events).includes('response.mcp_call.failed'));
    const call = (events.at(-1)!.response as { output: Array<Record<string, unknown>> }).output[0]!;
    assert.equal([call.output, call.error], [null, { type: 'tool_execution_error', message: 'The weather service is down.' }]);
    assert.is(failing.llm.requests.at(-1)!.messages.at(-1)!.content, 'The tool failed: The weather service is down.');
  } finally {
    await failing.h.close();
  }
  const slow = await setup(server, toolModel('slow', '{"ms":5000}', null), {}, true, 300);
  try {
    const events = await respond(slow.h);
    const call = (events.at(-1)!.response as { output: Array<Record<string, unknown>> }).output[0]!;
    assert.equal(call.error, { type: 'protocol_error', code: -32001, message: 'The MCP server did not answer within 300 ms.' });
    assert.equal((events.at(-1)!.response as { output: unknown[] }).output.length, 2, 'the model answered after the timeout');
  } finally {
    await slow.h.close();
  }
});

Mcp('a cancel while the call runs cancels it at the server and fails the item as cancelled', async () => {
  const { h } = await setup(server, toolModel('slow', '{"ms":10000}', null));
  try {
    const from = h.events.length;
    h.send(ask('Take your time.'));
    h.send({ type: 'response.create' });
    await h.waitFor((e) => e.type === 'response.mcp_call.in_progress', { from });
    h.send({ type: 'response.cancel' });
    await h.waitFor((e) => e.type === 'response.done', { from });
    const response = h.events.slice(from).find((e) => e.type === 'response.done')!.response as { status: string; output: Array<Record<string, unknown>> };
    assert.is(response.status, 'cancelled');
    assert.equal((response.output[0]!.error as { code: number }).code, -32800);
    for (let i = 0; i < 100 && server.cancelled.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(server.cancelled, ['slow'], 'the SDK told the server');
  } finally {
    await h.close();
  }
});

Mcp('an unreachable server: mcp_list_tools.failed, then an error naming the session.update; the session goes on', async () => {
  const url = server.url;
  await server.close();
  const llm = new FakeLanguageModels({ reply: 'Still here.' });
  const h = await engineHarness({ deps: { llm, mcp: loopback() } });
  try {
    h.send({ type: 'session.update', event_id: 'ev_dead', session: { type: 'realtime', output_modalities: ['text'], tools: [{ type: 'mcp', server_label: 'gone', server_url: url }] } });
    const err = await h.waitFor((e) => e.type === 'error');
    const seen = types(h.events);
    assert.ok(seen.indexOf('mcp_list_tools.failed') < seen.indexOf('error'));
    assert.equal([(err.error as { code: string }).code, (err.error as { event_id: string }).event_id], ['mcp_list_tools_failed', 'ev_dead']);
    assert.match((err.error as { message: string }).message, /ECONNREFUSED/);
    const events = await respond(h, 'Hello?');
    assert.is((events.at(-1)!.response as { status: string }).status, 'completed');
    assert.equal(llm.requests.at(-1)!.tools ?? [], [], 'no tools were offered');
  } finally {
    server = await startMcpServer(); // for after.each
    await h.close();
  }
});

Mcp("the operator's policy: a host not allowed is refused before the update applies, naming the tool", async () => {
  const h = await engineHarness(); // the default: no MCP server allowed
  try {
    h.send({
      type: 'session.update',
      event_id: 'ev_mcp',
      session: { type: 'realtime', instructions: 'Changed.', tools: [{ type: 'function', name: 'f' }, { type: 'mcp', server_label: 'x', server_url: server.url }] },
    });
    const err = await h.waitFor((e) => e.type === 'error');
    assert.equal([(err.error as { code: string }).code, (err.error as { param: string }).param], ['mcp_server_not_allowed', 'session.tools[1].server_url']);
    assert.match((err.error as { message: string }).message, /MCP_ALLOWED_HOSTS/);
    assert.not.ok(h.events.some((e) => e.type === 'session.updated'));
    assert.equal(server.headers, [], 'nothing was sent');
  } finally {
    await h.close();
  }
});

Mcp('outbound policy: schemes, credentials, hosts, non-public addresses, and names that resolve inward', async () => {
  const strict = new OutboundPolicy({ allowedHosts: [{ host: '*.example.com', port: null }, { host: 'localhost', port: null }, { host: '127.0.0.1', port: null }], allowPrivateAddresses: false });
  strict.checkUrl('https://tools.example.com/mcp');
  for (const url of ['ftp://tools.example.com', 'https://user:pw@tools.example.com', 'https://example.org/mcp', 'http://127.0.0.1:9/mcp', 'https://example.com/']) {
    assert.throws(() => strict.checkUrl(url), (e: unknown) => e instanceof RefusedTarget, url);
  }
  // localhost is on the list, but resolves to loopback: refused when the connection is made.
  await strict.fetch(`http://localhost:${new URL(server.url).port}/mcp`, { method: 'POST', body: '{}' }).then(
    () => assert.unreachable('fetched'),
    (err: Error) => assert.instance(err, RefusedTarget),
  );
  assert.equal(server.headers, []);
  assert.ok(isNonPublicAddress('10.1.2.3') && isNonPublicAddress('::1') && isNonPublicAddress('::ffff:192.168.0.1') && isNonPublicAddress('fd00::1') && isNonPublicAddress('169.254.169.254'));
  assert.not.ok(isNonPublicAddress('93.184.216.34') || isNonPublicAddress('2606:4700::1111'));
  const none = new OutboundPolicy({ allowedHosts: [], allowPrivateAddresses: true });
  assert.throws(() => none.checkUrl('https://tools.example.com'), /allowed none/);
});

Mcp.run();
