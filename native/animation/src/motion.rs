//! Driving motions: a looping sequence of head poses (and optionally eye openness) recorded at a
//! fixed rate, e.g. extracted from a LivePortrait driving video.
//!
//! Invariants: a `DrivingMotion` has at least one frame, `1 <= fps <= 240`, and only finite
//! values (checked once in `new`). `sample(t)` loops forever and interpolates linearly between
//! neighbouring frames, the last frame blending into the first across the loop seam, so a motion
//! never jumps. Translations are fractions of the face width (the TypeScript side converts
//! LivePortrait's `t` before passing it); `MotionFrame::pose` clamps to the ranges the renderer
//! can warp without artefacts.
//!
//! It does not know when a motion started (callers pass time relative to that), and does not
//! blend between motions: that is the animator.

use face_render::Pose;

/// One frame of a driving motion. Angles in degrees (LivePortrait convention, see `Pose`),
/// `tx`/`ty` as a fraction of the face width, `scale` 1 = as photographed. `eye_open`: left and
/// right, 0 shut .. 1 as in the photo, `None` when the motion carries no eye data (the animator
/// then blinks procedurally).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MotionFrame {
    pub pitch_deg: f32,
    pub yaw_deg: f32,
    pub roll_deg: f32,
    pub tx: f32,
    pub ty: f32,
    pub scale: f32,
    pub eye_open: Option<[f32; 2]>,
}

/// Largest head rotation passed to the renderer, each axis: 20°. Beyond that a single photo
/// warps visibly (stretched ear, smeared background).
pub const MAX_ANGLE_DEG: f32 = 20.0;
/// Largest translation, each axis, as a fraction of the face width: 0.15, keeping the face inside
/// the photo's framing.
pub const MAX_TRANSLATION: f32 = 0.15;
/// Scale range: 0.85 .. 1.15, a gentle lean in or out; more reveals the photo's edges.
pub const MIN_SCALE: f32 = 0.85;
pub const MAX_SCALE: f32 = 1.15;
/// Frame rates accepted: 1 .. 240 fps, covering every camera and synthetic motion; outside it is
/// almost certainly a unit mistake (e.g. a frame duration passed as a rate).
pub const MIN_FPS: f32 = 1.0;
pub const MAX_FPS: f32 = 240.0;
/// Floats per frame in the flat layout: `[pitch, yaw, roll, tx, ty, scale, eye_l, eye_r]`.
pub const FLAT_FRAME_LEN: usize = 8;

impl MotionFrame {
    /// The rest pose with no eye data.
    pub const REST: MotionFrame =
        MotionFrame { pitch_deg: 0.0, yaw_deg: 0.0, roll_deg: 0.0, tx: 0.0, ty: 0.0, scale: 1.0, eye_open: None };

    /// The pose clamped to what the renderer can show (see the `MAX_*` constants).
    pub fn pose(&self) -> Pose {
        let a = |v: f32| v.clamp(-MAX_ANGLE_DEG, MAX_ANGLE_DEG);
        let t = |v: f32| v.clamp(-MAX_TRANSLATION, MAX_TRANSLATION);
        Pose {
            pitch_deg: a(self.pitch_deg),
            yaw_deg: a(self.yaw_deg),
            roll_deg: a(self.roll_deg),
            tx: t(self.tx),
            ty: t(self.ty),
            scale: self.scale.clamp(MIN_SCALE, MAX_SCALE),
        }
    }

    /// Linear blend, `k` in 0..1. Eyes: blended when both have data, else whichever has it.
    pub fn lerp(&self, o: &MotionFrame, k: f32) -> MotionFrame {
        let l = |a: f32, b: f32| a + (b - a) * k;
        let eye_open = match (self.eye_open, o.eye_open) {
            (Some(a), Some(b)) => Some([l(a[0], b[0]), l(a[1], b[1])]),
            (a, b) => a.or(b),
        };
        MotionFrame {
            pitch_deg: l(self.pitch_deg, o.pitch_deg),
            yaw_deg: l(self.yaw_deg, o.yaw_deg),
            roll_deg: l(self.roll_deg, o.roll_deg),
            tx: l(self.tx, o.tx),
            ty: l(self.ty, o.ty),
            scale: l(self.scale, o.scale),
            eye_open,
        }
    }

    fn first_non_finite(&self) -> Option<&'static str> {
        let fields = [
            ("pitch_deg", self.pitch_deg),
            ("yaw_deg", self.yaw_deg),
            ("roll_deg", self.roll_deg),
            ("tx", self.tx),
            ("ty", self.ty),
            ("scale", self.scale),
        ];
        let eyes = self.eye_open.map_or([("eye_l", 0.0), ("eye_r", 0.0)], |e| [("eye_l", e[0]), ("eye_r", e[1])]);
        fields.into_iter().chain(eyes).find(|(_, v)| !v.is_finite()).map(|(n, _)| n)
    }
}

/// Why a motion was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MotionError {
    #[error("a driving motion needs at least one frame")]
    Empty,
    #[error("driving motion fps {0} is outside {MIN_FPS}..={MAX_FPS}")]
    BadFps(f32),
    #[error("driving motion frame {frame}: {field} is not finite")]
    NonFinite { frame: usize, field: &'static str },
    #[error("flat driving motion has {0} floats, not a multiple of {FLAT_FRAME_LEN}")]
    FlatLength(usize),
}

/// A validated, looping driving motion.
#[derive(Clone, Debug, PartialEq)]
pub struct DrivingMotion {
    fps: f32,
    frames: Vec<MotionFrame>,
}

impl DrivingMotion {
    /// Validates and wraps `frames` recorded at `fps`.
    pub fn new(fps: f32, frames: Vec<MotionFrame>) -> Result<DrivingMotion, MotionError> {
        if !(MIN_FPS..=MAX_FPS).contains(&fps) {
            return Err(MotionError::BadFps(fps)); // NaN fails `contains` too
        }
        if frames.is_empty() {
            return Err(MotionError::Empty);
        }
        if let Some((frame, field)) = frames.iter().enumerate().find_map(|(i, f)| f.first_non_finite().map(|n| (i, n))) {
            return Err(MotionError::NonFinite { frame, field });
        }
        Ok(DrivingMotion { fps, frames })
    }

    /// Reads the flat layout TypeScript passes across the native boundary: 8 floats per frame,
    /// `[pitch, yaw, roll, tx, ty, scale, eye_l, eye_r]`; a negative eye value means "no eye
    /// data" for that frame.
    pub fn from_flat(fps: f32, data: &[f32]) -> Result<DrivingMotion, MotionError> {
        if !data.len().is_multiple_of(FLAT_FRAME_LEN) {
            return Err(MotionError::FlatLength(data.len()));
        }
        let frames = data
            .chunks_exact(FLAT_FRAME_LEN)
            .map(|c| MotionFrame {
                pitch_deg: c[0],
                yaw_deg: c[1],
                roll_deg: c[2],
                tx: c[3],
                ty: c[4],
                scale: c[5],
                // NaN is not < 0: it reaches the validation below instead of reading as no data.
                eye_open: if c[6] < 0.0 || c[7] < 0.0 { None } else { Some([c[6], c[7]]) },
            })
            .collect();
        DrivingMotion::new(fps, frames)
    }

    /// The rest pose held forever, no eye data.
    pub fn rest() -> DrivingMotion {
        DrivingMotion { fps: MIN_FPS, frames: vec![MotionFrame::REST] }
    }

    pub fn fps(&self) -> f32 {
        self.fps
    }

    pub fn frames(&self) -> &[MotionFrame] {
        &self.frames
    }

    /// Length of one loop: `frames / fps`, rounded to the nanosecond.
    pub fn duration_ns(&self) -> u64 {
        (self.frames.len() as f64 * 1e9 / self.fps as f64).round() as u64
    }

    /// The motion at `t_ns` after its start, looping, interpolated linearly between frames
    /// (frame `i` is at `i / fps`; the last frame blends into the first over one frame period).
    pub fn sample(&self, t_ns: u64) -> MotionFrame {
        let n = self.frames.len();
        if n == 1 {
            return self.frames[0];
        }
        // f64 keeps sub-microsecond precision for more than a year of session time.
        let pos = (t_ns as f64 * self.fps as f64 / 1e9).rem_euclid(n as f64);
        let i = (pos.floor() as usize).min(n - 1);
        let k = (pos - i as f64) as f32;
        self.frames[i].lerp(&self.frames[(i + 1) % n], k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(pitch: f32, yaw: f32) -> MotionFrame {
        MotionFrame { pitch_deg: pitch, yaw_deg: yaw, ..MotionFrame::REST }
    }

    #[test]
    fn interpolates_linearly_between_frames() {
        let m = DrivingMotion::new(10.0, vec![frame(0.0, 0.0), frame(10.0, -4.0), frame(4.0, 2.0)]).unwrap();
        assert_eq!(m.duration_ns(), 300_000_000);
        assert_eq!(m.sample(0).pitch_deg, 0.0);
        assert_eq!(m.sample(100_000_000).pitch_deg, 10.0);
        let s = m.sample(125_000_000);
        assert!((s.pitch_deg - 8.5).abs() < 1e-4 && (s.yaw_deg + 2.5).abs() < 1e-4, "{s:?}");
        let s = m.sample(50_000_000);
        assert!((s.pitch_deg - 5.0).abs() < 1e-4);
    }

    #[test]
    fn loops_and_interpolates_across_the_seam() {
        let m = DrivingMotion::new(10.0, vec![frame(0.0, 0.0), frame(10.0, 0.0), frame(4.0, 0.0)]).unwrap();
        // Between the last frame (t = 200 ms) and the first again (t = 300 ms).
        let s = m.sample(250_000_000);
        assert!((s.pitch_deg - 2.0).abs() < 1e-4, "{s:?}");
        // Periodic, also after ten hours.
        for t in [0u64, 37_000_000, 125_000_000, 299_999_999] {
            let a = m.sample(t).pitch_deg;
            let b = m.sample(t + 3 * m.duration_ns()).pitch_deg;
            let c = m.sample(t + 120_000 * m.duration_ns()).pitch_deg;
            assert!((a - b).abs() < 1e-4 && (a - c).abs() < 1e-3, "t {t}: {a} {b} {c}");
        }
        // Continuous everywhere, seam included: no step bigger than the steepest segment allows.
        let mut prev = m.sample(0).pitch_deg;
        for ms in 1..=900u64 {
            let p = m.sample(ms * 1_000_000).pitch_deg;
            assert!((p - prev).abs() <= 0.1 + 1e-4, "ms {ms}: {prev} -> {p}");
            prev = p;
        }
        // A single frame holds.
        let one = DrivingMotion::new(25.0, vec![frame(3.0, 1.0)]).unwrap();
        assert_eq!(one.sample(123_456_789).pitch_deg, 3.0);
        assert_eq!(one.duration_ns(), 40_000_000);
    }

    #[test]
    fn from_flat_reads_frames_with_and_without_eyes() {
        let data = [
            1.0, 2.0, 3.0, 0.01, -0.02, 1.05, 0.9, 0.8, //
            -1.0, -2.0, -3.0, 0.0, 0.0, 1.0, -1.0, -1.0,
        ];
        let m = DrivingMotion::from_flat(25.0, &data).unwrap();
        assert_eq!(m.frames().len(), 2);
        let f0 = m.frames()[0];
        assert_eq!((f0.pitch_deg, f0.yaw_deg, f0.roll_deg, f0.tx, f0.ty, f0.scale), (1.0, 2.0, 3.0, 0.01, -0.02, 1.05));
        assert_eq!(f0.eye_open, Some([0.9, 0.8]));
        assert_eq!(m.frames()[1].eye_open, None);
        // One eye negative also means no data.
        let m = DrivingMotion::from_flat(25.0, &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5, -1.0]).unwrap();
        assert_eq!(m.frames()[0].eye_open, None);
        // Sampling between a frame with eye data and one without keeps the data.
        let m = DrivingMotion::from_flat(25.0, &data).unwrap();
        assert_eq!(m.sample(20_000_000).eye_open, Some([0.9, 0.8]));
    }

    #[test]
    fn rejects_invalid_motions() {
        assert_eq!(DrivingMotion::new(25.0, vec![]), Err(MotionError::Empty));
        assert_eq!(DrivingMotion::from_flat(25.0, &[]), Err(MotionError::Empty));
        for fps in [0.0, 0.5, 241.0, f32::NAN, f32::INFINITY, -25.0] {
            assert!(matches!(DrivingMotion::new(fps, vec![MotionFrame::REST]), Err(MotionError::BadFps(_))), "{fps}");
        }
        assert!(DrivingMotion::new(1.0, vec![MotionFrame::REST]).is_ok());
        assert!(DrivingMotion::new(240.0, vec![MotionFrame::REST]).is_ok());
        let bad = MotionFrame { yaw_deg: f32::NAN, ..MotionFrame::REST };
        assert_eq!(
            DrivingMotion::new(25.0, vec![MotionFrame::REST, bad]),
            Err(MotionError::NonFinite { frame: 1, field: "yaw_deg" })
        );
        let bad_eye = MotionFrame { eye_open: Some([0.5, f32::INFINITY]), ..MotionFrame::REST };
        assert_eq!(DrivingMotion::new(25.0, vec![bad_eye]), Err(MotionError::NonFinite { frame: 0, field: "eye_r" }));
        assert_eq!(DrivingMotion::from_flat(25.0, &[0.0; 9]), Err(MotionError::FlatLength(9)));
        assert_eq!(
            DrivingMotion::from_flat(25.0, &[0.0, 0.0, 0.0, 0.0, 0.0, f32::NAN, 1.0, 1.0]),
            Err(MotionError::NonFinite { frame: 0, field: "scale" })
        );
        // Messages carry the detail.
        assert_eq!(MotionError::BadFps(0.0).to_string(), "driving motion fps 0 is outside 1..=240");
    }

    #[test]
    fn pose_is_clamped_to_safe_ranges() {
        let f = MotionFrame { pitch_deg: 35.0, yaw_deg: -90.0, roll_deg: 5.0, tx: 0.4, ty: -0.3, scale: 2.0, eye_open: None };
        let p = f.pose();
        assert_eq!((p.pitch_deg, p.yaw_deg, p.roll_deg), (20.0, -20.0, 5.0));
        assert_eq!((p.tx, p.ty, p.scale), (0.15, -0.15, 1.15));
        assert_eq!(MotionFrame { scale: 0.1, ..MotionFrame::REST }.pose().scale, 0.85);
    }
}
