/**
 * Realtime latency over a real WebSocket against the real server process (its own process, real
 * store, real media plane), with the offline responder as the language model and the default
 * offline voice, so that what is measured is this server and not a model:
 *  - text turns: response.create sent → first response.output_audio.delta, and → first
 *    response.output_image.delta (the session asks for images);
 *  - voice turns: a spoken question streamed in real time (20 ms appends) → first audio delta of
 *    the reply, measured from the end of the speech (so it includes the VAD's silence window,
 *    silence_duration_ms) and from input_audio_buffer.speech_stopped (what remains: the
 *    transcription, the model, the voice and the first frame).
 */
import { spawnServer } from '../test/helpers/process.js';
import { tempDir } from '../test/helpers/server.js';
import { RealtimeTestClient, type ServerEvent } from '../test/helpers/realtime-client.js';
import { speechPcm24k } from '../test/helpers/speech.js';
import { summarise, type Benchmark } from './lib/harness.js';

const TEXT_TURNS = 20;
const VOICE_TURNS = 10;
const APPEND_MS = 20;
/** The VAD's end-of-turn silence: OpenAI's default (500); REALTIME_BENCH_SILENCE_MS overrides it. */
const SILENCE_DURATION_MS = Number(process.env.REALTIME_BENCH_SILENCE_MS ?? 500);

const QUESTIONS = ['Hello, who are you?', 'What can you do for me?', 'Tell me about the weather.', 'How are you today?', 'What time is it?'];

const bench: Benchmark = {
  name: 'realtime',
  description: 'WebSocket realtime latency: response.create → first audio / first image; end of user speech → first audio',
  async run(ctx) {
    const firstAudio: number[] = [];
    const firstImage: number[] = [];
    const voiceFromSpeechEnd: number[] = [];
    const voiceFromStopped: number[] = [];
    let engines = '';
    for (let run = 0; run < ctx.runs; run++) {
      const server = await spawnServer({ DATA_DIR: tempDir('avatar-bench-'), LLM_PROVIDER: 'offline', LOG_LEVEL: 'info', PRELOAD_MODELS: 'true' });
      try {
        // Measure a warm server: wait until the voices and the recogniser are loaded.
        for (let waited = 0; !server.stdout().includes('models warmed up'); waited += 100) {
          if (waited > 120_000) throw new Error('the server did not finish warming up in 2 minutes');
          await new Promise((r) => setTimeout(r, 100));
        }
        const key = server.bootstrapKey as string;
        const c = await RealtimeTestClient.connect(server.url, { key, query: 'model=gpt-realtime' });
        await c.waitFor('session.created', { timeoutMs: 60_000 });
        c.send({
          type: 'session.update',
          session: { type: 'realtime', output_modalities: ['audio', 'image'], audio: { input: { turn_detection: { type: 'server_vad', silence_duration_ms: SILENCE_DURATION_MS } } } },
        });
        await c.waitFor('session.updated');
        // One warm-up turn (loads the voice model), not measured.
        await textTurn(c, 'Hi there.');
        for (let i = 0; i < TEXT_TURNS; i++) {
          const r = await textTurn(c, QUESTIONS[i % QUESTIONS.length] as string);
          firstAudio.push(r.audioMs);
          firstImage.push(r.imageMs);
        }
        for (let i = 0; i < VOICE_TURNS; i++) {
          const speech = speechPcm24k(QUESTIONS[i % QUESTIONS.length] as string);
          const r = await voiceTurn(c, speech);
          voiceFromSpeechEnd.push(r.fromSpeechEndMs);
          voiceFromStopped.push(r.fromStoppedMs);
        }
        await c.close();
        engines = `voices and recogniser as the server logged them: ${[...server.stdout().matchAll(/"msg":"([^"]*(?:voice|whisper|piper|recogni)[^"]*)"/gi)].map((m) => m[1]).slice(0, 4).join('; ')}`;
      } catch (err) {
        throw new Error(`${(err as Error).message.slice(0, 300)}\nserver output (tail):\n${server.stdout().slice(-3000)}`);
      } finally {
        server.child.kill('SIGTERM');
        await server.exited;
      }
      ctx.log(`run ${run + 1}: first audio p50 ${median(firstAudio)} ms, first image p50 ${median(firstImage)} ms, voice turn p50 ${median(voiceFromSpeechEnd)} ms`);
    }
    return {
      params: { text_turns_per_run: TEXT_TURNS, voice_turns_per_run: VOICE_TURNS, runs: ctx.runs, llm: 'offline responder', silence_duration_ms: SILENCE_DURATION_MS, video: '512x512 JPEG @ 25 fps' },
      metrics: [
        summarise('response.create → first output_audio.delta', 'ms', firstAudio),
        summarise('response.create → first output_image.delta', 'ms', firstImage),
        summarise('end of user speech → first audio delta (incl. VAD silence window)', 'ms', voiceFromSpeechEnd),
        summarise('speech_stopped → first audio delta', 'ms', voiceFromStopped),
      ],
      notes: [
        `Goals: first audio ≤ 150 ms, first image ≤ 200 ms, voice turn ≤ 700 ms p50. The voice-turn figure includes the ${SILENCE_DURATION_MS} ms of silence the VAD waits for before it ends the turn.`,
        ...(engines ? [engines] : []),
      ],
    };
  },
};

async function textTurn(c: RealtimeTestClient, text: string): Promise<{ audioMs: number; imageMs: number }> {
  const from = c.events.length;
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  await c.waitFor('conversation.item.done', { from });
  const t0 = performance.now();
  const marks = watch(c, t0, ['response.output_audio.delta', 'response.output_image.delta']);
  c.send({ type: 'response.create' });
  // Only the start is measured: cancel once both have arrived instead of listening to the whole reply.
  await c.waitFor('response.output_audio.delta', { from, timeoutMs: 60_000 });
  await c.waitFor('response.output_image.delta', { from, timeoutMs: 60_000 });
  c.send({ type: 'response.cancel' });
  await c.waitFor('response.done', { from, timeoutMs: 60_000 });
  const m = marks();
  return { audioMs: m['response.output_audio.delta'] as number, imageMs: m['response.output_image.delta'] as number };
}

async function voiceTurn(c: RealtimeTestClient, speech: Int16Array): Promise<{ fromSpeechEndMs: number; fromStoppedMs: number }> {
  const from = c.events.length;
  const step = (24000 * APPEND_MS) / 1000;
  const lead = new Int16Array(24000 * 0.3);
  const tail = new Int16Array(24000 * 1.5);
  const audio = new Int16Array(lead.length + speech.length + tail.length);
  audio.set(speech, lead.length);
  // espeak-ng pads its speech with ~300 ms of silence: the speech ends at its last audible sample.
  const speechEndSample = lead.length + lastAudible(speech);
  let speechEnd = 0;
  let stoppedAt = 0;
  let firstAudio = 0;
  const onEvent = (e: ServerEvent) => {
    const now = performance.now();
    if (e.type === 'input_audio_buffer.speech_stopped' && !stoppedAt) stoppedAt = now;
    if (e.type === 'response.output_audio.delta' && !firstAudio) firstAudio = now;
  };
  const listener = (data: Buffer) => onEvent(JSON.parse(data.toString()) as ServerEvent);
  c.ws.on('message', listener);
  const start = performance.now();
  for (let i = 0, n = 0; i < audio.length; i += step, n++) {
    // Real-time pacing: the client's microphone delivers 20 ms every 20 ms.
    const due = start + n * APPEND_MS;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const part = audio.subarray(i, Math.min(audio.length, i + step));
    c.send({ type: 'input_audio_buffer.append', audio: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('base64') });
    if (!speechEnd && i + step >= speechEndSample) speechEnd = due + ((speechEndSample - i) / 24000) * 1000;
  }
  await c.waitFor('response.output_audio.delta', { from, timeoutMs: 60_000 });
  c.send({ type: 'response.cancel' });
  await c.waitFor('response.done', { from, timeoutMs: 60_000 });
  c.ws.off('message', listener);
  return { fromSpeechEndMs: Math.round(firstAudio - speechEnd), fromStoppedMs: Math.round(firstAudio - stoppedAt) };
}

/** Records when each of `types` first arrives after t0. */
function watch(c: RealtimeTestClient, t0: number, types: string[]): () => Record<string, number> {
  const seen: Record<string, number> = {};
  const listener = (data: Buffer) => {
    const type = (JSON.parse(data.toString()) as ServerEvent).type;
    if (types.includes(type) && seen[type] === undefined) seen[type] = Math.round(performance.now() - t0);
  };
  c.ws.on('message', listener);
  return () => {
    c.ws.off('message', listener);
    return seen;
  };
}

function lastAudible(pcm: Int16Array): number {
  let peak = 0;
  for (const v of pcm) peak = Math.max(peak, Math.abs(v));
  for (let i = pcm.length - 1; i >= 0; i--) if (Math.abs(pcm[i] as number) > peak * 0.02) return i + 1;
  return pcm.length;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

export default bench;
