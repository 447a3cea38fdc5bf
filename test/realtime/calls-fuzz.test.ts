/**
 * The WebRTC call surface under attack, against the real server in its own process (so a crash is
 * an exit, not a dead test runner; LLM_PROVIDER offline, the real media plane and transport):
 *
 * 1. Offers: a seeded stream of malformed, oversized and hostile SDP offers to POST
 *    /v1/realtime/calls, as application/sdp, multipart (sdp and session parts) and JSON bodies:
 *    truncated and garbled lines, hundreds of m-lines, thousands of candidates and attributes,
 *    enormous lines, invalid UTF-8, NULs, wrong ports, missing or duplicated ICE and DTLS fields,
 *    unsupported codecs only, missing and huge boundaries, oversized parts, and slowloris bodies
 *    beside them. Every hostile offer is a 4xx with the {"error":{message,type,code,param}} shape
 *    (413 when too large); offers that are odd but usable may be answered, and are hung up at once.
 *    Slowloris bodies (a byte every 200 ms) are answered 408 at the offer's body deadline.
 * 2. Events on a real call's data channel (the client is node-datachannel in this process): the
 *    WebSocket fuzz corpus (test/helpers/fuzz.ts, buildRealtimeCase), each case followed by a probe
 *    that must be answered; errors name their events; the call stays up.
 * 3. Garbage UDP at the call's port (read from the answer's candidates), from a stranger's socket
 *    and from the client's own address (a UDP relay in this test carries the call, so the packets
 *    it saw are replayed, bit-flipped and cut from where the client's come from): random bytes,
 *    malformed STUN, DTLS and RTP/RTCP. The call keeps working: media still reaches the client and
 *    the data channel still answers.
 * 4. Storms of calls that never connect (no ICE at all) and that complete ICE but never DTLS (a
 *    minimal ICE agent in this test answers the server's checks and nominates, then ignores its
 *    DTLS): their slots are freed within the pending-start timeout (PENDING_START_TIMEOUT_MS) plus
 *    slack, their sessions cancelled and never billed.
 *
 * Throughout: /healthz keeps answering within HEALTH_DEADLINE_MS, the process safety net counts no
 * escaped error (avatar_process_escaped_errors), and no slot is left used.
 *
 * FUZZ_SEED replays a run; FUZZ_CALLS_CASES, FUZZ_CALLS_TIME_BUDGET_MS and FUZZ_CALLS_DC_TIME_BUDGET_MS change its size.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import ndc from 'node-datachannel';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { PENDING_START_TIMEOUT_MS } from '../../src/sessions/session-service.js';
import { OFFER_BODY_DEADLINE_MS } from '../../src/signaling/realtime-calls.js';
import { MAX_OFFER_BYTES } from '../../src/transport/sdp.js';
import {
  Rng,
  buildRealtimeCase,
  checkCaseErrors,
  decodeStun,
  encodeStun,
  deepJsonText,
  fuzzSeed,
  hostileDatagram,
  iceBindingRequest,
  iceBindingSuccess,
  learnRealtime,
  oddJson,
  oddString,
  type RealtimeKnown,
  type UdpTarget,
} from '../helpers/fuzz.js';
import { watchHealth } from '../helpers/health.js';
import { spawnServer, type ServerProcess } from '../../harness/servers/process.js';
import { REPO_ROOT, request, tempDir } from '../../harness/servers/server.js';
import { until } from '../../harness/servers/wait.js';

const OFFER_CASES = Number(process.env.FUZZ_CALLS_CASES) || 3000;
/** Offer cases stop being issued after this long, so a loaded machine bounds the suite's time, not its coverage. */
const OFFER_TIME_BUDGET_MS = Number(process.env.FUZZ_CALLS_TIME_BUDGET_MS) || 40_000;
/** A run on a very loaded machine must still have tried this many offer cases to count. */
const MIN_OFFER_CASES = 500;
const CONCURRENCY = 6;
/** Data-channel cases stop after this long. */
const DC_TIME_BUDGET_MS = Number(process.env.FUZZ_CALLS_DC_TIME_BUDGET_MS) || 25_000;
const MIN_DC_CASES = 150;
/** A request, or a case's probe, with no answer in this long is a failure. */
const CASE_TIMEOUT_MS = 20_000;
const HEALTH_INTERVAL_MS = 100;
/** /healthz must answer within this long: a request that blocks the event loop for seconds shows; load noise does not. */
const HEALTH_DEADLINE_MS = 2_000;
/** The server's JSON (and offer body) limit, as spawned here. */
const MAX_BODY_BYTES = 1024 * 1024;
/** Slots of the server under test: the storms take 24 at once. */
const CAPACITY = 32;
/** Calls in each storm. */
const STORM_CALLS = 12;
/** Beyond a server deadline (the pending-start timeout, the offer body's), the slack a loaded machine gets. */
const SLACK_MS = 10_000;

const FIXTURES = path.join(REPO_ROOT, 'test/fixtures/sdp');
const BASE_OFFERS = ['chromium-audio-video-dc.sdp', 'chromium-dc-only.sdp', 'chromium-vp8-only.sdp'].map((f) => fs.readFileSync(path.join(FIXTURES, f), 'utf8').replace(/\r?\n/g, '\r\n'));

interface Ctx {
  proc: ServerProcess;
  dataDir: string;
  key: string;
  /** Printed at the end, for docs/webrtc.md (Under attack). */
  figures: string[];
}

// ── The offers ────────────────────────────────────────────────────────────────

interface OfferCase {
  headers: Record<string, string>;
  body: Buffer;
  describe: string;
  /** Odd but usable: a 201 is a right answer (the call is hung up at once). */
  mayAnswer: boolean;
  /** Too large: must be a 413 ('yes'), must not be ('no'), or may be (an oversized offer in a form that may fail first). */
  tooLarge: 'yes' | 'no' | 'maybe';
  /** How the offer was sent, for the counts. */
  form: string;
}

interface SdpCase {
  sdp: Buffer;
  describe: string;
  mayAnswer: boolean;
}

const lines = (sdp: string) => sdp.split('\r\n').filter((l) => l !== '');
const join = (ls: string[]) => ls.join('\r\n') + '\r\n';

function randomIp(rng: Rng): string {
  return rng.pick([
    () => '127.0.0.1',
    () => `${rng.int(0, 255)}.${rng.int(0, 255)}.${rng.int(0, 255)}.${rng.int(0, 255)}`,
    () => rng.pick(['0.0.0.0', '255.255.255.255', '224.0.0.1', '::', '::1', 'fe80::1%eth0', '[::1]', '999.1.1.1', '1.2.3', '']),
    () => `${rng.bytes(6).toString('hex')}.local`,
    () => rng.pick(['localhost', 'x.invalid', 'a'.repeat(300), oddString(rng, 40).replace(/\s/g, '')]),
  ])();
}

function candidateLine(rng: Rng, i: number): string {
  const port = rng.pick([rng.int(1, 65535), 0, -1, 65536, 99999999999, 9]);
  const typ = rng.pick(['host', 'srflx', 'relay', 'prflx', 'bogus']);
  const proto = rng.pick(['udp', 'UDP', 'tcp', 'sctp', 'x']);
  const base = `a=candidate:${i} ${rng.pick([1, 2, 0, 256])} ${proto} ${rng.pick([2122260223, 0, 4294967295, -1])} ${randomIp(rng)} ${port} typ ${typ}`;
  return rng.chance(0.2) ? base + ` raddr ${randomIp(rng)} rport ${rng.int(0, 70000)} tcptype ${rng.pick(['active', 'passive', 'so', 'x'])}` : base;
}

/** A garbage line for the middle of an offer. */
function garbageLine(rng: Rng): string {
  return rng.pick<() => string>([
    () => oddString(rng, 200),
    () => rng.pick(['a=', 'm=', '=', 'm=audio', 'm=video 9', 'm=application 9 UDP/DTLS/SCTP', 'v=1', 'o=', 'c=IN IP4', 'a=mid:', 'a=setup:', 'a=group:BUNDLE']),
    () => `a=rtpmap:${rng.pick(['', 'x', '-1', '999999', '111'])} ${rng.pick(['opus', 'H264', 'VP8', ''])}/${rng.pick(['48000', '0', '-1', 'x', '99999999999999999999'])}/${rng.pick(['2', '0', '255', ''])}`,
    () => `a=fmtp:${rng.pick(['102', '111', '96', 'x'])} ${'x=y;'.repeat(rng.int(0, 3000))}`,
    () => `a=rtcp-fb:${rng.pick(['*', '96', '102'])} ${rng.pick(['nack', 'nack pli', 'ccm fir', 'goog-remb', oddString(rng, 50)])}`,
    () => `a=ssrc:${rng.pick(['0', '4294967296', '-1', 'x'])} cname:${oddString(rng, 50)}`,
    () => `a=extmap:${rng.pick(['0', '15', '256', '-1', 'x'])} ${oddString(rng, 80)}`,
    () => `a=ssrc-group:FID ${Array.from({ length: rng.int(0, 200) }, () => rng.int(0, 2 ** 32)).join(' ')}`,
    () => `a=msid:${oddString(rng, 100)}`,
    () => `a=simulcast:send ${Array.from({ length: rng.int(1, 100) }, (_, i) => `r${i}`).join(';')}`,
    () => `a=rid:${oddString(rng, 20)} send pt=${rng.int(0, 200)}`,
    () => candidateLine(rng, rng.int(0, 9)),
    () => `a=${oddString(rng, 30).replace(/[\r\n]/g, '')}:${oddString(rng, 100).replace(/[\r\n]/g, '')}`,
  ])();
}

/** Replaces every line that starts with `prefix` by `value` (or removes them: null). */
function replaceLines(sdp: string, prefix: string, value: ((line: string) => string) | null): string {
  return join(lines(sdp).flatMap((l) => (l.startsWith(prefix) ? (value ? [value(l)] : []) : [l])));
}

function sdpCase(rng: Rng): SdpCase {
  const base = rng.pick(BASE_OFFERS);
  const text = (sdp: string, describe: string, mayAnswer: boolean): SdpCase => ({ sdp: Buffer.from(sdp), describe, mayAnswer });
  const ls = lines(base);
  switch (rng.int(0, 21)) {
    case 0:
      return text(base.slice(0, rng.int(0, base.length - 1)), 'truncated', true);
    case 1: {
      const at = rng.int(1, ls.length - 1);
      ls.splice(at, rng.chance(0.5) ? 1 : 0, ...Array.from({ length: rng.int(1, 5) }, () => garbageLine(rng)));
      return text(join(ls), 'garbled lines', true);
    }
    case 2: {
      // Hundreds of media sections (some past the offer limit).
      const n = rng.pick([40, 200, 1000, 3000]);
      const extra = Array.from({ length: n }, (_, i) => `m=${rng.pick(['application 9 UDP/DTLS/SCTP webrtc-datachannel', 'audio 9 UDP/TLS/RTP/SAVPF 111', 'video 9 UDP/TLS/RTP/SAVPF 96'])}\r\na=mid:x${i}\r\na=rtpmap:111 opus/48000/2\r\na=rtpmap:96 VP8/90000\r\n`).join('');
      return text(base + extra, `${n} more m-lines`, false);
    }
    case 3: {
      // Thousands of candidates, or a few hostile ones.
      const n = rng.pick([1, 3, 10, 200, 2000]);
      const candidates = Array.from({ length: n }, (_, i) => candidateLine(rng, i));
      const at = ls.findIndex((l) => l.startsWith('a=mid:')) + 1;
      ls.splice(at, 0, ...candidates);
      return text(join(ls), `${n} candidates`, n <= 10);
    }
    case 4: {
      const n = rng.pick([100, 1000, 5000, 20_000]);
      ls.splice(rng.int(1, ls.length - 1), 0, ...Array.from({ length: n }, (_, i) => `a=x-fuzz-${i}:${rng.int(0, 1e9)}`));
      return text(join(ls), `${n} more attributes`, n < 5000);
    }
    case 5: {
      // One enormous line, under or over the limit.
      const size = rng.pick([10_000, 60_000, 70_000, 200_000]);
      const line = rng.pick(['a=ice-ufrag:', 'a=ice-pwd:', 'a=fingerprint:sha-256 ', 'a=fmtp:111 ', 'a=mid:', 's=', 'a=x-long:']) + 'A'.repeat(size);
      ls.splice(rng.int(1, ls.length - 1), 0, line);
      return text(join(ls), `a ${size}-byte line`, size < MAX_OFFER_BYTES - base.length);
    }
    case 6: {
      // Invalid UTF-8 or NULs inside lines.
      const at = rng.int(0, ls.length - 1);
      const parts = join(ls.slice(0, at)) + ls[at]!.slice(0, 3);
      const rest = ls[at]!.slice(3) + '\r\n' + join(ls.slice(at + 1));
      const junk = rng.pick([Buffer.from([0xff, 0xfe]), Buffer.from([0xc0, 0x80]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0]), Buffer.alloc(rng.int(1, 100)), rng.bytes(rng.int(1, 50))]);
      return { sdp: Buffer.concat([Buffer.from(parts), junk, Buffer.from(rest)]), describe: 'invalid UTF-8 or NULs in a line', mayAnswer: true };
    }
    case 7: {
      const port = rng.pick(['0', '-1', '70000', '99999999999999999999', 'abc', '9/2', '9/0', '', '1e5']);
      const all = rng.chance(0.3);
      let first = true;
      const sdp = join(ls.map((l) => (l.startsWith('m=') && (all || first) ? ((first = false), l.replace(/^(m=\S+) \S+/, `$1 ${port}`)) : l)));
      return text(sdp, `m-line port ${port}${all ? ' on every section' : ''}`, !(all && port === '0'));
    }
    case 8: {
      const field = rng.pick(['a=ice-ufrag', 'a=ice-pwd', 'a=fingerprint', 'a=mid', 'v=0', 'm=']);
      return text(replaceLines(base, field, null), `no ${field}`, false);
    }
    case 9: {
      // A field duplicated, with another value.
      const field = rng.pick(['a=ice-ufrag:', 'a=ice-pwd:', 'a=fingerprint:', 'a=setup:', 'a=mid:', 'a=rtpmap:111 ', 'a=sctp-port:', 'a=max-message-size:', 'a=group:BUNDLE', 'v=', 'o=', 'a=sendrecv']);
      const other = field === 'a=rtpmap:111 ' ? 'PCMU/8000' : field === 'a=fingerprint:' ? `sha-256 ${rng.bytes(32).toString('hex').toUpperCase().match(/../g)!.join(':')}` : oddString(rng, 40).replace(/[\r\n]/g, '') || 'x';
      return text(join(ls.flatMap((l) => (l.startsWith(field) ? [l, field + other] : [l]))), `${field} duplicated`, true);
    }
    case 10: {
      // A whole section duplicated, its mid included.
      const start = ls.findIndex((l) => l.startsWith('m='));
      const section = ls.slice(start, ls.findIndex((l, i) => i > start && l.startsWith('m=')) >>> 0 || ls.length);
      return text(join([...ls, ...section]), 'a media section twice, same mid', false);
    }
    case 11: {
      // Codecs this server does not use, and nothing else.
      const noAudio = replaceLines(base, 'a=rtpmap:111 ', () => 'a=rtpmap:111 PCMU/8000').replace(/opus\/48000\/2/gi, 'G722/8000');
      const noVideo = noAudio.replace(/(H264|VP8)\/90000/g, 'VP9/90000');
      return text(noVideo.replace(/m=application[^]*?(?=m=|$)/, ''), 'unsupported codecs only', base.includes('m=audio') || base.includes('m=video') ? false : true);
    }
    case 12: {
      const fp = rng.pick(['sha-256 ZZ', 'md5 00', 'sha-256', '', 'sha-999 ' + '00:'.repeat(32), 'sha-256 ' + '0'.repeat(5000), `sha-1 ${'AB:'.repeat(19)}AB`]);
      return text(replaceLines(base, 'a=fingerprint:', () => `a=fingerprint:${fp}`), `fingerprint '${fp.slice(0, 20)}'`, true);
    }
    case 13: {
      const value = rng.pick(['a=setup:passive', 'a=setup:active', 'a=setup:holdconn', 'a=setup:x', 'a=sctp-port:0', 'a=sctp-port:70000', 'a=max-message-size:0', 'a=max-message-size:99999999999999999999', 'a=max-message-size:-5', 'a=inactive', 'a=sendonly', 'a=ice-lite', 'a=ice-options:ice2', 'a=ice-ufrag:a', 'a=ice-pwd:short']);
      const prefix = value.split(':')[0]!.startsWith('a=setup') ? 'a=setup:' : value.startsWith('a=sctp') ? 'a=sctp-port:' : value.startsWith('a=max-message') ? 'a=max-message-size:' : value.startsWith('a=ice-ufrag') ? 'a=ice-ufrag:' : value.startsWith('a=ice-pwd') ? 'a=ice-pwd:' : 'a=mid:';
      const sdp = prefix === 'a=mid:' ? replaceLines(base, 'a=mid:', (l) => `${l}\r\n${value}`) : replaceLines(base, prefix, () => value);
      return text(sdp, `'${value}'`, true);
    }
    case 14: {
      const mids = rng.pick([[], ['9'], Array.from({ length: 2000 }, (_, i) => String(i))]);
      return text(replaceLines(base, 'a=group:BUNDLE', () => `a=group:BUNDLE ${mids.join(' ')}`), `BUNDLE of ${mids.length} mids`, true);
    }
    case 15: {
      const eol = rng.pick(['\r', '\n\r', '\r\r\n', '\u2028', ' ']);
      return text(ls.join(eol), `lines ended by ${JSON.stringify(eol)}`, eol === '\r\r\n');
    }
    case 16:
      return text(oddString(rng, 3000), 'not SDP', false);
    case 17:
      return { sdp: rng.bytes(rng.int(1, 8000)), describe: 'random bytes', mayAnswer: false };
    case 18: {
      // Only rejected sections (port 0), or none live.
      return text(join(ls.map((l) => l.replace(/^(m=\S+) \d+/, '$1 0'))), 'every section rejected', false);
    }
    case 19: {
      // Every line repeated many times.
      const n = rng.int(2, 30);
      return text(join(ls.flatMap((l) => (l.startsWith('a=') ? Array(n).fill(l) : [l]))), `every attribute ${n} times`, true);
    }
    case 20: {
      // Payload types out of range, and codecs that are nearly ours.
      const pt = rng.pick(['128', '-1', '999', '35.5', '']);
      return text(base.replace(/a=rtpmap:111 opus\/48000\/2/, `a=rtpmap:${pt} opus/48000/2`).replace(/(m=audio \d+ \S+) 111/, `$1 ${pt}`), `Opus on payload type '${pt}'`, true);
    }
    default:
      return text(base, 'valid', true);
  }
}

function multipartBody(rng: Rng, sdp: Buffer, session: string | null): { body: Buffer; contentType: string; describe: string; intact: boolean; oversizedPart: boolean; partsMayDrop: boolean } {
  const boundary = rng.chance(0.85) ? `----fuzz${rng.int(0, 1e9)}` : rng.pick(['b', 'x'.repeat(70), 'y'.repeat(rng.pick([71, 1000, 8000])), '--', '"quoted"', '=?']);
  const asFile = rng.chance(0.3);
  const part = (name: string, value: Buffer | string, file: boolean) =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${name}"` : ''}\r\n${file ? `Content-Type: ${name === 'sdp' ? 'application/sdp' : 'application/json'}\r\n` : ''}\r\n`),
      Buffer.isBuffer(value) ? value : Buffer.from(value),
      Buffer.from('\r\n'),
    ]);
  const parts: Buffer[] = [];
  let intact = true;
  let tooLarge = false;
  let describe = asFile ? 'file parts' : 'fields';
  const extra = rng.next();
  if (extra < 0.1) {
    parts.push(...Array.from({ length: rng.int(1, 30) }, (_, i) => part(`x${i}`, oddString(rng, 100), rng.chance(0.5))));
    describe += ', extra parts';
  }
  if (rng.chance(0.93)) parts.push(part('sdp', sdp, asFile));
  else {
    intact = false;
    describe += ', no sdp part';
  }
  if (session !== null) parts.push(part('session', session, asFile));
  const r = rng.next();
  if (r < 0.05) {
    parts.push(part('sdp', Buffer.alloc(MAX_BODY_BYTES + 1000, 'a'), asFile));
    (tooLarge = true), (intact = false), (describe += ', an oversized part');
  } else if (r < 0.08) {
    // Of two parts of one name, the first file part counts, or the last field.
    parts.unshift(part('sdp', rng.bytes(100), asFile));
    describe += ', two sdp parts (garbage first)';
    if (asFile) intact = false;
  }
  const end = rng.next();
  if (end < 0.75) parts.push(Buffer.from(`--${boundary}--\r\n`));
  else if (end < 0.85) (intact = false), (describe += ', cut inside a part'), parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-da`));
  else if (end < 0.92) describe += ', no closing boundary';
  else parts.push(Buffer.from(`--${boundary}--\r\n`), rng.bytes(rng.int(1, 500))), (describe += ', bytes after the end');
  let body = Buffer.concat(parts);
  // Bytes after the closing boundary are no part of the form: a cut among them leaves it whole.
  const formEnds = describe.endsWith(', bytes after the end') ? body.length - (parts.at(-1)?.length ?? 0) : body.length;
  if (rng.chance(0.05)) {
    body = body.subarray(0, rng.int(0, body.length));
    if (body.length < formEnds) (intact = false), (describe += ', cut short');
    else describe += ', cut short after the closing boundary';
  }
  let contentType = `multipart/form-data; boundary=${boundary}`;
  const t = rng.next();
  if (t < 0.05) (contentType = 'multipart/form-data'), (intact = false), (describe += ', no boundary parameter');
  else if (t < 0.08) (contentType = 'multipart/form-data; boundary=other'), (intact = false), (describe += ', the wrong boundary');
  else if (t < 0.1) (contentType = `multipart/form-data; boundary="${boundary}"`), (describe += ', a quoted boundary');
  else if (t < 0.12) (contentType = `multipart/mixed; boundary=${boundary}`), (intact = false), (describe += ', multipart/mixed');
  // Odd boundaries (over RFC 2046's 70 characters, quotes, '=?'): a reader may take them or not.
  describe += ` (boundary of ${boundary.length})`;
  return { body, contentType, describe, intact, oversizedPart: tooLarge, partsMayDrop: extra < 0.1 };
}

function sessionPart(rng: Rng): { value: string | null; usable: boolean } {
  const r = rng.next();
  if (r < 0.5) return { value: null, usable: true };
  if (r < 0.7) return { value: JSON.stringify({ type: 'realtime', instructions: 'Be brief.' }), usable: true };
  if (r < 0.8) return { value: rng.pick(['{"type":', 'null', '[]', '"x"', '{"type":"realtime","voice":"nobody"}', '{"type":"realtime","video_codec":"av1"}']), usable: false };
  // Odd values, some of which happen to be usable configs ({}, "", {"type":"realtime"}).
  if (r < 0.9) return { value: JSON.stringify(oddJson(rng)) ?? 'null', usable: true };
  if (r < 0.95) return { value: deepJsonText(rng.pick([100, 10_000, 100_000]), rng), usable: false };
  return { value: `{"type":"realtime","instructions":"${'z'.repeat(rng.pick([5000, 2_000_000]))}"}`, usable: true };
}

function offerCase(rng: Rng, key: string): OfferCase {
  const sdp = sdpCase(rng);
  const session = sessionPart(rng);
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  const form = rng.next();
  let body: Buffer;
  let describe: string;
  let mayAnswer = sdp.mayAnswer;
  let tooLarge = false;
  let formName: string;
  // Measured as the server reads it (invalid UTF-8 becomes U+FFFD, three bytes).
  let oversizedOffer = Buffer.byteLength(sdp.sdp.toString('utf8')) > MAX_OFFER_BYTES;
  let offerSizeChecked = false;
  let maybeLarge = false;
  if (form < 0.5) {
    body = sdp.sdp;
    headers['content-type'] = rng.pick(['application/sdp', 'application/sdp', 'text/plain', 'application/sdp; charset=utf-8']);
    describe = `${headers['content-type']}: ${sdp.describe}`;
    formName = 'application/sdp';
    offerSizeChecked = true;
  } else if (form < 0.8) {
    const m = multipartBody(rng, sdp.sdp, session.value);
    body = m.body;
    headers['content-type'] = m.contentType;
    // Past the form's part limits (extra parts first), the session part may not be read at all.
    mayAnswer &&= m.intact && (session.usable || m.partsMayDrop);
    maybeLarge = m.oversizedPart;
    describe = `multipart ${m.describe}: ${sdp.describe}`;
    formName = 'multipart';
  } else if (form < 0.88) {
    const asText = rng.chance(0.8);
    const sdpValue = asText ? sdp.sdp.toString('utf8') : oddJson(rng);
    body = Buffer.from(JSON.stringify({ sdp: sdpValue, ...(session.value !== null && rng.chance(0.5) ? { session: rng.chance(0.5) ? session.value : oddJson(rng) } : {}) }) ?? '{}');
    headers['content-type'] = 'application/json';
    describe = `json: ${sdp.describe}`;
    formName = 'json';
    // The session sent here is the generated one or any JSON value (an object may be a usable config).
    mayAnswer = asText && sdp.mayAnswer;
    oversizedOffer = typeof sdpValue === 'string' && Buffer.byteLength(sdpValue) > MAX_OFFER_BYTES;
    offerSizeChecked = true;
  } else if (form < 0.93) {
    // Too large for any form.
    body = Buffer.concat([sdp.sdp, Buffer.alloc(MAX_BODY_BYTES + rng.int(1, 4 * MAX_BODY_BYTES), 'a')]);
    headers['content-type'] = rng.pick(['application/sdp', 'application/json', 'multipart/form-data; boundary=x']);
    tooLarge = true;
    mayAnswer = false;
    describe = `a ${body.length}-byte body`;
    formName = 'oversized body';
  } else {
    body = sdp.sdp;
    headers['content-type'] = rng.pick(['image/png', 'application/x-www-form-urlencoded', 'application/octet-stream', 'x/\u00e9'.replace(/[^\x20-\x7e]/g, '?'), 'multipart/related; boundary=x']);
    mayAnswer = false;
    describe = `${headers['content-type']}: ${sdp.describe}`;
    formName = 'other content type';
  }
  // Any body over the limit is refused by its Content-Length before anything else; an offer over
  // its own limit is too large in any form that gets as far as reading it (a form refused earlier
  // for another reason, a broken multipart, may be answered with that reason instead).
  tooLarge ||= body.length > MAX_BODY_BYTES;
  const size: OfferCase['tooLarge'] = tooLarge || (oversizedOffer && offerSizeChecked) ? 'yes' : oversizedOffer || maybeLarge ? 'maybe' : 'no';
  return { headers, body, describe: `${describe} [${body.length} B]`, mayAnswer: mayAnswer && !oversizedOffer && !tooLarge, tooLarge: size, form: formName };
}

interface Answer {
  status: number;
  contentType: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function post(base: URL, agent: http.Agent | false, pathName: string, headers: Record<string, string | number>, body: Buffer | null, timeoutMs = CASE_TIMEOUT_MS): Promise<Answer | null> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: base.hostname, port: base.port, method: 'POST', path: pathName, headers: { ...headers, ...(body ? { 'content-length': body.length } : {}) }, agent, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    // The server may answer (413, 415) and close before the whole body is sent: that is an answer, unread.
    req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? resolve(null) : reject(err)));
    if (body) req.write(body);
    req.end();
  });
}

/** Null when `a` is a well-formed error answer; what is wrong otherwise. */
function errorShapeProblem(a: Answer): string | null {
  let parsed: { error?: Record<string, unknown> };
  try {
    parsed = JSON.parse(a.body.toString()) as { error?: Record<string, unknown> };
  } catch {
    return `${a.status} without a JSON error body: ${a.body.toString().slice(0, 200)}`;
  }
  const e = parsed?.error;
  const shaped = e && typeof e.message === 'string' && e.message !== '' && typeof e.type === 'string' && typeof e.code === 'string' && (e.param === null || typeof e.param === 'string');
  return shaped ? null : `${a.status} with a malformed error body: ${a.body.toString().slice(0, 200)}`;
}

/**
 * A client that sends an offer's body a byte at a time, slowly (slowloris): the server must
 * answer it (408) within its body deadline rather than hold the socket, and meanwhile serve others.
 */
function slowloris(base: URL, key: string, rng: Rng): Promise<{ status: number; afterMs: number; body: string }> {
  const started = performance.now();
  const offer = Buffer.from(rng.pick(BASE_OFFERS));
  const multipart = rng.chance(0.5);
  const body = multipart ? Buffer.concat([Buffer.from('--S\r\nContent-Disposition: form-data; name="sdp"\r\n\r\n'), offer, Buffer.from('\r\n--S--\r\n')]) : offer;
  return new Promise((resolve) => {
    const socket = net.connect(Number(base.port), base.hostname);
    let got = '';
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < body.length && !socket.destroyed) socket.write(body.subarray(sent, ++sent));
    }, 200);
    socket.setTimeout(120_000, () => socket.destroy());
    socket.on('data', (d) => (got += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(got)?.[1] ?? 0), afterMs: performance.now() - started, body: got.split('\r\n\r\n').slice(1).join('\r\n\r\n') });
    });
    socket.write(
      `POST /v1/realtime/calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: ${multipart ? 'multipart/form-data; boundary=S' : 'application/sdp'}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
    );
  });
}

// ── Server state ──────────────────────────────────────────────────────────────

async function metricsOf(ctx: Ctx): Promise<{ slotsUsed: number; sessions: Record<string, number>; escaped: Array<[string, number]> }> {
  const text = (await request(ctx.proc.url, 'GET', '/metrics')).text;
  const slotsUsed = Number(/^avatar_worker_slots\{state="used"\} (\d+)$/m.exec(text)?.[1] ?? NaN);
  const sessions = Object.fromEntries([...text.matchAll(/^avatar_sessions\{status="(\w+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
  const escaped = [...text.matchAll(/^avatar_process_escaped_errors\{kind="(\w+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])] as [string, number]);
  return { slotsUsed, sessions, escaped };
}

async function assertNothingEscaped(ctx: Ctx): Promise<void> {
  assert.is(ctx.proc.child.exitCode, null, `the server exited:\n${ctx.proc.stdout().slice(-3000)}`);
  const { escaped } = await metricsOf(ctx);
  assert.equal(escaped, [['uncaught_exception', 0], ['unhandled_rejection', 0]], `errors escaped their handlers:\n${ctx.proc.stdout().slice(-3000)}`);
}

async function hangup(ctx: Ctx, callId: string): Promise<void> {
  const res = await request(ctx.proc.url, 'POST', `/v1/realtime/calls/${callId}/hangup`, { key: ctx.key });
  if (res.status !== 200) throw new Error(`hangup of ${callId}: ${res.status} ${res.text}`);
}

// ── The suite ─────────────────────────────────────────────────────────────────

const Fuzz = suite<Ctx>('WebRTC call fuzz', {} as Ctx);

Fuzz.before(async (ctx) => {
  ctx.dataDir = tempDir('avatar-calls-fuzz-');
  ctx.figures = [];
  ctx.proc = await spawnServer({
    DATA_DIR: ctx.dataDir,
    LOG_LEVEL: 'warn',
    // The WebRTC stack's errors, so a call it ends says why (the known limit below).
    RTC_NATIVE_LOG: 'error',
    RATE_LIMIT_PER_MINUTE: '0',
    AUTH_FAILURES_PER_MINUTE: '0',
    WORKER_CAPACITY: String(CAPACITY),
    LLM_PROVIDER: 'offline',
  });
  assert.ok(ctx.proc.bootstrapKey, 'the server printed its first key');
  ctx.key = ctx.proc.bootstrapKey!;
});

Fuzz.after(async (ctx) => {
  if (ctx.proc.child.exitCode === null) {
    ctx.proc.child.kill('SIGTERM');
    await ctx.proc.exited;
  }
  ndc.cleanup();
  fs.rmSync(ctx.dataDir, { recursive: true, force: true });
  console.log(`  calls fuzz figures:\n    ${ctx.figures.join('\n    ')}`);
});

Fuzz('thousands of hostile offers: each a well-formed 4xx (413 when too large) or, when usable, answered; slowloris bodies answered 408; no slot left, nothing escaped, /healthz responsive', async (ctx) => {
  const seed = fuzzSeed();
  console.log(`  calls offer fuzz seed ${seed} (replay: FUZZ_SEED=${seed})`);
  const rng = new Rng(seed);
  const base = new URL(ctx.proc.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const healthWatch = watchHealth(ctx.proc.url, HEALTH_DEADLINE_MS, HEALTH_INTERVAL_MS, ctx.proc.child.pid);
  const failures: string[] = [];
  const statuses = new Map<string, number>();
  const kinds = new Map<string, number>();
  let answered = 0;
  const started = performance.now();
  const slow = Array.from({ length: 4 }, (_, i) => slowloris(base, ctx.key, new Rng(seed + i)));
  let issued = 0;
  const worker = async () => {
    while (issued < OFFER_CASES && performance.now() - started < OFFER_TIME_BUDGET_MS && ctx.proc.child.exitCode === null && failures.length < 30) {
      issued++;
      const c = offerCase(rng, ctx.key);
      kinds.set(c.form, (kinds.get(c.form) ?? 0) + 1);
      let a: Answer | null;
      try {
        a = await post(base, agent, '/v1/realtime/calls', c.headers, c.body);
      } catch (err) {
        failures.push(`no answer to ${c.describe}: ${(err as Error).message}`);
        continue;
      }
      if (a === null) {
        // Cut off while sending: only a refusal of the size or type may do that.
        if (c.tooLarge === 'no') failures.push(`connection reset for ${c.describe}`);
        continue;
      }
      const code = a.status >= 400 ? (JSON.parse(a.body.toString() || '{}') as { error?: { code?: string } }).error?.code : undefined;
      statuses.set(`${a.status}${code ? ` ${code}` : ''}`, (statuses.get(`${a.status}${code ? ` ${code}` : ''}`) ?? 0) + 1);
      if (a.status === 201) {
        answered++;
        if (!c.mayAnswer) failures.push(`a hostile offer was answered: ${c.describe}`);
        if (!/^v=0/.test(a.body.toString())) failures.push(`201 without an SDP answer for ${c.describe}`);
        const callId = String(a.headers.location ?? '').split('/').pop() ?? '';
        await hangup(ctx, callId).catch((err: Error) => failures.push(err.message));
        continue;
      }
      if (a.status < 400 || a.status >= 500) {
        failures.push(`${a.status} for ${c.describe}: ${a.body.toString().slice(0, 300)}`);
        continue;
      }
      const problem = errorShapeProblem(a);
      if (problem) failures.push(`${problem} for ${c.describe}`);
      if (c.tooLarge === 'yes' && a.status !== 413) failures.push(`${a.status} instead of 413 for ${c.describe}: ${a.body.toString().slice(0, 200)}`);
      if (c.tooLarge === 'no' && a.status === 413) failures.push(`413 for ${c.describe}, which is not too large: ${a.body.toString().slice(0, 200)}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const fuzzSeconds = (performance.now() - started) / 1000;
  const slowAnswers = await Promise.all(slow);
  const health = await healthWatch.stop();
  agent.destroy();
  for (const s of slowAnswers) {
    if (s.status !== 408 || s.afterMs > OFFER_BODY_DEADLINE_MS + SLACK_MS) failures.push(`a slowloris body got ${s.status} after ${Math.round(s.afterMs)} ms: ${s.body.slice(0, 200)}`);
    else if (errorShapeProblem({ status: 408, contentType: '', headers: {}, body: Buffer.from(s.body) })) failures.push(`a slowloris 408 is not an error body: ${s.body.slice(0, 200)}`);
  }
  const byStatus = Object.fromEntries([...statuses].sort((a, b) => b[1] - a[1]));
  console.log(`  ${issued} offers in ${fuzzSeconds.toFixed(1)} s (${answered} answered and hung up); ${JSON.stringify(byStatus)}; slowloris answered ${slowAnswers.map((s) => `${s.status} after ${(s.afterMs / 1000).toFixed(1)} s`).join(', ')}; /healthz asked ${health.asked} times, worst ${Math.round(health.worstMs)} ms`);
  ctx.figures.push(`offers: ${issued} cases in ${fuzzSeconds.toFixed(1)} s (${answered} usable ones answered), by form ${JSON.stringify(Object.fromEntries(kinds))}; ${slowAnswers.length} slowloris bodies; /healthz worst ${Math.round(health.worstMs)} ms`);
  assert.equal(failures.slice(0, 12), [], `${failures.length} bad answers (seed ${seed})`);
  assert.ok(issued >= MIN_OFFER_CASES, `only ${issued} cases ran`);
  assert.equal(health.failed.slice(0, 10), [], `/healthz was not responsive (seed ${seed})`);
  const settled = await until(() => metricsOf(ctx), (m) => m.slotsUsed === 0 && !m.sessions.pending && !m.sessions.active, 'every slot free and no session pending or active', 15_000);
  assert.is(settled.slotsUsed, 0);
  await assertNothingEscaped(ctx);
});


// ── A real call: node-datachannel in this process is the client ──────────────

/** The answer's ICE credentials and the port of its first host candidate. */
function answerIce(answer: string): { ufrag: string; pwd: string; port: number } {
  const ufrag = /^a=ice-ufrag:(\S+)/m.exec(answer)?.[1];
  const pwd = /^a=ice-pwd:(\S+)/m.exec(answer)?.[1];
  const port = Number(/^a=candidate:\S+ \d+ UDP \d+ 127\.0\.0\.1 (\d+) typ host/im.exec(answer)?.[1]);
  if (!ufrag || !pwd || !port) throw new Error(`no ICE credentials or host candidate in the answer:\n${answer}`);
  return { ufrag, pwd, port };
}

/**
 * A UDP relay between the client and the server, so this test sends from where the client's
 * packets come from (replays, bit flips) and sees every packet of the call. The offer's candidate
 * is rewritten to `serverSide` (the server sends there, the relay passes it on to the client) and
 * the answer's to `clientSide`.
 */
class UdpRelay {
  readonly serverSide = dgram.createSocket('udp4');
  readonly clientSide = dgram.createSocket('udp4');
  clientPort = 0;
  serverPort = 0;
  /** Packets the client sent, by kind (first byte, RFC 7983), the last 200 of each. */
  readonly fromClient = new Map<string, Buffer[]>();

  async start(): Promise<void> {
    await Promise.all([this.serverSide, this.clientSide].map((sock) => new Promise<void>((resolve) => sock.bind(0, '127.0.0.1', resolve))));
    this.clientSide.on('message', (msg) => {
      const kind = msg[0]! < 4 ? 'stun' : msg[0]! >= 20 && msg[0]! < 64 ? 'dtls' : msg[0]! >= 128 && msg[0]! < 192 ? (msg[1]! >= 192 && msg[1]! <= 223 ? 'srtcp' : 'srtp') : 'other';
      const list = this.fromClient.get(kind) ?? [];
      list.push(Buffer.from(msg));
      if (list.length > 200) list.shift();
      this.fromClient.set(kind, list);
      if (this.serverPort) this.serverSide.send(msg, this.serverPort, '127.0.0.1');
    });
    this.serverSide.on('message', (msg) => {
      if (this.clientPort) this.clientSide.send(msg, this.clientPort, '127.0.0.1');
    });
  }

  /** The client's offer with its candidate moved to the relay (the client's real port noted). */
  rewriteOffer(offer: string): string {
    return offer.replace(/^(a=candidate:\S+ \d+ UDP \d+ 127\.0\.0\.1 )(\d+)( typ host.*)$/gim, (_, head: string, port: string, tail: string) => {
      this.clientPort = Number(port);
      return `${head}${this.serverSide.address().port}${tail}`;
    });
  }

  /** The server's answer with its candidate moved to the relay (the server's real port noted). */
  rewriteAnswer(answer: string): string {
    return answer.replace(/^(a=candidate:\S+ \d+ UDP \d+ 127\.0\.0\.1 )(\d+)( typ host.*)$/gim, (_, head: string, port: string, tail: string) => {
      this.serverPort = Number(port);
      return `${head}${this.clientSide.address().port}${tail}`;
    });
  }

  close(): void {
    this.serverSide.close();
    this.clientSide.close();
  }
}

interface SeenEvent {
  type: string;
  // The server's events, read loosely.
  [k: string]: any;
}

class TestCall {
  readonly events: SeenEvent[] = [];
  readonly rtp = { audio: 0, video: 0 };
  callId = '';
  sessionId = '';
  answer = '';
  private waiters: Array<() => void> = [];
  private micTimer: NodeJS.Timeout | null = null;

  private constructor(
    readonly pc: ndc.PeerConnection,
    readonly channel: ndc.DataChannel,
    readonly audio: ndc.Track,
    readonly video: ndc.Track,
  ) {}

  /** Offers audio (sendrecv), H.264 video (recvonly) and a data channel; posts the offer; plays the answer; waits for session.created. */
  static async open(ctx: Ctx, relay: UdpRelay | null = null): Promise<TestCall> {
    const pc = new ndc.PeerConnection('fuzz-client', { iceServers: [], bindAddress: '127.0.0.1' });
    const audio = new ndc.Audio('0', 'SendRecv');
    audio.addOpusCodec(111);
    audio.addSSRC(4242, 'fuzz', 'fuzz-stream', 'fuzz-audio');
    const video = new ndc.Video('1', 'RecvOnly');
    video.addH264Codec(102);
    // Tracks first: they take mids 0 and 1, the data channel the next.
    const audioTrack = pc.addTrack(audio);
    const videoTrack = pc.addTrack(video);
    const call = new TestCall(pc, pc.createDataChannel('oai-events'), audioTrack, videoTrack);
    call.audio.onMessage(() => call.rtp.audio++);
    call.video.onMessage(() => call.rtp.video++);
    call.channel.onMessage((m) => {
      call.events.push(typeof m === 'string' ? (JSON.parse(m) as SeenEvent) : { type: '(binary)' });
      for (const w of call.waiters.splice(0)) w();
    });
    await new Promise<void>((resolve) => {
      pc.onGatheringStateChange((state) => state === 'complete' && resolve());
      if (pc.gatheringState() === 'complete') resolve();
    });
    let offer = pc.localDescription()!.sdp;
    if (relay) offer = relay.rewriteOffer(offer);
    const res = await request(ctx.proc.url, 'POST', '/v1/realtime/calls', { key: ctx.key, body: offer, headers: { 'content-type': 'application/sdp' } });
    if (res.status !== 201) throw new Error(`the call was refused: ${res.status} ${res.text}`);
    call.callId = String(res.headers.get('location')).split('/').pop()!;
    call.sessionId = res.headers.get('x-session-id')!;
    call.answer = relay ? relay.rewriteAnswer(res.text) : res.text;
    pc.setRemoteDescription(call.answer, 'answer');
    await call.waitFor((e) => e.type === 'session.created', 0, 30_000);
    return call;
  }

  send(event: Record<string, unknown>): void {
    this.channel.sendMessage(JSON.stringify(event));
  }

  waitFor(match: (e: SeenEvent) => boolean, from: number, timeoutMs: number): Promise<SeenEvent> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching event in ${timeoutMs} ms; the last: ${JSON.stringify(this.events.slice(-3)).slice(0, 400)}`)), timeoutMs);
      const check = () => {
        const found = this.events.slice(from).find(match);
        if (found) {
          clearTimeout(timer);
          resolve(found);
        } else this.waiters.push(check);
      };
      check();
    });
  }

  /** An event that must fail naming `eventId` (a retrieve of an item that does not exist): the session answers. */
  async probe(eventId: string, timeoutMs = CASE_TIMEOUT_MS): Promise<void> {
    const from = this.events.length;
    this.send({ type: 'conversation.item.retrieve', item_id: '__fuzz_probe__', event_id: eventId });
    await this.waitFor((e) => e.type === 'error' && e.error?.event_id === eventId, from, timeoutMs);
  }

  /** Sends a 20 ms Opus silence frame as RTP every 20 ms, so the call has microphone packets to replay. */
  startMicrophone(): void {
    let seq = 0;
    this.micTimer = setInterval(() => {
      if (!this.audio.isOpen()) return;
      const packet = Buffer.alloc(15);
      packet[0] = 0x80;
      packet[1] = 111;
      packet.writeUInt16BE(seq++ & 0xffff, 2);
      packet.writeUInt32BE((seq * 960) >>> 0, 4);
      packet.writeUInt32BE(4242, 8);
      packet.set([0xf8, 0xff, 0xfe], 12); // an Opus CELT silence frame
      try {
        this.audio.sendMessageBinary(packet);
      } catch {
        // closed meanwhile
      }
    }, 20);
  }

  close(): void {
    if (this.micTimer) clearInterval(this.micTimer);
    this.pc.close();
  }
}

Fuzz('the realtime event corpus on a live call\'s data channel: every bad event answered with an error naming it, the call and its media unaffected', async (ctx) => {
  const seed = fuzzSeed() + 1;
  console.log(`  data-channel fuzz seed ${seed} (replay: FUZZ_SEED=${seed - 1})`);
  const rng = new Rng(seed);
  const healthWatch = watchHealth(ctx.proc.url, HEALTH_DEADLINE_MS, HEALTH_INTERVAL_MS, ctx.proc.child.pid);
  const call = await TestCall.open(ctx);
  const known: RealtimeKnown = { itemIds: [], assistantItemIds: [], responseIds: [] };
  const failures: string[] = [];
  let cases = 0;
  let tooBig = 0;
  const started = performance.now();
  try {
    // The channel's largest message (the server's answer says 262144); bigger frames cannot be sent.
    const maxMessage = Number(/^a=max-message-size:(\d+)/m.exec(call.answer)?.[1] ?? 65536);
    for (let n = 0; performance.now() - started < DC_TIME_BUDGET_MS && failures.length < 20; n++) {
      const built = buildRealtimeCase(rng, n, known);
      if (built.frames.some((f) => Buffer.byteLength(f) > maxMessage)) {
        tooBig++;
        continue;
      }
      const from = call.events.length;
      for (const frame of built.frames) {
        if (typeof frame === 'string') call.channel.sendMessage(frame);
        else call.channel.sendMessageBinary(frame);
      }
      try {
        await call.probe(`probe_${n}`);
      } catch (err) {
        failures.push(`case ${n} (${built.describe}): the call did not answer: ${(err as Error).message.slice(0, 300)}`);
        break;
      }
      const caused = call.events.slice(from).filter((e) => !(e.type === 'error' && e.error?.event_id === `probe_${n}`));
      checkCaseErrors(caused as Array<{ type: string }>, built, n, failures, 'fz_');
      learnRealtime(known, caused);
      cases++;
    }
    const videoBefore = call.rtp.video;
    await until(async () => call.rtp.video, (v) => v > videoBefore + 10, 'video RTP still flowing after the fuzz', 15_000);
    assert.is(call.pc.state(), 'connected', 'the call is still up');
  } finally {
    call.close();
  }
  const health = await healthWatch.stop();
  const seconds = (performance.now() - started) / 1000;
  const codes = new Map<string, number>();
  for (const e of call.events) if (e.type === 'error') codes.set(String(e.error?.code), (codes.get(String(e.error?.code)) ?? 0) + 1);
  console.log(`  ${cases} data-channel cases in ${seconds.toFixed(1)} s (${tooBig} over the channel's message size, not sent); error codes ${JSON.stringify(Object.fromEntries([...codes].sort((a, b) => b[1] - a[1])))}; /healthz worst ${Math.round(health.worstMs)} ms`);
  ctx.figures.push(`data channel: ${cases} cases in ${seconds.toFixed(1)} s on one call (${tooBig} over its message size skipped); /healthz worst ${Math.round(health.worstMs)} ms`);
  const serverErrors = ctx.proc.stdout().split('\n').filter((l) => /"level":"(error|warn)"/.test(l));
  assert.equal(failures.slice(0, 12), [], `${failures.length} problems (seed ${seed - 1}); the server's warnings:\n${serverErrors.slice(-10).join('\n').slice(0, 4000)}`);
  assert.ok(cases >= MIN_DC_CASES, `only ${cases} cases ran`);
  assert.equal(health.failed.slice(0, 10), [], '/healthz was not responsive');
  await until(() => metricsOf(ctx), (m) => m.slotsUsed === 0, 'the call\'s slot freed', 15_000);
  await assertNothingEscaped(ctx);
});

Fuzz('garbage UDP at a live call\'s port, from a stranger and from the client\'s own address (STUN, DTLS, RTP/RTCP malformed, replayed, bit-flipped, cut short): media and channel unaffected', async (ctx) => {
  const seed = fuzzSeed() + 2;
  const rng = new Rng(seed);
  const relay = new UdpRelay();
  await relay.start();
  const stranger = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => stranger.bind(0, '127.0.0.1', resolve));
  const call = await TestCall.open(ctx, relay);
  const sent = new Map<string, number>();
  const count = (kind: string) => sent.set(kind, (sent.get(kind) ?? 0) + 1);
  const started = performance.now();
  try {
    call.startMicrophone();
    await until(async () => ({ v: call.rtp.video, a: relay.fromClient.get('srtp')?.length ?? 0 }), ({ v, a }) => v > 20 && a > 20, 'video at the client and microphone packets through the relay', 20_000);
    const server = answerIce(call.answer.replace(/ \d+ typ host/, ` ${relay.serverPort} typ host`));
    const clientUfrag = /^a=ice-ufrag:(\S+)/m.exec(call.pc.localDescription()!.sdp)![1]!;
    // The stranger does not know the ICE password (a check it could sign would be a client's own).
    const strangerTarget: UdpTarget = { serverUfrag: server.ufrag, serverPwd: rng.bytes(18).toString('base64'), clientUfrag };
    const insiderTarget: UdpTarget = { serverUfrag: server.ufrag, serverPwd: server.pwd, clientUfrag };
    const videoAtStart = call.rtp.video;
    for (let round = 0; round < 80; round++) {
      for (let i = 0; i < 50; i++) {
        const { packet, kind } = hostileDatagram(rng, strangerTarget);
        if (shortProtectedDtls(packet)) {
          count('withheld: a short protected DTLS record (the known limit below)');
          continue;
        }
        stranger.send(packet, server.port, '127.0.0.1');
        count(`stranger: ${kind}`);
      }
      for (let i = 0; i < 25; i++) {
        // From the client's own address: hostile datagrams, and the client's real packets replayed,
        // bit-flipped or cut short.
        const captured = [...relay.fromClient.values()].flat();
        if (rng.chance(0.5) || captured.length === 0) {
          const { packet, kind } = hostileDatagram(rng, rng.chance(0.5) ? insiderTarget : strangerTarget);
          if (shortProtectedDtls(packet)) {
            count('withheld: a short protected DTLS record (the known limit below)');
            continue;
          }
          relay.serverSide.send(packet, server.port, '127.0.0.1');
          count(`client address: ${kind}`);
          continue;
        }
        const original = rng.pick(captured);
        const copy = Buffer.from(original);
        const how = rng.pick(['replayed', 'bit-flipped', 'cut short', 'extended']);
        let packet = copy;
        if (how === 'bit-flipped') copy[rng.int(0, copy.length - 1)]! ^= 1 << rng.int(0, 7);
        else if (how === 'cut short') packet = copy.subarray(0, rng.int(0, copy.length - 1));
        else if (how === 'extended') packet = Buffer.concat([copy, rng.bytes(rng.int(1, 200))]);
        const kind = [...relay.fromClient].find(([, list]) => list.includes(original))?.[0] ?? 'other';
        if (shortProtectedDtls(packet)) {
          count('withheld: a short protected DTLS record (the known limit below)');
          continue;
        }
        relay.serverSide.send(packet, server.port, '127.0.0.1');
        count(`client address: ${kind} ${how}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const videoAfterAttack = call.rtp.video;
    assert.ok(videoAfterAttack > videoAtStart + 25, `video kept flowing during the attack: ${videoAtStart} -> ${videoAfterAttack} packets`);
    await until(async () => ({ ...call.rtp, state: call.pc.state(), videoAfterAttack }), (r) => r.video > videoAfterAttack + 25, 'video still flowing after the attack', 15_000);
    await call.probe('probe_after_udp');
    assert.is(call.pc.state(), 'connected', 'the call is still up');
  } finally {
    call.close();
    stranger.close();
    // The relay carries the client's goodbye (DTLS close_notify, SCTP abort) to the server: it stays
    // until the server has ended the call (closed at once, a vanished client is noticed only after
    // ICE consent expires, about 30 s).
    await until(() => metricsOf(ctx), (m) => m.slotsUsed === 0, 'the call\'s slot freed', 15_000).finally(() => relay.close());
  }
  const total = [...sent.values()].reduce((a, b) => a + b, 0);
  const seconds = (performance.now() - started) / 1000;
  console.log(`  ${total} hostile datagrams in ${seconds.toFixed(1)} s: ${JSON.stringify(Object.fromEntries([...sent].sort((a, b) => b[1] - a[1])))}`);
  ctx.figures.push(`UDP: ${total} hostile datagrams at a live call in ${seconds.toFixed(1)} s (${[...sent].filter(([k]) => k.startsWith('stranger')).reduce((a, [, n]) => a + n, 0)} from a stranger, the rest from the client's address: replays, bit flips, cuts of its real packets, and hostile ones); media and channel unaffected`);
  await assertNothingEscaped(ctx);
});

/**
 * Whether a datagram holds a protected DTLS 1.2 record (epoch 1) too short for its AEAD: under 24
 * bytes, an 8-byte explicit nonce and a 16-byte tag. Such a record ends the call, whoever sends it
 * (the test below), through two faults in what node-datachannel 0.33.4 bundles:
 *  - OpenSSL 1.1.1w answers it with a fatal internal_error alert instead of discarding it as
 *    RFC 6347 4.1.2.7 asks (tls1_enc fails on the AEAD's additional data; openssl/openssl#25389);
 *  - libjuice accepts a datagram only from a known address, but it learns as a peer-reflexive
 *    candidate the address of any STUN Binding indication or error response that carries a
 *    MESSAGE-INTEGRITY attribute, without checking it (agent_verify_stun_binding skips those
 *    classes), so a stranger needs one such STUN message first.
 * Every record of the datagram counts (OpenSSL reads them all).
 */
function shortProtectedDtls(packet: Buffer): boolean {
  for (let at = 0; at + 13 <= packet.length; ) {
    const length = packet.readUInt16BE(at + 11);
    if (packet[at]! >= 20 && packet[at]! <= 63 && packet.readUInt16BE(at + 3) === 1 && length < 24) return true;
    at += 13 + length;
  }
  return false;
}

/** A DTLS 1.2 application-data record of epoch 1 with a `length`-byte fragment of zeros (no valid tag can be in it). */
function forgedDtlsRecord(length: number, sequence: number): Buffer {
  const record = Buffer.alloc(13 + length);
  record[0] = 23;
  record.writeUInt16BE(0xfefd, 1);
  record.writeUInt16BE(1, 3);
  record.writeUIntBE(sequence, 5, 6);
  record.writeUInt16BE(length, 11);
  return record;
}

Fuzz('KNOWN LIMIT (libjuice and OpenSSL 1.1.1w in node-datachannel): a stranger who knows the port ends a call with two datagrams; the server ends it cleanly (slot freed, session ended, billed once) and other calls go on', async (ctx) => {
  const relay = new UdpRelay();
  await relay.start();
  const stranger = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => stranger.bind(0, '127.0.0.1', resolve));
  const bystander = await TestCall.open(ctx);
  const call = await TestCall.open(ctx, relay);
  try {
    call.startMicrophone();
    await until(async () => [call.rtp.video, bystander.rtp.video], ([a, b]) => a! > 20 && b! > 20, 'video at both clients', 20_000);
    const server = answerIce(call.answer.replace(/ \d+ typ host/, ` ${relay.serverPort} typ host`));
    // What is survived: short records from an address ICE does not know are dropped before DTLS;
    // forged records long enough for the AEAD, even from the client's own address, fail their tag
    // and are discarded.
    for (let i = 0; i < 100; i++) stranger.send(forgedDtlsRecord(i % 24, 1_000_000 + i), server.port, '127.0.0.1');
    for (let i = 0; i < 100; i++) relay.serverSide.send(forgedDtlsRecord(24 + i * 3, 2_000_000 + i), server.port, '127.0.0.1');
    const before = call.rtp.video;
    await until(async () => call.rtp.video, (v) => v > before + 25, 'video still flowing after forged records', 15_000);
    await call.probe('probe_before_the_attack');
    assert.is(call.pc.state(), 'connected');

    // What is not: a Binding indication with any MESSAGE-INTEGRITY makes the stranger a candidate,
    // then one short record ends the association. If this fails, the stack bundled now discards
    // one or the other: turn this test into "the call survives" and drop shortProtectedDtls above.
    stranger.send(encodeStun({ type: 0x0011, transactionId: randomBytes(12), attributes: [] }, 'not-the-password'), server.port, '127.0.0.1');
    await new Promise((resolve) => setTimeout(resolve, 200));
    stranger.send(forgedDtlsRecord(8, 3_000_000), server.port, '127.0.0.1');
    await until(async () => call.pc.state(), (s) => s === 'closed' || s === 'failed', 'the call to end', 10_000);
    // The server's log says why (RTC_NATIVE_LOG=error).
    await until(async () => ctx.proc.stdout().split('\n').filter((l) => l.includes('"module":"webrtc-native"') && l.includes('DTLS alert')), (lines) => lines.length > 0, 'the DTLS alert in the server log', 10_000);
    await until(() => metricsOf(ctx), (m) => m.slotsUsed === 1, 'the ended call\'s slot freed (the bystander\'s held)', 15_000);
    const session = await until(async () => (await request(ctx.proc.url, 'GET', `/v1/sessions/${call.sessionId}`, { key: ctx.key })).body, (b) => b?.status !== 'active', 'the session to end', 15_000);
    assert.ok(['ended', 'failed'].includes(session.status), JSON.stringify(session));
    const records = ((await request(ctx.proc.url, 'GET', '/v1/usage?limit=100', { key: ctx.key })).body.data as Array<{ session_id: string; duration_seconds: number }>).filter((u) => u.session_id === call.sessionId);
    assert.is(records.length, 1, 'billed once');
    assert.ok(records[0]!.duration_seconds > 0, JSON.stringify(records[0]));
    const bystanderVideo = bystander.rtp.video;
    await until(async () => bystander.rtp.video, (v) => v > bystanderVideo + 25, 'the other call\'s video still flowing', 15_000);
    await bystander.probe('probe_bystander');
    const figure = `known limit: a STUN Binding indication and one ${13 + 8}-byte DTLS record from a stranger ended a call: session ${session.status}, billed once (${records[0]!.duration_seconds.toFixed(2)} s), the other call unaffected`;
    console.log(`  ${figure}`);
    ctx.figures.push(figure);
  } finally {
    call.close();
    bystander.close();
    stranger.close();
    relay.close();
  }
  await until(() => metricsOf(ctx), (m) => m.slotsUsed === 0, 'every slot freed', 15_000);
  await assertNothingEscaped(ctx);
});

// ── Calls that never connect ─────────────────────────────────────────────────

/**
 * A client that completes ICE and nothing more: a UDP socket answering the server's connectivity
 * checks and nominating its pair (a minimal controlling ICE agent), which then ignores the
 * server's DTLS handshake. Resolves once the server has started DTLS (ICE is complete there).
 */
async function iceOnlyCall(ctx: Ctx, rng: Rng): Promise<{ sessionId: string; iceCompleteAfterMs: Promise<number>; close: () => void }> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => sock.bind(0, '127.0.0.1', resolve));
  const ufrag = rng.bytes(4).toString('hex');
  const pwd = rng.bytes(16).toString('hex');
  const fingerprint = rng.bytes(32).toString('hex').toUpperCase().match(/../g)!.join(':');
  const offer = join(
    lines(BASE_OFFERS[1]!).flatMap((l) => {
      if (l.startsWith('a=ice-ufrag:')) return [`a=ice-ufrag:${ufrag}`];
      if (l.startsWith('a=ice-pwd:')) return [`a=ice-pwd:${pwd}`];
      if (l.startsWith('a=fingerprint:')) return [`a=fingerprint:sha-256 ${fingerprint}`];
      if (l.startsWith('a=mid:')) return [l, `a=candidate:1 1 UDP 2122260223 127.0.0.1 ${sock.address().port} typ host`, 'a=end-of-candidates'];
      return [l];
    }),
  );
  const posted = performance.now();
  const res = await request(ctx.proc.url, 'POST', '/v1/realtime/calls', { key: ctx.key, body: offer, headers: { 'content-type': 'application/sdp' } });
  if (res.status !== 201) throw new Error(`the ICE-only offer was refused: ${res.status} ${res.text}`);
  const server = answerIce(res.text);
  let dtlsSeen = false;
  let resolveIce: (ms: number) => void = () => undefined;
  const iceCompleteAfterMs = new Promise<number>((resolve) => (resolveIce = resolve));
  sock.on('message', (msg, from) => {
    const stun = decodeStun(msg);
    if (stun?.type === 0x0001) sock.send(iceBindingSuccess(stun, pwd, from), from.port, from.address);
    else if (!stun && msg[0]! >= 20 && msg[0]! < 64 && !dtlsSeen) {
      dtlsSeen = true;
      resolveIce(performance.now() - posted);
    }
  });
  const checks = setInterval(() => {
    if (!dtlsSeen) sock.send(iceBindingRequest(rng, `${server.ufrag}:${ufrag}`, server.pwd), server.port, '127.0.0.1');
  }, 50);
  return {
    sessionId: res.headers.get('x-session-id')!,
    iceCompleteAfterMs,
    close: () => {
      clearInterval(checks);
      sock.close();
    },
  };
}

Fuzz('storms of calls that never connect (no ICE) and that never finish DTLS (ICE only): slots freed within the pending-start timeout, sessions cancelled, nothing billed', async (ctx) => {
  const rng = new Rng(fuzzSeed() + 3);
  const before = await metricsOf(ctx);
  assert.is(before.slotsUsed, 0);
  const started = performance.now();
  const noIce: string[] = [];
  for (let i = 0; i < STORM_CALLS; i++) {
    const res = await request(ctx.proc.url, 'POST', '/v1/realtime/calls', { key: ctx.key, body: rng.pick([BASE_OFFERS[0]!, BASE_OFFERS[1]!]), headers: { 'content-type': 'application/sdp' } });
    assert.is(res.status, 201, res.text);
    noIce.push(res.headers.get('x-session-id')!);
  }
  const iceOnly = await Promise.all(Array.from({ length: STORM_CALLS }, () => iceOnlyCall(ctx, rng)));
  const postedAfterMs = performance.now() - started;
  try {
    const iceTimes = await Promise.all(iceOnly.map((c) => Promise.race([c.iceCompleteAfterMs, new Promise<number>((_, reject) => setTimeout(() => reject(new Error('ICE did not complete')), 20_000))])));
    const held = await metricsOf(ctx);
    assert.is(held.slotsUsed, 2 * STORM_CALLS, 'every storm call holds its slot while pending');
    const freed = await until(() => metricsOf(ctx), (m) => m.slotsUsed === 0, 'every storm slot freed', PENDING_START_TIMEOUT_MS + SLACK_MS + 5_000);
    const releasedAfterMs = performance.now() - started;
    assert.is(freed.sessions.pending ?? 0, 0);
    // Every slot is freed within the timeout of the last offer, plus slack.
    assert.ok(releasedAfterMs <= postedAfterMs + PENDING_START_TIMEOUT_MS + SLACK_MS, `slots freed after ${Math.round(releasedAfterMs)} ms`);
    assert.ok(releasedAfterMs >= PENDING_START_TIMEOUT_MS - 1_000, `slots freed after ${Math.round(releasedAfterMs)} ms, before the pending-start timeout: a pending call was cut short`);
    const ids = [...noIce, ...iceOnly.map((c) => c.sessionId)];
    for (const id of ids) {
      const session = await request(ctx.proc.url, 'GET', `/v1/sessions/${id}`, { key: ctx.key });
      assert.is(session.body.status, 'cancelled', `${id}: ${session.text}`);
      assert.is(session.body.started_at, null, 'it never started');
    }
    const usage = await request(ctx.proc.url, 'GET', '/v1/usage?limit=100', { key: ctx.key });
    const billed = (usage.body.data as Array<{ session_id: string; duration_seconds: number }>).filter((u) => ids.includes(u.session_id) && u.duration_seconds > 0);
    assert.equal(billed, [], 'nothing billed for calls that never connected');
    const figure = `storm: ${STORM_CALLS} calls without ICE and ${STORM_CALLS} with ICE completed (in ${Math.round(Math.min(...iceTimes))}-${Math.round(Math.max(...iceTimes))} ms) but no DTLS, posted in ${(postedAfterMs / 1000).toFixed(1)} s; every slot free ${(releasedAfterMs / 1000).toFixed(1)} s after the first offer (pending-start timeout ${PENDING_START_TIMEOUT_MS / 1000} s); all cancelled, none billed`;
    console.log(`  ${figure}`);
    ctx.figures.push(figure);
  } finally {
    for (const c of iceOnly) c.close();
  }
  await assertNothingEscaped(ctx);
});


Fuzz.run();
