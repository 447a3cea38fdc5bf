/**
 * Tools a session (session.tools) or one response (response.create's `tools`) offers the model,
 * and how it may call them (tool_choice), validated like every other field: an error names the
 * offending element (`session.tools[1].parameters`) and nothing of a bad update is applied.
 *
 *  - `{type: "function", name, description?, parameters?}`: name 1..64 of [A-Za-z0-9_-] and unique,
 *    description up to MAX_TOOL_DESCRIPTION_CHARS, parameters a JSON Schema object (type "object"
 *    when it says a type) of at most MAX_TOOL_SCHEMA_CHARS as JSON. At most MAX_TOOLS tools.
 *  - `{type: "mcp", server_label, server_url, allowed_tools?, require_approval?, headers?,
 *    authorization?, server_description?}`: a remote MCP server this server calls for the session
 *    (mcp-toolbox.ts lists it, the response runs its calls). The label is 1..64 of [A-Za-z0-9_-]
 *    and unique; allowed_tools is a list of names or a filter {tool_names?, read_only?};
 *    require_approval is 'always' (OpenAI's default), 'never', or {always?, never?} of such
 *    filters; headers (and authorization, sent as `Authorization: Bearer`) are kept for the
 *    connection and never echoed. OpenAI's hosted connectors (connector_id) and tunnels
 *    (tunnel_id) are refused: only a server_url can be reached from here. Whether the operator
 *    allows the URL is the engine's check (providers/mcp), made before the update applies.
 *  - tool_choice: "auto", "none", "required", or `{type: "function", name}` naming one of the
 *    function tools offered (`{type: "mcp"}` is refused: say 'required').
 *
 * Tools are echoed in the session object in OpenAI's shape (`ParsedTools.json`).
 */
import type { ToolChoice, ToolDefinition } from '../providers/llm/base.js';
import type { McpToolInfo } from '../providers/mcp/base.js';
import { type Json, RealtimeError, describeValue, isObject, quoted } from './protocol.js';

/** Tools one session or response may offer (OpenAI's limit). */
export const MAX_TOOLS = 128;
export const MAX_TOOL_DESCRIPTION_CHARS = 8192;
/** A tool's parameter schema, serialised: a generous bound for a real schema (a few kB). */
export const MAX_TOOL_SCHEMA_CHARS = 64 * 1024;
const NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** Headers one MCP server may be sent, and the longest value (a bearer token fits many times). */
const MAX_MCP_HEADERS = 32;
const MAX_HEADER_VALUE_CHARS = 8192;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/** Headers the transport owns. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'content-type', 'connection', 'transfer-encoding', 'accept', 'mcp-session-id', 'mcp-protocol-version']);
const MAX_MCP_URL_CHARS = 2048;

/** Which of a server's tools a rule names: by name, by its read-only annotation, or both. */
export interface McpToolFilter {
  toolNames: string[] | null;
  readOnly: boolean | null;
}

/** One MCP server a session or response declares. */
export interface McpServerDeclaration {
  label: string;
  url: string;
  /** Sent with every request (authorization folded in as `Authorization: Bearer`); never echoed. */
  headers: Record<string, string>;
  /** Null: every tool the server lists. */
  allowedTools: McpToolFilter | null;
  /** 'always' | 'never', or the tools that need it ({always, never}; a tool in neither needs it). */
  requireApproval: 'always' | 'never' | { always: McpToolFilter | null; never: McpToolFilter | null };
  description: string | null;
}

/** A `tools` array, parsed: functions the client runs, MCP servers this server calls, and the echo. */
export interface ParsedTools {
  functions: ToolDefinition[];
  mcp: McpServerDeclaration[];
  /** Every tool in OpenAI's shape, in the order given (MCP secrets left out). */
  json: Json[];
}

export const NO_TOOLS: ParsedTools = { functions: [], mcp: [], json: [] };

/** Whether `filter` names `tool` (every criterion it gives holds). */
export function filterMatches(filter: McpToolFilter, tool: Pick<McpToolInfo, 'name' | 'annotations'>): boolean {
  if (filter.toolNames !== null && !filter.toolNames.includes(tool.name)) return false;
  if (filter.readOnly !== null && (tool.annotations?.readOnlyHint === true) !== filter.readOnly) return false;
  return true;
}

/** Whether a call of `tool` must wait for the client's mcp_approval_response. */
export function needsApproval(server: McpServerDeclaration, tool: Pick<McpToolInfo, 'name' | 'annotations'>): boolean {
  const rule = server.requireApproval;
  if (rule === 'always' || rule === 'never') return rule === 'always';
  if (rule.never && filterMatches(rule.never, tool)) return false;
  return true;
}

/** Validates a `tools` array; `param` is where it sits ('session.tools' or 'response.tools'). */
export function parseTools(value: unknown, param: string): ParsedTools {
  if (value === undefined || value === null) return NO_TOOLS;
  if (!Array.isArray(value)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an array of tools.`, param);
  if (value.length > MAX_TOOLS) {
    throw new RealtimeError(
      'array_above_max_length',
      `Invalid '${param}': array too long. Expected an array with maximum length ${MAX_TOOLS}, but got an array with length ${value.length} instead.`,
      param,
    );
  }
  const names = new Set<string>();
  const labels = new Set<string>();
  const parsed: ParsedTools = { functions: [], mcp: [], json: [] };
  value.forEach((raw: unknown, i: number) => {
    const p = `${param}[${i}]`;
    if (!isObject(raw)) throw new RealtimeError('invalid_type', `Invalid type for '${p}': expected an object.`, p);
    const type = raw.type ?? 'function';
    if (type === 'mcp') {
      const server = parseMcpTool(raw, p);
      if (labels.has(server.label)) throw new RealtimeError('duplicate_server_label', `MCP server label '${server.label}' is used twice in '${param}'.`, `${p}.server_label`);
      labels.add(server.label);
      parsed.mcp.push(server);
      parsed.json.push(mcpToolJson(server));
      return;
    }
    if (type !== 'function') throw new RealtimeError('invalid_value', `Invalid value for '${p}.type': ${describeValue(type)}; expected 'function' or 'mcp'.`, `${p}.type`);
    const name = raw.name;
    if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
      throw new RealtimeError(
        name === undefined ? 'missing_required_parameter' : 'invalid_value',
        `Invalid '${p}.name': expected 1 to 64 letters, digits, underscores or dashes${typeof name === 'string' ? `, got '${quoted(name)}'` : ''}.`,
        `${p}.name`,
      );
    }
    if (names.has(name)) throw new RealtimeError('duplicate_tool_name', `Tool name '${name}' is used twice in '${param}'.`, `${p}.name`);
    names.add(name);
    const description = raw.description ?? '';
    if (typeof description !== 'string') throw new RealtimeError('invalid_type', `Invalid type for '${p}.description': expected a string.`, `${p}.description`);
    if (description.length > MAX_TOOL_DESCRIPTION_CHARS) {
      throw new RealtimeError('string_above_max_length', `Invalid '${p}.description': longer than ${MAX_TOOL_DESCRIPTION_CHARS} characters.`, `${p}.description`);
    }
    const parameters = raw.parameters ?? { type: 'object', properties: {} };
    if (!isObject(parameters)) throw new RealtimeError('invalid_type', `Invalid type for '${p}.parameters': expected a JSON Schema object.`, `${p}.parameters`);
    if (parameters.type !== undefined && parameters.type !== 'object') {
      throw new RealtimeError('invalid_value', `Invalid '${p}.parameters': a function's parameters schema must have type 'object', got ${describeValue(parameters.type)}.`, `${p}.parameters.type`);
    }
    if (parameters.properties !== undefined && !isObject(parameters.properties)) {
      throw new RealtimeError('invalid_type', `Invalid type for '${p}.parameters.properties': expected an object.`, `${p}.parameters.properties`);
    }
    if (JSON.stringify(parameters).length > MAX_TOOL_SCHEMA_CHARS) {
      throw new RealtimeError('string_above_max_length', `Invalid '${p}.parameters': the schema is longer than ${MAX_TOOL_SCHEMA_CHARS} characters as JSON.`, `${p}.parameters`);
    }
    parsed.functions.push({ name, description, parameters });
    parsed.json.push({ type: 'function', name, description, parameters });
  });
  return parsed;
}

function parseMcpTool(raw: Json, p: string): McpServerDeclaration {
  const label = raw.server_label;
  if (typeof label !== 'string' || !NAME_PATTERN.test(label)) {
    throw new RealtimeError(
      label === undefined ? 'missing_required_parameter' : 'invalid_value',
      `Invalid '${p}.server_label': expected 1 to 64 letters, digits, underscores or dashes.`,
      `${p}.server_label`,
    );
  }
  for (const hosted of ['connector_id', 'tunnel_id'] as const) {
    if (raw[hosted] !== undefined && raw[hosted] !== null) {
      throw new RealtimeError(
        'unsupported_mcp_target',
        `'${p}.${hosted}' names one of OpenAI's hosted ${hosted === 'connector_id' ? 'connectors' : 'MCP tunnels'}, which this server cannot reach; give the MCP server's 'server_url'.`,
        `${p}.${hosted}`,
      );
    }
  }
  const url = raw.server_url;
  if (typeof url !== 'string' || url === '') {
    throw new RealtimeError(url === undefined ? 'missing_required_parameter' : 'invalid_type', `'${p}.server_url' must be the MCP server's URL (https://...).`, `${p}.server_url`);
  }
  if (url.length > MAX_MCP_URL_CHARS) throw new RealtimeError('string_above_max_length', `Invalid '${p}.server_url': longer than ${MAX_MCP_URL_CHARS} characters.`, `${p}.server_url`);
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    throw new RealtimeError('invalid_value', `Invalid '${p}.server_url': expected an http:// or https:// URL.`, `${p}.server_url`);
  }
  const headers = mcpHeaders(raw.headers, `${p}.headers`);
  if (raw.authorization !== undefined && raw.authorization !== null) {
    if (typeof raw.authorization !== 'string' || raw.authorization.length > MAX_HEADER_VALUE_CHARS || /[\r\n]/.test(raw.authorization)) {
      throw new RealtimeError('invalid_value', `'${p}.authorization' must be an access token of at most ${MAX_HEADER_VALUE_CHARS} characters.`, `${p}.authorization`);
    }
    if (Object.keys(headers).some((h) => h.toLowerCase() === 'authorization')) {
      throw new RealtimeError('invalid_value', `'${p}' gives both 'authorization' and an Authorization header; give one.`, `${p}.authorization`);
    }
    headers.Authorization = `Bearer ${raw.authorization}`;
  }
  const description = raw.server_description ?? null;
  if (description !== null && (typeof description !== 'string' || description.length > MAX_TOOL_DESCRIPTION_CHARS)) {
    throw new RealtimeError('invalid_value', `'${p}.server_description' must be a string of at most ${MAX_TOOL_DESCRIPTION_CHARS} characters.`, `${p}.server_description`);
  }
  return {
    label,
    url,
    headers,
    allowedTools: allowedTools(raw.allowed_tools, `${p}.allowed_tools`),
    requireApproval: approvalRule(raw.require_approval, `${p}.require_approval`),
    description,
  };
}

function mcpHeaders(value: unknown, param: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an object of header names and values.`, param);
  const entries = Object.entries(value);
  if (entries.length > MAX_MCP_HEADERS) throw new RealtimeError('invalid_value', `'${param}' may hold at most ${MAX_MCP_HEADERS} headers.`, param);
  const out: Record<string, string> = {};
  for (const [name, v] of entries) {
    // The value is never quoted back: it may be a secret.
    if (!HEADER_NAME.test(name)) throw new RealtimeError('invalid_value', `'${param}' has a header name that is not a valid HTTP token.`, param);
    if (RESERVED_HEADERS.has(name.toLowerCase())) throw new RealtimeError('invalid_value', `'${param}.${name}' is set by the MCP transport and cannot be given.`, `${param}.${name}`);
    if (typeof v !== 'string' || v.length > MAX_HEADER_VALUE_CHARS || /[\r\n\0]/.test(v)) {
      throw new RealtimeError('invalid_value', `'${param}.${name}' must be a string of at most ${MAX_HEADER_VALUE_CHARS} characters, without line breaks.`, `${param}.${name}`);
    }
    out[name] = v;
  }
  return out;
}

function toolFilter(value: unknown, param: string): McpToolFilter {
  if (!isObject(value)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected {"tool_names": [...], "read_only": true|false}.`, param);
  for (const k of Object.keys(value)) {
    if (k !== 'tool_names' && k !== 'read_only') throw new RealtimeError('unknown_parameter', `Unknown parameter: '${param}.${quoted(k)}'.`, `${param}.${quoted(k)}`);
  }
  const names = value.tool_names ?? null;
  if (names !== null && (!Array.isArray(names) || names.length > MAX_TOOLS || names.some((n) => typeof n !== 'string' || n === '' || n.length > 128))) {
    throw new RealtimeError('invalid_value', `'${param}.tool_names' must be a list of tool names.`, `${param}.tool_names`);
  }
  const readOnly = value.read_only ?? null;
  if (readOnly !== null && typeof readOnly !== 'boolean') throw new RealtimeError('invalid_type', `Invalid type for '${param}.read_only': expected a boolean.`, `${param}.read_only`);
  return { toolNames: names as string[] | null, readOnly };
}

function allowedTools(value: unknown, param: string): McpToolFilter | null {
  if (value === undefined || value === null) return null;
  if (Array.isArray(value)) return toolFilter({ tool_names: value }, param);
  return toolFilter(value, param);
}

function approvalRule(value: unknown, param: string): McpServerDeclaration['requireApproval'] {
  if (value === undefined || value === null || value === 'always') return 'always';
  if (value === 'never') return 'never';
  if (!isObject(value)) throw new RealtimeError('invalid_value', `Invalid value for '${param}': expected 'always', 'never' or {"always": {...}, "never": {...}}.`, param);
  for (const k of Object.keys(value)) {
    if (k !== 'always' && k !== 'never') throw new RealtimeError('unknown_parameter', `Unknown parameter: '${param}.${quoted(k)}'.`, `${param}.${quoted(k)}`);
  }
  const rule = (k: 'always' | 'never') => (value[k] === undefined || value[k] === null ? null : toolFilter(value[k], `${param}.${k}`));
  return { always: rule('always'), never: rule('never') };
}

function filterJson(f: McpToolFilter | null): Json | null {
  if (f === null) return null;
  return { ...(f.toolNames !== null ? { tool_names: f.toolNames } : {}), ...(f.readOnly !== null ? { read_only: f.readOnly } : {}) };
}

/** An MCP tool as session.tools echoes it: no headers, no authorization. */
function mcpToolJson(s: McpServerDeclaration): Json {
  const approval = s.requireApproval;
  return {
    type: 'mcp',
    server_label: s.label,
    server_url: s.url,
    allowed_tools: filterJson(s.allowedTools),
    require_approval: typeof approval === 'string' ? approval : { ...(approval.always ? { always: filterJson(approval.always) } : {}), ...(approval.never ? { never: filterJson(approval.never) } : {}) },
    server_description: s.description,
  };
}

/** Validates a tool_choice against the tools it may name. */
export function parseToolChoice(value: unknown, tools: readonly ToolDefinition[], param: string): ToolChoice {
  if (value === undefined || value === null) return 'auto';
  if (value === 'auto' || value === 'none' || value === 'required') return value;
  if (isObject(value) && value.type === 'mcp') {
    throw new RealtimeError('invalid_value', `Invalid value for '${param}': {"type": "mcp"} is not supported here; use 'required' to make the model call one of the tools.`, `${param}.type`);
  }
  if (isObject(value) && (value.type === 'function' || value.type === undefined)) {
    const name = (value as { name?: unknown }).name ?? (isObject(value.function) ? value.function.name : undefined);
    if (typeof name !== 'string' || name === '') throw new RealtimeError('missing_required_parameter', `'${param}.name' must name a function.`, `${param}.name`);
    if (!tools.some((t) => t.name === name)) {
      throw new RealtimeError('invalid_value', `Invalid '${param}': no tool named '${quoted(name)}' is offered.`, `${param}.name`);
    }
    return { type: 'function', name };
  }
  throw new RealtimeError('invalid_value', `Invalid value for '${param}': expected 'auto', 'none', 'required' or {"type":"function","name":...}.`, param);
}
