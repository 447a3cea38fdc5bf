//! The one object the media session asks, once per video frame, for the face at time `t`.
//!
//! - Mouth: from the viseme track where phoneme timings were pushed for that span, read
//!   `VISEME_LEAD_NS` ahead (a bilabial's press `CLOSURE_LEAD_NS` ahead); the audio, if any,
//!   scales the viseme's opening by `AUDIO_MODULATION` and sets its least opening: the jaw opens
//!   as far as the audio analysis alone would open it (the voice's loudness), scaled down by
//!   `press` so that bilabials still close. The visemes give
//!   the lips' shape (spread, round, pressed) and open further where the phoneme asks for it.
//!   From rest (nothing audible for `FULL_CLOSE_PAUSE_NS`) they stay shut until the audio
//!   `LOOKAHEAD_NS` ahead is audible (`AUDIBLE_DBFS`): the read-ahead and the track's window
//!   anticipate a phoneme by up to 80 ms, and a first phoneme (a weak /ð/, /h/) is often timed
//!   30-40 ms before it is heard, so over WebSocket a reply's mouth opened two frames before its
//!   first sound. Phoneme timings come from our own voices, peak-normalised, so their speech is
//!   well over that level.
//!   Without phoneme timings, from the audio analysis alone. Idle (nothing queued) means closed.
//! - Pose: the driving motion at `t`, looping, with a little more amplitude while speaking
//!   (`SPEAKING_GAIN`, eased in and out). `set_motion` cross-fades from the current pose to the
//!   new motion, which starts at its first frame, over at least `MOTION_CROSSFADE_NS` and long
//!   enough that no 40 ms step exceeds `MAX_FADE_STEP_DEG` (or the motions' own speed).
//! - Eyes: the motion's eye data where it has some, procedural blinks (`Blinker`) otherwise.
//! - Listening: while `set_listening(true)` (the user speaks), the `listening` layer adds
//!   attention on top of the motion (tilt, lean, nods, gaze drift, an onset blink) and fades out
//!   after; the mouth is left as the speech makes it.
//! - Speaking face: the `expression` layer (brows, cheeks, nods, phrase-end blinks) from the pushed
//!   phonemes' stress and phrase marks and the audio's `prosody`, after the motion and listening,
//!   scaled by the speaking envelope and by what listening leaves of it.
//!
//! Invariants: `face_at` is meant to be called with non-decreasing `t` (the session clock); it
//! does not allocate in the steady state. `interrupt(t)` drops every queued phoneme and sample,
//! and also any pushed later that starts before `t`: from the first frame at or after `t` the
//! mouth is closed, while the head keeps moving as before (no pose jump).
//!
//! It does not own a clock, render, or resample audio; a change of sample rate starts a new
//! audio analysis (levels are learnt again).

use crate::audio::AudioLips;
use crate::audio::LOOKAHEAD_NS;
use crate::blink::Blinker;
use crate::expression::Expression;
use crate::listening::Listening;
use crate::motion::{DrivingMotion, MotionFrame};
use crate::prosody::Prosody;
use crate::timeline::ns_to_samples;
use crate::track::{VisemeEvent, VisemeTrack, FULL_CLOSE_PAUSE_NS};
use face_render::{FaceState, MouthShape};

/// Shortest motion cross-fade: 300 ms, long enough to read as a deliberate change of posture,
/// short enough to follow a change of mood in the conversation.
pub const MOTION_CROSSFADE_NS: u64 = 300_000_000;
/// Longest motion cross-fade: 4 s, enough to swing 40° (one clamp limit to the other) within
/// `MAX_FADE_STEP_DEG` per frame (a smoothstep's steepest slope is 1.5x its average: 1.5 * 40° /
/// 0.9° * 40 ms = 2.7 s) with room for the motions' own movement.
pub const MAX_MOTION_CROSSFADE_NS: u64 = 4_000_000_000;
/// Largest step a cross-fade may make per 40 ms frame: 0.9°, under the 1° at which a head turn
/// reads as a jump, unless one of the two motions itself moves faster (then that speed). The fade
/// is lengthened until its blend stays within this. Translation and scale count 1 % of face
/// width, or 1 % of size, as 1°.
pub const MAX_FADE_STEP_DEG: f32 = 0.9;
/// The fade is probed over 4 s (its longest) in 40 ms steps, one 25 fps frame.
const FADE_PROBE_STEPS: u64 = 100;
const FADE_PROBE_STEP_NS: u64 = 40_000_000;

/// Extra head-motion amplitude while speaking: +20 % around the motion's mean pose, subtle but
/// visibly more animated than listening.
pub const SPEAKING_GAIN: f32 = 0.2;
/// The speaking gain eases in over ~400 ms and out over ~800 ms (time constants), so that pauses
/// between sentences do not make the head pump.
const SPEAKING_ATTACK_TAU_NS: f32 = 400_000_000.0;
const SPEAKING_RELEASE_TAU_NS: f32 = 800_000_000.0;
/// `is_speaking` keeps reporting speech this long after the last voiced audio: 300 ms, bridging
/// the pauses between words and short ones between phrases.
pub const SPEAKING_HANGOVER_NS: u64 = 300_000_000;
/// How much the audio level scales a viseme-driven opening: ±15 % (0.85 at a quiet moment, 1.15 at
/// the loudest), so stressed syllables open a little more without disturbing the visemes.
pub const AUDIO_MODULATION: f32 = 0.15;
/// The viseme track is read this far ahead of the frame's time: 40 ms. Half of it is the middle of
/// the 40 ms a 25 fps frame is shown for (the audio analysis reads 20 ms ahead for the same
/// reason); the other half lets the lips lead the sound a little, as people's do: the track's
/// window is symmetric, so read on time it reaches a vowel's opening half a window after the
/// vowel's sound begins. On decoded frames of a Piper reply (the mouth's dark interior against
/// the audio's RMS per frame) the correlation peaks at 0 ms lag with this lead, at +40 ms without
/// it (r 0.75 against 0.63).
pub const VISEME_LEAD_NS: u64 = 40_000_000;
/// A bilabial's press is the lesser of the track read `VISEME_LEAD_NS` ahead and read this much
/// ahead, the middle of the frame: 20 ms. A closure is heard as the silence it makes; led like a
/// vowel (its span widened to `BILABIAL_MIN_NS` and read 40 ms ahead) it sealed the lips up to
/// 80 ms before that silence, over the loud end of the vowel before it (the /oʊ/ of "open" and
/// "globe" shown shut while it sounded); read only at the frame's middle, it would hold them shut
/// 20 ms into the vowel after it. Until it seals them the voice's loudness keeps the jaw open
/// (the floor in `mouth_at`).
pub const CLOSURE_LEAD_NS: u64 = 20_000_000;
/// The procedural blinker is probed every 20 ms (blinks last 150 ms or more) to see whether it
/// leaves room for a phrase-end blink.
const BLINK_PROBE_NS: u64 = 20_000_000;
/// Openness the audio analysis gives at its adaptive peak (see `audio`).
const AUDIO_OPEN_AT_PEAK: f32 = 0.8;

/// One driving motion on the session timeline, fading in from `fade_from_ns`.
#[derive(Clone, Debug)]
struct Layer {
    motion: DrivingMotion,
    /// Session time of the motion's first frame.
    origin_ns: u64,
    fade_from_ns: u64,
    fade_ns: u64,
    /// Mean pose of the motion (the centre of the speaking gain).
    mean: MotionFrame,
}

impl Layer {
    fn new(motion: DrivingMotion, at_ns: u64, fade_ns: u64) -> Layer {
        let n = motion.frames().len() as f32;
        let mut mean = MotionFrame { scale: 0.0, ..MotionFrame::REST };
        for f in motion.frames() {
            mean.pitch_deg += f.pitch_deg / n;
            mean.yaw_deg += f.yaw_deg / n;
            mean.roll_deg += f.roll_deg / n;
            mean.tx += f.tx / n;
            mean.ty += f.ty / n;
            mean.scale += f.scale / n;
        }
        Layer { motion, origin_ns: at_ns, fade_from_ns: at_ns, fade_ns, mean }
    }

    /// Weight of this layer over the ones below it at `t_ns`: smoothstep 0 -> 1.
    fn weight(&self, t_ns: u64) -> f32 {
        if self.fade_ns == 0 || t_ns >= self.fade_from_ns + self.fade_ns {
            return 1.0;
        }
        let x = t_ns.saturating_sub(self.fade_from_ns) as f32 / self.fade_ns as f32;
        x * x * (3.0 - 2.0 * x)
    }

    /// The motion at `t_ns`, eyes resolved (blinks where the motion has none), with the speaking
    /// gain applied around the mean pose.
    fn frame(&self, t_ns: u64, blinker: &Blinker, gain: f32) -> MotionFrame {
        let f = self.motion.sample(t_ns.saturating_sub(self.origin_ns));
        let m = &self.mean;
        let g = |v: f32, c: f32| c + (v - c) * gain;
        MotionFrame {
            pitch_deg: g(f.pitch_deg, m.pitch_deg),
            yaw_deg: g(f.yaw_deg, m.yaw_deg),
            roll_deg: g(f.roll_deg, m.roll_deg),
            tx: g(f.tx, m.tx),
            ty: g(f.ty, m.ty),
            scale: g(f.scale, m.scale),
            eye_open: Some(f.eye_open.unwrap_or_else(|| blinker.eye_open_at(t_ns))),
        }
    }
}

/// Largest difference between two frames in degree-equivalents (see `MAX_FADE_STEP_DEG`).
fn pose_distance_deg(a: &MotionFrame, b: &MotionFrame) -> f32 {
    let angles = (a.pitch_deg - b.pitch_deg).abs().max((a.yaw_deg - b.yaw_deg).abs()).max((a.roll_deg - b.roll_deg).abs());
    let other = (a.tx - b.tx).abs().max((a.ty - b.ty).abs()).max((a.scale - b.scale).abs()) * 100.0;
    angles.max(other)
}

/// Per-frame face animation; see the module comment.
#[derive(Clone, Debug)]
pub struct Animator {
    /// Bottom layer first; every layer but the first is (or was) fading in.
    layers: Vec<Layer>,
    pending_motion: Option<DrivingMotion>,
    blinker: Blinker,
    track: VisemeTrack,
    lips: Option<AudioLips>,
    prosody: Option<Prosody>,
    expression: Expression,
    /// Speech before this time (the latest interrupt) is dropped on push.
    speech_floor_ns: u64,
    /// Speaking gain envelope 0..1 and the time it was last advanced to.
    activity: f32,
    last_t_ns: Option<u64>,
    listening: Listening,
    /// Set by `set_listening`, applied at the next frame.
    pending_listening: Option<bool>,
}

impl Animator {
    /// An idle face driven by `motion` from session time 0; `seed` fixes the blink pattern.
    pub fn new(motion: DrivingMotion, seed: u64) -> Animator {
        Animator {
            layers: vec![Layer::new(motion, 0, 0)],
            pending_motion: None,
            blinker: Blinker::new(seed),
            track: VisemeTrack::new(),
            lips: None,
            prosody: None,
            expression: Expression::new(),
            speech_floor_ns: 0,
            activity: 0.0,
            last_t_ns: None,
            listening: Listening::new(seed ^ 0x6C69_7374_656E),
            pending_listening: None,
        }
    }

    /// Switches the driving motion from the next frame on, cross-fading the pose (see the module
    /// comment). The new motion starts at its first frame.
    pub fn set_motion(&mut self, m: DrivingMotion) {
        self.pending_motion = Some(m);
    }

    /// Whether the user is speaking (the face listens), from the next frame on.
    pub fn set_listening(&mut self, on: bool) {
        self.pending_listening = Some(on);
    }

    /// Whether the face is listening (as last set and applied).
    pub fn is_listening(&self) -> bool {
        self.listening.is_on()
    }

    /// Queues speech audio (mono PCM16) whose first sample is at `pts_ns`. Samples before the
    /// latest interrupt are dropped.
    pub fn push_audio(&mut self, pts_ns: u64, sample_rate_hz: u32, samples: &[i16]) {
        if sample_rate_hz == 0 || samples.is_empty() {
            return;
        }
        let (mut pts_ns, mut samples) = (pts_ns, samples);
        if pts_ns < self.speech_floor_ns {
            let skip = ns_to_samples(self.speech_floor_ns - pts_ns, sample_rate_hz) as usize;
            if skip >= samples.len() {
                return;
            }
            samples = &samples[skip..];
            pts_ns = self.speech_floor_ns;
        }
        if self.lips.as_ref().is_none_or(|l| l.sample_rate_hz() != sample_rate_hz) {
            self.lips = Some(AudioLips::new(sample_rate_hz));
        }
        if let Some(lips) = self.lips.as_mut() {
            lips.push(pts_ns, samples);
        }
        if self.prosody.as_ref().is_none_or(|p| p.sample_rate_hz() != sample_rate_hz) {
            self.prosody = Some(Prosody::new(sample_rate_hz));
        }
        if let Some(p) = self.prosody.as_mut() {
            p.push(pts_ns, samples);
        }
    }

    /// Queues phoneme timings: for the span they cover they drive the mouth instead of the audio
    /// analysis. Events (or their parts) before the latest interrupt are dropped.
    pub fn push_visemes(&mut self, events: &[VisemeEvent]) {
        let floor = self.speech_floor_ns;
        let kept: Vec<VisemeEvent> = events
            .iter()
            .filter(|e| e.end_ns > floor)
            .map(|e| VisemeEvent { start_ns: e.start_ns.max(floor), ..*e })
            .collect();
        self.track.push(&kept);
        self.expression.push(&kept);
    }

    /// Drops all queued speech: the mouth is closed from the first frame at or after `t_ns`
    /// (normally the next frame's pts) until new speech is pushed; speech pushed later that
    /// starts before `t_ns` is clipped to it. The head keeps its motion. (The audio analysis is
    /// dropped whole, so a frame queried before `t_ns` after this call is closed too.)
    pub fn interrupt(&mut self, t_ns: u64) {
        self.track.discard_from(t_ns);
        if let Some(lips) = self.lips.as_mut() {
            lips.clear();
        }
        if let Some(p) = self.prosody.as_mut() {
            p.clear();
        }
        self.expression.interrupt(t_ns);
        self.speech_floor_ns = self.speech_floor_ns.max(t_ns);
    }

    /// Whether speech (phonemes, or voiced audio within the last `SPEAKING_HANGOVER_NS`) is
    /// playing at `t_ns`.
    pub fn is_speaking(&self, t_ns: u64) -> bool {
        self.track.is_active(t_ns)
            || self.lips.as_ref().is_some_and(|l| l.is_voiced_near(t_ns, SPEAKING_HANGOVER_NS, 0))
    }

    /// The face at `t_ns`.
    pub fn face_at(&mut self, t_ns: u64) -> FaceState {
        if let Some(m) = self.pending_motion.take() {
            self.start_crossfade(m, t_ns);
        }
        let mouth = self.mouth_at(t_ns);

        // Speaking gain envelope, advanced by the time since the last frame.
        let dt = self.last_t_ns.map_or(0, |last| t_ns.saturating_sub(last)) as f32;
        self.last_t_ns = Some(t_ns);
        let target = if self.is_speaking(t_ns) { 1.0 } else { 0.0 };
        let tau = if target > self.activity { SPEAKING_ATTACK_TAU_NS } else { SPEAKING_RELEASE_TAU_NS };
        self.activity += (target - self.activity) * (1.0 - (-dt / tau).exp());
        let gain = 1.0 + SPEAKING_GAIN * self.activity;

        let mut frame = self.motion_frame(t_ns, gain);
        if let Some(on) = self.pending_listening.take() {
            self.listening.set(on, t_ns);
        }
        self.listening.apply(t_ns, &mut frame);
        let level = self.activity * (1.0 - self.listening.level());
        let hops = self.prosody.as_mut().map(|p| p.take_until(t_ns + LOOKAHEAD_NS)).into_iter().flatten();
        let blinker = &self.blinker;
        let clear = |from: u64, len: u64| (0..=len / BLINK_PROBE_NS).all(|i| blinker.eye_open_at(from + i * BLINK_PROBE_NS)[0] >= 1.0);
        let (brow, cheek) = self.expression.apply(t_ns, level, hops, &mouth, &mut frame, clear);
        let eyes = frame.eye_open.unwrap_or([1.0, 1.0]);
        FaceState {
            pose: frame.pose(),
            mouth,
            eye_open: [eyes[0].clamp(0.0, 1.0), eyes[1].clamp(0.0, 1.0)],
            brow,
            cheek,
        }
    }

    fn mouth_at(&mut self, t_ns: u64) -> MouthShape {
        let audio = self.lips.as_mut().map(|l| l.shape_at(t_ns));
        let track_t_ns = t_ns + VISEME_LEAD_NS;
        if !self.track.covers(track_t_ns) {
            return audio.unwrap_or(MouthShape::CLOSED);
        }
        let mut m = self.track.shape_at(track_t_ns);
        // The lips seal with the closure's silence and part with its burst (see CLOSURE_LEAD_NS).
        m.press = m.press.min(self.track.shape_at(t_ns + CLOSURE_LEAD_NS).press);
        let has_audio = self.lips.as_ref().is_some_and(|l| l.is_voiced_near(t_ns, SPEAKING_HANGOVER_NS, SPEAKING_HANGOVER_NS));
        if let (Some(a), true) = (audio, has_audio) {
            let level = (a.open / AUDIO_OPEN_AT_PEAK).clamp(0.0, 1.0);
            m.open = (m.open * (1.0 - AUDIO_MODULATION + 2.0 * AUDIO_MODULATION * level)).clamp(0.0, 1.0);
            // The jaw opens at least as far as the voice's loudness says, unless the lips close.
            m.open = m.open.max(a.open * (1.0 - m.press));
        }
        if self.lips.as_ref().is_some_and(|l| !l.is_audible_near(t_ns, FULL_CLOSE_PAUSE_NS, LOOKAHEAD_NS)) {
            // From rest the lips may take the first phoneme's shape, but part only with its sound.
            m.open = 0.0;
            m.tongue = 0.0;
        }
        m
    }

    /// Composite of the motion layers at `t_ns`; drops layers hidden by a finished fade.
    fn motion_frame(&mut self, t_ns: u64, gain: f32) -> MotionFrame {
        if let Some(top) = self.layers.iter().rposition(|l| l.weight(t_ns) >= 1.0) {
            self.layers.drain(..top);
        }
        self.motion_frame_at(t_ns, gain)
    }

    /// Adds `m` as a new top layer fading in from `t_ns`, choosing the shortest fade (from
    /// `MOTION_CROSSFADE_NS`, growing by 10 %) whose blend, probed every 40 ms, never
    /// steps further than the faster of the two inputs or `MAX_FADE_STEP_DEG`. Probing the actual
    /// blend rather than the distance also covers a switch during an unfinished fade.
    fn start_crossfade(&mut self, m: DrivingMotion, t_ns: u64) {
        let gain = 1.0 + SPEAKING_GAIN * self.activity;
        let incoming = Layer::new(m, t_ns, 0);
        let n = FADE_PROBE_STEPS as usize + 1;
        let mut old = [MotionFrame::REST; FADE_PROBE_STEPS as usize + 1];
        let mut new = old;
        for j in 0..n {
            let t = t_ns + j as u64 * FADE_PROBE_STEP_NS;
            old[j] = self.motion_frame_at(t, gain);
            new[j] = incoming.frame(t, &self.blinker, gain);
        }
        let own_step = |v: &[MotionFrame]| v.windows(2).map(|w| pose_distance_deg(&w[0], &w[1])).fold(0.0f32, f32::max);
        let limit = own_step(&old).max(own_step(&new)).max(MAX_FADE_STEP_DEG);
        let mut fade_ns = MOTION_CROSSFADE_NS;
        while fade_ns < MAX_MOTION_CROSSFADE_NS {
            let probe = Layer { fade_ns, ..incoming.clone() };
            let blend = |j: usize| old[j].lerp(&new[j], probe.weight(t_ns + j as u64 * FADE_PROBE_STEP_NS));
            let worst = (1..n).map(|j| pose_distance_deg(&blend(j - 1), &blend(j))).fold(0.0f32, f32::max);
            if worst <= limit {
                break;
            }
            fade_ns = (fade_ns + fade_ns / 10).min(MAX_MOTION_CROSSFADE_NS);
        }
        self.layers.push(Layer { fade_ns, ..incoming });
    }

    /// `motion_frame` without pruning (for probing the future).
    fn motion_frame_at(&self, t_ns: u64, gain: f32) -> MotionFrame {
        let mut frame = self.layers[0].frame(t_ns, &self.blinker, gain);
        for layer in &self.layers[1..] {
            frame = frame.lerp(&layer.frame(t_ns, &self.blinker, gain), layer.weight(t_ns));
        }
        frame
    }
}
