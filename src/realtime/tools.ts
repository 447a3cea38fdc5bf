/**
 * Tools a session (session.tools) or one response (response.create's `tools`) offers the model,
 * and how it may call them (tool_choice), validated like every other field: an error names the
 * offending element (`session.tools[1].parameters`) and nothing of a bad update is applied.
 *
 *  - `{type: "function", name, description?, parameters?}`: name 1..64 of [A-Za-z0-9_-] and unique,
 *    description up to MAX_TOOL_DESCRIPTION_CHARS, parameters a JSON Schema object (type "object"
 *    when it says a type) of at most MAX_TOOL_SCHEMA_CHARS as JSON. At most MAX_TOOLS tools.
 *  - `{type: "mcp", ...}` (a remote MCP server the session would connect to) is refused with
 *    `unsupported_tool_type`: this server makes no outbound connections on a client's behalf, and
 *    a tool accepted but never called would be worse than a refusal.
 *  - tool_choice: "auto", "none", "required", or `{type: "function", name}` naming one of the
 *    tools offered.
 *
 * Tools are echoed in the session and response objects in OpenAI's shape (`toolsJson`).
 */
import type { ToolChoice, ToolDefinition } from '../providers/llm/base.js';
import { RealtimeError, describeValue, isObject, quoted } from './protocol.js';

/** Tools one session or response may offer (OpenAI's limit). */
export const MAX_TOOLS = 128;
export const MAX_TOOL_DESCRIPTION_CHARS = 8192;
/** A tool's parameter schema, serialised: a generous bound for a real schema (a few kB). */
export const MAX_TOOL_SCHEMA_CHARS = 64 * 1024;
const NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Validates a `tools` array; `param` is where it sits ('session.tools' or 'response.tools'). */
export function parseTools(value: unknown, param: string): ToolDefinition[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new RealtimeError('invalid_type', `Invalid type for '${param}': expected an array of tools.`, param);
  if (value.length > MAX_TOOLS) {
    throw new RealtimeError(
      'array_above_max_length',
      `Invalid '${param}': array too long. Expected an array with maximum length ${MAX_TOOLS}, but got an array with length ${value.length} instead.`,
      param,
    );
  }
  const names = new Set<string>();
  return value.map((raw: unknown, i: number): ToolDefinition => {
    const p = `${param}[${i}]`;
    if (!isObject(raw)) throw new RealtimeError('invalid_type', `Invalid type for '${p}': expected an object.`, p);
    const type = raw.type ?? 'function';
    if (type === 'mcp') {
      throw new RealtimeError(
        'unsupported_tool_type',
        `MCP tools are not supported by this server (it makes no outbound connections for a session); declare the MCP server's tools as function tools and run them in your client.`,
        `${p}.type`,
      );
    }
    if (type !== 'function') throw new RealtimeError('invalid_value', `Invalid value for '${p}.type': ${describeValue(type)}; expected 'function'.`, `${p}.type`);
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
    return { name, description, parameters };
  });
}

/** Validates a tool_choice against the tools it may name. */
export function parseToolChoice(value: unknown, tools: readonly ToolDefinition[], param: string): ToolChoice {
  if (value === undefined || value === null) return 'auto';
  if (value === 'auto' || value === 'none' || value === 'required') return value;
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

/** Tools in OpenAI's session/response shape. */
export function toolsJson(tools: readonly ToolDefinition[]) {
  return tools.map((t) => ({ type: 'function' as const, name: t.name, description: t.description, parameters: t.parameters }));
}
