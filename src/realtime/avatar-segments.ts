/**
 * The spoken segments of an avatar-only session on the avatar's clock: which segment each piece of
 * queued speech belongs to, when a segment starts and finishes playing, and how much of it was
 * heard when a clear cut it. Pure bookkeeping (no I/O, no timers): the engine tells it where the
 * avatar placed each append (`append`), that the playout advanced (`advance`, once per tick), and
 * where a clear cut (`cut`); it answers with what happened, in timeline order.
 *
 *   append ─▶ open segment ── commit ─▶ committed ── played out ─▶ finished (interrupted: false)
 *                  │                         │
 *                  └──────── cut ────────────┴──────────────────▶ finished (interrupted: true)
 *   an open segment whose audio ran out IDLE_END_NS ago also finishes (interrupted: false)
 *
 * Every segment finishes exactly once. Speech of consecutive appends is contiguous on the clock
 * unless the client fell behind the playout (the avatar then starts the next append at the next
 * frame); a segment therefore holds a list of spans, and spans that have played are folded into a
 * running total, so a segment that streams for hours holds only what is still ahead of the playout.
 */
import { randomBase62 } from '../core/ids.js';

/** An open segment whose audio has all played ends by itself after this much more session time. */
export const SEGMENT_IDLE_END_NS = 10_000_000_000;

export const newSegmentId = (): string => `seg_${randomBase62(20)}`;

interface Span {
  startNs: number;
  endNs: number;
}

export interface Segment {
  readonly id: string;
  committed: boolean;
  started: boolean;
  /** Session time of its first sample. */
  readonly firstNs: number;
  /** Session time its last queued sample ends. */
  lastEndNs: number;
  /** All its queued audio, ns. */
  totalNs: number;
  /** Audio of spans that have wholly played, ns. */
  playedSpansNs: number;
  /** Spans not wholly played yet, in time order. */
  spans: Span[];
}

export type SegmentChange =
  | { kind: 'started'; segment: Segment; ptsNs: number }
  | { kind: 'finished'; segment: Segment; playedNs: number; interrupted: boolean };

export class SegmentTimeline {
  /** Unfinished segments in time order; the last one may be open (not committed). */
  private readonly segments: Segment[] = [];

  /** The segment appends go to, if one is open. */
  get open(): Segment | null {
    const last = this.segments.at(-1);
    return last && !last.committed ? last : null;
  }

  /** Session time at which everything queued has played (0 when nothing is). */
  get queuedEndNs(): number {
    return this.segments.at(-1)?.lastEndNs ?? 0;
  }

  get unfinished(): readonly Segment[] {
    return this.segments;
  }

  /** Speech the avatar placed at [startNs, endNs): joins the open segment, or opens one (named `id` when given). */
  append(startNs: number, endNs: number, id: string | null = null): Segment {
    let segment = this.open;
    if (!segment) {
      segment = { id: id ?? newSegmentId(), committed: false, started: false, firstNs: startNs, lastEndNs: startNs, totalNs: 0, playedSpansNs: 0, spans: [] };
      this.segments.push(segment);
    }
    const last = segment.spans.at(-1);
    if (last && last.endNs === startNs) last.endNs = endNs;
    else segment.spans.push({ startNs, endNs });
    segment.totalNs += endNs - startNs;
    segment.lastEndNs = Math.max(segment.lastEndNs, endNs);
    return segment;
  }

  /** Ends the open segment (no more audio joins it); null when none is open. */
  commit(): Segment | null {
    const segment = this.open;
    if (segment) segment.committed = true;
    return segment;
  }

  /**
   * The playout has played everything before `toNs`: segments whose first sample is now played
   * start; committed segments wholly played, and open ones idle for SEGMENT_IDLE_END_NS, finish.
   */
  advance(toNs: number): SegmentChange[] {
    const changes: SegmentChange[] = [];
    for (const segment of this.segments) {
      if (!segment.started && segment.firstNs < toNs) {
        segment.started = true;
        changes.push({ kind: 'started', segment, ptsNs: segment.firstNs });
      }
      while (segment.spans.length > 0 && segment.spans[0]!.endNs <= toNs) {
        const span = segment.spans.shift()!;
        segment.playedSpansNs += span.endNs - span.startNs;
      }
      const playedOut = segment.spans.length === 0;
      if (playedOut && (segment.committed || toNs - segment.lastEndNs >= SEGMENT_IDLE_END_NS)) {
        segment.committed = true;
        changes.push({ kind: 'finished', segment, playedNs: segment.totalNs, interrupted: false });
      }
    }
    this.dropFinished(changes);
    return changes;
  }

  /** A clear cut the playout at `cutNs`: every unfinished segment finishes, interrupted, with what had played by then. */
  cut(cutNs: number): SegmentChange[] {
    const changes: SegmentChange[] = this.segments.map((segment) => ({ kind: 'finished', segment, playedNs: playedBy(segment, cutNs), interrupted: true }));
    this.segments.length = 0;
    return changes;
  }

  /** The segment playing at `ptsNs` (the start of a tick), or starting within `untilNs`; null in silence. */
  segmentAt(ptsNs: number, untilNs: number): Segment | null {
    for (const segment of this.segments) {
      for (const span of segment.spans) if (span.startNs < untilNs && span.endNs > ptsNs) return segment;
    }
    return null;
  }

  /** How much of each unfinished segment had played by `atNs` (usage when the session ends). */
  playedBy(atNs: number): number {
    return this.segments.reduce((sum, s) => sum + playedBy(s, atNs), 0);
  }

  private dropFinished(changes: SegmentChange[]): void {
    for (const change of changes) {
      if (change.kind !== 'finished') continue;
      const at = this.segments.indexOf(change.segment);
      if (at >= 0) this.segments.splice(at, 1);
    }
  }
}

function playedBy(segment: Segment, atNs: number): number {
  let played = segment.playedSpansNs;
  for (const span of segment.spans) played += Math.min(Math.max(atNs - span.startNs, 0), span.endNs - span.startNs);
  return played;
}
