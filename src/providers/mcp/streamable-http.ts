/**
 * MCP servers over streamable HTTP, through the official TypeScript SDK's client
 * (`@modelcontextprotocol/sdk`): one SDK client per declared server, connected on first use and
 * kept for the session (a failed connection is retried on the next use), every request through
 * the outbound policy's guarded fetch (outbound.ts), each bounded in time (MCP_LIST_TIMEOUT_MS for
 * connecting and listing, MCP_CALL_TIMEOUT_MS for a call) and cancelled with the response that
 * made it (the SDK tells the server with notifications/cancelled).
 *
 * A call's result becomes the item's `output`: its text parts joined (structured content as JSON
 * when there is no text; other parts named in brackets). Failures map to OpenAI's error kinds
 * (base.ts); a message says what happened and never carries the declared headers.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../../core/log.js';
import { MAX_MCP_TOOLS, McpFailure, RefusedTarget, type McpCallError, type McpCallOutcome, type McpConnection, type McpConnector, type McpTarget, type McpToolInfo } from './base.js';
import type { McpConfig } from './config.js';
import { OutboundPolicy } from './outbound.js';

/** Pages of tools/list followed at most (a server that pages forever is cut off). */
const MAX_LIST_PAGES = 16;
/** Longest error message kept from a server (its body may be a whole HTML page). */
const MAX_ERROR_MESSAGE_CHARS = 500;
const CLIENT_INFO = { name: 'realtime-avatar-server', version: '1.0.0' };

export class StreamableHttpMcp implements McpConnector {
  private readonly policy: OutboundPolicy;

  constructor(
    private readonly config: McpConfig,
    private readonly log: Logger,
  ) {
    this.policy = new OutboundPolicy(config);
  }

  check(target: McpTarget): void {
    this.policy.checkUrl(target.url);
  }

  open(target: McpTarget): McpConnection {
    return new StreamableHttpConnection(target, this.policy, this.config, this.log);
  }
}

class StreamableHttpConnection implements McpConnection {
  private client: Promise<Client> | null = null;
  private closed = false;

  constructor(
    private readonly target: McpTarget,
    private readonly policy: OutboundPolicy,
    private readonly config: McpConfig,
    private readonly log: Logger,
  ) {}

  async listTools(signal?: AbortSignal): Promise<McpToolInfo[]> {
    try {
      const client = await this.connected(signal);
      const tools: McpToolInfo[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_LIST_PAGES && tools.length < MAX_MCP_TOOLS; page++) {
        const listed = await client.listTools(cursor ? { cursor } : undefined, { timeout: this.config.listTimeoutMs, signal });
        for (const t of listed.tools) {
          tools.push({
            name: t.name,
            description: t.description ?? null,
            inputSchema: t.inputSchema as Record<string, unknown>,
            annotations: (t.annotations as Record<string, unknown> | undefined) ?? null,
          });
        }
        cursor = listed.nextCursor;
        if (!cursor) break;
      }
      return tools.slice(0, MAX_MCP_TOOLS);
    } catch (err) {
      throw new McpFailure(this.errorOf(err, signal, this.config.listTimeoutMs));
    }
  }

  async callTool(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<McpCallOutcome> {
    try {
      const client = await this.connected(signal);
      const result = await client.callTool({ name, arguments: args }, undefined, { timeout: this.config.callTimeoutMs, signal });
      const text = outputText(result as { content?: unknown; structuredContent?: unknown });
      if (result.isError) return { output: null, error: { type: 'tool_execution_error', message: clip(text || `Tool '${name}' reported an error.`) } };
      return { output: text, error: null };
    } catch (err) {
      return { output: null, error: this.errorOf(err, signal, this.config.callTimeoutMs) };
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = null;
    await client?.then((c) => c.close()).catch(() => undefined);
  }

  /** The SDK client, connected (initialize handshake) on first use; a failed connect is retried next time. */
  private connected(signal?: AbortSignal): Promise<Client> {
    if (this.closed) return Promise.reject(new McpError(ErrorCode.ConnectionClosed, 'The session has ended.'));
    if (!this.client) {
      const attempt = (async () => {
        const client = new Client(CLIENT_INFO, { capabilities: {} });
        const transport = new StreamableHTTPClientTransport(new URL(this.target.url), { fetch: this.policy.fetch, requestInit: { headers: this.target.headers } });
        client.onerror = (err) => this.log.debug('mcp transport error', { server: this.target.label, message: err.message });
        try {
          await client.connect(transport, { timeout: this.config.listTimeoutMs, signal });
        } catch (err) {
          await client.close().catch(() => undefined);
          throw err;
        }
        return client;
      })();
      this.client = attempt;
      attempt.catch(() => {
        if (this.client === attempt) this.client = null;
      });
    }
    return this.client;
  }

  /** A failure as OpenAI's error kinds (base.ts). */
  private errorOf(err: unknown, signal: AbortSignal | undefined, timeoutMs: number): McpCallError {
    if (signal?.aborted) return { type: 'protocol_error', code: -32800, message: 'The call was cancelled: the response ended before it finished.' };
    const refused = causeOf(err, RefusedTarget);
    if (refused) return { type: 'http_error', code: 403, message: clip(`Refused by this server's outbound policy: ${refused.message}`) };
    const mcp = causeOf(err, McpError);
    if (mcp) {
      if (mcp.code === ErrorCode.RequestTimeout) return { type: 'protocol_error', code: mcp.code, message: `The MCP server did not answer within ${timeoutMs} ms.` };
      return { type: 'protocol_error', code: mcp.code, message: clip(mcp.message) };
    }
    const http = causeOf(err, StreamableHTTPError);
    if (http) {
      const code = typeof http.code === 'number' && http.code >= 100 ? http.code : 502;
      return { type: 'http_error', code, message: clip(http.message) };
    }
    const e = err as { message?: string; code?: string; cause?: { message?: string; code?: string } };
    const reason = e.cause?.code ?? e.code ?? e.cause?.message ?? e.message ?? String(err);
    return { type: 'http_error', code: 502, message: clip(`Could not reach the MCP server '${this.target.label}': ${reason}.`) };
  }
}

/** `err` or the first error of its cause chain that is a `kind`. */
function causeOf<T extends Error>(err: unknown, kind: abstract new (...args: never[]) => T): T | null {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof kind) return e;
  }
  return null;
}

/** A tool result's content as the text the model reads. */
function outputText(result: { content?: unknown; structuredContent?: unknown }): string {
  const parts = Array.isArray(result.content) ? (result.content as Array<Record<string, unknown>>) : [];
  const texts = parts.map((p) => (p.type === 'text' && typeof p.text === 'string' ? p.text : `[${String(p.type ?? 'content')}]`));
  if (texts.every((t) => t.startsWith('[')) && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return texts.join('\n');
}

function clip(message: string): string {
  return message.length > MAX_ERROR_MESSAGE_CHARS ? `${message.slice(0, MAX_ERROR_MESSAGE_CHARS)}…` : message;
}
