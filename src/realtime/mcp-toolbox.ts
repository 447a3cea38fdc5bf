/**
 * A session's MCP servers (session.tools, or a response's own tools, of type mcp): this server
 * connects to each one, lists its tools and offers them to the model; a response calls them
 * (response-mcp-call.ts). One entry per declaration (label, URL, headers, allowed_tools), kept
 * for the session: a declaration given again is not listed again, a changed one is.
 *
 * Listing a server, as OpenAI does it:
 *   conversation.item.added (an mcp_list_tools item, no tools yet) → mcp_list_tools.in_progress →
 *   mcp_list_tools.completed → conversation.item.done (the item with the tools allowed_tools lets through)
 * or, when the server cannot be reached or listed, mcp_list_tools.failed → conversation.item.done
 * (no tools) → an `error` event (code mcp_list_tools_failed) naming the event that declared it.
 * A response waits for the listings of its servers (each bounded by MCP_LIST_TIMEOUT_MS), so the
 * model is offered what the server has.
 *
 * The operator's outbound policy (providers/mcp) is checked when a declaration arrives, before the
 * session.update applies: a refused URL is an `error` naming `session.tools[i].server_url`
 * (mcp_server_not_allowed), and nothing of the update applies.
 *
 * Approvals: a client's mcp_approval_response is kept (answered) until a response takes it
 * (takeApproved): the approved calls run first in that response, the declined ones only tell the
 * model (items.ts shows them).
 *
 * Names: the model calls an MCP tool by its own name. A name that a function tool, or an earlier
 * server's tool, already has is not offered (logged), so every call routes to exactly one tool.
 */
import type { Logger } from '../core/log.js';
import type { ToolDefinition } from '../providers/llm/base.js';
import { McpFailure, RefusedTarget, type McpCallOutcome, type McpConnection, type McpConnector, type McpToolInfo } from '../providers/mcp/base.js';
import { type Item, type McpApprovalResponseItem, type McpListToolsItem, openedItem } from './items.js';
import type { ApprovedCall } from './response.js';
import { RealtimeError, type ServerEventDraft, errorEvent, newItemId } from './protocol.js';
import { type McpServerDeclaration, filterMatches, needsApproval } from './tools.js';

/** Distinct MCP servers one session may declare over its life. */
export const MAX_MCP_SERVERS = 16;

/** One tool a response may call on an MCP server. */
export interface McpRoute {
  server: McpServerDeclaration;
  tool: McpToolInfo;
  /** Whether a call waits for the client's approval. */
  approval: boolean;
  call(args: Record<string, unknown>, signal: AbortSignal): Promise<McpCallOutcome>;
}

/** The MCP tools offered to one response. */
export interface McpOffer {
  tools: ToolDefinition[];
  /** The tool the model's call `name` is (null: not an MCP tool). */
  route(name: string): McpRoute | null;
  /** A tool by its server's label and its name (an approved request's). */
  find(label: string, name: string): McpRoute | null;
}

export const NO_MCP: McpOffer = { tools: [], route: () => null, find: () => null };

export interface McpToolboxDeps {
  connector: McpConnector;
  emit(event: ServerEventDraft): void;
  /** Adds an item at the end of the conversation; returns the id of the item before it. */
  insert(item: Item): string | null;
  log: Logger;
}

interface Entry {
  declaration: McpServerDeclaration;
  connection: McpConnection;
  /** The tools allowed_tools lets through, once listed (empty when the listing failed). */
  tools: McpToolInfo[];
  listing: Promise<void>;
  failed: boolean;
}

export class McpToolbox {
  private readonly entries = new Map<string, Entry>();
  /** Approval answers not yet acted on. */
  private answers: McpApprovalResponseItem[] = [];
  /** Tools not offered because their name is taken (logged once each). */
  private readonly unoffered = new Set<string>();

  constructor(private readonly deps: McpToolboxDeps) {}

  /**
   * Refuses declarations the operator does not allow, or more servers than a session may have;
   * `param` is the tools array's place ('session.tools'), `rawTools` that array as sent (a refusal
   * names `param[i].server_url`).
   */
  check(servers: readonly McpServerDeclaration[], param: string, rawTools: unknown): void {
    const indexOf = (server: McpServerDeclaration) => (Array.isArray(rawTools) ? rawTools.findIndex((t) => isMcp(t, server.label)) : -1);
    const fresh = servers.filter((s) => !this.entries.has(fingerprint(s)));
    for (const server of fresh) {
      try {
        this.deps.connector.check({ label: server.label, url: server.url, headers: server.headers });
      } catch (err) {
        if (!(err instanceof RefusedTarget)) throw err;
        const p = `${param}[${indexOf(server)}].server_url`;
        throw new RealtimeError('mcp_server_not_allowed', `MCP server '${server.label}' cannot be reached from this server: ${err.message}`, p);
      }
    }
    if (this.entries.size + fresh.length > MAX_MCP_SERVERS) {
      throw new RealtimeError('too_many_mcp_servers', `A session may declare at most ${MAX_MCP_SERVERS} distinct MCP servers over its life.`, param);
    }
  }

  /** Lists every declared server not listed yet (see the header); `eventId` names the declaring event in a failure. */
  list(servers: readonly McpServerDeclaration[], eventId: string | null): void {
    for (const server of servers) {
      const key = fingerprint(server);
      const known = this.entries.get(key);
      if (known && !known.failed) continue;
      void known?.connection.close();
      this.entries.set(key, this.startListing(server, eventId));
    }
  }

  /** Resolves once the listings of `servers` are over (never rejects). */
  async settled(servers: readonly McpServerDeclaration[]): Promise<void> {
    await Promise.all(servers.map((s) => this.entries.get(fingerprint(s))?.listing));
  }

  /** The tools of `servers` to offer beside the function tools named `taken`. */
  offer(servers: readonly McpServerDeclaration[], taken: ReadonlySet<string>): McpOffer {
    if (servers.length === 0) return NO_MCP;
    const byName = new Map<string, McpRoute>();
    const tools: ToolDefinition[] = [];
    for (const server of servers) {
      const entry = this.entries.get(fingerprint(server));
      if (!entry) continue;
      for (const tool of entry.tools) {
        if (taken.has(tool.name) || byName.has(tool.name)) {
          const key = `${server.label}/${tool.name}`;
          if (!this.unoffered.has(key)) this.deps.log.warn('mcp tool not offered: its name is taken', { server: server.label, tool: tool.name });
          this.unoffered.add(key);
          continue;
        }
        const route: McpRoute = {
          server,
          tool,
          approval: needsApproval(server, tool),
          call: (args, signal) => entry.connection.callTool(tool.name, args, signal),
        };
        byName.set(tool.name, route);
        tools.push({ name: tool.name, description: describe(server, tool), parameters: objectSchema(tool.inputSchema) });
      }
    }
    return {
      tools,
      route: (name) => byName.get(name) ?? null,
      find: (label, name) => [...byName.values()].find((r) => r.server.label === label && r.tool.name === name) ?? null,
    };
  }

  /** A client's answer to an approval request: the next response acts on it (takeApproved). */
  answered(answer: McpApprovalResponseItem): void {
    this.answers.push(answer);
  }

  /** Whether answers wait for a response. */
  get answersWaiting(): boolean {
    return this.answers.length > 0;
  }

  /** The approved calls among the answers waiting (their requests looked up by `request`), routed by `offer`; the answers are taken. */
  takeApproved(offer: McpOffer, request: (id: string) => Item | undefined): ApprovedCall[] {
    const answers = this.answers;
    this.answers = [];
    return answers.flatMap((answer) => {
      const asked = request(answer.approval_request_id);
      return answer.approve && asked?.type === 'mcp_approval_request' ? [{ request: asked, route: offer.find(asked.server_label, asked.name) }] : [];
    });
  }

  /** Closes every connection (the session is over). */
  async close(): Promise<void> {
    const entries = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(entries.map((e) => e.connection.close().catch(() => undefined)));
  }

  private startListing(server: McpServerDeclaration, eventId: string | null): Entry {
    const connection = this.deps.connector.open({ label: server.label, url: server.url, headers: server.headers });
    const item: McpListToolsItem = { id: newItemId(), object: 'realtime.item', type: 'mcp_list_tools', server_label: server.label, tools: [] };
    const previousItemId = this.deps.insert(item);
    this.deps.emit({ type: 'conversation.item.added', previous_item_id: previousItemId, item: openedItem(item) });
    this.deps.emit({ type: 'mcp_list_tools.in_progress', item_id: item.id });
    const entry: Entry = { declaration: server, connection, tools: [], failed: false, listing: Promise.resolve() };
    entry.listing = connection.listTools().then(
      (tools) => {
        entry.tools = server.allowedTools ? tools.filter((t) => filterMatches(server.allowedTools!, t)) : tools;
        item.tools = entry.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema, annotations: t.annotations }));
        this.deps.emit({ type: 'mcp_list_tools.completed', item_id: item.id });
        this.deps.emit({ type: 'conversation.item.done', previous_item_id: previousItemId, item });
      },
      (err: unknown) => {
        entry.failed = true;
        const message = err instanceof McpFailure ? err.message : 'the listing failed';
        this.deps.log.warn('mcp server could not be listed', { server: server.label, message });
        this.deps.emit({ type: 'mcp_list_tools.failed', item_id: item.id });
        this.deps.emit({ type: 'conversation.item.done', previous_item_id: previousItemId, item });
        this.deps.emit(errorEvent(new RealtimeError('mcp_list_tools_failed', `The tools of MCP server '${server.label}' could not be listed: ${message}`, null), eventId));
      },
    );
    return entry;
  }
}

/** What makes two declarations the same server (the headers included: another key is another connection). */
function fingerprint(s: McpServerDeclaration): string {
  return JSON.stringify([s.label, s.url, s.headers, s.allowedTools]);
}

function describe(server: McpServerDeclaration, tool: McpToolInfo): string {
  const own = tool.description ?? '';
  return server.description ? `${own}${own ? ' ' : ''}(${server.label}: ${server.description})` : own;
}

/** A tool's input schema as a function's parameters (an object schema; anything else becomes one with no properties). */
function objectSchema(schema: Record<string, unknown>): Record<string, unknown> {
  return schema && typeof schema === 'object' && (schema.type === undefined || schema.type === 'object') ? schema : { type: 'object', properties: {} };
}

/** Whether `tool` (an element of a tools array as sent) is the MCP server labelled `label`. */
function isMcp(tool: unknown, label: string): boolean {
  return typeof tool === 'object' && tool !== null && (tool as { type?: unknown }).type === 'mcp' && (tool as { server_label?: unknown }).server_label === label;
}
