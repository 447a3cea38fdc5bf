/**
 * A real MCP server for tests and benchmarks: the official SDK's server side over streamable HTTP (a session per
 * client, as real servers keep them), on 127.0.0.1 with a port of its own. Its tools:
 *   get_weather {city}   read-only; answers "Sunny and 21 degrees in <city>."
 *   send_email {to, body} not read-only; answers "Sent to <to>."
 *   fail {}              reports an error (isError)
 *   slow {ms}            answers after `ms` (or when the client cancels)
 * It records every call and the headers of every request, so a test can see what reached it.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

export interface TestMcpServer {
  url: string;
  calls: Array<{ name: string; arguments: Record<string, unknown> }>;
  headers: http.IncomingHttpHeaders[];
  /** Calls cancelled by the client (the SDK's notifications/cancelled reached the handler's signal). */
  cancelled: string[];
  close(): Promise<void>;
}

const TOOLS = [
  {
    name: 'get_weather',
    description: 'The weather in a city now.',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    annotations: { readOnlyHint: true },
  },
  {
    name: 'send_email',
    description: 'Sends an email.',
    inputSchema: { type: 'object', properties: { to: { type: 'string' }, body: { type: 'string' } }, required: ['to'] },
    annotations: { readOnlyHint: false },
  },
  { name: 'fail', description: 'Always fails.', inputSchema: { type: 'object', properties: {} } },
  { name: 'slow', description: 'Answers after a while.', inputSchema: { type: 'object', properties: { ms: { type: 'number' } } } },
];

export async function startMcpServer(): Promise<TestMcpServer> {
  const state: Omit<TestMcpServer, 'url' | 'close'> = { calls: [], headers: [], cancelled: [] };
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const newServer = (): Server => {
    const server = new Server({ name: 'test-tools', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name } = request.params;
      const args = (request.params.arguments ?? {}) as Record<string, unknown>;
      state.calls.push({ name, arguments: args });
      switch (name) {
        case 'get_weather':
          return { content: [{ type: 'text', text: `Sunny and 21 degrees in ${String(args.city)}.` }] };
        case 'send_email':
          return { content: [{ type: 'text', text: `Sent to ${String(args.to)}.` }] };
        case 'fail':
          return { isError: true, content: [{ type: 'text', text: 'The weather service is down.' }] };
        case 'slow':
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, Number(args.ms ?? 10_000));
            extra.signal.addEventListener('abort', () => {
              state.cancelled.push(name);
              clearTimeout(timer);
              resolve();
            });
          });
          return { content: [{ type: 'text', text: 'Done at last.' }] };
        default:
          throw new Error(`no tool ${name}`);
      }
    });
    return server;
  };
  // Stateful, as real servers are: a session per client, so a cancellation reaches the call it names.
  const httpServer = http.createServer(async (req, res) => {
    state.headers.push(req.headers);
    const id = req.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? sessions.get(id) : undefined;
    if (!transport) {
      const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: true,
        onsessioninitialized: (sid) => void sessions.set(sid, created),
      });
      await newServer().connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const { port } = httpServer.address() as AddressInfo;
  return {
    ...state,
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of sessions.values()) void t.close();
        httpServer.closeAllConnections();
        httpServer.close(() => resolve());
      }),
  };
}
