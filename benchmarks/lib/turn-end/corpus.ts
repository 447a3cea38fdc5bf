/**
 * The turn-end benchmark's utterances (turn-end.bench.ts): what is said, by whom, at what rate, on
 * what line, and where its pauses are.
 *
 * Texts (TEXTS), by kind:
 *  - question, statement: finished, without a pause (many questions end in a preposition, "Where
 *    are you from?", a word a detector may distrust as an ending);
 *  - list: items with a pause after each comma ("I need eggs, | milk, | and some bread.");
 *  - hesitation: a filler and a pause ("I would like, um, | a cup of coffee, please.");
 *  - mid-clause: a pause of 200–1,000 ms inside a clause ("a table for | two people");
 *  - trailing-conjunction: a pause after "and", "but", "because" ... ("I went to the shop and |
 *    bought some milk.");
 *  - goes-on: a finished sentence, a gap, then more ("What is the capital of France? | And what
 *    about Spain?"): the gap is a sentence's end, where answering is right and giving way when the
 *    user goes on is the server's part; it is reported apart, never as a cut-off.
 * Mid-sentence pauses are put into the sentence spoken whole (harness/measures/voices.ts,
 * speechWithPauses: at the end of the last phoneme of the words before the pause, by the voice's
 * own timings), so the words before them carry a mid-sentence melody and a short last word ("and",
 * "to") is heard before the pause; goes-on's parts are spoken apart, each with its own final melody.
 *
 * Speakers: every Piper voice fetched, flite's four and four espeak-ng variants (at least 9 when
 * Piper's joe is fetched). Each text is spoken REPEATS times, by speakers in rotation (text k,
 * repeat r: speaker (k × REPEATS + r) mod S), each at a rate of SPEEDS in turn and on a line of
 * LINES in turn: digital silence, or a live microphone's pink noise floor at -60, -55 or -50 dBFS
 * (seeded by the utterance, so every judge hears the same line). Every utterance has LEAD_MS of
 * line before the speech and TAIL_MS after it.
 *
 * The plan (corpusPlan: which text, by whom, how fast, on what line) is fixed and cheap; speaking
 * it (speakCorpus) takes minutes. Everything is deterministic for flite and espeak-ng; Piper's
 * timing varies a little from run to run, so the signals file (signals.ts), keyed by the plan, is
 * the corpus a fit and a replay read, not this module.
 */
import { FliteVoice } from '../../../src/providers/tts/flite.js';
import type { Voice } from '../../../src/providers/tts/base.js';
import { concatSamples, silence } from '../../../harness/measures/speech.js';
import { espeakTestVoices, piperTestVoices, speechWithPauses, voiceSpeech } from '../../../harness/measures/voices.js';
import { PinkNoise, dbfsToRms } from '../voice-turns.js';

export const RATE_HZ = 24000;
export const LEAD_MS = 500;
/** Line after the speech: longer than any judge waits after a finished utterance but the ceiling. */
export const TAIL_MS = 3000;
export const REPEATS = 4;
export const SPEEDS = [1, 0.8, 1, 1.25] as const;
/** null: digital silence; else the noise floor's dBFS. */
export const LINES: ReadonlyArray<number | null> = [null, -60, -55, -50];

export type UtteranceKind = 'question' | 'statement' | 'list' | 'hesitation' | 'mid-clause' | 'trailing-conjunction' | 'goes-on';

/** A text: the sentence, and the pauses put into it (the words before each, and its length). */
export interface Text {
  kind: UtteranceKind;
  /** For goes-on: the two parts joined with ' | '. */
  sentence: string;
  cuts: Array<{ after: string; ms: number }>;
}

/** A pause of an utterance: where it is, and whether the turn goes on after it. */
export interface Pause {
  /** [start, end) in the utterance's samples. */
  start: number;
  end: number;
  /** 'continue': the turn goes on (mid-sentence); 'sentence-end': a finished sentence, then more (goes-on). */
  label: 'continue' | 'sentence-end';
  /** The words said before it. */
  before: string;
}

/** What an utterance is: its text, speaker and line (the signals file keeps it beside the measurements). */
export interface UtteranceInfo {
  id: string;
  kind: UtteranceKind;
  text: string;
  /** The voice's id and the rate it spoke at. */
  voice: string;
  speed: number;
  /** The line: null for digital silence, else the noise floor in dBFS. */
  noiseDbfs: number | null;
}

export interface Utterance extends UtteranceInfo {
  /** Lead, speech and pauses, then the tail, -1..1 at RATE_HZ, the line's noise added. */
  audio: Float32Array;
  /** Where the speech begins and ends in `audio` (samples). */
  speechStart: number;
  speechEnd: number;
  pauses: Pause[];
}

const q = (sentence: string): Text => ({ kind: 'question', sentence, cuts: [] });
const st = (sentence: string): Text => ({ kind: 'statement', sentence, cuts: [] });
/** `parts` joined by the spaces between them, with a pause of `ms[i]` after part i (the last has none). */
function paused(kind: UtteranceKind, parts: string[], ms: number[]): Text {
  const cuts: Text['cuts'] = [];
  let said = '';
  parts.forEach((p, i) => {
    said = said === '' ? p : `${said} ${p}`;
    if (i < parts.length - 1) cuts.push({ after: said, ms: ms[i % ms.length]! });
  });
  return { kind, sentence: said, cuts };
}
const goesOn = (first: string, then: string, ms: number): Text => ({ kind: 'goes-on', sentence: `${first} | ${then}`, cuts: [{ after: first, ms }] });

export const TEXTS: Text[] = [
  ...[
    'What is the capital of France?',
    'Where are you from?',
    'What are you thinking of?',
    'Who did you go with?',
    'Can you tell me a joke about cats?',
    'Where is the nearest train station?',
    'Who are you waiting for?',
    'What is this made of?',
    'How do I get to the airport?',
    'What time does the museum open?',
    'Which one are you talking about?',
    'Do you know any good restaurants around here?',
    'How long does it take to boil an egg?',
    'What should I cook for dinner tonight?',
    'Is it going to rain tomorrow?',
    'Why is the sky blue?',
    'What music do you listen to?',
    'Could you recommend a good book?',
    'How many people live in Tokyo?',
    'What did you have for breakfast?',
    'Where did you put my keys?',
    'What is that song about?',
    'Who wrote Romeo and Juliet?',
    'How far is the moon from the earth?',
  ].map(q),
  ...[
    'I would like to book a table for two.',
    'My name is Sarah.',
    'I think that sounds like a great idea.',
    'Please turn off the lights in the kitchen.',
    'I need to be at the office by nine.',
    'That was the best movie I have seen this year.',
    'Thank you so much for your help.',
    'Set a timer for ten minutes.',
    'I am looking for a birthday present for my sister.',
    'We are going to the beach this weekend.',
    'Tell me something interesting.',
    'I do not know what to do.',
    'Let us talk about something else.',
    'The weather has been lovely lately.',
    'I just finished reading a really good book.',
    'Remind me to call my mother tomorrow.',
  ].map(st),
  paused('list', ['I need eggs,', 'milk,', 'and some bread.'], [250, 400]),
  paused('list', ['We visited Paris,', 'Rome,', 'and Madrid last summer.'], [400, 600]),
  paused('list', ['For the trip I packed a tent,', 'a sleeping bag,', 'and a stove.'], [600, 250]),
  paused('list', ['My favourite colours are red,', 'green,', 'and blue.'], [300, 500]),
  paused('list', ['Can you add apples,', 'bananas,', 'and oranges to the list?'], [500, 300]),
  paused('list', ['The meeting is on Monday,', 'Wednesday,', 'and Friday.'], [250, 600]),
  paused('list', ['I play the guitar,', 'the piano,', 'and a little bit of drums.'], [400, 400]),
  paused('list', ['We need chairs,', 'tables,', 'and a few lamps for the party.'], [600, 300]),
  paused('hesitation', ['I would like, um,', 'a cup of coffee, please.'], [600]),
  paused('hesitation', ['Can you tell me, uh,', 'how to get to the station?'], [800]),
  paused('hesitation', ['So, um,', 'what do you think about it?'], [1000]),
  paused('hesitation', ['I was thinking, uh,', 'maybe we could go out tonight.'], [400]),
  paused('hesitation', ['The thing is, um,', 'I forgot my password.'], [700]),
  paused('hesitation', ['What is the, uh,', 'the name of that actor?'], [900]),
  paused('hesitation', ['My brother, um,', 'lives in Canada.'], [500]),
  paused('hesitation', ['I need to, uh,', 'change my flight.'], [1000]),
  paused('hesitation', ['Could you, um,', 'play some music?'], [600]),
  paused('hesitation', ['It was, uh,', 'really cold yesterday.'], [800]),
  paused('mid-clause', ['What time zone', 'are you in right now?'], [450]),
  paused('mid-clause', ['I would like to book a table for', 'two people tonight.'], [800]),
  paused('mid-clause', ['Can you tell me about the', 'history of Rome?'], [600]),
  paused('mid-clause', ['So what I was thinking is that', 'we could go to the park.'], [300]),
  paused('mid-clause', ['My favourite colour is', 'blue, what is yours?'], [500]),
  paused('mid-clause', ['How far is it from', 'London to Paris?'], [1000]),
  paused('mid-clause', ['Do you know where', 'I left my keys?'], [600]),
  paused('mid-clause', ['Is it going to', 'rain tomorrow?'], [200]),
  paused('mid-clause', ['I was wondering if', 'you could help me.'], [450]),
  paused('mid-clause', ['The best way to get there is', 'by train.'], [700]),
  paused('mid-clause', ['Could you remind me to', 'buy some milk?'], [900]),
  paused('mid-clause', ['What I really want is a', 'quiet weekend at home.'], [300]),
  paused('mid-clause', ['The restaurant on the corner of', 'Main Street is great.'], [800]),
  paused('mid-clause', ['I think the problem with my', 'computer is the battery.'], [1000]),
  paused('mid-clause', ['Can you send a message to', 'my brother?'], [500]),
  paused('mid-clause', ['We should probably leave before', 'it gets dark.'], [600]),
  paused('mid-clause', ['The train to', 'Boston leaves at noon.'], [200]),
  paused('mid-clause', ['I have been learning to play the', 'violin for a year.'], [700]),
  paused('mid-clause', ['Tell me more about', 'your favourite holiday.'], [400]),
  paused('mid-clause', ['What is the difference between', 'a frog and a toad?'], [900]),
  paused('trailing-conjunction', ['I went to the shop and', 'bought some milk.'], [500]),
  paused('trailing-conjunction', ['I wanted to call you but', 'my phone was dead.'], [700]),
  paused('trailing-conjunction', ['We could take the bus or', 'we could walk.'], [300]),
  paused('trailing-conjunction', ['I stayed at home because', 'it was raining.'], [900]),
  paused('trailing-conjunction', ['She likes coffee and', 'I like tea.'], [600]),
  paused('trailing-conjunction', ['You can have the cake if', 'you finish your dinner.'], [400]),
  paused('trailing-conjunction', ['I will call you when', 'I get home.'], [800]),
  paused('trailing-conjunction', ['It was late so', 'we took a taxi.'], [1000]),
  paused('trailing-conjunction', ['I like the blue one but', 'the red one is cheaper.'], [500]),
  paused('trailing-conjunction', ['We went to the museum and then', 'we had lunch.'], [700]),
  goesOn('What is the capital of France?', 'And what about Spain?', 800),
  goesOn('Tell me a joke.', 'Make it about dogs.', 700),
  goesOn('How tall is Mount Everest?', 'And how long does it take to climb it?', 900),
  goesOn('I am hungry.', 'What should I eat?', 600),
  goesOn('Turn on the lights.', 'Actually, just the ones in the kitchen.', 1000),
  goesOn('What is the weather like today?', 'I want to go for a run.', 500),
  goesOn('I love that song.', 'Who sings it?', 800),
  goesOn('Book me a flight to Rome.', 'For next Friday.', 700),
];

/** The speakers in their fixed order (engines interleaved): flite, Piper, espeak-ng in turn. */
export async function corpusVoices(): Promise<Voice[]> {
  const flite = (v: string): Voice => new FliteVoice(`flite-${v}`, { voice: v });
  const [us, usF3, gbM3, usM7] = espeakTestVoices() as [Voice, Voice, Voice, Voice];
  return [flite('slt'), ...(await piperTestVoices()), us, flite('rms'), usF3, flite('awb'), gbM3, flite('kal16'), usM7];
}

/** One utterance to be spoken: its text, speaker, rate and line, and its number (the noise's seed). */
export interface PlannedUtterance {
  text: Text;
  voice: Voice;
  speed: number;
  noiseDbfs: number | null;
  n: number;
}

/** Every utterance of the corpus (see the header), `limit` of them at most (the first of each text first). */
export async function corpusPlan(limit?: number): Promise<PlannedUtterance[]> {
  const voices = await corpusVoices();
  const plan: PlannedUtterance[] = [];
  for (let r = 0; r < REPEATS; r++) {
    TEXTS.forEach((text, k) => {
      plan.push({ text, voice: voices[(k * REPEATS + r) % voices.length]!, speed: SPEEDS[(k + r) % SPEEDS.length]!, noiseDbfs: LINES[(k + 2 * r) % LINES.length]!, n: plan.length });
    });
  }
  return plan.slice(0, limit ?? plan.length);
}

/** The planned utterances, spoken. */
export async function speakCorpus(plan: PlannedUtterance[], log?: (line: string) => void): Promise<Utterance[]> {
  const out: Utterance[] = [];
  for (const p of plan) {
    out.push(await utterance(p.text, p.voice, p.speed, p.noiseDbfs, p.n));
    if (log && out.length % 50 === 0) log(`turn-end corpus: ${out.length} of ${plan.length} utterances spoken`);
  }
  return out;
}

async function utterance(text: Text, voice: Voice, speed: number, noiseDbfs: number | null, n: number): Promise<Utterance> {
  const lead = silence(LEAD_MS, RATE_HZ);
  let speech: Float32Array;
  let spans: Array<[number, number]>;
  let said: string;
  if (text.kind === 'goes-on') {
    const [first, then] = text.sentence.split(' | ') as [string, string];
    const a = await voiceSpeech(voice, first, RATE_HZ, speed);
    const b = await voiceSpeech(voice, then, RATE_HZ, speed);
    const gap = silence(text.cuts[0]!.ms, RATE_HZ);
    speech = concatSamples([a, gap, b]);
    spans = [[a.length, a.length + gap.length]];
    said = `${first} ${then}`;
  } else {
    ({ audio: speech, pauses: spans } = await speechWithPauses(voice, text.sentence, text.cuts, RATE_HZ, speed));
    said = text.sentence;
  }
  const audio = concatSamples([lead, speech, silence(TAIL_MS, RATE_HZ)]);
  if (noiseDbfs !== null) new PinkNoise(1 + n, dbfsToRms(noiseDbfs)).addTo(audio);
  const pauses: Pause[] = spans.map(([start, end], i) => ({
    start: lead.length + start,
    end: lead.length + end,
    label: text.kind === 'goes-on' ? 'sentence-end' : 'continue',
    before: text.cuts[i]!.after,
  }));
  const rate = speed === 1 ? '' : `@${speed}`;
  return {
    id: `${n}:${voice.id}${rate}${noiseDbfs === null ? '' : `~${noiseDbfs}dB`}`,
    kind: text.kind,
    text: said,
    voice: voice.id,
    speed,
    noiseDbfs,
    audio,
    speechStart: lead.length,
    speechEnd: lead.length + speech.length,
    pauses,
  };
}
