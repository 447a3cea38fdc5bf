//! The listening layer: what the face does while the user speaks. Without it the avatar idles the
//! same way whether someone is talking to it or not; people who listen show it. Switched on and
//! off by the session (the server's voice activity detection knows when the user speaks), it adds
//! to whatever driving motion plays:
//!
//! - attention: the head tilts a little (`TILT_DEG` of roll) and leans in (`LEAN_SCALE`);
//! - nods: small, slow nods (`NOD_DEG` down and back over `NOD_NS`), the first `FIRST_NOD_NS`
//!   after the user starts, then every `NOD_GAP_MIN_NS` .. + `NOD_GAP_SPAN_NS` (seeded);
//! - gaze: a slow sideways drift of the head (`GAZE_DEG` of yaw, period `GAZE_PERIOD_NS`), as a
//!   listener's eyes and head wander a little (the renderer has no separate eye direction);
//! - a blink `ONSET_BLINK_NS` after the user starts, as people blink when their attention shifts.
//!
//! The mouth is not touched: a listening face keeps its mouth as it is (closed when the avatar is
//! silent). All of it fades in with `ATTACK_TAU_NS` and out with `RELEASE_TAU_NS` (exponential
//! envelopes), so the face settles back to idle after the turn without a jump.
//!
//! Invariants: deterministic for a seed and the same calls; no allocation; with the layer off and
//! its envelope settled the motion frame is returned unchanged.

use crate::motion::MotionFrame;

/// Envelope time constants: attention comes quickly (~0.25 s) and leaves more slowly (~0.6 s).
pub const ATTACK_TAU_NS: f32 = 250_000_000.0;
pub const RELEASE_TAU_NS: f32 = 600_000_000.0;
/// Head tilt while listening: 2.5° of roll, a clear but quiet sign of attention.
pub const TILT_DEG: f32 = 2.5;
/// Lean in: 2 % larger.
pub const LEAN_SCALE: f32 = 0.02;
/// A nod: 3° down and back, raised-cosine over 0.7 s.
pub const NOD_DEG: f32 = 3.0;
pub const NOD_NS: u64 = 700_000_000;
/// The first nod comes 0.9 s after the user starts; the next ones 1.6 .. 3.2 s apart.
pub const FIRST_NOD_NS: u64 = 900_000_000;
pub const NOD_GAP_MIN_NS: u64 = 1_600_000_000;
pub const NOD_GAP_SPAN_NS: u64 = 1_600_000_000;
/// Gaze drift: ±1.5° of yaw over a 5 s period.
pub const GAZE_DEG: f32 = 1.5;
pub const GAZE_PERIOD_NS: u64 = 5_000_000_000;
/// The onset blink starts 0.12 s after the user starts and takes 0.18 s.
pub const ONSET_BLINK_NS: u64 = 120_000_000;
pub const BLINK_NS: u64 = 180_000_000;
/// Below this envelope level the layer counts as settled (nothing added).
const SETTLED: f32 = 1e-3;

/// See the module comment.
#[derive(Clone, Debug)]
pub struct Listening {
    seed: u64,
    on: bool,
    /// When the layer last turned on (session time).
    since_ns: u64,
    /// How many times it has turned on (varies the nods of each turn).
    turns: u64,
    level: f32,
    last_t_ns: Option<u64>,
}

impl Listening {
    pub fn new(seed: u64) -> Listening {
        Listening { seed, on: false, since_ns: 0, turns: 0, level: 0.0, last_t_ns: None }
    }

    /// Whether the user is speaking, from `t_ns` on. Repeating the current state changes nothing.
    pub fn set(&mut self, on: bool, t_ns: u64) {
        if on && !self.on {
            self.since_ns = t_ns;
            self.turns += 1;
        }
        self.on = on;
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The envelope, 0 (idle) .. 1 (fully attentive), as of the last `apply`.
    pub fn level(&self) -> f32 {
        self.level
    }

    /// Advances the envelope to `t_ns` (non-decreasing) and adds the layer to `frame`.
    pub fn apply(&mut self, t_ns: u64, frame: &mut MotionFrame) {
        let dt = self.last_t_ns.map_or(0, |last| t_ns.saturating_sub(last)) as f32;
        self.last_t_ns = Some(t_ns);
        let target = if self.on { 1.0 } else { 0.0 };
        let tau = if target > self.level { ATTACK_TAU_NS } else { RELEASE_TAU_NS };
        self.level += (target - self.level) * (1.0 - (-dt / tau).exp());
        if self.level < SETTLED && !self.on {
            self.level = 0.0;
            return;
        }
        let k = self.level;
        let since = t_ns.saturating_sub(self.since_ns);
        let gaze_phase = (t_ns % GAZE_PERIOD_NS) as f32 / GAZE_PERIOD_NS as f32 + self.unit(0, 0);
        frame.roll_deg += k * TILT_DEG;
        frame.scale += k * LEAN_SCALE;
        frame.pitch_deg += k * NOD_DEG * self.nod_at(since);
        frame.yaw_deg += k * GAZE_DEG * (std::f32::consts::TAU * gaze_phase).sin();
        if self.on {
            let closed = bump(since.saturating_sub(ONSET_BLINK_NS), BLINK_NS, since >= ONSET_BLINK_NS);
            if let Some(eyes) = frame.eye_open.as_mut() {
                eyes[0] *= 1.0 - closed;
                eyes[1] *= 1.0 - closed;
            }
        }
    }

    /// The nod curve 0..1 at `since` ns into this turn.
    fn nod_at(&self, since: u64) -> f32 {
        let mut start = FIRST_NOD_NS;
        let mut k = 1;
        while start + NOD_NS <= since {
            start += NOD_NS + NOD_GAP_MIN_NS + (self.unit(self.turns, k) * NOD_GAP_SPAN_NS as f32) as u64;
            k += 1;
        }
        bump(since.saturating_sub(start), NOD_NS, since >= start)
    }

    /// A seeded number in 0..1 for (turn, index).
    fn unit(&self, turn: u64, index: u64) -> f32 {
        let mut x = self.seed ^ turn.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        // splitmix64 finaliser
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        (x >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A raised-cosine bump 0 -> 1 -> 0 over `len_ns`, `x_ns` into it (0 when not `started` or past it).
pub(crate) fn bump(x_ns: u64, len_ns: u64, started: bool) -> f32 {
    if !started || x_ns >= len_ns {
        return 0.0;
    }
    let x = x_ns as f32 / len_ns as f32;
    0.5 * (1.0 - (std::f32::consts::TAU * x).cos())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const FRAME_NS: u64 = 40 * MS;

    fn rest() -> MotionFrame {
        MotionFrame { eye_open: Some([1.0, 1.0]), ..MotionFrame::REST }
    }

    /// Frames from 0 to `until_ns` with the layer on from `on_ns` to `off_ns`.
    fn run(on_ns: u64, off_ns: u64, until_ns: u64) -> Vec<(u64, MotionFrame, f32)> {
        let mut l = Listening::new(7);
        let mut out = Vec::new();
        let mut t = 0;
        while t <= until_ns {
            if t == on_ns {
                l.set(true, t);
            }
            if t == off_ns {
                l.set(false, t);
            }
            let mut f = rest();
            l.apply(t, &mut f);
            out.push((t, f, l.level()));
            t += FRAME_NS;
        }
        out
    }

    #[test]
    fn off_adds_nothing() {
        for (_, f, level) in run(u64::MAX, u64::MAX, 5_000 * MS) {
            assert_eq!(level, 0.0);
            assert_eq!(f.pitch_deg, 0.0);
            assert_eq!(f.roll_deg, 0.0);
            assert_eq!(f.yaw_deg, 0.0);
            assert_eq!(f.scale, MotionFrame::REST.scale);
            assert_eq!(f.eye_open, Some([1.0, 1.0]));
        }
    }

    #[test]
    fn listening_tilts_leans_nods_and_blinks_then_settles() {
        let frames = run(1_000 * MS, 7_000 * MS, 11_000 * MS);
        let during: Vec<_> = frames.iter().filter(|(t, _, _)| (2_000 * MS..7_000 * MS).contains(t)).collect();
        // Attention: tilted and leaning in once the envelope is up.
        assert!(during.iter().all(|(_, f, _)| f.roll_deg > 0.8 * TILT_DEG));
        assert!(during.iter().all(|(_, f, _)| f.scale > MotionFrame::REST.scale + 0.8 * LEAN_SCALE));
        // Nods: at least two clear ones in 5 s of listening, each a few degrees.
        let mut nods = 0;
        let mut in_nod = false;
        for (_, f, _) in &during {
            let nodding = f.pitch_deg > 0.5 * NOD_DEG;
            if nodding && !in_nod {
                nods += 1;
            }
            in_nod = nodding;
        }
        assert!(nods >= 2, "{nods} nods in 5 s");
        // Gaze drift: yaw varies.
        let yaws: Vec<f32> = during.iter().map(|(_, f, _)| f.yaw_deg).collect();
        let spread = yaws.iter().cloned().fold(f32::MIN, f32::max) - yaws.iter().cloned().fold(f32::MAX, f32::min);
        assert!(spread > GAZE_DEG, "yaw spread {spread}");
        // A blink right after the user starts.
        let onset: Vec<_> = frames.iter().filter(|(t, _, _)| (1_000 * MS..1_400 * MS).contains(t)).collect();
        assert!(onset.iter().any(|(_, f, _)| f.eye_open.unwrap()[0] < 0.2), "the eyes close at the onset");
        // Settled back to idle a few seconds after the user stops, without a jump on the way.
        let (_, last, level) = frames.last().unwrap();
        assert!(*level < 0.01 && last.roll_deg.abs() < 0.05, "settled: level {level}, roll {}", last.roll_deg);
        for w in frames.windows(2) {
            let (a, b) = (&w[0].1, &w[1].1);
            assert!((a.roll_deg - b.roll_deg).abs() < 0.6 && (a.pitch_deg - b.pitch_deg).abs() < 0.8, "smooth at {} ms", w[1].0 / MS);
        }
    }

    #[test]
    fn the_same_seed_and_calls_give_the_same_faces() {
        assert_eq!(format!("{:?}", run(500 * MS, 4_000 * MS, 6_000 * MS)), format!("{:?}", run(500 * MS, 4_000 * MS, 6_000 * MS)));
    }
}
