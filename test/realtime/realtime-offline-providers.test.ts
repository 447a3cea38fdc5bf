/**
 * A voice turn through the real offline stack, nothing scripted: Silero VAD, Whisper (skipped
 * with a printed reason when its model is not fetched), the rule-based responder as the language
 * model (deterministic; the local GGUF model is covered by its own test), the default offline
 * voice, and the avatar's media plane.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import path from 'node:path';
import { startTestServer, type TestServer, REPO_ROOT } from '../../harness/servers/server.js';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { speechPcm24k } from '../../harness/measures/speech.js';
import { whisperModelPath } from '../../src/providers/asr/index.js';

const WHISPER = whisperModelPath(path.join(REPO_ROOT, 'models'));
if (!WHISPER) process.stdout.write('realtime offline providers: skipping: the Whisper model is not fetched (run npm run setup:models)\n');
const whisperTest = WHISPER ? test : test.skip;

let t: TestServer;

test.before(async () => {
  t = await startTestServer({ env: { LLM_PROVIDER: 'offline' } });
});

test.after(async () => {
  await t?.close();
});

whisperTest('a spoken question is heard, transcribed by Whisper, answered and spoken back', async () => {
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  const speech = speechPcm24k('Hello, can you hear me?', 150);
  const pad = new Int16Array(24000 * 0.8);
  for (const pcm of [pad, speech, pad]) c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(pcm.buffer).toString('base64') });
  const heard = await c.waitFor('conversation.item.input_audio_transcription.completed', { timeoutMs: 60_000 });
  assert.match(heard.transcript.toLowerCase(), /hello|hear/);
  const done = await c.waitFor('response.done', { timeoutMs: 60_000 });
  assert.is(done.response.status, 'completed');
  const spoken = done.response.output[0].content[0].transcript as string;
  assert.match(spoken, /rule-based responder/);
  const audio = c.ofType('response.output_audio.delta').reduce((n, e) => n + Buffer.from(e.delta, 'base64').length / 2, 0);
  assert.ok(audio / 24000 > 2, `spoken reply of ${audio / 24000} s`);
  await c.close();
});

test.run();
