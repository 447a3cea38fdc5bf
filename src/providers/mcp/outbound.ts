/**
 * The outbound policy for MCP servers: which URLs a session may have this server reach, enforced
 * twice: on the URL when a session declares the tool (check), and on the address actually
 * connected to (the guarded fetch's DNS lookup), so a name on the allow-list that resolves to a
 * loopback or private address, or changes its answer between the two, is still refused.
 *
 *  - http: and https: only; no credentials in the URL (headers carry them);
 *  - the host (and port) must match MCP_ALLOWED_HOSTS (providers/mcp/config.ts);
 *  - loopback, private, link-local, CGNAT, multicast and reserved ranges (IPv4 and IPv6, and
 *    IPv4-mapped IPv6) are refused unless MCP_ALLOW_PRIVATE_ADDRESSES;
 *  - redirects are not followed (a 3xx is an HTTP error), so a server cannot bounce a request
 *    inward.
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { Readable } from 'node:stream';
import type { LookupFunction } from 'node:net';
import { RefusedTarget } from './base.js';
import type { McpConfig, McpHostPattern } from './config.js';

/** Longest server_url accepted. */
export const MAX_MCP_URL_CHARS = 2048;

const NON_PUBLIC = new net.BlockList();
for (const [prefix, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NON_PUBLIC.addSubnet(prefix, bits, 'ipv4');
for (const [prefix, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['64:ff9b::', 96]] as const) {
  NON_PUBLIC.addSubnet(prefix, bits, 'ipv6');
}

/** Whether `address` (an IP literal) is outside the public unicast ranges. */
export function isNonPublicAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return NON_PUBLIC.check(address, 'ipv4');
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return NON_PUBLIC.check(mapped[1] as string, 'ipv4');
  return NON_PUBLIC.check(address, 'ipv6');
}

type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

export class OutboundPolicy {
  constructor(private readonly config: Pick<McpConfig, 'allowedHosts' | 'allowPrivateAddresses'>) {}

  /** The URL, checked against the policy; throws RefusedTarget saying why (never echoing secrets). */
  checkUrl(raw: string | URL): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new RefusedTarget('server_url is not a valid URL.');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RefusedTarget(`server_url must be http: or https:, not ${url.protocol}`);
    if (url.username !== '' || url.password !== '') throw new RefusedTarget('server_url may not carry credentials; send them in headers or authorization.');
    const host = url.hostname.toLowerCase();
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    if (this.config.allowedHosts.length === 0) {
      throw new RefusedTarget('this server reaches no MCP servers: its operator has allowed none (MCP_ALLOWED_HOSTS).');
    }
    if (!this.config.allowedHosts.some((p) => matches(p, host, port))) {
      throw new RefusedTarget(`host '${host}' (port ${port}) is not among the MCP servers this server's operator allows (MCP_ALLOWED_HOSTS).`);
    }
    const literal = host.startsWith('[') ? host.slice(1, -1) : host;
    if (net.isIP(literal) !== 0 && !this.config.allowPrivateAddresses && isNonPublicAddress(literal)) {
      throw new RefusedTarget(`address ${literal} is loopback, private or reserved; this server's operator allows only public addresses (MCP_ALLOW_PRIVATE_ADDRESSES).`);
    }
    return url;
  }

  /** A fetch that applies the policy to every request and to the addresses it connects to. */
  readonly fetch: FetchLike = (input, init) => {
    const url = this.checkUrl(input);
    const transport = url.protocol === 'https:' ? https : http;
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, key) => (headers[key] = value));
    const body = init?.body;
    if (body !== undefined && body !== null && typeof body !== 'string') return Promise.reject(new TypeError('the MCP client sent a body that is not text'));
    return new Promise<Response>((resolve, reject) => {
      const req = transport.request(url, { method: init?.method ?? 'GET', headers, lookup: this.lookup, signal: init?.signal ?? undefined }, (res) => {
        const status = res.statusCode ?? 502;
        const responseHeaders = new Headers();
        for (const [key, value] of Object.entries(res.headers)) {
          if (Array.isArray(value)) for (const v of value) responseHeaders.append(key, v);
          else if (value !== undefined) responseHeaders.set(key, value);
        }
        const empty = status === 204 || status === 205 || status === 304 || init?.method === 'HEAD';
        if (empty) res.resume();
        resolve(new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage, headers: responseHeaders }));
      });
      req.on('error', reject);
      req.end(body ?? undefined);
    });
  };

  /** dns.lookup, refusing a name that resolves to an address the policy does not allow. */
  private readonly lookup: LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as dns.LookupAddress[];
      const inward = this.config.allowPrivateAddresses ? undefined : list.find((a) => isNonPublicAddress(a.address));
      if (inward) {
        return callback(
          Object.assign(new RefusedTarget(`'${hostname}' resolves to ${inward.address}, which is loopback, private or reserved; this server's operator allows only public addresses (MCP_ALLOW_PRIVATE_ADDRESSES).`), { code: 'EREFUSEDTARGET' }),
          '',
          4,
        );
      }
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`'${hostname}' has no address`), { code: 'ENOTFOUND' }), '', 4);
      callback(null, first.address, first.family);
    });
  };
}

function matches(pattern: McpHostPattern, host: string, port: number): boolean {
  if (pattern.port !== null && pattern.port !== port) return false;
  if (pattern.host === '*') return true;
  if (pattern.host.startsWith('*.')) return host.endsWith(pattern.host.slice(1)) && host.length > pattern.host.length - 1;
  return pattern.host === host;
}
