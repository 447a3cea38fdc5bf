/**
 * What a realtime client was delivered, counted at the client, for the tests that compare usage
 * records with it (test/server/usage.test.ts, test/fleet/usage-faults.test.ts): seconds of PCM16
 * 24 kHz audio, image deltas, and the tokens response.done reported. Also the two steps those
 * tests repeat: a conversation the socket makes (with frames as image events if asked), and a
 * typed question with its reply.
 */
import { RealtimeTestClient } from '../clients/realtime-client.js';

export interface Received {
  audioSeconds: number;
  frames: number;
  inputTokens: number;
  outputTokens: number;
  responses: number;
}

export function receivedBy(ws: RealtimeTestClient): Received {
  const bytes = ws.ofType('response.output_audio.delta').reduce((n, e) => n + Buffer.from(String(e.delta), 'base64').length, 0);
  const done = ws.ofType('response.done');
  return {
    audioSeconds: bytes / 2 / 24_000,
    frames: ws.ofType('response.output_image.delta').length,
    inputTokens: done.reduce((n, e) => n + (e.response.usage?.input_tokens ?? 0), 0),
    outputTokens: done.reduce((n, e) => n + (e.response.usage?.output_tokens ?? 0), 0),
    responses: done.length,
  };
}

/** A conversation whose session the socket makes (closing the socket ends it). */
export async function converse(url: string, key: string, images = false, timeoutMs = 60_000): Promise<{ ws: RealtimeTestClient; id: string }> {
  const ws = await RealtimeTestClient.connect(url, { key, query: 'model=gpt-realtime' });
  const id = (await ws.waitFor('session.created', { timeoutMs })).session.id as string;
  if (images) {
    ws.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio', 'image'] } });
    await ws.waitFor('session.updated');
  }
  return { ws, id };
}

/** Asks a typed question for a reply; returns the index of the events that follow. */
export function ask(ws: RealtimeTestClient, text: string): number {
  const from = ws.events.length;
  ws.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  ws.send({ type: 'response.create' });
  return from;
}
