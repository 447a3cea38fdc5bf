/**
 * CallPeer against real Chromium: the browser posts its offer to a minimal signalling endpoint in
 * this test, CallPeer answers, and a real media session's encoded output is sent to it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as assert from 'uvu/assert';
import { Logger } from '../../src/core/log.js';
import { MediaSession } from '../../src/media/media-session.js';
import { CallPeer, releaseClosedPeers, type CloseReason } from '../../src/transport/call-peer.js';
import { callIn, chromiumAvailable, CHROMIUM_PATH, launchBrowser, type CallStartResult, type TestBrowser } from '../../harness/clients/browser.js';
import { standardMediaConfig } from '../helpers/media.js';
import { until } from '../../harness/servers/wait.js';
import { suiteNeeding } from '../helpers/skip.js';

interface Ctx {
  browser: TestBrowser;
  server: http.Server;
  url: string;
  peers: CallPeer[];
  media: MediaSession[];
}

/** Answers POST /v1/realtime/calls with CallPeer (raw SDP body), feeding it a live media session. */
async function signalling(ctx: Ctx, videoCodec: 'h264' | 'vp8'): Promise<void> {
  ctx.server = http.createServer(async (req, res) => {
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-allow-headers', 'authorization, content-type');
    if (req.method === 'OPTIONS') return void res.end();
    let body = '';
    for await (const chunk of req) body += chunk;
    try {
      const { peer, answer } = await CallPeer.answer(body, { videoCodec, bindAddress: '127.0.0.1', log: new Logger('silent') });
      ctx.peers.push(peer);
      const outputs = { h264: peer.videoCodec === 'h264', vp8: peer.videoCodec === 'vp8', opus: true };
      const media = await MediaSession.start(await standardMediaConfig(outputs, 'realtime'));
      ctx.media.push(media);
      media.on('h264', (e) => peer.sendVideo(e.data, e.ptsNs));
      media.on('vp8', (e) => peer.sendVideo(e.data, e.ptsNs));
      media.on('opus', (e) => peer.sendAudio(e.data, e.ptsNs));
      peer.on('keyframe_request', () => media.requestKeyframe());
      res.writeHead(201, { 'content-type': 'application/sdp' }).end(answer);
    } catch (err) {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: (err as Error).message, code: (err as { code?: string }).code } }));
    }
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  ctx.url = `http://127.0.0.1:${(ctx.server.address() as AddressInfo).port}`;
}

/** Without Chromium every test here is registered as skipped, saying why (and no hook runs). */
const Peer = suiteNeeding<Ctx>('CallPeer with Chromium', chromiumAvailable() ? null : `${CHROMIUM_PATH} is missing (src/cli/setup.sh installs it)`, {} as Ctx);
Peer.before(async (ctx) => {
  ctx.browser = await launchBrowser();
});
Peer.after(async (ctx) => {
  await ctx.browser.close();
  assert.ok(releaseClosedPeers(), 'every peer closed');
});
Peer.before.each((ctx) => {
  ctx.peers = [];
  ctx.media = [];
});
Peer.after.each(async (ctx) => {
  for (const p of ctx.peers) p.close();
  await Promise.all(ctx.media.map((m) => m.close()));
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
});

for (const codec of ['h264', 'vp8'] as const) {
  Peer(`${codec}: the browser decodes 512x512 video and receives Opus; its microphone arrives as RTP; a keyframe is asked for at open`, async (ctx) => {
    await signalling(ctx, codec);
    const page = await ctx.browser.newPage();
    const result = await callIn<CallStartResult>(page, 'start', { baseUrl: ctx.url, key: 'x', form: 'sdp', audio: true, video: true, channel: 'oai-events' });
    assert.is(result.status, 201, result.answer);
    const peer = ctx.peers[0]!;
    assert.is(peer.videoCodec, codec);
    const stats = await until(() => callIn<any>(page, 'stats'), (s: any) => s.video?.framesDecoded > 25 && s.audio?.packets > 25, 'decoded video and audio');
    assert.is(stats.video.width, 512);
    assert.is(stats.video.height, 512);
    // Chromium offers the playout-delay extension; the answer takes it and every video packet
    // asks for 100 ms at least, which Chromium's video jitter buffer holds from the first frames
    // (without it: 3-15 ms for the first seconds, until its A/V sync catches up).
    assert.match(result.answer, /a=extmap:\d+ http:\/\/www\.webrtc\.org\/experiments\/rtp-hdrext\/playout-delay/);
    assert.ok(stats.video.jitterBufferMs >= 40, `video jitter buffer ${stats.video.jitterBufferMs} ms`);
    await until(async () => peer.stats().micPackets, (n) => n > 10, 'microphone RTP');
    assert.ok(peer.stats().keyframeRequests >= 1, 'keyframe asked for when the video track opened');
    assert.is(peer.stats().droppedBeforeOpen >= 0, true);
    await page.close();
  });
}

Peer('the data channel carries text both ways, any label; oversize messages are refused and counted', async (ctx) => {
  await signalling(ctx, 'h264');
  const page = await ctx.browser.newPage();
  await callIn(page, 'start', { baseUrl: ctx.url, key: 'x', form: 'sdp', audio: false, video: false, channel: 'realtime' });
  const peer = ctx.peers[0]!;
  assert.is(peer.negotiated.video, null);
  assert.is(peer.negotiated.audio, null);
  const label = await new Promise<string>((resolve) => (peer.channelOpen ? resolve('open') : peer.once('channel_open', resolve)));
  assert.ok(label === 'realtime' || label === 'open');
  const received = new Promise<string>((resolve) => peer.once('channel_message', resolve));
  await callIn(page, 'send', { type: 'hello' });
  assert.equal(JSON.parse(await received), { type: 'hello' });
  assert.ok(peer.sendText(JSON.stringify({ type: 'from.server' })));
  await until(() => callIn<string[]>(page, 'types'), (t: string[]) => t.includes('from.server'), 'the server message');
  assert.is(peer.sendText('x'.repeat(peer.maxMessageSize + 1)), false);
  assert.is(peer.stats().channelMessagesDropped, 1);
  await page.close();
});

Peer('a hangup from the browser closes the peer once (peer_closed)', async (ctx) => {
  await signalling(ctx, 'vp8');
  const page = await ctx.browser.newPage();
  await callIn(page, 'start', { baseUrl: ctx.url, key: 'x', form: 'sdp', audio: true, video: true, channel: 'oai-events' });
  const peer = ctx.peers[0]!;
  await until(() => callIn<any>(page, 'stats'), (s: any) => s.video?.framesDecoded > 0, 'first frame');
  const reasons: CloseReason[] = [];
  peer.on('closed', (r) => reasons.push(r));
  const closed = new Promise((resolve) => peer.once('closed', resolve));
  await callIn(page, 'hangup');
  await closed;
  peer.close();
  assert.equal(reasons, ['peer_closed']);
  await page.close();
});

Peer('the server ends a connected call: closed once (server_closed), and the browser sees its connection go', async (ctx) => {
  await signalling(ctx, 'h264');
  const page = await ctx.browser.newPage();
  await callIn(page, 'start', { baseUrl: ctx.url, key: 'x', form: 'sdp', audio: true, video: true, channel: 'oai-events' });
  const peer = ctx.peers[0]!;
  await until(() => callIn<any>(page, 'stats'), (s: any) => s.video?.framesDecoded > 0 && peer.channelOpen, 'first frame and an open channel');
  const reasons: CloseReason[] = [];
  peer.on('closed', (r) => reasons.push(r));
  peer.close();
  peer.close();
  assert.equal(reasons, ['server_closed']);
  assert.is(peer.sendText('{}'), false, 'nothing is sent after close');
  await until(() => callIn<any>(page, 'stats'), (s: any) => s.state !== 'connected', 'the browser to notice', 30_000);
  await page.close();
});

Peer('an unusable offer is refused with a 400 naming the problem, and nothing is left open', async (ctx) => {
  await signalling(ctx, 'h264');
  for (const [body, code] of [['garbage', 'invalid_offer'], ['v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n', 'invalid_offer']] as const) {
    const res = await fetch(`${ctx.url}/v1/realtime/calls`, { method: 'POST', body });
    assert.is(res.status, 400);
    assert.is(((await res.json()) as { error: { code: string } }).error.code, code);
  }
  assert.is(ctx.peers.length, 0);
});

Peer.run();
