/**
 * The realtime engine when something inside it fails (issue 8): a server event that cannot be
 * sent, a voice that throws while a response starts, an asset check that throws something that is
 * not an AppError. In each case the failure is reported (a named error event, logged with the event
 * id and type when it is internal), the response in flight ends with response.done, and the session
 * takes the next response: nothing leaves it wedged with a dead "active" response. The engine is
 * driven directly (no socket) with fakes, so each failure is injected exactly where it matters.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryLogger, type LogFields } from '../../src/core/log.js';
import type { SpeechService } from '../../src/providers/tts/base.js';
import { engineHarness, type Harness, type SeenEvent } from '../helpers/engine-harness.js';

interface Ctx {
  h: Harness;
  records: LogFields[];
  /** Makes the engine's send throw for the next event of this type. */
  failNextSendOf: string | null;
  voiceThrows: boolean;
  assetThrows: boolean;
}

const test = suite<Ctx>('RealtimeSessionEngine faults', {} as Ctx);

test.before.each(async (ctx) => {
  ctx.failNextSendOf = null;
  ctx.voiceThrows = false;
  ctx.assetThrows = false;
  const { logger, records } = memoryLogger('debug');
  ctx.records = records;
  const tts: SpeechService = {
    // Not async on purpose: a voice service that throws synchronously, before any promise exists.
    voice: () => {
      if (ctx.voiceThrows) throw new TypeError('voice table is broken');
      return Promise.resolve({ id: 'v', engine: 'fake', speak: async function* () {} });
    },
    close: async () => undefined,
  };
  ctx.h = await engineHarness({
    sessionId: 'sess_1',
    initial: { audio: { input: { turn_detection: null } } },
    reply: { reply: 'Fine, thanks.' },
    beforeSend: (event) => {
      if (event.type === ctx.failNextSendOf) {
        ctx.failNextSendOf = null;
        throw new RangeError('Maximum call stack size exceeded');
      }
    },
    deps: {
      tts,
      assets: {
        require: async () => {
          if (ctx.assetThrows) throw new TypeError("Cannot read properties of undefined (reading 'owner')");
        },
      },
      log: logger,
    },
  });
});

test.after.each(async (ctx) => {
  await ctx.h.close();
});

/** The first event from index `from` matching (the harness lets the engine run, up to 10 s). */
function waitFor(ctx: Ctx, pred: (e: SeenEvent) => boolean, from = 0): Promise<SeenEvent> {
  return ctx.h.waitFor(pred, { from });
}

const errorOf = (e: SeenEvent) => e.error as { type: string; code: string; event_id: string | null };

async function textTurn(ctx: Ctx, eventId: string): Promise<SeenEvent> {
  const from = ctx.h.events.length;
  ctx.h.engine.receive(JSON.stringify({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } }));
  ctx.h.engine.receive(JSON.stringify({ type: 'response.create', event_id: eventId, response: { output_modalities: ['text'] } }));
  return waitFor(ctx, (e) => e.type === 'response.done', from);
}

test('a server event that cannot be sent is logged with its type and replaced by a server_error; the response still ends and the next starts', async (ctx) => {
  ctx.failNextSendOf = 'response.created';
  const done = await textTurn(ctx, 'first');
  assert.is((done.response as { status: string }).status, 'completed');
  const err = await waitFor(ctx, (e) => e.type === 'error');
  assert.equal([errorOf(err).type, errorOf(err).code], ['server_error', 'server_error']);
  const logged = ctx.records.find((r) => r.msg === 'server event could not be sent');
  assert.is(logged?.type, 'response.created');
  const again = await textTurn(ctx, 'second');
  assert.is((again.response as { status: string }).status, 'completed');
});

test('a response whose voice throws while it starts ends failed, naming its response.create, and the session takes the next response', async (ctx) => {
  ctx.voiceThrows = true;
  const from = ctx.h.events.length;
  ctx.h.engine.receive(JSON.stringify({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } }));
  ctx.h.engine.receive(JSON.stringify({ type: 'response.create', event_id: 'spoken' }));
  const done = await waitFor(ctx, (e) => e.type === 'response.done', from);
  assert.is((done.response as { status: string }).status, 'failed');
  const err = await waitFor(ctx, (e) => e.type === 'error', from);
  assert.is(errorOf(err).event_id, 'spoken');
  ctx.voiceThrows = false;
  ctx.h.engine.receive(JSON.stringify({ type: 'response.cancel', event_id: 'nothing_to_cancel' }));
  const cancel = await waitFor(ctx, (e) => e.type === 'error' && errorOf(e).event_id === 'nothing_to_cancel');
  assert.is(errorOf(cancel).code, 'response_cancel_not_active');
  const again = await textTurn(ctx, 'after');
  assert.is((again.response as { status: string }).status, 'completed');
});

test('an internal failure in a handler is logged with the event id and type, answered with an error naming the event, and the session goes on', async (ctx) => {
  ctx.assetThrows = true;
  ctx.h.engine.receive(JSON.stringify({ type: 'session.update', event_id: 'upd', session: { voice: 'alice' } }));
  const err = await waitFor(ctx, (e) => e.type === 'error');
  assert.equal([errorOf(err).code, errorOf(err).event_id], ['server_error', 'upd']);
  const logged = ctx.records.find((r) => r.msg === 'realtime event failed');
  assert.equal([logged?.eventId, logged?.type, logged?.level], ['upd', 'session.update', 'error']);
  ctx.assetThrows = false;
  const done = await textTurn(ctx, 'then');
  assert.is((done.response as { status: string }).status, 'completed');
});

test.run();
