//! The speaking face through the Animator: speech moves brows, cheeks and head and fades out
//! after it; between turns (listening or idle, nobody speaking) the frames are exactly what they
//! were before the speaking face existed.

mod common;

use animation::timeline::frame_pts_ns;
use animation::{Animator, DrivingMotion, FaceState, MotionFrame, PhraseMark, Viseme, VisemeEvent};
use common::*;

const MS: u64 = 1_000_000;

fn t(frame: u64) -> u64 {
    frame_pts_ns(frame, 25, 1)
}

fn sway() -> DrivingMotion {
    let frames = (0..100)
        .map(|i| {
            let ph = std::f32::consts::TAU * i as f32 / 100.0;
            MotionFrame { pitch_deg: 1.5 * ph.sin(), yaw_deg: 3.0 * (2.0 * ph).sin(), roll_deg: ph.cos(), ..MotionFrame::REST }
        })
        .collect();
    DrivingMotion::new(25.0, frames).unwrap()
}

/// FNV-1a over the bits of every field of the faces.
fn digest(faces: &[FaceState]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for f in faces {
        let p = f.pose;
        let m = f.mouth;
        for v in [p.pitch_deg, p.yaw_deg, p.roll_deg, p.tx, p.ty, p.scale, m.open, m.wide, m.press, m.tongue, f.eye_open[0], f.eye_open[1], f.brow, f.cheek] {
            for b in v.to_bits().to_le_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3);
            }
        }
    }
    h
}

/// 40 s of frames, nobody speaking, the user speaking (listening) from 3 to 9 s and 20 to 22 s,
/// silent audio pushed each frame from 25 s on (as a session does between replies).
fn between_turns() -> Vec<FaceState> {
    let mut a = Animator::new(sway(), 11);
    let silence = vec![0i16; 960];
    (0..1_000u64)
        .map(|f| {
            match f {
                75 | 500 => a.set_listening(true),
                225 | 550 => a.set_listening(false),
                _ => {}
            }
            if f >= 625 {
                a.push_audio(t(f), 24_000, &silence);
            }
            a.face_at(t(f))
        })
        .collect()
}

#[test]
fn between_turns_the_frames_are_exactly_as_before() {
    let faces = between_turns();
    assert!(faces.iter().all(|f| f.brow == 0.0 && f.cheek == 0.0));
    // The digest of the same frames from the animator before the speaking face existed (commit
    // 3576fc2); a change in the motion, blink or listening layers changes it too, on purpose.
    assert_eq!(digest(&faces), 0xe83e_4bd6_2b96_9782, "{:#018x}", digest(&faces));
}

/// The committed utterance, pushed a frame at a time from frame 25, with or without timings.
fn speak(visemes: &[VisemeEvent], listening_from: Option<u64>) -> Vec<FaceState> {
    let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
    let mut a = Animator::new(sway(), 3);
    a.push_visemes(visemes);
    let per = (rate / 25) as usize;
    (0..250u64)
        .map(|f| {
            if let Some(chunk) = f.checked_sub(25).and_then(|k| samples.chunks(per).nth(k as usize)) {
                a.push_audio(t(f), rate, chunk);
            }
            if Some(f) == listening_from {
                a.set_listening(true);
            }
            a.face_at(t(f))
        })
        .collect()
}

#[test]
fn speech_lifts_the_brows_nods_and_settles_after() {
    let quiet = speak(&[], Some(u64::MAX));
    let plain = {
        let mut a = Animator::new(sway(), 3);
        (0..250u64).map(|f| a.face_at(t(f))).collect::<Vec<_>>()
    };
    // Audio alone (no timings): the accents lift the brows and nod the head.
    let during = 25..100;
    let max_brow = quiet[during.clone()].iter().map(|f| f.brow).fold(f32::MIN, f32::max);
    assert!(max_brow >= 0.3, "brow {max_brow}");
    let nod = quiet[during.clone()].iter().zip(&plain[during]).map(|(q, p)| q.pose.pitch_deg - p.pose.pitch_deg).fold(f32::MIN, f32::max);
    assert!(nod > 0.5, "nod {nod}°");
    // Settled two and a half seconds after the speech (it ends near frame 100).
    for f in &quiet[165..] {
        assert!(f.brow.abs() < 0.05 && f.cheek < 0.05, "{f:?}");
    }
    // With timings: a question at the end raises the brows there.
    let (_, samples) = read_wav_mono16(UTTERANCE_WAV);
    let end_ns = t(25) + samples.len() as u64 * 1_000_000_000 / 16_000;
    let q = [VisemeEvent { mark: PhraseMark::Question, ..VisemeEvent::new(end_ns - 100 * MS, end_ns, Viseme::Silence) }];
    let asked = speak(&q, None);
    let near_end = |faces: &[FaceState]| {
        let last = (0..250u64).filter(|&f| (end_ns - 300 * MS..end_ns).contains(&t(f)));
        last.map(|f| faces[f as usize].brow).fold(f32::MIN, f32::max)
    };
    assert!(near_end(&asked) >= 0.5, "question end brow {}", near_end(&asked));
    assert!(near_end(&quiet) < 0.5, "statement end brow {}", near_end(&quiet));
    // A barge-in: listening takes over and the speaking face fades.
    let barged = speak(&[], Some(50));
    for f in &barged[70..100] {
        assert!(f.brow.abs() < 0.2, "{f:?}");
    }
}
