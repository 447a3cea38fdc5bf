/**
 * An audio-only realtime endpoint, for tests of clients that must cope with what a product does
 * not do (the endpoint benchmark's "unsupported, not a failure"): a WebSocket proxy in front of
 * this server that speaks the same OpenAI Realtime protocol but behaves like a voice-only product.
 *
 *  - `image` is taken out of every session.update's output_modalities before it is forwarded, so
 *    session.updated echoes audio only, and no image event ever reaches the client;
 *  - semantic_vad is refused, and so is a user item with an input_image: an `error` event
 *    (invalid_request_error, invalid_value, naming the event_id and the field), the event not
 *    forwarded, as a product refuses what it does not know;
 *  - POST /v1/realtime/calls answers 404 (no WebRTC); any other HTTP request too, with the CORS
 *    headers a browser needs to read the answer.
 *
 * Everything else (the key, session.created, audio both ways, server VAD, transcription,
 * cancellation) is the real server's, unchanged. Loopback only; close() ends every connection.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';

export interface AudioOnlyTarget {
  /** Base URL (http://127.0.0.1:PORT) to give a client in place of the server's. */
  url: string;
  /** Client events refused so far, by type. */
  refused: string[];
  close(): Promise<void>;
}

type Json = Record<string, any>;

export async function startAudioOnlyTarget(upstreamUrl: string): Promise<AudioOnlyTarget> {
  const refused: string[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    // Browsers may call it from any page, as they may call OpenAI's API: the 404 must reach them.
    const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization, content-type', 'access-control-allow-methods': 'GET, POST, DELETE' };
    if (req.method === 'OPTIONS') {
      res.writeHead(204, cors);
      res.end();
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json', ...cors });
    res.end(JSON.stringify({ error: { message: `${req.method} ${req.url?.split('?')[0]} is not available on this endpoint`, type: 'invalid_request_error', code: 'not_found', param: null } }));
  });
  const wss = new WebSocketServer({ noServer: true });
  const sockets = new Set<WebSocket>();
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (client) => {
      const upstream = new WebSocket(`${upstreamUrl.replace(/^http/, 'ws')}${req.url ?? '/v1/realtime'}`, {
        headers: req.headers.authorization ? { authorization: req.headers.authorization } : {},
      });
      sockets.add(client).add(upstream);
      const pending: string[] = [];
      const end = () => {
        for (const s of [client, upstream]) if (s.readyState === WebSocket.OPEN || s.readyState === WebSocket.CONNECTING) s.terminate();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
      upstream.on('open', () => {
        for (const text of pending.splice(0)) upstream.send(text);
      });
      upstream.on('message', (data, isBinary) => {
        if (isBinary) return; // raw frames: video, which this product has none of
        const event = JSON.parse(data.toString()) as Json;
        if (typeof event.type === 'string' && /image/.test(event.type)) return;
        client.send(JSON.stringify(event));
      });
      client.on('message', (data) => {
        let event: Json;
        try {
          event = JSON.parse(data.toString()) as Json;
        } catch {
          event = {};
        }
        const refusal = refuse(event);
        if (refusal) {
          refused.push(String(event.type));
          client.send(JSON.stringify({ type: 'error', event_id: `event_proxy_${refused.length}`, error: { type: 'invalid_request_error', code: 'invalid_value', message: refusal.message, param: refusal.param, event_id: event.event_id ?? null } }));
          return;
        }
        const text = JSON.stringify(withoutImages(event));
        if (upstream.readyState === WebSocket.OPEN) upstream.send(text);
        else pending.push(text);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    refused,
    async close() {
      for (const s of sockets) s.terminate();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What this product refuses, with the field named. */
function refuse(event: Json): { message: string; param: string } | null {
  if (event.type === 'session.update') {
    const s = (event.session ?? {}) as Json;
    const kind = s.audio?.input?.turn_detection?.type ?? s.turn_detection?.type;
    if (kind === 'semantic_vad') return { message: "Invalid value: 'semantic_vad'. Supported values are: 'server_vad'.", param: 'session.audio.input.turn_detection.type' };
  }
  if (event.type === 'conversation.item.create') {
    const content = (event.item?.content ?? []) as Json[];
    if (content.some((c) => c?.type === 'input_image')) return { message: "Invalid value: 'input_image'. Supported values are: 'input_text' and 'input_audio'.", param: 'item.content.type' };
  }
  return null;
}

/** A session.update with `image` taken out of its output_modalities. */
function withoutImages(event: Json): Json {
  if (event.type !== 'session.update' || !Array.isArray(event.session?.output_modalities)) return event;
  return { ...event, session: { ...event.session, output_modalities: (event.session.output_modalities as string[]).filter((m) => m !== 'image') } };
}
