//! Animator: the per-frame face as the media session sees it.

mod common;

use animation::timeline::frame_pts_ns;
use animation::animator::{CLOSURE_LEAD_NS, VISEME_LEAD_NS};
use animation::{Animator, DrivingMotion, FaceState, MotionFrame, MouthShape, Viseme, VisemeEvent};
use common::*;

const MS: u64 = 1_000_000;

fn t(frame: u64) -> u64 {
    frame_pts_ns(frame, 25, 1)
}

/// A smooth idle sway: `yaw = yaw0 + a sin`, `pitch = a/2 sin`, at `hz`, sampled at 25 fps for
/// one period.
fn sway(yaw0: f32, roll0: f32, amp: f32, hz: f32, eyes: Option<[f32; 2]>) -> DrivingMotion {
    let n = (25.0 / hz).round() as usize;
    let frames = (0..n)
        .map(|i| {
            let ph = 2.0 * std::f32::consts::PI * i as f32 / n as f32;
            MotionFrame {
                pitch_deg: 0.5 * amp * (2.0 * ph).sin(),
                yaw_deg: yaw0 + amp * ph.sin(),
                roll_deg: roll0 + 0.3 * amp * ph.cos(),
                tx: 0.01 * ph.sin(),
                ty: 0.0,
                scale: 1.0 + 0.01 * ph.cos(),
                eye_open: eyes,
            }
        })
        .collect();
    DrivingMotion::new(25.0, frames).unwrap()
}

fn angle_step(a: &FaceState, b: &FaceState) -> f32 {
    let (p, q) = (a.pose, b.pose);
    (p.pitch_deg - q.pitch_deg).abs().max((p.yaw_deg - q.yaw_deg).abs()).max((p.roll_deg - q.roll_deg).abs())
}

/// Feeds the real utterance frame by frame from `start_frame`, as the media engine does.
struct Feeder {
    rate: u32,
    samples: Vec<i16>,
    start_frame: u64,
}

impl Feeder {
    fn utterance(start_frame: u64) -> Feeder {
        let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
        Feeder { rate, samples, start_frame }
    }

    /// Pushes the audio of frame `f` (if any) into `a`.
    fn feed(&self, a: &mut Animator, f: u64) {
        if f < self.start_frame {
            return;
        }
        let per = (self.rate / 25) as usize;
        let i = (f - self.start_frame) as usize;
        let from = (i * per).min(self.samples.len());
        let to = ((i + 1) * per).min(self.samples.len());
        if from < to {
            a.push_audio(t(f), self.rate, &self.samples[from..to]);
        }
    }

    fn end_frame(&self) -> u64 {
        self.start_frame + (self.samples.len() / (self.rate as usize / 25)) as u64
    }
}

#[test]
fn interrupt_closes_the_mouth_on_the_very_next_frame() {
    // Audio-driven: interrupt in the middle of every syllable-ish position.
    let feeder = Feeder::utterance(10);
    for cut in (14..feeder.end_frame() - 5).step_by(3) {
        let mut a = Animator::new(sway(0.0, 0.0, 3.0, 0.25, None), 1);
        let mut prev = a.face_at(0);
        let mut opened = false;
        for f in 0..cut + 20 {
            if f == cut {
                // The interrupt arrives 13 ms after frame `cut - 1` was rendered.
                a.interrupt(t(cut - 1) + 13 * MS);
            }
            if f < cut {
                feeder.feed(&mut a, f); // after the interrupt the session no longer feeds speech
            }
            let face = a.face_at(t(f));
            opened |= face.mouth.open > 0.3;
            if f >= cut {
                assert_eq!(face.mouth, MouthShape::CLOSED, "cut {cut} frame {f}");
                assert!(!a.is_speaking(t(f)));
                assert!(angle_step(&prev, &face) < 1.0, "pose must not jump at an interrupt");
            }
            prev = face;
        }
        assert!(cut < 30 || opened, "cut {cut}: speech should have opened the mouth");
    }
    // Viseme-driven; audio that arrives late for the interrupted span is dropped.
    let mut b = Animator::new(sway(0.0, 0.0, 3.0, 0.25, None), 1);
    b.push_visemes(&[VisemeEvent::new(200 * MS, 2_000 * MS, Viseme::Open)]);
    for f in 0..26 {
        b.face_at(t(f));
    }
    assert!(b.face_at(t(25)).mouth.open > 0.7);
    b.interrupt(t(25) + 5 * MS);
    let loud = vec![8_000i16; 12_000];
    b.push_audio(t(5), 16_000, &loud[..]); // stale: [0.2 s, 0.95 s), all before the interrupt
    b.push_visemes(&[VisemeEvent::new(0, t(25), Viseme::Open)]); // stale
    assert_eq!(b.face_at(t(26)).mouth, MouthShape::CLOSED);
    assert_eq!(b.face_at(t(27)).mouth, MouthShape::CLOSED);
    assert!(!b.is_speaking(t(27)));
    // A new response after the interrupt animates normally.
    b.push_visemes(&[VisemeEvent::new(t(30), t(60), Viseme::Rounded)]);
    let face = b.face_at(t(45));
    assert!((face.mouth.wide + 0.8).abs() < 1e-4, "{face:?}");
}

#[test]
fn switching_motion_never_jumps_more_than_one_degree_per_frame() {
    let calm = sway(0.0, 0.0, 3.0, 0.25, None);
    let turned = sway(12.0, 6.0, 4.0, 0.3, Some([0.9, 0.9]));
    let far = sway(-18.0, -10.0, 2.0, 0.5, None);
    for switch_at in [10u64, 23, 37, 52] {
        let mut a = Animator::new(calm.clone(), 3);
        let mut prev = a.face_at(0);
        let mut max_step = 0.0f32;
        for f in 1..400 {
            if f == switch_at {
                a.set_motion(turned.clone());
            }
            if f == switch_at + 5 {
                a.set_motion(far.clone()); // a second switch in the middle of the first fade
            }
            if f == switch_at + 150 {
                a.set_motion(calm.clone());
            }
            let face = a.face_at(t(f));
            max_step = max_step.max(angle_step(&prev, &face));
            assert!((face.pose.tx - prev.pose.tx).abs() < 0.01 && (face.pose.scale - prev.pose.scale).abs() < 0.01);
            prev = face;
        }
        println!("switch at frame {switch_at}: largest step {max_step:.3}°");
        assert!(max_step <= 1.0, "switch at {switch_at}: {max_step}°");
    }
    // After the fade the new motion plays exactly, from its first frame.
    let mut a = Animator::new(calm.clone(), 3);
    a.face_at(t(0));
    a.set_motion(turned.clone());
    a.face_at(t(10));
    let face = a.face_at(t(110));
    let expect = turned.sample(t(100)).pose();
    assert!((face.pose.yaw_deg - expect.yaw_deg).abs() < 1e-4, "{:?} vs {:?}", face.pose, expect);
    assert_eq!(face.eye_open, [0.9, 0.9], "the motion's eye data drives the eyes");
}

#[test]
fn idle_face_keeps_moving_and_blinking_with_the_mouth_closed() {
    let mut a = Animator::new(sway(2.0, 0.0, 3.0, 0.25, None), 11);
    let (mut min_yaw, mut max_yaw) = (f32::MAX, f32::MIN);
    let mut blinks = 0;
    let mut prev_eye = 1.0;
    for f in 0..25 * 20 {
        let face = a.face_at(t(f));
        assert_eq!(face.mouth, MouthShape::CLOSED);
        assert!(!a.is_speaking(t(f)));
        min_yaw = min_yaw.min(face.pose.yaw_deg);
        max_yaw = max_yaw.max(face.pose.yaw_deg);
        if face.eye_open[0] < 0.5 && prev_eye >= 0.5 {
            blinks += 1;
        }
        prev_eye = face.eye_open[0];
    }
    assert!(max_yaw - min_yaw > 5.0, "head should sway: {min_yaw}..{max_yaw}");
    assert!((3..=9).contains(&blinks), "{blinks} blinks in 20 s");
}

#[test]
fn speech_moves_the_mouth_and_livens_the_head() {
    let feeder = Feeder::utterance(25);
    let motion = sway(0.0, 0.0, 3.0, 0.5, None);
    let mut a = Animator::new(motion.clone(), 5);
    let mut max_open = 0.0f32;
    let mut speaking_frames = 0;
    let mut gain_seen = 0.0f32;
    for f in 0..feeder.end_frame() + 40 {
        feeder.feed(&mut a, f);
        let face = a.face_at(t(f));
        max_open = max_open.max(face.mouth.open);
        if a.is_speaking(t(f)) {
            speaking_frames += 1;
        }
        if f < 25 {
            assert_eq!(face.mouth, MouthShape::CLOSED);
        }
        let idle_yaw = motion.sample(t(f)).yaw_deg;
        if idle_yaw.abs() > 1.0 {
            gain_seen = gain_seen.max(face.pose.yaw_deg / idle_yaw);
        }
    }
    assert!(max_open > 0.6, "{max_open}");
    let speech_frames = feeder.end_frame() - 25;
    assert!(speaking_frames as u64 >= speech_frames * 8 / 10, "{speaking_frames} of {speech_frames}");
    assert!(gain_seen > 1.1 && gain_seen <= 1.2 + 1e-3, "speaking gain {gain_seen}");
    // Long after the speech: idle again.
    assert!(!a.is_speaking(t(feeder.end_frame() + 40)));
    assert_eq!(a.face_at(t(feeder.end_frame() + 41)).mouth, MouthShape::CLOSED);
}

#[test]
fn visemes_shape_their_span_and_the_audio_sets_the_least_opening() {
    let feeder = Feeder::utterance(0);
    // Phonemes for 0.5 .. 1.0 s only: a held rounded vowel.
    let span = VisemeEvent::new(500 * MS, 1_000 * MS, Viseme::Rounded);
    let mut with = Animator::new(DrivingMotion::rest(), 2);
    let mut without = Animator::new(DrivingMotion::rest(), 2);
    with.push_visemes(&[span]);
    let mut louder_than_the_viseme = 0;
    for f in 0..feeder.end_frame() {
        feeder.feed(&mut with, f);
        feeder.feed(&mut without, f);
        let (a, b) = (with.face_at(t(f)), without.face_at(t(f)));
        let ms = t(f) / MS;
        if (580..=920).contains(&ms) {
            // The viseme's lip shape throughout; its opening scaled by the audio within ±15 %,
            // or the audio's own opening where that is larger.
            assert!((a.mouth.wide + 0.8).abs() < 1e-4, "{ms} ms: {a:?}");
            assert!(a.mouth.open >= 0.35 * 0.85 - 1e-4 && a.mouth.open >= b.mouth.open - 1e-4, "{ms} ms: {a:?} audio alone {b:?}");
            let scaled = a.mouth.open <= 0.35 * 1.15 + 1e-4;
            assert!(scaled || (a.mouth.open - b.mouth.open).abs() < 1e-4, "{ms} ms: {a:?} audio alone {b:?}");
            louder_than_the_viseme += usize::from(!scaled);
        } else if !(400..=1_200).contains(&ms) {
            assert_eq!(a.mouth, b.mouth, "{ms} ms: outside the span the audio drives");
        }
    }
    assert!(louder_than_the_viseme > 0, "the utterance opens wider than a rounded vowel somewhere in the span");
}

#[test]
fn visemes_lead_the_frame_and_bilabials_close_however_loud() {
    // No audio: the track alone, read VISEME_LEAD_NS ahead, so a frame 40 ms before a vowel
    // already shows half its opening (the smoothing window is centred on the read time).
    let mut a = Animator::new(DrivingMotion::rest(), 0);
    a.push_visemes(&[VisemeEvent::new(1_000 * MS, 1_400 * MS, Viseme::Open)]);
    let half = a.face_at(1_000 * MS - VISEME_LEAD_NS).mouth.open;
    assert!((half - 0.4).abs() < 1e-3, "{half}");
    assert!(a.face_at(1_040 * MS - VISEME_LEAD_NS).mouth.open > 0.79);

    // Loud speech with a bilabial in it: pressed shut at its centre.
    let feeder = Feeder::utterance(10);
    let mut loud = Animator::new(DrivingMotion::rest(), 0);
    let (at, widest) = widest_frame(&feeder);
    assert!(widest > 0.5, "{widest}");
    // The frame at `at` reads the lips' shape at t + VISEME_LEAD_NS and their press also at
    // t + CLOSURE_LEAD_NS: put a bilabial between the two, vowels around it.
    let centre = t(at) + (VISEME_LEAD_NS + CLOSURE_LEAD_NS) / 2;
    loud.push_visemes(&[
        VisemeEvent::new(centre - 200 * MS, centre - 40 * MS, Viseme::Open),
        VisemeEvent::new(centre - 40 * MS, centre + 40 * MS, Viseme::Closed),
        VisemeEvent::new(centre + 40 * MS, centre + 200 * MS, Viseme::Open),
    ]);
    for f in 0..=at {
        feeder.feed(&mut loud, f);
        let face = loud.face_at(t(f));
        if f + 3 == at {
            assert!(face.mouth.open >= 0.8 * 0.85 - 1e-4, "{face:?}");
        }
        if f == at {
            assert!(face.mouth.press > 0.98 && face.mouth.open < 0.02, "{face:?}");
        }
    }
}

/// The loudest frame of `Feeder::utterance(10)` fed alone, and its opening.
fn widest_frame(feeder: &Feeder) -> (u64, f32) {
    let mut alone = Animator::new(DrivingMotion::rest(), 0);
    let (mut at, mut widest) = (0, 0.0f32);
    for f in 0..feeder.end_frame() {
        feeder.feed(&mut alone, f);
        let open = alone.face_at(t(f)).mouth.open;
        if open > widest {
            (at, widest) = (f, open);
        }
    }
    (at, widest)
}

#[test]
fn a_bilabial_seals_the_lips_with_its_silence_not_over_the_loud_vowel_before_it() {
    // A rounded vowel sounding to the end of a frame, then a short /p/ (40 ms, widened to 80):
    // the frame still shows the jaw open by the voice; the next one, over the closure, is pressed.
    // Read 40 ms ahead alone, the press shut the first one (open under a tenth of the voice's).
    let feeder = Feeder::utterance(10);
    let (at, widest) = widest_frame(&feeder);
    assert!(widest > 0.5, "{widest}");
    let closure = t(at + 1);
    let mut a = Animator::new(DrivingMotion::rest(), 0);
    a.push_visemes(&[
        VisemeEvent::new(closure - 200 * MS, closure, Viseme::Rounded),
        VisemeEvent::new(closure, closure + 40 * MS, Viseme::Closed),
        VisemeEvent::new(closure + 40 * MS, closure + 200 * MS, Viseme::Open),
    ]);
    for f in 0..=at + 1 {
        feeder.feed(&mut a, f);
        let face = a.face_at(t(f));
        if f == at {
            assert!(face.mouth.open > 0.4 * widest && face.mouth.press <= 0.5 + 1e-3, "{face:?}");
        }
        if f == at + 1 {
            assert!(face.mouth.press > 0.9, "{face:?}");
        }
    }
}

#[test]
fn same_inputs_give_the_same_faces() {
    let run = || {
        let feeder = Feeder::utterance(3);
        let mut a = Animator::new(sway(1.0, 2.0, 3.0, 0.25, None), 77);
        let mut out = Vec::new();
        for f in 0..120 {
            feeder.feed(&mut a, f);
            if f == 40 {
                a.set_motion(sway(-4.0, 0.0, 2.0, 0.4, None));
            }
            if f == 60 {
                a.interrupt(t(60));
            }
            out.push(a.face_at(t(f)));
        }
        out
    };
    assert_eq!(run(), run());
}

#[test]
fn a_change_of_sample_rate_starts_a_new_analysis() {
    let feeder = Feeder::utterance(0);
    let mut a = Animator::new(DrivingMotion::rest(), 0);
    for f in 0..20 {
        feeder.feed(&mut a, f);
        a.face_at(t(f));
    }
    // 24 kHz audio from frame 20 on: a loud tone burst.
    let tone: Vec<i16> = (0..24_000).map(|i| ((i as f32 * 0.1).sin() * 8_000.0) as i16).collect();
    let mut last = MouthShape::CLOSED;
    for f in 20..45 {
        let i = (f - 20) as usize * 960;
        a.push_audio(t(f), 24_000, &tone[i..i + 960]);
        last = a.face_at(t(f)).mouth;
    }
    assert!(last.open > 0.5, "{last:?}");
    assert!(a.is_speaking(t(44)));
}
