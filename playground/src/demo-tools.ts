/**
 * Demo tools that the page answers itself (not the server), so a person can watch a function call
 * go round: main.ts offers them with session.update while "Demo tools" is on. The model calls one,
 * the page runs it, sends its output as a function_call_output item, then asks for the reply with
 * response.create, and the model speaks using the output.
 *
 *   get_local_time         this browser's local date, time and time zone
 *   set_background_color   {color: a CSS colour name or #hex}: the page's background; {ok, color}
 *
 * Outputs are JSON text, as the protocol carries them, and never throw: a name the page does not
 * know gets {"error":"unknown function"}, and arguments that are not a JSON object or a colour the
 * browser does not know get an error that says so. The model hears what went wrong and can say it.
 * Nothing here sends events: main.ts does, in the order the protocol wants.
 */

export { DEMO_TOOLS, type FunctionTool } from './demo-tool-definitions.js';

/** What a tool may change on the page. */
export interface ToolHost {
  setBackground(color: string): void;
}

/** A colour name (letters only) or #hex; CSS.supports then says whether the browser knows it. */
const COLOR_PATTERN = /^(?:[a-z]{3,30}|#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8}))$/i;
/** Words CSS takes where a colour goes that are not colours. */
const NOT_COLORS = new Set(['inherit', 'initial', 'unset', 'revert', 'currentcolor']);

export interface ToolResult {
  /** JSON text, for the function_call_output item. */
  output: string;
  /** The output is an error (`{"error": ...}`). */
  failed: boolean;
}

/** Runs the tool `name` with `args` (the model's JSON text). */
export function runDemoTool(name: string, args: string, host: ToolHost): ToolResult {
  const tool = TOOLS.get(name);
  if (!tool) return result({ error: 'unknown function' });
  let parsed: unknown;
  try {
    // A function without parameters may be called with no arguments at all.
    parsed = args.trim() === '' ? {} : JSON.parse(args);
  } catch {
    return result({ error: 'arguments are not valid JSON' });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return result({ error: 'arguments must be a JSON object' });
  return result(tool(parsed as Record<string, unknown>, host));
}

function result(value: Record<string, unknown>): ToolResult {
  return { output: JSON.stringify(value), failed: 'error' in value };
}

type Tool = (args: Record<string, unknown>, host: ToolHost) => Record<string, unknown>;

function localTime(): Record<string, unknown> {
  const now = new Date();
  const pad = (n: number): string => String(n).padStart(2, '0');
  const offset = -now.getTimezoneOffset();
  return {
    date: `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`,
    time: `${pad(now.getHours())}:${pad(now.getMinutes())}`,
    weekday: now.toLocaleDateString('en', { weekday: 'long' }),
    time_zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    utc_offset: `${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`,
  };
}

function setBackgroundColor(args: Record<string, unknown>, host: ToolHost): Record<string, unknown> {
  const color = typeof args.color === 'string' ? args.color.trim() : '';
  if (!COLOR_PATTERN.test(color) || NOT_COLORS.has(color.toLowerCase()) || !CSS.supports('color', color)) {
    return { error: `not a CSS colour name or hex colour: ${JSON.stringify(args.color ?? null)}` };
  }
  host.setBackground(color);
  return { ok: true, color };
}

/** A Map, not an object: a name such as 'toString' must not find Object.prototype's. */
const TOOLS = new Map<string, Tool>([
  ['get_local_time', localTime],
  ['set_background_color', setBackgroundColor],
]);
