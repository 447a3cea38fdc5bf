//! A timeline of visemes (from phoneme timings) turned into a continuous, coarticulated mouth.
//!
//! Model: the events define a piecewise-constant *target* signal (each event's `target_shape`;
//! gaps and `Silence` events ease back to closed along a short release ramp), and the mouth at
//! `t` is that target averaged under a raised-cosine window of `ATTACK_WINDOW_NS` centred on `t`.
//! That gives smooth S-shaped transitions of exactly the window's length, starting half a window
//! before a phoneme (lips anticipate), lets neighbours blend into short phonemes (coarticulation),
//! and bounds the change per frame. Two rules sit on top:
//! - a bilabial (`Closed`) shorter than `BILABIAL_MIN_NS` is widened symmetrically to that length
//!   (taking time from its neighbours), so `press` reaches >= 0.99 at its centre however short;
//! - after the last phoneme before a gap the target ramps to closed over `RELEASE_NS`, so a gap
//!   of `FULL_CLOSE_PAUSE_NS` (150 ms) or more closes the mouth fully before the next phoneme's
//!   anticipation begins, while a shorter pause only relaxes it.
//!
//! Invariants: `shape_at` is a pure function of the events, the interrupt barriers and `t` (the
//! `&mut` is only for pruning), so frame rate and call pattern do not change the result; values
//! stay in the `MouthShape` ranges; the only discontinuities are at `discard_from` barriers,
//! across which nothing is blended (the mouth is closed right after one unless new events
//! follow), and where a push replaces events that are already within half a window of the
//! latest query. Events are kept sorted and non-overlapping: a later push replaces what was queued
//! from its first event on.
//!
//! It does not read audio or know the frame rate; queries are expected in non-decreasing time
//! order (events more than `KEEP_HISTORY_NS` before the latest query are forgotten).

use crate::viseme::{phrase_mark_of, stress_of, target_shape, viseme_for_phoneme, PhraseMark, Viseme};
use face_render::MouthShape;

/// One phoneme's viseme over `[start_ns, end_ns)` on the session timeline, with what the
/// phoneme said about the voice: its stress (0 none, 1 secondary, 2 primary) and whether a phrase
/// ends there (the speaking face, `expression`, reads these; the mouth does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VisemeEvent {
    pub start_ns: u64,
    pub end_ns: u64,
    pub viseme: Viseme,
    pub stress: u8,
    pub mark: PhraseMark,
}

impl VisemeEvent {
    /// An unstressed event without a phrase mark.
    pub fn new(start_ns: u64, end_ns: u64, viseme: Viseme) -> VisemeEvent {
        VisemeEvent { start_ns, end_ns, viseme, stress: 0, mark: PhraseMark::None }
    }

    /// The event of a phoneme symbol (espeak-ng mnemonic or IPA, marks and punctuation included).
    pub fn from_phoneme(start_ns: u64, end_ns: u64, phoneme: &str) -> VisemeEvent {
        VisemeEvent { stress: stress_of(phoneme), mark: phrase_mark_of(phoneme), ..VisemeEvent::new(start_ns, end_ns, viseme_for_phoneme(phoneme)) }
    }
}

/// Length of every transition (the smoothing window): 80 ms, the top of the 60–80 ms that lip
/// movements between phonemes take, so that one 40 ms frame never shows more than 82 % of a
/// swing (no pops), while 80 ms phonemes still reach their target at their centre.
pub const ATTACK_WINDOW_NS: u64 = 80_000_000;
const HALF_WINDOW_NS: u64 = ATTACK_WINDOW_NS / 2;

/// Ramp from the last phoneme's shape to closed when speech pauses: 100 ms, which with the window
/// gives a ~90 ms 90 %-to-10 % release (the jaw relaxes more slowly than it articulates) and a
/// closed mouth 140 ms after the phoneme ends.
pub const RELEASE_NS: u64 = 100_000_000;
/// The ramp is applied as this many constant steps; the window smooths them.
const RELEASE_STEPS: u64 = 10;

/// Pauses at least this long close the mouth fully: 150 ms. For them the ramp is shortened to
/// `pause - window` (70 ms at least) so that the mouth is closed before the next phoneme's
/// anticipation begins; shorter pauses keep the full ramp, cut off by the next phoneme, and so only
/// relax the mouth (as between words).
pub const FULL_CLOSE_PAUSE_NS: u64 = 150_000_000;

/// Shortest span a bilabial occupies in the target: 80 ms. Under the 80 ms window that gives
/// press 1.0 at its centre and >= 0.9 within 20 ms of it, so whatever the phase of the 25 fps
/// frame grid, one frame shows p/b/m pressed even when the phoneme lasts 40 ms; real closures
/// last 60–100 ms anyway.
pub const BILABIAL_MIN_NS: u64 = 80_000_000;

/// How long events and barriers are kept behind the latest query: 1 s, far more than the window
/// and release need, so a slightly late or repeated query still sees them.
pub const KEEP_HISTORY_NS: u64 = 1_000_000_000;

/// Start..end of the target that an event occupies, after bilabial widening.
fn effective_span(e: &VisemeEvent) -> (u64, u64) {
    let dur = e.end_ns - e.start_ns;
    if e.viseme == Viseme::Closed && dur < BILABIAL_MIN_NS {
        let centre = e.start_ns + dur / 2;
        let a = centre.saturating_sub(BILABIAL_MIN_NS / 2);
        (a, a + BILABIAL_MIN_NS)
    } else {
        (e.start_ns, e.end_ns)
    }
}

/// Cumulative weight of the raised-cosine window up to `x_ns` from its centre (0 .. 1).
fn window_cdf(x_ns: i64) -> f64 {
    let h = HALF_WINDOW_NS as f64;
    let u = (x_ns as f64 / h).clamp(-1.0, 1.0);
    (u + 1.0) * 0.5 + (std::f64::consts::PI * u).sin() / (2.0 * std::f64::consts::PI)
}

/// A constant stretch of the target signal.
#[derive(Clone, Copy, Debug)]
struct Piece {
    start_ns: u64,
    end_ns: u64,
    shape: MouthShape,
}

/// Viseme timeline with coarticulation; see the module comment.
#[derive(Clone, Debug, Default)]
pub struct VisemeTrack {
    /// Sorted by start, non-overlapping, no `Silence` (a pause is just a gap).
    events: Vec<VisemeEvent>,
    /// `[first start, last end)` of each push, `Silence` included, clipped by `discard_from`.
    spans: Vec<(u64, u64)>,
    /// Interrupt times, sorted: the window never reaches across one.
    barriers: Vec<u64>,
    /// Scratch for `shape_at`, kept to avoid allocating per frame.
    pieces: Vec<Piece>,
}

impl VisemeTrack {
    pub fn new() -> VisemeTrack {
        VisemeTrack::default()
    }

    /// Adds events (any order; empty ones ignored; overlaps inside the batch resolved in favour
    /// of the later event). Whatever was queued from the batch's first start on is replaced.
    pub fn push(&mut self, events: &[VisemeEvent]) {
        let mut batch: Vec<VisemeEvent> = events.iter().filter(|e| e.end_ns > e.start_ns).copied().collect();
        if batch.is_empty() {
            return;
        }
        batch.sort_by_key(|e| e.start_ns);
        for i in 1..batch.len() {
            if batch[i - 1].end_ns > batch[i].start_ns {
                batch[i - 1].end_ns = batch[i].start_ns;
            }
        }
        batch.retain(|e| e.end_ns > e.start_ns);
        let start = batch[0].start_ns;
        let end = batch.iter().map(|e| e.end_ns).max().unwrap_or(start);
        self.truncate(start);
        self.spans.push((start, end));
        self.events.extend(batch.into_iter().filter(|e| e.viseme != Viseme::Silence));
    }

    /// Drops everything from `t_ns` on and puts a barrier there: from `t_ns` the mouth is closed
    /// at once (no blending with what was dropped) until events pushed later take over.
    pub fn discard_from(&mut self, t_ns: u64) {
        self.truncate(t_ns);
        let i = self.barriers.partition_point(|&b| b < t_ns);
        if self.barriers.get(i) != Some(&t_ns) {
            self.barriers.insert(i, t_ns);
        }
    }

    /// Forgets all events: the mouth is closed from now on.
    pub fn clear(&mut self) {
        self.events.clear();
        self.spans.clear();
        self.barriers.clear();
    }

    /// Whether this track drives the mouth at `t_ns`: inside a pushed span, extended by the
    /// anticipation before it and the release after it.
    pub fn covers(&self, t_ns: u64) -> bool {
        self.spans.iter().any(|&(a, b)| {
            t_ns + HALF_WINDOW_NS >= a && t_ns < b + RELEASE_NS + HALF_WINDOW_NS
        })
    }

    /// Whether a pushed span (phonemes or pauses between them) contains `t_ns`.
    pub fn is_active(&self, t_ns: u64) -> bool {
        self.spans.iter().any(|&(a, b)| t_ns >= a && t_ns < b)
    }

    /// Mouth at `t_ns`.
    pub fn shape_at(&mut self, t_ns: u64) -> MouthShape {
        self.prune(t_ns);
        let mut lo = t_ns.saturating_sub(HALF_WINDOW_NS);
        let mut hi = t_ns + HALF_WINDOW_NS;
        let bi = self.barriers.partition_point(|&b| b <= t_ns);
        if bi > 0 {
            lo = lo.max(self.barriers[bi - 1]);
        }
        if let Some(&b) = self.barriers.get(bi) {
            hi = hi.min(b);
        }
        let mut pieces = std::mem::take(&mut self.pieces);
        self.target_pieces(lo, hi, &mut pieces);
        let (mut open, mut wide, mut press, mut tongue) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for p in &pieces {
            let a = p.start_ns.max(lo);
            let b = p.end_ns.min(hi);
            if b <= a {
                continue;
            }
            let w = window_cdf(b as i64 - t_ns as i64) - window_cdf(a as i64 - t_ns as i64);
            open += w * p.shape.open as f64;
            wide += w * p.shape.wide as f64;
            press += w * p.shape.press as f64;
            tongue += w * p.shape.tongue as f64;
        }
        self.pieces = pieces;
        MouthShape {
            open: (open as f32).clamp(0.0, 1.0),
            wide: (wide as f32).clamp(-1.0, 1.0),
            press: (press as f32).clamp(0.0, 1.0),
            tongue: (tongue as f32).clamp(0.0, 1.0),
        }
    }

    /// The non-closed stretches of the target signal that can touch `[lo, hi)`, in time order
    /// and non-overlapping (closed stretches contribute nothing: `MouthShape::CLOSED` is zero).
    fn target_pieces(&self, lo: u64, hi: u64, out: &mut Vec<Piece>) {
        out.clear();
        let reach = RELEASE_NS + BILABIAL_MIN_NS;
        let first = self.events.partition_point(|e| e.end_ns + reach < lo);
        let mut cursor = 0u64;
        for (i, e) in self.events.iter().enumerate().skip(first) {
            if e.start_ns > hi + BILABIAL_MIN_NS {
                break;
            }
            let (mut a, b) = effective_span(e);
            if e.viseme == Viseme::Closed && a < cursor {
                // A widened bilabial takes its time from what precedes it.
                while let Some(last) = out.last_mut() {
                    if last.start_ns >= a {
                        out.pop();
                    } else {
                        last.end_ns = last.end_ns.min(a);
                        break;
                    }
                }
            } else {
                a = a.max(cursor);
            }
            if b <= a {
                continue;
            }
            let shape = target_shape(e.viseme);
            out.push(Piece { start_ns: a, end_ns: b, shape });
            cursor = b;
            // Release ramp into the gap, cut short by the next event.
            let next = self.events.get(i + 1).map_or(u64::MAX, |n| n.start_ns);
            let barrier = self.barriers.get(self.barriers.partition_point(|&x| x < e.end_ns));
            let next = next.min(barrier.copied().unwrap_or(u64::MAX));
            let gap = next.saturating_sub(b);
            let ramp = if gap >= FULL_CLOSE_PAUSE_NS { RELEASE_NS.min(gap - ATTACK_WINDOW_NS) } else { RELEASE_NS };
            let step = ramp / RELEASE_STEPS;
            for s in 0..RELEASE_STEPS {
                let sa = b + s * step;
                let sb = (sa + step).min(next);
                if sb <= sa || sa > hi {
                    break;
                }
                let keep = 1.0 - (s as f32 + 0.5) / RELEASE_STEPS as f32;
                out.push(Piece { start_ns: sa, end_ns: sb, shape: scale(shape, keep) });
                cursor = sb;
            }
        }
    }

    /// Drops events from `t_ns` on (clipping one that straddles it) and clips the spans.
    fn truncate(&mut self, t_ns: u64) {
        self.events.retain(|e| e.start_ns < t_ns);
        if let Some(last) = self.events.last_mut() {
            last.end_ns = last.end_ns.min(t_ns);
        }
        self.spans.retain(|s| s.0 < t_ns);
        for s in &mut self.spans {
            s.1 = s.1.min(t_ns);
        }
    }

    fn prune(&mut self, t_ns: u64) {
        let horizon = t_ns.saturating_sub(KEEP_HISTORY_NS + RELEASE_NS + ATTACK_WINDOW_NS + BILABIAL_MIN_NS);
        if horizon == 0 {
            return;
        }
        let n = self.events.partition_point(|e| e.end_ns < horizon);
        if n > 0 {
            self.events.drain(..n);
        }
        self.spans.retain(|s| s.1 >= horizon);
        let n = self.barriers.partition_point(|&b| b < horizon);
        if n > 0 {
            self.barriers.drain(..n);
        }
    }
}

fn scale(s: MouthShape, k: f32) -> MouthShape {
    MouthShape { open: s.open * k, wide: s.wide * k, press: s.press * k, tongue: s.tongue * k }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ev(start_ms: u64, end_ms: u64, viseme: Viseme) -> VisemeEvent {
        VisemeEvent::new(start_ms * MS, end_ms * MS, viseme)
    }

    /// Deterministic pseudo-random phoneme sequence: 40–200 ms phonemes, sometimes pauses.
    fn random_utterance(seed: u64, n: usize) -> Vec<VisemeEvent> {
        let mut x = seed;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as u32
        };
        let mut t = 200;
        let mut out = Vec::new();
        for _ in 0..n {
            let dur = 40 + (next() % 160) as u64;
            let v = Viseme::ALL[(next() % 9) as usize];
            out.push(ev(t, t + dur, v));
            t += dur;
            if next() % 6 == 0 {
                t += 30 + (next() % 300) as u64; // pause (gap without event)
            }
        }
        out
    }

    fn max_delta(a: MouthShape, b: MouthShape) -> f32 {
        (a.open - b.open).abs().max((a.wide - b.wide).abs()).max((a.press - b.press).abs())
    }

    #[test]
    fn holds_targets_of_long_phonemes() {
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(100, 300, Viseme::Open), ev(300, 500, Viseme::Rounded), ev(500, 700, Viseme::Wide)]);
        assert_eq!(tr.shape_at(200 * MS), target_shape(Viseme::Open));
        let r = tr.shape_at(400 * MS);
        assert!(max_delta(r, target_shape(Viseme::Rounded)) < 1e-5, "{r:?}");
        let w = tr.shape_at(600 * MS);
        assert!(max_delta(w, target_shape(Viseme::Wide)) < 1e-5, "{w:?}");
        // Anticipation: already moving half a window before the phoneme, not before.
        assert_eq!(tr.shape_at(100 * MS - HALF_WINDOW_NS), MouthShape::CLOSED);
        assert!(tr.shape_at(90 * MS).open > 0.0);
        // Transition midpoint is the average.
        let mid = tr.shape_at(300 * MS);
        assert!((mid.wide - (0.1 - 0.8) / 2.0).abs() < 1e-4, "{mid:?}");
    }

    #[test]
    fn transitions_are_smooth_with_bounded_change_per_frame() {
        for seed in 0..20 {
            let mut tr = VisemeTrack::new();
            let events = random_utterance(seed, 60);
            tr.push(&events);
            let end = events.last().unwrap().end_ns + 400 * MS;
            // Every 40 ms frame, at several phases of the frame grid.
            for phase in [0, 7, 13, 20, 33] {
                let mut prev = tr.clone().shape_at(phase * MS);
                let mut t = phase * MS + 40 * MS;
                while t < end {
                    let s = tr.shape_at(t);
                    // The 80 ms window lets one 40 ms frame show at most 81.8 % of a swing:
                    // open 0 -> 0.8, press 0 -> 1, wide 0.7 -> -0.8.
                    let at = t / MS;
                    assert!((s.open - prev.open).abs() <= 0.8 * 0.82, "seed {seed} t {at} ms open {prev:?} -> {s:?}");
                    assert!((s.press - prev.press).abs() <= 0.82, "seed {seed} t {at} ms press {prev:?} -> {s:?}");
                    assert!((s.wide - prev.wide).abs() <= 1.5 * 0.82, "seed {seed} t {at} ms wide {prev:?} -> {s:?}");
                    prev = s;
                    t += 40 * MS;
                }
            }
            // And continuous: no jump between 2 ms steps (slope at most 1.5 * 2 ms / 40 ms).
            let mut tr = VisemeTrack::new();
            tr.push(&events);
            let mut prev = tr.shape_at(0);
            let mut t = 2 * MS;
            while t < end {
                let s = tr.shape_at(t);
                assert!(max_delta(prev, s) <= 0.076, "seed {seed} t {} ms: {prev:?} -> {s:?}", t / MS);
                prev = s;
                t += 2 * MS;
            }
        }
    }

    #[test]
    fn short_bilabials_reach_closure() {
        for dur in [20, 40, 50, 60, 80] {
            for (before, after) in [(Viseme::Open, Viseme::Open), (Viseme::Wide, Viseme::Rounded), (Viseme::Mid, Viseme::Narrow)] {
                let mut tr = VisemeTrack::new();
                tr.push(&[ev(0, 150, before), ev(150, 150 + dur, Viseme::Closed), ev(150 + dur, 300 + dur, after)]);
                let centre = (150 + dur / 2) * MS;
                let s = tr.shape_at(centre);
                assert!(s.press >= 0.99, "{dur} ms between {before:?} and {after:?}: {s:?}");
                assert!(s.open <= 0.01, "{dur} ms: {s:?}");
                // The closure is a plateau: >= 0.9 within 20 ms of the centre, so a 25 fps frame
                // sees it whatever the phase of the frame grid.
                assert!(tr.shape_at(centre - 20 * MS).press >= 0.9, "{dur} ms");
                assert!(tr.shape_at(centre + 20 * MS).press >= 0.9, "{dur} ms");
            }
        }
        // Two bilabials in a row ("mb") stay pressed throughout.
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(0, 100, Viseme::Open), ev(100, 140, Viseme::Closed), ev(140, 180, Viseme::Closed), ev(180, 300, Viseme::Open)]);
        for t in (120..=160).step_by(5) {
            assert!(tr.shape_at(t * MS).press >= 0.9, "t {t}");
        }
    }

    #[test]
    fn silence_gaps_close_the_mouth() {
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(0, 200, Viseme::Open), ev(200, 400, Viseme::Silence), ev(400, 600, Viseme::Mid)]);
        // 200 ms pause: the ramp shrinks to 200 - 80 = 120 -> 100 ms: closed from 140 ms after
        // the phoneme until the next one's anticipation.
        let close_at = 200 * MS + RELEASE_NS + HALF_WINDOW_NS;
        assert!(tr.shape_at(close_at - 5 * MS).open > 0.0);
        for t in (close_at..400 * MS - HALF_WINDOW_NS).step_by(5_000_000) {
            assert_eq!(tr.shape_at(t), MouthShape::CLOSED, "t {} ms", t / MS);
        }
        // Release is gradual: about 100 ms from 90 % to 10 %.
        let open_at = |tr: &mut VisemeTrack, ms: u64| tr.shape_at(ms * MS).open / 0.8;
        let t90 = (150..400).find(|&ms| open_at(&mut tr, ms) <= 0.9).unwrap();
        let t10 = (150..400).find(|&ms| open_at(&mut tr, ms) <= 0.1).unwrap();
        println!("release 90->10 %: {} ms", t10 - t90);
        assert!((70..=120).contains(&(t10 - t90)), "release 90->10 % took {} ms", t10 - t90);
        // The attack is the window: 10 % to 90 % in well under 70 ms.
        let t10a = (300..600).find(|&ms| tr.shape_at(ms * MS).open >= 0.05).unwrap();
        let t90a = (300..600).find(|&ms| tr.shape_at(ms * MS).open >= 0.45).unwrap();
        println!("attack 10->90 %: {} ms", t90a - t10a);
        assert!((25..=60).contains(&(t90a - t10a)), "attack took {} ms", t90a - t10a);
        // After the last phoneme: closed.
        assert_eq!(tr.shape_at(600 * MS + RELEASE_NS + HALF_WINDOW_NS), MouthShape::CLOSED);
        assert_eq!(tr.shape_at(5_000 * MS), MouthShape::CLOSED);
        // The shortest pause that closes fully does, for an instant.
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(0, 200, Viseme::Open), ev(350, 500, Viseme::Open)]);
        assert_eq!(tr.shape_at(310 * MS), MouthShape::CLOSED);
        // A short pause only relaxes the mouth.
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(0, 200, Viseme::Open), ev(260, 460, Viseme::Open)]);
        let dip = tr.shape_at(230 * MS).open;
        assert!(dip > 0.2 && dip < 0.7, "{dip}");
    }

    #[test]
    fn discard_from_closes_at_once_and_later_pushes_take_over() {
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(0, 1000, Viseme::Open)]);
        assert!(tr.shape_at(480 * MS).open > 0.79);
        tr.discard_from(500 * MS);
        assert_eq!(tr.shape_at(500 * MS), MouthShape::CLOSED);
        assert_eq!(tr.shape_at(520 * MS), MouthShape::CLOSED);
        assert!(!tr.covers(900 * MS));
        // A new response after the interrupt blends in from closed.
        tr.push(&[ev(600, 800, Viseme::Rounded)]);
        assert_eq!(tr.shape_at(560 * MS), MouthShape::CLOSED);
        let r = tr.shape_at(700 * MS);
        assert!(max_delta(r, target_shape(Viseme::Rounded)) < 1e-5);
        // clear() empties it.
        tr.clear();
        assert_eq!(tr.shape_at(700 * MS), MouthShape::CLOSED);
        assert!(!tr.covers(700 * MS));
    }

    #[test]
    fn later_push_replaces_the_overlapping_tail() {
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(0, 500, Viseme::Open), ev(500, 1000, Viseme::Open)]);
        tr.push(&[ev(400, 1000, Viseme::Wide)]);
        let w = tr.shape_at(700 * MS);
        assert!(max_delta(w, target_shape(Viseme::Wide)) < 1e-5);
        assert!(tr.shape_at(200 * MS).open > 0.79);
        // Unsorted and overlapping input inside one batch.
        let mut tr = VisemeTrack::new();
        tr.push(&[ev(300, 500, Viseme::Mid), ev(0, 400, Viseme::Open), ev(600, 600, Viseme::Open)]);
        assert_eq!(tr.events.len(), 2);
        assert_eq!(tr.events[0].end_ns, 300 * MS);
        assert!(!tr.is_active(550 * MS) && tr.is_active(450 * MS));
    }

    #[test]
    fn result_does_not_depend_on_query_pattern() {
        let events = random_utterance(7, 40);
        let mut a = VisemeTrack::new();
        a.push(&events);
        let mut b = VisemeTrack::new();
        b.push(&events);
        for t in (0..6_000u64).step_by(40) {
            for extra in (0..40).step_by(3) {
                b.shape_at((t + extra) * MS); // many more queries on b
            }
            assert_eq!(a.shape_at(t * MS), b.clone().shape_at(t * MS));
        }
    }
}
