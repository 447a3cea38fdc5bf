/**
 * MCP configuration from the environment: which MCP servers a session may have this server reach
 * (the operator's allow-list, and whether private addresses are allowed), and how long a listing
 * and a call may take. Its rows are read by src/core/env.ts and merged by src/config.ts into
 * CONFIG_VARS (the table in docs/configuration.md); a bad value throws ConfigError naming the variable.
 *
 * MCP_ALLOWED_HOSTS: comma-separated host patterns, each `host`, `*.domain` (any subdomain) or
 * `*` (any host), optionally with `:port`. Empty (the default): no MCP server may be reached, and
 * a session declaring an MCP tool is told so. Whatever the list says, an address in a loopback,
 * private, link-local or otherwise non-public range is refused unless MCP_ALLOW_PRIVATE_ADDRESSES
 * is true (checked on the address actually connected to, so a name that resolves inward is refused).
 */
import { ConfigError } from '../../core/errors.js';
import { boolean, envVar, integer, readVars, type Env, type EnvVar, type Parser } from '../../core/env.js';

export interface McpHostPattern {
  /** Lower-case host, or `*.domain`, or `*`. */
  host: string;
  /** Null: any port. */
  port: number | null;
}

export interface McpConfig {
  allowedHosts: McpHostPattern[];
  allowPrivateAddresses: boolean;
  listTimeoutMs: number;
  callTimeoutMs: number;
}

const HOST_PATTERN = /^(\*|(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])$/;

const hostPatterns: Parser<McpHostPattern[]> = (t, name) => {
  if (t === '') return [];
  return t.split(',').map((raw) => {
    const entry = raw.trim().toLowerCase();
    const bracket = entry.startsWith('[') ? entry.indexOf(']') : -1;
    const colon = bracket >= 0 ? (entry[bracket + 1] === ':' ? bracket + 1 : -1) : entry.lastIndexOf(':');
    const host = colon >= 0 ? entry.slice(0, colon) : entry;
    const portText = colon >= 0 ? entry.slice(colon + 1) : null;
    const port = portText === null ? null : /^\d{1,5}$/.test(portText) ? Number(portText) : -1;
    if (!HOST_PATTERN.test(host) || (port !== null && (port < 1 || port > 65535))) {
      throw new ConfigError(name, `'${raw.trim()}' is not a host pattern: expected host, *.domain or * (each optionally :port), comma-separated`);
    }
    return { host, port };
  });
};

const VARS = {
  allowedHosts: envVar(
    'MCP_ALLOWED_HOSTS',
    '',
    'MCP servers sessions may have this server call (session `tools` of type mcp): comma-separated `host`, `*.domain` or `*`, each optionally `:port`. Empty: none (an MCP tool is refused with mcp_server_not_allowed).',
    hostPatterns,
  ),
  allowPrivateAddresses: envVar(
    'MCP_ALLOW_PRIVATE_ADDRESSES',
    'false',
    'Whether an allowed MCP host may be at a loopback, private or link-local address (checked on the address connected to). false: only public addresses.',
    boolean,
  ),
  listTimeoutMs: envVar('MCP_LIST_TIMEOUT_MS', '10000', "How long connecting to an MCP server and listing its tools may take before mcp_list_tools.failed, 500..120000.", integer(500, 120_000)),
  callTimeoutMs: envVar('MCP_CALL_TIMEOUT_MS', '15000', 'How long one MCP tool call may take before it fails (protocol_error -32001) and the model says so, 500..600000.', integer(500, 600_000)),
};

export const MCP_CONFIG_VARS: EnvVar[] = Object.values(VARS);

export function loadMcpConfig(env: Env = process.env): McpConfig {
  return readVars(env, VARS);
}
