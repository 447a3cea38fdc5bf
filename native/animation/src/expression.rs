//! The speaking face: what the brows, cheeks, eyelids and head do with the voice while the avatar
//! speaks, on top of the driving motion (and after the listening layer). People's faces move with
//! what they say; without this only the mouth would.
//!
//! Driven by the phoneme timings (`VisemeEvent` stress and phrase marks, pushed ahead of time) and
//! by the voice's pitch and loudness (`ProsodyHop`s, as the audio arrives):
//! - brows: lift `BROW_STRESS` on a stressed syllable (stress 2) spoken on a high pitch (`pitch_z`
//!   over `STRESS_PITCH_Z`), `BROW_ACCENT` for `ACCENT_LIFT_NS` on a pitch accent (all a voice
//!   without phoneme timings has), `BROW_QUESTION` over the last `QUESTION_LEAD_NS` of a question
//!   (and `QUESTION_HOLD_NS` after), `BROW_RISING` while the pitch rises; a slight knit
//!   (`BROW_KNIT`) on a long low stretch. Followed with a fast attack and slower release;
//! - head: a nod (`NOD_DEG` down and back over `NOD_NS`) on each pitch accent, at most one per
//!   `NOD_GAP_NS`, and a slight up-tilt (`QUESTION_TILT_DEG`) at a question's end;
//! - cheeks: raised by wide, open vowels (`CHEEK_GAIN` x spread x opening), narrowing the eyes a
//!   little (`SQUINT`);
//! - blinks: one `PHRASE_BLINK_DELAY_NS` after a phrase ends (a `.` `,` `!` `?` mark, or a pause in
//!   the audio), unless the eyes blinked within `BLINK_GAP_NS` or the procedural blinker is about
//!   to (`CLEAR_AHEAD_NS`), so blinks gather at phrase ends while the rate stays natural.
//!
//! Everything but the blink is scaled by the envelope the animator passes (its speaking envelope
//! times what listening leaves: listening wins at a barge-in), so it fades in and out with speech.
//!
//! Invariants: deterministic for the same calls; no allocation per frame once the mark queue has
//! grown; while the envelope and every follower are settled and no blink or nod is under way, the
//! motion frame is returned untouched and brow and cheek are exactly 0 (the face between turns is
//! exactly what the motion and listening make of it).

use crate::listening::bump;
use crate::motion::MotionFrame;
use crate::prosody::ProsodyHop;
use crate::track::VisemeEvent;
use crate::viseme::PhraseMark;
use face_render::MouthShape;
use std::collections::VecDeque;

/// Brow targets (-1 knit .. +1 raised).
pub const BROW_STRESS: f32 = 0.6;
pub const BROW_ACCENT: f32 = 0.5;
pub const BROW_QUESTION: f32 = 0.8;
pub const BROW_RISING: f32 = 0.6;
pub const BROW_KNIT: f32 = -0.2;
/// A stressed syllable lifts the brows when spoken this high (deviations above the mean).
pub const STRESS_PITCH_Z: f32 = 0.5;
/// How long an accent holds the brows up.
pub const ACCENT_LIFT_NS: u64 = 250_000_000;
/// A question lifts the brows from 400 ms before its mark to 300 ms after.
pub const QUESTION_LEAD_NS: u64 = 400_000_000;
pub const QUESTION_HOLD_NS: u64 = 300_000_000;
/// A low stretch (pitch under -1 deviation for 600 ms) knits the brows a little.
const LOW_PITCH_Z: f32 = -1.0;
const LOW_STRETCH_NS: u64 = 600_000_000;
/// Brow follower: rises in ~40 ms, falls in ~150 ms (time constants).
const BROW_ATTACK_TAU_NS: f32 = 40_000_000.0;
const BROW_RELEASE_TAU_NS: f32 = 150_000_000.0;
/// Pitch heard within the last 100 ms counts for the syllable now.
const RECENT_PITCH_NS: u64 = 100_000_000;
/// Nods on accents: 1.5° down and back over 350 ms, at most one per 600 ms.
pub const NOD_DEG: f32 = 1.5;
pub const NOD_NS: u64 = 350_000_000;
pub const NOD_GAP_NS: u64 = 600_000_000;
/// A question's end tilts the head up by 1° (negative pitch), with the brow follower's timing.
pub const QUESTION_TILT_DEG: f32 = 1.0;
/// Cheeks: 0.5 x spread x opening (full at open 0.3); the eyes narrow by 10 % at cheek 1.
pub const CHEEK_GAIN: f32 = 0.5;
const CHEEK_OPEN_FULL: f32 = 0.3;
pub const SQUINT: f32 = 0.1;
/// Phrase-end blinks: 150 ms after the phrase ends, 180 ms long; not within 2.5 s of another
/// blink, nor when the procedural blinker blinks within the next 1.5 s.
pub const PHRASE_BLINK_DELAY_NS: u64 = 150_000_000;
pub const BLINK_NS: u64 = 180_000_000;
pub const BLINK_GAP_NS: u64 = 2_500_000_000;
pub const CLEAR_AHEAD_NS: u64 = 1_500_000_000;
/// Eyes under this openness count as a blink (for the gap).
const BLINK_OPEN: f32 = 0.5;
/// A phrase-end blink needs this much of the speaking envelope (not in idle).
const BLINK_MIN_LEVEL: f32 = 0.2;
/// Below this, envelope and followers count as settled.
const SETTLED: f32 = 1e-3;
/// Marks kept: 2 s behind the latest frame.
const KEEP_MARKS_NS: u64 = 2_000_000_000;

/// A stressed syllable or a phrase mark from the phoneme timings.
#[derive(Clone, Copy, Debug)]
struct Mark {
    start_ns: u64,
    end_ns: u64,
    stress: u8,
    mark: PhraseMark,
    /// The phrase-end blink of this mark has been considered.
    blinked: bool,
}

/// See the module comment.
#[derive(Clone, Debug, Default)]
pub struct Expression {
    marks: VecDeque<Mark>,
    brow: f32,
    tilt: f32,
    last_t_ns: Option<u64>,
    /// Latest voiced hop (time, pitch_z), start of the current low stretch, latest rising hop,
    /// latest accent.
    pitch: Option<(u64, f32)>,
    low_since: Option<u64>,
    rising_at: Option<u64>,
    accent_at: Option<u64>,
    nod_at: Option<u64>,
    /// A phrase end heard in the audio, waiting for its blink.
    audio_end_at: Option<u64>,
    blink_at: Option<u64>,
    last_closed_ns: Option<u64>,
}

impl Expression {
    pub fn new() -> Expression {
        Expression::default()
    }

    /// Keeps the stressed syllables and phrase marks of pushed phoneme events. Like the viseme
    /// track, a push replaces what was queued from its first event on.
    pub fn push(&mut self, events: &[VisemeEvent]) {
        let Some(first) = events.iter().map(|e| e.start_ns).min() else {
            return;
        };
        self.marks.retain(|m| m.start_ns < first);
        let mut new: Vec<Mark> = events
            .iter()
            .filter(|e| e.stress >= 2 || e.mark != PhraseMark::None)
            .map(|e| Mark { start_ns: e.start_ns, end_ns: e.end_ns, stress: e.stress, mark: e.mark, blinked: false })
            .collect();
        new.sort_by_key(|m| m.start_ns);
        self.marks.extend(new);
    }

    /// Drops what was queued from `t_ns` on (an interruption).
    pub fn interrupt(&mut self, t_ns: u64) {
        self.marks.retain(|m| m.start_ns < t_ns);
        self.audio_end_at = None;
    }

    /// Advances to `t_ns` with the prosody heard up to now, and adds the layer to `frame` at
    /// envelope `level` (0..1). `blinker_clear(from, len)` says whether the procedural blinks
    /// leave the eyes open over `[from, from + len)`. Returns (brow, cheek).
    pub fn apply(
        &mut self,
        t_ns: u64,
        level: f32,
        hops: impl Iterator<Item = ProsodyHop>,
        mouth: &MouthShape,
        frame: &mut MotionFrame,
        blinker_clear: impl Fn(u64, u64) -> bool,
    ) -> (f32, f32) {
        let dt = self.last_t_ns.map_or(0, |last| t_ns.saturating_sub(last)) as f32;
        self.last_t_ns = Some(t_ns);
        for h in hops {
            self.hear(&h);
        }
        while self.marks.front().is_some_and(|m| m.end_ns + KEEP_MARKS_NS < t_ns) {
            self.marks.pop_front();
        }
        if let Some(eyes) = frame.eye_open {
            if eyes[0].min(eyes[1]) < BLINK_OPEN {
                self.last_closed_ns = Some(t_ns);
            }
        }

        // Brows and tilt.
        let (brow_target, tilt_target) = self.targets(t_ns);
        let follow = |v: &mut f32, target: f32| {
            let tau = if target.abs() > v.abs() { BROW_ATTACK_TAU_NS } else { BROW_RELEASE_TAU_NS };
            *v += (target - *v) * (1.0 - (-dt / tau).exp());
        };
        follow(&mut self.brow, brow_target);
        follow(&mut self.tilt, tilt_target);
        let nod = self.nod_at.map_or(0.0, |n| bump(t_ns.saturating_sub(n), NOD_NS, t_ns >= n));

        // Phrase-end blinks.
        let end = self.phrase_end_due(t_ns);
        if let Some(end) = end {
            let gap_ok = self.last_closed_ns.is_none_or(|c| t_ns >= c + BLINK_GAP_NS);
            if gap_ok && level >= BLINK_MIN_LEVEL && blinker_clear(t_ns, CLEAR_AHEAD_NS) && t_ns < end + BLINK_NS {
                self.blink_at = Some(t_ns);
                self.last_closed_ns = Some(t_ns);
            }
        }
        let closed = self.blink_at.map_or(0.0, |b| bump(t_ns.saturating_sub(b), BLINK_NS, t_ns >= b));

        let settled = level < SETTLED && self.brow.abs() < SETTLED && self.tilt.abs() < SETTLED;
        if settled && nod == 0.0 && closed == 0.0 {
            self.brow = 0.0;
            self.tilt = 0.0;
            return (0.0, 0.0);
        }
        let cheek = level * CHEEK_GAIN * mouth.wide.max(0.0) * (mouth.open / CHEEK_OPEN_FULL).min(1.0);
        frame.pitch_deg += level * (NOD_DEG * nod - QUESTION_TILT_DEG * self.tilt);
        if let Some(eyes) = frame.eye_open.as_mut() {
            for e in eyes.iter_mut() {
                *e *= (1.0 - SQUINT * cheek) * (1.0 - closed);
            }
        }
        ((level * self.brow).clamp(-1.0, 1.0), cheek.clamp(0.0, 1.0))
    }

    /// Takes in one hop of prosody.
    fn hear(&mut self, h: &ProsodyHop) {
        if h.voiced {
            self.pitch = Some((h.t_ns, h.pitch_z));
            if h.pitch_z < LOW_PITCH_Z {
                self.low_since.get_or_insert(h.t_ns);
            } else {
                self.low_since = None;
            }
        }
        if h.rising {
            self.rising_at = Some(h.t_ns);
        }
        if h.accent {
            self.accent_at = Some(h.t_ns);
            if self.nod_at.is_none_or(|n| h.t_ns >= n + NOD_GAP_NS) {
                self.nod_at = Some(h.t_ns);
            }
        }
        if h.phrase_end {
            self.audio_end_at = Some(h.t_ns);
            self.low_since = None;
        }
    }

    /// Brow and tilt targets at `t_ns`.
    fn targets(&self, t_ns: u64) -> (f32, f32) {
        let mut brow = 0.0f32;
        let mut tilt = 0.0f32;
        let high_now = self.pitch.is_some_and(|(t, z)| t + RECENT_PITCH_NS >= t_ns && z > STRESS_PITCH_Z);
        for m in &self.marks {
            if m.start_ns > t_ns + QUESTION_LEAD_NS {
                break;
            }
            if m.stress >= 2 && high_now && (m.start_ns..m.end_ns).contains(&t_ns) {
                brow = brow.max(BROW_STRESS);
            }
            if m.mark == PhraseMark::Question && t_ns + QUESTION_LEAD_NS >= m.start_ns && t_ns < m.start_ns + QUESTION_HOLD_NS {
                brow = brow.max(BROW_QUESTION);
                tilt = 1.0;
            }
        }
        if self.accent_at.is_some_and(|a| t_ns >= a && t_ns < a + ACCENT_LIFT_NS) {
            brow = brow.max(BROW_ACCENT);
        }
        if self.rising_at.is_some_and(|r| r + RECENT_PITCH_NS >= t_ns) {
            brow = brow.max(BROW_RISING);
        }
        if brow == 0.0 && self.low_since.is_some_and(|s| t_ns >= s + LOW_STRETCH_NS) {
            brow = BROW_KNIT;
        }
        (brow, tilt)
    }

    /// The latest phrase end (mark or audio pause) whose blink is due at `t_ns`, considered once.
    fn phrase_end_due(&mut self, t_ns: u64) -> Option<u64> {
        let mut due = None;
        for m in self.marks.iter_mut() {
            if m.start_ns + PHRASE_BLINK_DELAY_NS > t_ns {
                break;
            }
            if m.mark != PhraseMark::None && !m.blinked {
                m.blinked = true;
                due = Some(m.start_ns + PHRASE_BLINK_DELAY_NS);
            }
        }
        if let Some(a) = self.audio_end_at {
            // A pause heard in the audio is already `PHRASE_PAUSE_NS` old: no further delay.
            if a <= t_ns {
                self.audio_end_at = None;
                due = Some(due.map_or(a, |d: u64| d.max(a)));
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::viseme::Viseme;

    const MS: u64 = 1_000_000;
    const FRAME_NS: u64 = 40 * MS;

    fn rest() -> MotionFrame {
        MotionFrame { eye_open: Some([1.0, 1.0]), ..MotionFrame::REST }
    }

    fn stressed(start_ms: u64, end_ms: u64, stress: u8) -> VisemeEvent {
        VisemeEvent { stress, ..VisemeEvent::new(start_ms * MS, end_ms * MS, Viseme::Open) }
    }

    fn mark(at_ms: u64, mark: PhraseMark) -> VisemeEvent {
        VisemeEvent { mark, ..VisemeEvent::new(at_ms * MS, at_ms * MS + 200 * MS, Viseme::Silence) }
    }

    /// Voiced hops every 10 ms up to `until_ms`, pitch from `z(ms)`, accents at `accents`.
    fn hops(until_ms: u64, z: impl Fn(u64) -> f32, accents: &[u64]) -> Vec<ProsodyHop> {
        (0..until_ms / 10)
            .map(|i| {
                let ms = i * 10;
                ProsodyHop { t_ns: ms * MS, level: 0.8, voiced: true, f0_hz: 150.0, pitch_z: z(ms), accent: accents.contains(&ms), ..ProsodyHop::default() }
            })
            .collect()
    }

    /// Frames every 40 ms to `until_ms` at envelope 1: (ms, frame, brow, cheek).
    fn run(events: &[VisemeEvent], hops: &[ProsodyHop], until_ms: u64, blinker_clear: bool) -> Vec<(u64, MotionFrame, f32, f32)> {
        let mut x = Expression::new();
        x.push(events);
        let mut next = 0;
        let mut out = Vec::new();
        let mut t = 0;
        while t <= until_ms * MS {
            let n = hops[next..].iter().take_while(|h| h.t_ns <= t).count();
            let mut f = rest();
            let mouth = MouthShape { open: 0.5, wide: 0.6, ..MouthShape::CLOSED };
            let (brow, cheek) = x.apply(t, 1.0, hops[next..next + n].iter().copied(), &mouth, &mut f, |_, _| blinker_clear);
            next += n;
            out.push((t / MS, f, brow, cheek));
            t += FRAME_NS;
        }
        out
    }

    #[test]
    fn a_high_stressed_syllable_lifts_the_brows_and_they_come_back() {
        let high = |ms: u64| if (1_000..1_200).contains(&ms) { 1.5 } else { 0.0 };
        let frames = run(&[stressed(1_000, 1_200, 2)], &hops(3_000, high, &[]), 3_000, false);
        let brow = |a: u64, b: u64| frames.iter().filter(|f| (a..b).contains(&f.0)).map(|f| f.2).fold(f32::MIN, f32::max);
        assert!(brow(1_000, 1_120) >= 0.3, "{}", brow(1_000, 1_120));
        assert!(brow(0, 960) < 0.01);
        assert!(brow(1_800, 3_000) < 0.1, "{}", brow(1_800, 3_000));
        // Unstressed, or stressed but low, does nothing.
        for (ev, z) in [(stressed(1_000, 1_200, 0), 1.5f32), (stressed(1_000, 1_200, 2), 0.0)] {
            let frames = run(&[ev], &hops(3_000, |_| z, &[]), 3_000, false);
            assert!(frames.iter().all(|f| f.2.abs() < 1e-6), "{ev:?} at z {z}");
        }
    }

    #[test]
    fn a_question_ends_with_raised_brows_and_a_slight_up_tilt() {
        let frames = run(&[mark(2_000, PhraseMark::Question)], &hops(2_000, |_| 0.0, &[]), 3_000, false);
        let at = |ms: u64| frames.iter().find(|f| f.0 == ms).unwrap();
        assert!(at(1_960).2 >= 0.5 && at(2_200).2 >= 0.5, "{} {}", at(1_960).2, at(2_200).2);
        assert!(at(2_000).1.pitch_deg < -0.5 * QUESTION_TILT_DEG, "{:?}", at(2_000).1);
        assert!(at(1_400).2 < 0.01 && at(3_000).2 < 0.05);
        // A statement's end does not.
        let frames = run(&[mark(2_000, PhraseMark::End)], &hops(2_000, |_| 0.0, &[]), 3_000, false);
        assert!(frames.iter().all(|f| f.2.abs() < 1e-6 && f.1.pitch_deg.abs() < 1e-6));
    }

    #[test]
    fn accents_nod_at_most_once_per_gap() {
        // Four accents, one only 200 ms after another: three nods.
        let frames = run(&[], &hops(4_000, |_| 2.5, &[500, 1_500, 1_700, 2_500]), 4_000, false);
        let mut nods = 0;
        let mut down = false;
        for f in &frames {
            let nodding = f.1.pitch_deg > 0.5 * NOD_DEG;
            nods += usize::from(nodding && !down);
            down = nodding;
        }
        assert_eq!(nods, 3);
        assert!(frames.iter().all(|f| f.1.pitch_deg <= NOD_DEG + 1e-4));
        // Brows lift with the accents too.
        assert!(frames.iter().any(|f| (500..750).contains(&f.0) && f.2 >= 0.3));
    }

    #[test]
    fn phrase_ends_blink_unless_a_blink_is_near() {
        let shut_within = |frames: &[(u64, MotionFrame, f32, f32)], a: u64, b: u64| {
            frames.iter().any(|f| (a..b).contains(&f.0) && f.1.eye_open.unwrap()[0] < 0.5)
        };
        let frames = run(&[mark(1_000, PhraseMark::End)], &hops(1_000, |_| 0.0, &[]), 2_000, true);
        assert!(shut_within(&frames, 1_000, 1_300));
        assert!(!shut_within(&frames, 0, 1_000) && !shut_within(&frames, 1_400, 2_000));
        // A blink due from the procedural blinker: none added.
        let frames = run(&[mark(1_000, PhraseMark::End)], &hops(1_000, |_| 0.0, &[]), 2_000, false);
        assert!(!shut_within(&frames, 0, 2_000));
        // Two phrase ends 1 s apart: one blink.
        let frames = run(&[mark(1_000, PhraseMark::End), mark(2_000, PhraseMark::Question)], &hops(2_000, |_| 0.0, &[]), 3_000, true);
        assert!(shut_within(&frames, 1_000, 1_300) && !shut_within(&frames, 1_400, 3_000));
        // A pause heard in the audio counts as a phrase end.
        let mut h = hops(1_000, |_| 0.0, &[]);
        h.push(ProsodyHop { t_ns: 1_250 * MS, phrase_end: true, ..ProsodyHop::default() });
        let frames = run(&[], &h, 2_000, true);
        assert!(shut_within(&frames, 1_250, 1_500) && !shut_within(&frames, 0, 1_250));
    }

    #[test]
    fn wide_open_vowels_raise_the_cheeks_and_narrow_the_eyes() {
        let mut x = Expression::new();
        let mut f = rest();
        let wide = MouthShape { open: 0.4, wide: 0.8, ..MouthShape::CLOSED };
        let (_, cheek) = x.apply(0, 1.0, std::iter::empty(), &wide, &mut f, |_, _| false);
        assert!((cheek - CHEEK_GAIN * 0.8).abs() < 1e-6, "{cheek}");
        assert!((f.eye_open.unwrap()[0] - (1.0 - SQUINT * cheek)).abs() < 1e-6);
        let round = MouthShape { open: 0.4, wide: -0.8, ..MouthShape::CLOSED };
        assert_eq!(x.apply(40 * MS, 1.0, std::iter::empty(), &round, &mut rest(), |_, _| false).1, 0.0);
    }

    #[test]
    fn a_settled_layer_leaves_the_frame_untouched_and_is_deterministic() {
        let mut x = Expression::new();
        x.push(&[stressed(100, 300, 2), mark(400, PhraseMark::Question)]);
        let h = hops(3_000, |ms| (ms as f32 * 0.01).sin() * 3.0, &[200, 900]);
        for (i, hop) in h.iter().enumerate() {
            let mut f = MotionFrame { pitch_deg: i as f32 * 0.37, yaw_deg: -1.25, eye_open: Some([0.3, 0.9]), ..MotionFrame::REST };
            let before = format!("{f:?}");
            let mouth = MouthShape { open: 0.8, wide: 0.7, ..MouthShape::CLOSED };
            let out = x.apply(hop.t_ns, 0.0, std::iter::once(*hop), &mouth, &mut f, |_, _| true);
            assert_eq!(out, (0.0, 0.0));
            assert_eq!(format!("{f:?}"), before);
        }
        let a = run(&[stressed(1_000, 1_200, 2), mark(2_000, PhraseMark::Question)], &h, 3_000, true);
        let b = run(&[stressed(1_000, 1_200, 2), mark(2_000, PhraseMark::Question)], &h, 3_000, true);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}
