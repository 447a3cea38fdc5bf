import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaSession } from '../../src/media/media-session.js';
import { MicrophoneDecoder, type MicPacket } from '../../src/media/opus-decoder.js';
import { standardMediaConfig } from '../helpers/media.js';
import { espeak, toPcm16 } from '../../harness/measures/speech.js';

/** Real Opus packets (20 ms each) of a second of espeak speech, from the media session's own encoder, as RTP would number them. */
async function speechPackets(): Promise<MicPacket[]> {
  const session = new MediaSession(await standardMediaConfig({ opus: true }));
  const packets: MicPacket[] = [];
  session.on('opus', (e) => packets.push({ sequence: (1000 + packets.length) & 0xffff, timestamp: Math.round((e.ptsNs * 48_000) / 1e9) >>> 0, payload: Buffer.from(e.data) }));
  const wav = espeak('Hello there, how are you today?');
  session.pushAudio(toPcm16(wav.samples), wav.rateHz);
  for (let i = 0; i < 60; i++) {
    session.advance(1);
    await new Promise((r) => setImmediate(r));
  }
  await session.close();
  return packets;
}

const rms = (pcm: Int16Array[]) => {
  let e = 0;
  let n = 0;
  for (const c of pcm) for (const s of c) (e += s * s), n++;
  return Math.sqrt(e / Math.max(1, n));
};
const total = (pcm: Int16Array[]) => pcm.reduce((n, c) => n + c.length, 0);

const Mic = suite('MicrophoneDecoder');

Mic('decodes real Opus packets to 24 kHz mono of the same length, with the speech in it', async () => {
  const packets = await speechPackets();
  assert.ok(packets.length >= 100, `${packets.length} packets`);
  const out: Int16Array[] = [];
  const mic = new MicrophoneDecoder((pcm) => out.push(pcm));
  for (const p of packets) mic.push(p);
  assert.is(total(out), packets.length * 480, '20 ms = 480 samples each');
  assert.ok(rms(out) > 500, `speech level ${rms(out)}`);
  assert.equal([mic.stats.decoded, mic.stats.dropped, mic.stats.corrupt], [packets.length, 0, 0]);
});

Mic('lost packets are filled (FEC for the last, concealment for the rest): the stream keeps its length', async () => {
  const packets = await speechPackets();
  const kept = packets.filter((_, i) => i % 10 !== 5 && i % 10 !== 6); // two lost in every ten
  const out: Int16Array[] = [];
  const mic = new MicrophoneDecoder((pcm) => out.push(pcm));
  for (const p of kept) mic.push(p);
  const lastIndex = packets.indexOf(kept.at(-1)!);
  assert.is(total(out), (lastIndex + 1) * 480);
  assert.ok(mic.stats.concealed > 0 && mic.stats.recoveredFec > 0, JSON.stringify(mic.stats));
});

Mic('duplicates and late packets are dropped; garbage is counted, never thrown', async () => {
  const packets = await speechPackets();
  const out: Int16Array[] = [];
  const mic = new MicrophoneDecoder((pcm) => out.push(pcm));
  mic.push(packets[0]!);
  mic.push(packets[1]!);
  mic.push(packets[1]!);
  mic.push(packets[0]!);
  mic.push({ ...packets[2]!, payload: Buffer.from([0xff, 0xff]) });
  assert.is(mic.stats.dropped, 2);
  assert.is(mic.stats.corrupt, 1);
  assert.is(total(out), 2 * 480);
});

Mic('silence the sender did not send (DTX) comes back as zeros, so a pause is heard', async () => {
  const packets = await speechPackets();
  const out: Int16Array[] = [];
  const mic = new MicrophoneDecoder((pcm) => out.push(pcm));
  mic.push(packets[0]!);
  // The next packet comes 600 ms later on the RTP clock, with the next sequence number.
  mic.push({ ...packets[1]!, timestamp: (packets[0]!.timestamp + 960 + 48 * 600) >>> 0 });
  assert.is(total(out), 480 + 24 * 600 + 480);
  assert.is(mic.stats.silenceFilledMs, 600);
});

Mic('sequence numbers wrap at 65535', async () => {
  const packets = (await speechPackets()).slice(0, 4).map((p, i) => ({ ...p, sequence: (65534 + i) & 0xffff }));
  const out: Int16Array[] = [];
  const mic = new MicrophoneDecoder((pcm) => out.push(pcm));
  for (const p of packets) mic.push(p);
  assert.is(mic.stats.decoded, 4);
  assert.is(mic.stats.dropped, 0);
});

Mic.run();
