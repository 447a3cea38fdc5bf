/**
 * The playground's demo tools as session.update offers them (demo-tools.ts runs them in the page).
 * Data alone, no DOM: the tool bench (benchmarks/tool-calling.bench.ts) asks the embedded model
 * with exactly these definitions.
 */

/** A function tool as session.update carries it (OpenAI GA shape). */
export interface FunctionTool {
  type: 'function';
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export const DEMO_TOOLS: readonly FunctionTool[] = [
  {
    type: 'function',
    name: 'get_local_time',
    description: "The person's local date, time and time zone (from their browser). Use it when asked what time or day it is.",
    parameters: { type: 'object', properties: {} },
  },
  {
    type: 'function',
    name: 'set_background_color',
    description: "Changes the background colour of the person's page. Use it when asked to change the colour or background.",
    parameters: {
      type: 'object',
      properties: { color: { type: 'string', description: "A CSS colour name (e.g. 'teal') or a hex colour (e.g. '#336699')." } },
      required: ['color'],
    },
  },
];

