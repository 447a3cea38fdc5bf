/**
 * The MCP seam: tools a session declares as `{type: "mcp", server_url, ...}` live on a remote
 * Model Context Protocol server that this server reaches for the session (OpenAI's hosted MCP
 * tools). The engine sees an MCP server only through this file:
 *
 *   McpConnector.check(target)   the operator's outbound policy (an allow-list of hosts; private
 *                                and loopback addresses refused unless allowed): RefusedTarget
 *   McpConnector.open(target)    a connection to one server (opened lazily, kept for the session)
 *     .listTools()               its tools, as the server describes them
 *     .callTool(name, args)      one call's outcome: its text, or an error in OpenAI's three kinds
 *     .close()
 *
 * Errors are OpenAI's `mcp_call.error` shapes, so the engine puts them on the item as they are:
 * `http_error` {code} (the server answered an HTTP error, or could not be reached: 502),
 * `protocol_error` {code} (a JSON-RPC error, a timeout -32001, a cancelled call -32800),
 * `tool_execution_error` (the tool ran and reported an error). Headers and the authorization are
 * the connection's secret: no error message, log line or echo carries them.
 *
 * Implementation: streamable-http.ts (the official TypeScript SDK's client over streamable HTTP,
 * its requests through outbound.ts's guarded fetch).
 */

/** Where one declared MCP server is, and what the session sends it. */
export interface McpTarget {
  /** The session's label for it (session.tools[i].server_label). */
  label: string;
  url: string;
  /** Extra request headers (secret: never logged or echoed). */
  headers: Record<string, string>;
}

/** A tool as an MCP server lists it. */
export interface McpToolInfo {
  name: string;
  description: string | null;
  inputSchema: Record<string, unknown>;
  annotations: Record<string, unknown> | null;
}

export type McpCallError =
  | { type: 'http_error'; code: number; message: string }
  | { type: 'protocol_error'; code: number; message: string }
  | { type: 'tool_execution_error'; message: string };

export type McpCallOutcome = { output: string; error: null } | { output: null; error: McpCallError };

export interface McpConnection {
  /** Every tool the server offers (paged through; at most MAX_MCP_TOOLS). Throws McpFailure. */
  listTools(signal?: AbortSignal): Promise<McpToolInfo[]>;
  /** Calls one tool; never throws: a failure is the outcome's error. */
  callTool(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<McpCallOutcome>;
  close(): Promise<void>;
}

export interface McpConnector {
  /** Refuses a target the operator does not allow (RefusedTarget), before anything is sent. */
  check(target: McpTarget): void;
  open(target: McpTarget): McpConnection;
}

/** Tools one server may list; more are cut off (OpenAI's limit on a session's tools). */
export const MAX_MCP_TOOLS = 128;

/** A target the outbound policy refuses (its message says why and what the operator can set). */
export class RefusedTarget extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RefusedTarget';
  }
}

/** A listing or connection that failed, as an MCP error (its message carries no secret). */
export class McpFailure extends Error {
  constructor(readonly error: McpCallError) {
    super(error.message);
    this.name = 'McpFailure';
  }
}
