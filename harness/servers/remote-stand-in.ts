/**
 * A stand-in for a hosted language model, for the benchmarks that point the server at one
 * (LLM_PROVIDER=openai, LLM_BASE_URL=<its baseUrl>): no internet is reachable here, so a real
 * OpenAI-compatible chat-completions server on 127.0.0.1 (chat-completions-server.ts) answers
 * instead, paced as a hosted model streams. It honours `stream: true` and
 * `stream_options.include_usage` as the OpenAI API does, and a client that goes away (an aborted
 * reply) ends its stream; `counts()` says how many requests came and how many were aborted.
 *
 * Pacing (RemotePacing): the first token `firstTokenMs` after the request arrived, then
 * `tokensPerS`, one streamed word piece (or tool-call argument piece) a token, every event paced:
 * the role delta comes one interval before the first token, and the finish, usage and [DONE]
 * events one interval apart after the last.
 *
 * Replies (spokenAnswer, the default): a short spoken answer of one or two sentences (20–35 words)
 * to the last user message, from a small table of topics (the questions the realtime bench asks,
 * by their words: the first topic whose pattern matches answers), or else a generic answer that
 * repeats the question's words; the request's output limit (`max_tokens`,
 * `max_completion_tokens`) cuts it short with finish reason 'length'. A bench with replies of its
 * own (the tool round trip's scripted calls) passes its own `answer`; the pacing is applied to it
 * all the same.
 */
import { startChatCompletionsServer, type ChatCompletionsServer, type ChatReply, type ChatRequestBody } from './chat-completions-server.js';

export interface RemotePacing {
  /** ms from the request's arrival to the first token (the first word or call piece). */
  firstTokenMs: number;
  /** Tokens a second after the first (one streamed piece a token). */
  tokensPerS: number;
}

/** What the stand-in saw. */
export interface RemoteCounts {
  requests: number;
  /** Requests whose client went away before the reply's end. */
  aborted: number;
  /** Of those, the ones that went before the first token was sent (nothing of the reply reached the client). */
  abortedBeforeFirstToken: number;
}

export interface RemoteStandIn {
  /** The chat-completions server; the server under test takes its `baseUrl` (…/v1) as LLM_BASE_URL. */
  server: ChatCompletionsServer;
  pacing: RemotePacing;
  counts(): RemoteCounts;
}

/** A reply to a request, before the pacing is applied. */
export type RemoteAnswer = (body: ChatRequestBody) => ChatReply;

/** [the words that name a topic, the answer]; tried in order, the first match answers. */
const TOPICS: Array<[RegExp, string]> = [
  [/\b(weather|rain|raining|sunny|umbrella)\b/, 'It looks like a mild day with a few clouds and only a small chance of rain. I would still take a light jacket if you are out this evening.'],
  [/\btime zone\b/, 'I do not live in any time zone myself, since I run wherever my server is. Tell me your city and I will work out your local time.'],
  [/\btime\b|\bclock\b/, 'I cannot see a clock from here, but your phone or computer shows the exact time. If you tell me your city, I can help with time zones.'],
  [/\bdogs?\b/, 'Why did the dog sit in the shade? Because it did not want to be a hot dog. I have plenty more where that came from.'],
  [/\bjoke\b|\bcats?\b/, 'Why did the cat sit on the computer? To keep an eye on the mouse. Cats always seem to know exactly where the action is.'],
  [/\bcapital\b|\bfrance\b|\bspain\b/, 'Paris is the capital of France, right on the river Seine. If you meant Spain, its capital is Madrid, in the very middle of the country.'],
  [/\beverest\b|\bmountain\b|\bclimb\b/, 'Mount Everest is about eight thousand eight hundred metres tall. Most climbers spend around two months on the mountain, getting used to the thin air.'],
  [/\btrain\b|\bstation\b/, 'I cannot see where you are, but a map app will show the nearest train station. Most city centres have one within a short walk.'],
  [/\brome\b|\bhistory\b/, 'Rome began as a small town on seven hills almost three thousand years ago. It grew into an empire that ruled the whole Mediterranean for centuries.'],
  [/\btable\b|\bbook\b|\brestaurant\b|\bdinner\b/, 'A table for two tonight sounds lovely. I cannot make the booking myself, but most restaurants take one by phone or on their website.'],
  [/\bpark\b/, 'Going to the park sounds like a great idea. If the weather holds, we could take a walk by the lake and find a bench in the sun.'],
  [/\bcolou?r\b|\bblue\b/, 'Blue is a lovely choice, calm like the sea and the sky. If I had to pick a favourite colour, I think I would choose green.'],
  [/\blondon\b|\bparis\b|\bfar\b/, 'London and Paris are about three hundred and forty kilometres apart. The train through the tunnel takes a little over two hours from centre to centre.'],
  [/\bkeys?\b/, 'I am afraid I cannot see your keys from here. Try the last place you came in, like a coat pocket, a bag or the table by the door.'],
  [/\bwaiting\b/, 'I am not waiting for anyone in particular. I am here to talk with you, so ask me anything you like and I will do my best.'],
  [/\bthinking\b/, 'I was thinking about how many questions people ask in a day. But I would much rather hear what is on your mind right now.'],
  [/\bwhere are you from\b/, 'I am not from anywhere in particular, since I am a computer program. I was built to run on a server and talk with people like you.'],
  [/\bhelp\b|\bwhat can you do\b/, 'Of course, I am happy to help. I can answer questions, explain things, tell a joke or keep you company, so just tell me what you need.'],
  [/\bhow are you\b/, 'I am doing well, thank you for asking. It is a good day for a chat, so tell me how your own day is going so far.'],
  [/\bwho are you\b|\bhello\b|\bhi\b/, 'Hello, I am a friendly assistant you can talk to out loud. Ask me a question about almost anything and I will answer in a sentence or two.'],
];

/** The generic answer's fixed words; the question's words (at most GIST_WORDS) come before them. */
const GENERIC = 'I would need a little more detail to answer that well, so tell me what matters most to you and I will keep it short.';
const GIST_WORDS = 8;

/** Starts the stand-in on a free port of 127.0.0.1, answering with `answer` at `pacing`. */
export async function startRemoteStandIn(pacing: RemotePacing, answer: RemoteAnswer = spokenAnswer): Promise<RemoteStandIn> {
  const intervalMs = 1000 / pacing.tokensPerS;
  const server = await startChatCompletionsServer((body) => ({
    ...answer(body),
    // The role delta is the stream's first event, the first token its second.
    firstDelayMs: Math.max(0, pacing.firstTokenMs - intervalMs),
    delayMs: intervalMs,
  }));
  return {
    server,
    pacing,
    counts: () => ({
      requests: server.requests.length,
      aborted: server.aborts.length,
      abortedBeforeFirstToken: server.aborts.filter((a) => a.eventsSent < 2).length,
    }),
  };
}

/** The pacing in words, for a bench's notes. */
export function describePacing(pacing: RemotePacing): string {
  return `first token ${pacing.firstTokenMs} ms after the request, then ${pacing.tokensPerS} tokens/s (one word piece or argument piece a token, every event paced)`;
}

/** The default reply: the topic's answer to the last user message, or the generic one (see the header). */
export function spokenAnswer(body: ChatRequestBody): ChatReply {
  const asked = lastUserText(body);
  const lower = asked.toLowerCase();
  const topic = TOPICS.find(([pattern]) => pattern.test(lower));
  const gist = asked.replace(/[?!.,]+/g, ' ').split(/\s+/).filter((w) => w !== '').slice(0, GIST_WORDS).join(' ');
  const text = topic ? topic[1] : gist === '' ? `I did not quite catch that. ${GENERIC}` : `You asked: ${gist}. ${GENERIC}`;
  const pieces = text.match(/\S+\s*/g) ?? [];
  const limit = body.max_completion_tokens ?? body.max_tokens ?? Infinity;
  return pieces.length > limit ? { text: pieces.slice(0, limit), finishReason: 'length' } : { text: pieces };
}

/** The text of the last user message (its text parts, where it has parts); '' without one. */
function lastUserText(body: ChatRequestBody): string {
  const last = body.messages.findLast((m) => m.role === 'user');
  if (!last || last.content === null || last.content === undefined) return '';
  if (typeof last.content === 'string') return last.content;
  return last.content.map((p) => (p.type === 'text' ? p.text : '')).join(' ');
}
