//! A phrase's first sound moves the mouth on the frame it is heard (or the one before, the viseme
//! lead), whatever its first phoneme, with phoneme timings and from the audio alone: the issue's
//! "within 40 ms of each reply's first sound and of each phrase after a pause", measured on the
//! session clock (what goes into the stream), with nothing between.

use animation::timeline::frame_pts_ns;
use animation::{Animator, DrivingMotion, MotionFrame, Viseme, VisemeEvent};

const MS: u64 = 1_000_000;
const RATE: u32 = 24_000;
const FRAME_MS: i64 = 40;

fn still() -> DrivingMotion {
    let frame = MotionFrame { pitch_deg: 0.0, yaw_deg: 0.0, roll_deg: 0.0, tx: 0.0, ty: 0.0, scale: 1.0, eye_open: None };
    DrivingMotion::new(25.0, vec![frame]).unwrap()
}

/// A voiced sound (150 Hz with harmonics), `ms` long.
fn voice(ms: u64) -> Vec<i16> {
    let n = (RATE as u64 * ms / 1000) as usize;
    let tone = |f: f32, t: f32| (2.0 * std::f32::consts::PI * f * t).sin();
    (0..n)
        .map(|i| {
            let t = i as f32 / RATE as f32;
            (6000.0 * (tone(150.0, t) + 0.5 * tone(300.0, t) + 0.3 * tone(1200.0, t))) as i16
        })
        .collect()
}

fn silence(ms: u64) -> Vec<i16> {
    vec![0; (RATE as u64 * ms / 1000) as usize]
}

/// The first frame (ms from `sound_ms`) whose mouth shows open: opening 0.1 not held shut by `press`.
fn first_open_ms(a: &mut Animator, sound_ms: u64) -> Option<i64> {
    (0..100u64).map(|f| frame_pts_ns(f, 25, 1)).find_map(|t| {
        let m = a.face_at(t).mouth;
        (t + 400 * MS >= sound_ms * MS && m.open * (1.0 - m.press) >= 0.1).then(|| t as i64 / MS as i64 - sound_ms as i64)
    })
}

/// Two phrases, the second after a 500 ms pause, each starting with `first` for 80 ms then a vowel.
fn two_phrases(first: Viseme) -> (Vec<VisemeEvent>, Vec<i16>, [u64; 2]) {
    let ev = |a: u64, b: u64, v| VisemeEvent::new(a * MS, b * MS, v);
    let events = vec![
        ev(0, 1000, Viseme::Silence),
        ev(1000, 1080, first),
        ev(1080, 1300, Viseme::Open),
        ev(1300, 1800, Viseme::Silence),
        ev(1800, 1880, first),
        ev(1880, 2100, Viseme::Mid),
        ev(2100, 2600, Viseme::Silence),
    ];
    let audio = [silence(1000), voice(300), silence(500), voice(300), silence(500)].concat();
    (events, audio, [1000, 1800])
}

#[test]
fn each_phrase_opens_the_mouth_within_a_frame_of_its_first_sound() {
    for first in [Viseme::Open, Viseme::Mid, Viseme::Wide, Viseme::Rounded, Viseme::Dental, Viseme::Narrow, Viseme::LabioDental] {
        let (events, audio, onsets) = two_phrases(first);
        for with_audio in [false, true] {
            let mut a = Animator::new(still(), 1);
            a.push_visemes(&events);
            if with_audio {
                a.push_audio(0, RATE, &audio);
            }
            for &at in &onsets {
                let mut probe = a.clone();
                let off = first_open_ms(&mut probe, at);
                let ok = off.is_some_and(|o| (-FRAME_MS..=FRAME_MS).contains(&o));
                assert!(ok, "{first:?} (audio {with_audio}) phrase at {at} ms: the mouth opens at {off:?} ms");
            }
        }
    }
}

#[test]
fn a_bilabial_start_stays_shut_for_its_closure_and_opens_at_the_release() {
    let (events, audio, onsets) = two_phrases(Viseme::Closed);
    let mut a = Animator::new(still(), 1);
    a.push_visemes(&events);
    a.push_audio(0, RATE, &audio);
    for &at in &onsets {
        let off = first_open_ms(&mut a.clone(), at).expect("opens");
        // The 80 ms closure (m, b, p) is heard with the lips shut; the release comes with the vowel.
        assert!((40..=120).contains(&off), "phrase at {at} ms: opens at {off} ms, not at the release");
    }
}

#[test]
fn audio_only_lips_open_on_the_first_voiced_frame_after_a_long_silence() {
    let mut a = Animator::new(still(), 1);
    a.push_audio(0, RATE, &[silence(2000), voice(400), silence(1500), voice(400), silence(300)].concat());
    for at in [2000, 3900] {
        let off = first_open_ms(&mut a.clone(), at).expect("opens");
        assert!((-FRAME_MS..=FRAME_MS).contains(&off), "sound at {at} ms: opens at {off} ms");
    }
}

/// A breath too quiet to hear (-60 dBFS), `ms` long.
fn breath(ms: u64) -> Vec<i16> {
    let n = (RATE as u64 * ms / 1000) as usize;
    (0..n).map(|i| (46.0 * (2.0 * std::f32::consts::PI * 700.0 * i as f32 / RATE as f32).sin()) as i16).collect()
}

#[test]
fn a_first_phoneme_timed_before_its_sound_does_not_part_the_lips_before_it_is_heard() {
    // As a Piper reply begins: /ð/ timed 40 ms before it is heard, over a breath under hearing;
    // the audio pushed tick by tick before each frame, as the media session does.
    let ev = |a: u64, b: u64, v| VisemeEvent::new(a * MS, b * MS, v);
    let events = vec![
        ev(0, 1000, Viseme::Silence),
        ev(1000, 1090, Viseme::Dental),
        ev(1090, 1300, Viseme::Mid),
        ev(1300, 1800, Viseme::Silence),
        ev(1800, 1890, Viseme::Dental),
        ev(1890, 2100, Viseme::Open),
        ev(2100, 2600, Viseme::Silence),
    ];
    let audio = [silence(1000), breath(40), voice(260), silence(500), breath(40), voice(260), silence(500)].concat();
    let sounds = [1040i64, 1840];
    let mut a = Animator::new(still(), 1);
    a.push_visemes(&events);
    let per_frame = (RATE / 25) as usize;
    for f in 0..65u64 {
        let t = frame_pts_ns(f, 25, 1);
        a.push_audio(t, RATE, &audio[f as usize * per_frame..(f as usize + 1) * per_frame]);
        let m = a.face_at(t).mouth;
        let t_ms = (t / MS) as i64;
        for sound in sounds {
            if (sound - 400..=sound - FRAME_MS).contains(&t_ms) {
                assert!(m.open <= 0.01, "sound at {sound} ms: the frame at {t_ms} ms, shown before it, has the lips parted ({})", m.open);
            }
            if (sound..sound + 2 * FRAME_MS).contains(&t_ms) {
                assert!(m.open * (1.0 - m.press) >= 0.1, "sound at {sound} ms: the frame at {t_ms} ms, while it is heard, is closed ({})", m.open);
            }
        }
    }
}
