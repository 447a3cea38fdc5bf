/**
 * Function calling, items and images in the engine (issue 22), over the src fakes: a response
 * that calls a function produces a function_call item with streamed arguments and OpenAI's events
 * in OpenAI's order; the client's function_call_output reaches the model with the call; text and
 * calls, and parallel calls, each get their own output_index; a cancel in the middle of a call's
 * arguments leaves it incomplete; tool_choice and per-response tools reach the model; missing
 * items get OpenAI's error codes; input_image parts are checked and shown to the model; G.711
 * formats are converted at the edge; idle_timeout_ms times a silent user out.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import sharp from 'sharp';
import { engineHarness, type Harness, type SeenEvent } from '../helpers/engine-harness.js';
import { FakeLanguageModels, type FakeLlmOptions } from '../../src/providers/llm/fake-llm.js';
import type { GenerateRequest } from '../../src/providers/llm/base.js';
import { IMAGE_NOTE } from '../../src/providers/llm/base.js';

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'The current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const TIME = { type: 'function', name: 'get_time', description: 'The time now.', parameters: { type: 'object', properties: {} } };
const ask = (text: string) => ({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
const types = (events: SeenEvent[]) => events.map((e) => e.type);

async function harness(reply: FakeLlmOptions, text = true): Promise<{ h: Harness; llm: FakeLanguageModels }> {
  const llm = new FakeLanguageModels(reply);
  const h = await engineHarness({ deps: { llm } });
  h.send({ type: 'session.update', session: { type: 'realtime', tools: [WEATHER, TIME], ...(text ? { output_modalities: ['text'] } : {}) } });
  await h.waitFor((e) => e.type === 'session.updated');
  return { h, llm };
}

/** Sends a question and response.create; returns the response's events up to response.done. */
async function respond(h: Harness, event: Record<string, unknown> = { type: 'response.create' }, question: string | null = 'What is the weather in Paris?'): Promise<SeenEvent[]> {
  const from = h.events.length;
  if (question !== null) h.send(ask(question));
  h.send(event);
  await h.waitFor((e) => e.type === 'response.done', { from, tick: true });
  const all = h.events.slice(from);
  return all.slice(all.findIndex((e) => e.type === 'response.created'));
}

const Calls = suite('function calls');

Calls('a call: output_item.added, conversation.item.added, arguments deltas and done, item done, response.done listing it', async () => {
  const { h, llm } = await harness({ toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}', callId: 'call_1' }] });
  try {
    const events = await respond(h);
    assert.equal(types(events), [
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'conversation.item.done',
      'response.done',
    ]);
    const added = events[1]!.item as Record<string, unknown>;
    assert.equal(added, { id: added.id, object: 'realtime.item', type: 'function_call', status: 'in_progress', call_id: 'call_1', name: 'get_weather', arguments: '' });
    const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta');
    assert.is(deltas.map((d) => d.delta).join(''), '{"city":"Paris"}');
    for (const d of deltas) assert.equal([d.item_id, d.output_index, d.call_id], [added.id, 0, 'call_1']);
    const done = events[5]!;
    assert.equal([done.name, done.arguments, done.call_id, done.output_index], ['get_weather', '{"city":"Paris"}', 'call_1', 0]);
    const itemDone = events[6]!.item as Record<string, unknown>;
    assert.equal([itemDone.status, itemDone.arguments], ['completed', '{"city":"Paris"}']);
    const response = events.at(-1)!.response as { status: string; output: Record<string, unknown>[] };
    assert.is(response.status, 'completed');
    assert.equal(response.output.map((o) => [o.type, o.call_id]), [['function_call', 'call_1']]);
    // The model was offered both tools, and tool_choice auto.
    const request = llm.requests.at(-1) as GenerateRequest;
    assert.equal(request.tools?.map((t) => t.name), ['get_weather', 'get_time']);
    assert.is(request.toolChoice, 'auto');
  } finally {
    await h.close();
  }
});

Calls("function_call_output + response.create: the model sees its own call and the output, and answers", async () => {
  const { h, llm } = await harness({
    toolCalls: (r) => (r.messages.some((m) => m.role === 'tool') ? [] : [{ name: 'get_weather', arguments: '{"city":"Paris"}', callId: 'call_w' }]),
    reply: (r) => {
      const tool = r.messages.find((m) => m.role === 'tool');
      return tool ? `It is ${JSON.parse(tool.content).temperature} degrees in Paris.` : 'Let me check.';
    },
  });
  try {
    await respond(h);
    const from = h.events.length;
    h.send({ type: 'conversation.item.create', event_id: 'ev_out', item: { type: 'function_call_output', call_id: 'call_w', output: '{"temperature":21}' } });
    const added = await h.waitFor((e) => e.type === 'conversation.item.added', { from });
    assert.equal((added.item as Record<string, unknown>).type, 'function_call_output');
    const events = await respond(h, { type: 'response.create' }, null);
    const text = events.find((e) => e.type === 'response.output_text.done');
    assert.is(text?.text, 'It is 21 degrees in Paris.');
    const request = llm.requests.at(-1) as GenerateRequest;
    const roles = request.messages.map((m) => m.role);
    assert.equal(roles.slice(-3), ['user', 'assistant', 'tool']);
    const call = request.messages.at(-2) as { toolCalls?: { id: string; name: string; arguments: string }[] };
    assert.equal(call.toolCalls, [{ id: 'call_w', name: 'get_weather', arguments: '{"city":"Paris"}' }]);
    assert.equal(request.messages.at(-1), { role: 'tool', toolCallId: 'call_w', content: '{"temperature":21}' });
  } finally {
    await h.close();
  }
});

Calls('text then a call, and parallel calls: each its own item and output_index, in the model\'s order', async () => {
  const { h } = await harness({
    reply: 'Checking both.',
    toolCalls: [
      { name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { name: 'get_time', arguments: '{}' },
    ],
  });
  try {
    const events = await respond(h);
    const added = events.filter((e) => e.type === 'response.output_item.added');
    assert.equal(added.map((e) => [e.output_index, (e.item as { type: string }).type]), [[0, 'message'], [1, 'function_call'], [2, 'function_call']]);
    const done = events.filter((e) => e.type === 'response.function_call_arguments.done');
    assert.equal(done.map((e) => [e.output_index, e.name]), [[1, 'get_weather'], [2, 'get_time']]);
    const output = (events.at(-1)!.response as { output: { type: string; name?: string }[] }).output;
    assert.equal(output.map((o) => o.name ?? o.type), ['message', 'get_weather', 'get_time']);
    // Text parts carry the message's own output_index.
    assert.ok(events.filter((e) => e.type === 'response.output_text.delta').every((e) => e.output_index === 0));
  } finally {
    await h.close();
  }
});

Calls('a spoken reply with a call: the call is done before the speech has played out, response.done after both', async () => {
  const { h } = await harness({ reply: 'One moment.', toolCalls: [{ name: 'get_time', arguments: '{}' }] }, false);
  try {
    const events = await respond(h);
    const t = types(events);
    assert.ok(t.includes('response.output_audio.delta'));
    assert.ok(t.indexOf('response.function_call_arguments.done') < t.indexOf('response.output_audio.done'), t.join(', '));
    assert.is(t.at(-1), 'response.done');
    assert.is((events.at(-1)!.response as { status: string }).status, 'completed');
  } finally {
    await h.close();
  }
});

Calls('response.cancel in the middle of a call\'s arguments leaves the item incomplete, without arguments.done', async () => {
  const { h } = await harness({ toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }], chunkDelayMs: 200 });
  try {
    const from = h.events.length;
    h.send(ask('Weather?'));
    h.send({ type: 'response.create' });
    await h.waitFor((e) => e.type === 'response.function_call_arguments.delta', { from });
    h.send({ type: 'response.cancel' });
    const done = await h.waitFor((e) => e.type === 'response.done', { from });
    const t = types(h.events.slice(from));
    assert.not.ok(t.includes('response.function_call_arguments.done'));
    const itemDone = h.events.slice(from).find((e) => e.type === 'response.output_item.done')!;
    assert.is((itemDone.item as { status: string }).status, 'incomplete');
    assert.equal((done.response as { status: string; output: { status: string }[] }).output.map((o) => o.status), ['incomplete']);
  } finally {
    await h.close();
  }
});

Calls('tool_choice and tools per response reach the model; none offers no tools; required and a named function pass through', async () => {
  const { h, llm } = await harness({ reply: 'Fine.' });
  try {
    await respond(h, { type: 'response.create', response: { tool_choice: 'none' } });
    assert.is(llm.requests.at(-1)!.tools?.length ?? 0, 0);
    await respond(h, { type: 'response.create', response: { tool_choice: 'required' } });
    assert.is(llm.requests.at(-1)!.toolChoice, 'required');
    await respond(h, { type: 'response.create', response: { tool_choice: { type: 'function', name: 'get_time' } } });
    assert.equal(llm.requests.at(-1)!.toolChoice, { type: 'function', name: 'get_time' });
    await respond(h, { type: 'response.create', response: { tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } }] } });
    assert.equal(llm.requests.at(-1)!.tools?.map((t) => t.name), ['lookup']);
    // A bad tool in a response names it and the session goes on.
    const from = h.events.length;
    h.send({ type: 'response.create', event_id: 'ev_bad', response: { tools: [WEATHER, { type: 'function', name: 'x', parameters: 'nope' }] } });
    const err = await h.waitFor((e) => e.type === 'error', { from });
    assert.equal([(err.error as Record<string, unknown>).param, (err.error as Record<string, unknown>).event_id], ['response.tools[1].parameters', 'ev_bad']);
    await respond(h);
  } finally {
    await h.close();
  }
});

Calls('function_call_output for an unknown call id, and missing items, get named errors; the session goes on', async () => {
  const { h } = await harness({ reply: 'Fine.' });
  try {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'call_nope', output: '1' } }, 'invalid_call_id', 'item.call_id'],
      [{ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'call_nope' } }, 'missing_required_parameter', 'item.output'],
      [{ type: 'conversation.item.create', previous_item_id: 'item_nope', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x' }] } }, 'item_create_invalid_previous_item_id', 'previous_item_id'],
      [{ type: 'conversation.item.retrieve', item_id: 'item_nope' }, 'item_retrieve_invalid_item_id', 'item_id'],
      [{ type: 'conversation.item.delete', item_id: 'item_nope' }, 'item_delete_invalid_item_id', 'item_id'],
      [{ type: 'conversation.item.truncate', item_id: 'item_nope', content_index: 0, audio_end_ms: 0 }, 'item_truncate_invalid_item_id', 'item_id'],
      [{ type: 'conversation.item.create', item: { type: 'mcp_approval_response', approve: true } }, 'missing_required_parameter', 'item.approval_request_id'],
      [{ type: 'conversation.item.create', item: { type: 'mcp_call', name: 'x', server_label: 'y' } }, 'unsupported_item_type', 'item.type'],
    ];
    for (const [i, [event, code, param]] of cases.entries()) {
      const from = h.events.length;
      h.send({ ...event, event_id: `ev_${i}` });
      const err = (await h.waitFor((e) => e.type === 'error', { from })).error as Record<string, unknown>;
      assert.equal([err.code, err.param, err.event_id], [code, param, `ev_${i}`]);
    }
    // A client may replay a call and its output (LiveKit's chat sync), and then they are a pair.
    h.send({ type: 'conversation.item.create', item: { type: 'function_call', call_id: 'call_r', name: 'get_time', arguments: '{}' } });
    const from = h.events.length;
    h.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'call_r', output: '"noon"' } });
    await h.waitFor((e) => e.type === 'conversation.item.done' && (e.item as { type: string }).type === 'function_call_output', { from });
    await respond(h);
  } finally {
    await h.close();
  }
});

Calls('the model is asked to prepare the session\'s instructions and tools when they are set (once per change): what the first reply then starts with', async () => {
  const llm = new FakeLanguageModels({ reply: 'Sunny.' });
  const h = await engineHarness({ deps: { llm } });
  try {
    assert.is(llm.prepared.length, 1, 'the default session, at start');
    const update = { type: 'session.update', session: { type: 'realtime', instructions: 'You are Ada, a weather guide.', tools: [WEATHER] } };
    h.send(update);
    await h.waitFor((e) => e.type === 'session.updated');
    const from = h.events.length;
    h.send(update);
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: 'alloy' } } } });
    await h.engine.idle();
    assert.is(h.events.slice(from).filter((e) => e.type === 'session.updated').length, 2);
    assert.is(llm.prepared.length, 2, 'the same instructions and tools again, or a new voice, prepare nothing more');
    const prepared = llm.prepared[1]!;
    assert.match(prepared.messages[0]!.content, /You are Ada, a weather guide\./);
    assert.equal(prepared.tools?.map((t) => t.name), ['get_weather']);
    await respond(h);
    const asked = llm.requests.at(-1)!;
    assert.equal(asked.messages[0], prepared.messages[0], 'the reply starts with what was prepared');
    assert.equal(asked.tools, prepared.tools);
  } finally {
    await h.close();
  }
});

const Images = suite('input images');

Images('an input_image part is checked, kept in the item, and shown to the model with a note in its text', async () => {
  const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 200, g: 30, b: 30 } } }).png().toBuffer();
  const url = `data:image/png;base64,${png.toString('base64')}`;
  const { h, llm } = await harness({ reply: 'A red square.' });
  try {
    const from = h.events.length;
    h.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What is this?' }, { type: 'input_image', image_url: url, detail: 'low' }] } });
    const added = await h.waitFor((e) => e.type === 'conversation.item.added', { from });
    const part = ((added.item as { content: Record<string, unknown>[] }).content[1])!;
    assert.equal([part.type, part.image_url, part.detail], ['input_image', url, 'low']);
    await respond(h, { type: 'response.create' }, null);
    const user = llm.requests.at(-1)!.messages.at(-1) as { role: string; content: string; images?: { url: string; detail: string }[] };
    assert.equal(user.role, 'user');
    assert.ok(user.content.includes('What is this?') && user.content.includes(IMAGE_NOTE));
    assert.equal(user.images, [{ url, detail: 'low' }]);
  } finally {
    await h.close();
  }
});

Images('a bad image is refused naming the part; an http URL is not fetched; the session goes on', async () => {
  const { h } = await harness({ reply: 'Fine.' });
  try {
    const cases: Array<[string, string]> = [
      ['data:image/png;base64,bm90IGFuIGltYWdl', 'item.content[0].image_url'],
      ['https://example.com/cat.png', 'item.content[0].image_url'],
    ];
    for (const [i, [url, param]] of cases.entries()) {
      const from = h.events.length;
      h.send({ type: 'conversation.item.create', event_id: `ev_img${i}`, item: { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: url }] } });
      const err = (await h.waitFor((e) => e.type === 'error', { from })).error as Record<string, unknown>;
      assert.equal([err.param, err.event_id], [param, `ev_img${i}`]);
      assert.not.ok(h.events.slice(from).some((e) => e.type === 'conversation.item.added'));
    }
    await respond(h);
  } finally {
    await h.close();
  }
});

const Formats = suite('G.711 and idle timeout');

Formats('audio/pcmu output: audio deltas are μ-law at 8 kHz (a sixth of the PCM16 bytes), echoed in the response object', async () => {
  const llm = new FakeLanguageModels({ reply: 'Hello there, this is a short reply.' });
  const h = await engineHarness({ deps: { llm } });
  try {
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { format: { type: 'audio/pcmu' } } } } });
    await h.waitFor((e) => e.type === 'session.updated');
    const events = await respond(h);
    const bytes = events.filter((e) => e.type === 'response.output_audio.delta').reduce((n, e) => n + Buffer.from(e.delta as string, 'base64').length, 0);
    const created = events[0]!.response as { audio: { output: { format: { type: string } } } };
    assert.is(created.audio.output.format.type, 'audio/pcmu');
    const h2 = await engineHarness({ deps: { llm: new FakeLanguageModels({ reply: 'Hello there, this is a short reply.' }) } });
    try {
      const pcmBytes = (await respond(h2)).filter((e) => e.type === 'response.output_audio.delta').reduce((n, e) => n + Buffer.from(e.delta as string, 'base64').length, 0);
      assert.ok(bytes > 0 && Math.abs(bytes * 6 - pcmBytes) < pcmBytes * 0.02, `${bytes} μ-law bytes against ${pcmBytes} PCM bytes`);
    } finally {
      await h2.close();
    }
  } finally {
    await h.close();
  }
});

Formats('idle_timeout_ms: silence after a reply triggers timeout_triggered, a committed empty turn and a response that checks in', async () => {
  const llm = new FakeLanguageModels({ reply: 'Are you still there?' });
  const h = await engineHarness({ deps: { llm } });
  try {
    h.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'], audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: 600 } } } } });
    await h.waitFor((e) => e.type === 'session.updated');
    await respond(h, { type: 'response.create' }, 'Hello');
    const from = h.events.length;
    const timeout = await h.waitFor((e) => e.type === 'input_audio_buffer.timeout_triggered', { from });
    assert.type(timeout.audio_start_ms, 'number');
    assert.type(timeout.audio_end_ms, 'number');
    await h.waitFor((e) => e.type === 'response.done', { from });
    const t = types(h.events.slice(from));
    assert.equal(t.slice(0, 5), ['input_audio_buffer.timeout_triggered', 'input_audio_buffer.committed', 'conversation.item.added', 'conversation.item.done', 'response.created']);
    assert.is(h.events.slice(from).find((e) => e.type === 'input_audio_buffer.committed')!.item_id, timeout.item_id);
    assert.ok((llm.requests.at(-1)!.messages[0]!.content as string).includes('said nothing'));
  } finally {
    await h.close();
  }
});

Formats('idle_timeout_ms: a session.update that turns it off stops the timeout a reply armed', async () => {
  const llm = new FakeLanguageModels({ reply: 'Hello there.' });
  const h = await engineHarness({ deps: { llm } });
  try {
    h.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'], audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: 500 } } } } });
    await h.waitFor((e) => e.type === 'session.updated');
    await respond(h, { type: 'response.create' }, 'Hello');
    const mark = h.events.length;
    h.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: null } } } } });
    const updated = await h.waitFor((e) => e.type === 'session.updated', { from: mark });
    assert.is((updated.session as { audio: { input: { turn_detection: { idle_timeout_ms: unknown } } } }).audio.input.turn_detection.idle_timeout_ms, null);
    await new Promise((r) => setTimeout(r, 900)); // past the 500 ms it was armed with
    assert.not.ok(h.events.some((e) => e.type === 'input_audio_buffer.timeout_triggered'), 'turned off after it was armed');
  } finally {
    await h.close();
  }
});

Calls.run();
Images.run();
Formats.run();
