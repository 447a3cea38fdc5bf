/**
 * What the realtime benchmark says about its voice turns (lib/voice-turns.ts), per mode (turn
 * detection × line, or the concurrent sessions):
 *  - metrics over the questions (complete and paused): end of speech → first audio delta, the
 *    end-of-turn decision, the transcription tail and the server's steps from its 'response
 *    timing' log; counts of turns that waited more than WAIT_MS for speech_stopped and of false
 *    cut-ins (paused questions apart from the others); the answers to be cut on their own: end
 *    of the whole speech → first audio of the reply to it;
 *  - notes: how turns ended, the waiting turns by name, what became of the replies to the first
 *    part of the answers to be cut, and a line per speaker (p50 and worst) to see which voices
 *    are slow;
 *  - explainTurns: the server's own account of a session's turns (its 'turn ended' log: by the
 *    silence or the end-of-turn model, with the model's probability, and what it heard), printed
 *    for slow turns and cut-ins always and for every turn with REALTIME_BENCH_VERBOSE=1; a turn
 *    that waited, got no reply or wedged its session also gets the events it saw (the turn's
 *    trace), and a wedged session the server's last log lines about it.
 */
import type { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { median, summarise, type BenchContext, type Metric } from './harness.js';
import type { ResponseTiming } from '../../harness/servers/process.js';
import { RATE_HZ, TAIL_MS, type VoiceTurn } from './voice-turns.js';

/** A turn that took longer than this from the end of a complete utterance to speech_stopped waited. */
export const WAIT_MS = 1500;

/** How a mode's turns ended, from the server's log. */
export interface Endings {
  model: number;
  silence: number;
  /** Responses that took the reply started before the turn ended ('early reply taken'). */
  early: number;
}

export function noEndings(): Endings {
  return { model: 0, silence: 0, early: 0 };
}

export function addEndings(into: Endings, more: Endings): void {
  into.model += more.model;
  into.silence += more.silence;
  into.early += more.early;
}

const questions = (turns: VoiceTurn[]) => turns.filter((t) => t.sample.kind !== 'then-more');
const thenMore = (turns: VoiceTurn[]) => turns.filter((t) => t.sample.kind === 'then-more');
const cutIn = (t: VoiceTurn) => t.sample.kind !== 'then-more' && t.earlyStopsMs.length > 0;
const waited = (t: VoiceTurn) => t.decisionMs === null || t.decisionMs > WAIT_MS;
const count = (name: string, n: number): Metric => summarise(name, 'count', [n]);

function values(turns: VoiceTurn[], key: 'fromSpeechEndMs' | 'decisionMs' | 'transcriptionTailMs'): number[] {
  return turns.map((t) => t[key]).filter((v): v is number => v !== null);
}

/** The metrics of one mode's turns (see the header); `timings` by response id. */
export function turnMetrics(tag: string, turns: VoiceTurn[], timings: Map<string, ResponseTiming>): Metric[] {
  const q = questions(turns);
  const server = q.map((x) => (x.responseId ? timings.get(x.responseId) : undefined)).filter((x): x is ResponseTiming => x !== undefined);
  const steps = server.filter((s) => s.firstTextMs !== null && s.firstClauseMs !== null && s.firstVoiceChunkMs !== null && s.firstAudioMs !== null);
  const paused = q.filter((t) => t.sample.kind === 'paused');
  const metrics = [
    summarise(`${tag}: end of speech → first audio delta`, 'ms', values(q, 'fromSpeechEndMs')),
    summarise(`${tag}: end-of-turn decision (end of speech → speech_stopped)`, 'ms', values(q, 'decisionMs')),
    summarise(`${tag}: transcription tail (speech_stopped → transcription.completed)`, 'ms', values(q, 'transcriptionTailMs')),
    summarise(`${tag}: model first token`, 'ms', steps.map((s) => s.firstTextMs!)),
    summarise(`${tag}: model first clause`, 'ms', steps.map((s) => s.firstClauseMs!)),
    summarise(`${tag}: voice first chunk`, 'ms', steps.map((s) => s.firstVoiceChunkMs! - s.firstClauseMs!)),
    summarise(`${tag}: first tick (chunk queued → audio played out)`, 'ms', steps.map((s) => s.firstAudioMs! - s.firstVoiceChunkMs!)),
    count(`${tag}: turns that waited > ${WAIT_MS} ms for speech_stopped (of ${turns.length})`, turns.filter(waited).length),
    count(`${tag}: false cut-ins on paused questions (of ${paused.length})`, paused.filter(cutIn).length),
    count(`${tag}: false cut-ins on other questions (of ${q.length - paused.length})`, q.filter((t) => t.sample.kind !== 'paused' && cutIn(t)).length),
  ];
  const more = thenMore(turns);
  if (more.length > 0) metrics.push(summarise(`${tag}: answers to be cut: end of the whole speech → first audio delta of its reply`, 'ms', values(more, 'fromSpeechEndMs')));
  return metrics;
}

/** The notes of one mode's turns (see the header). */
export function turnNotes(tag: string, turns: VoiceTurn[], endings: Endings): string[] {
  const q = questions(turns);
  const paused = q.filter((t) => t.sample.kind === 'paused');
  const waits = turns.filter(waited).map((t) => `"${t.sample.label}" (${t.decisionMs === null ? 'never' : `${t.decisionMs} ms`})`);
  const notes = [
    `${tag}: turns ended by the end-of-turn model ${endings.model}, by silence ${endings.silence}; responses that took the reply started before the turn ended (early reply) ${endings.early}; ${turns.length} voice turns`,
    `${tag}: false cut-ins ${paused.filter(cutIn).length} of ${paused.length} paused questions, ${q.filter((t) => t.sample.kind !== 'paused' && cutIn(t)).length} of ${q.length - paused.length} others; ${turns.filter((t) => t.fromSpeechEndMs === null).length} turns without a reply heard within ${TAIL_MS} ms`,
    `${tag}: ${waits.length} turns waited > ${WAIT_MS} ms from the end of the speech to speech_stopped${waits.length > 0 ? `: ${waits.join('; ')}` : ''}`,
  ];
  const wedged = turns.filter((t) => t.wedged);
  if (wedged.length > 0) notes.push(`${tag}: ${wedged.length} sessions wedged (input_audio_buffer.clear unanswered), after: ${wedged.map((t) => `"${t.sample.label}"`).join('; ')}; the rest of their turns went to a new session`);
  const more = thenMore(turns);
  if (more.length > 0) notes.push(`${tag}: ${thenMoreNote(more)}`);
  notes.push(`${tag}: per speaker, end of speech → first audio p50/worst ms: ${speakerLine(q)}`);
  return notes;
}

/** What became of the answers to be cut: the first part's own turn, a reply in the gap, and whether it was stopped. */
function thenMoreNote(turns: VoiceTurn[]): string {
  const inGap = (t: VoiceTurn) => t.partReplies.filter((r) => r.firstAudioMs !== null && r.firstAudioMs < gapEndMs(t));
  const over = (t: VoiceTurn) => t.partReplies.filter((r) => r.firstAudioMs !== null && r.firstAudioMs >= gapEndMs(t));
  const gap = turns.filter((t) => inGap(t).length > 0);
  const late = turns.filter((t) => inGap(t).length === 0 && over(t).length > 0);
  const stopped = (rs: VoiceTurn['partReplies']) => rs.every((r) => r.stopped);
  const held = turns.filter((t) => t.partReplies.every((r) => r.firstAudioMs === null));
  return (
    `answers to be cut (${turns.length}): the first part ended as a turn of its own in ${turns.filter((t) => t.earlyStopsMs.length > 0).length}; ` +
    `a reply's first audio came in the gap in ${gap.length} (then stopped in ${gap.filter((t) => stopped(inGap(t))).length}), ` +
    `only after the speaker went on in ${late.length} (then stopped in ${late.filter((t) => stopped(over(t))).length}); ` +
    `no reply audio before the whole speech ended in ${held.length} (${held.filter((t) => t.partReplies.length > 0).length} of them had a reply started and stopped before its audio)`
  );
}

/** Where the gap of an answer to be cut ends, ms from the end of its speech (negative). */
function gapEndMs(t: VoiceTurn): number {
  return t.sample.pause ? ((t.sample.pause[1] - t.sample.speechEnd) / RATE_HZ) * 1000 : 0;
}

/** "flite-slt 480/730, piper-joe 512/none, …": p50 and worst per speaker, in the speakers' order; 'none': a turn without a reply. */
function speakerLine(turns: VoiceTurn[]): string {
  const by = new Map<string, Array<number | null>>();
  for (const t of turns) by.set(t.sample.speaker, [...(by.get(t.sample.speaker) ?? []), t.fromSpeechEndMs]);
  return [...by]
    .map(([speaker, ms]) => {
      const heard = ms.filter((x): x is number => x !== null);
      const worst = heard.length < ms.length ? 'none' : String(Math.max(...heard));
      return `${speaker} ${heard.length > 0 ? median(heard) : '-'}/${worst}`;
    })
    .join(', ');
}

/**
 * The server's account of one session's turns (its log in `stdout`): counts how they ended, and
 * prints every false cut-in and every turn that waited (or, `verbose`, every turn, what the
 * server heard in each, and what became of the replies to a part of the speech).
 */
export function explainTurns(ctx: BenchContext, tag: string, stdout: string, c: RealtimeTestClient, turns: VoiceTurn[], verbose: boolean): Endings {
  const sessionId = (c.events.find((e) => e.type === 'session.created') as { session?: { id?: string } } | undefined)?.session?.id;
  const endings = noEndings();
  type Ended = { sessionId: string; itemId: string; endedBy: string; endOfTurnProbability: number | null; wordsEndProbability?: number | null; wordsReadMs?: number | null };
  const ended = new Map<string, Ended>();
  for (const m of stdout.matchAll(/^\{.*"msg":"turn ended".*\}$/gm)) {
    const r = JSON.parse(m[0]) as Ended;
    if (r.sessionId !== sessionId) continue;
    if (r.endedBy === 'model') endings.model++;
    else if (r.endedBy === 'silence') endings.silence++;
    ended.set(r.itemId, r);
  }
  for (const m of stdout.matchAll(/^\{.*"msg":"early reply taken".*\}$/gm)) {
    if ((JSON.parse(m[0]) as { sessionId: string }).sessionId === sessionId) endings.early++;
  }
  const heard = new Map<string, string>();
  for (const e of c.events) if (e.type === 'conversation.item.input_audio_transcription.completed') heard.set(e.item_id as string, e.transcript as string);
  const how = (id: string | null) => {
    const r = id ? ended.get(id) : undefined;
    const words = r?.wordsEndProbability == null ? '' : `, words ${r.wordsEndProbability.toExponential(1)} read in ${r.wordsReadMs} ms`;
    return `${r?.endedBy}, p=${r?.endOfTurnProbability?.toFixed(2)}${words}, heard "${id ? heard.get(id) : undefined}"`;
  };
  if (verbose) {
    // Every turn the server ended, in order, with what it heard (a cut-in shows as the first part of a sentence).
    for (const [id] of ended) ctx.log(`${tag}: turn ended by ${how(id)}`);
  }
  for (const t of turns) {
    if (cutIn(t)) ctx.log(`${tag}: false cut-in on "${t.sample.label}" at ${t.earlyStopsMs.join(', ')} ms from the end of the speech`);
    const odd = waited(t) || t.fromSpeechEndMs === null || t.wedged;
    if (odd || verbose) ctx.log(`${tag}: "${t.sample.label}" ended ${t.decisionMs ?? 'never'} ms after the speech (${how(t.itemId)}), first audio ${t.fromSpeechEndMs ?? 'none'} ms`);
    if (odd) ctx.log(`${tag}:   its events (ms from the end of the speech): ${t.trace.join('; ')}`);
    if (t.wedged) {
      const lines = stdout.split('\n').filter((l) => sessionId !== undefined && l.includes(sessionId));
      ctx.log(`${tag}:   the session wedged (input_audio_buffer.clear unanswered); the server's last lines about it:\n${lines.slice(-12).join('\n')}`);
    }
    if (verbose && t.sample.kind === 'then-more') {
      const replies = t.partReplies.map((r) => `created ${r.createdMs} ms, audio ${r.firstAudioMs ?? 'none'} ms, ${r.stopped ? 'stopped' : 'not stopped'}`);
      ctx.log(`${tag}:   first part ended at ${t.earlyStopsMs.join(', ') || 'no'} ms; gap ends ${Math.round(gapEndMs(t))} ms; replies to it: ${replies.join('; ') || 'none'}`);
    }
  }
  return endings;
}
