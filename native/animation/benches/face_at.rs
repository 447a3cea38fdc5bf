//! Per-frame CPU cost of `Animator::face_at` (and of feeding it a frame of audio), in release.
//! Run: `cargo bench -p animation --bench face_at` (plain `main`, no bench framework). Per-call
//! wall clock; see `stats` for how to read it on a shared machine.
//!
//! Three sessions of 25 fps frames: idle (motion + blinks only), audio-driven speech (24 kHz
//! PCM pushed one frame at a time, as the media engine does), and phoneme-driven speech with
//! audio. The audio is a deterministic vowel-like signal with syllable-rate bursts.

use animation::timeline::frame_pts_ns;
use animation::{Animator, DrivingMotion, MotionFrame, Viseme, VisemeEvent};
use std::hint::black_box;
use std::time::Instant;

const RATE_HZ: u32 = 24_000;
const FRAMES: u64 = 25 * 600; // ten minutes of session time

fn motion() -> DrivingMotion {
    let frames = (0..250)
        .map(|i| {
            let ph = i as f32 / 250.0 * std::f32::consts::TAU;
            MotionFrame { pitch_deg: 2.0 * ph.sin(), yaw_deg: 4.0 * (2.0 * ph).sin(), roll_deg: ph.cos(), ..MotionFrame::REST }
        })
        .collect();
    DrivingMotion::new(25.0, frames).unwrap()
}

fn speech(n: usize) -> Vec<i16> {
    (0..n)
        .map(|i| {
            let t = i as f32 / RATE_HZ as f32;
            let env = (0.5 + 0.5 * (std::f32::consts::TAU * 4.0 * t).sin()).powi(2);
            let v = (std::f32::consts::TAU * 140.0 * t).sin() + 0.5 * (std::f32::consts::TAU * 700.0 * t).sin()
                + 0.3 * (std::f32::consts::TAU * 1900.0 * t).sin();
            (v * env * 6_000.0) as i16
        })
        .collect()
}

fn session(audio: bool, visemes: bool) -> (Animator, Vec<i16>) {
    let mut a = Animator::new(motion(), 7);
    if visemes {
        let cycle = [Viseme::Open, Viseme::Closed, Viseme::Wide, Viseme::Narrow, Viseme::Rounded, Viseme::Mid];
        let events: Vec<VisemeEvent> = (0..FRAMES * 40 / 90)
            .map(|i| VisemeEvent::new(i * 90_000_000, (i + 1) * 90_000_000, cycle[i as usize % 6]))
            .collect();
        a.push_visemes(&events);
    }
    let pcm = if audio { speech((RATE_HZ / 25) as usize * FRAMES as usize) } else { Vec::new() };
    (a, pcm)
}

fn push_frame(a: &mut Animator, pcm: &[i16], f: u64) {
    let per_frame = (RATE_HZ / 25) as usize;
    let i = f as usize * per_frame;
    if i + per_frame <= pcm.len() {
        a.push_audio(frame_pts_ns(f, 25, 1), RATE_HZ, &pcm[i..i + per_frame]);
    }
}

/// Median, trimmed mean (fastest 90 %) and p99 of per-call wall times. On a busy machine the
/// slow tail is mostly time spent waiting for a core; the median and trimmed mean are the cost.
fn stats(mut v: Vec<u64>) -> (u64, u64, u64) {
    v.sort_unstable();
    let n = v.len();
    let keep = &v[..n * 9 / 10];
    (v[n / 2], keep.iter().sum::<u64>() / keep.len() as u64, v[(n - 1) * 99 / 100])
}

fn run(name: &str, audio: bool, visemes: bool) {
    let (mut a, pcm) = session(audio, visemes);
    let mut push = Vec::with_capacity(FRAMES as usize);
    let mut face = Vec::with_capacity(FRAMES as usize);
    for f in 0..FRAMES {
        let s = Instant::now();
        push_frame(&mut a, &pcm, f);
        push.push(s.elapsed().as_nanos() as u64);
        let s = Instant::now();
        black_box(a.face_at(frame_pts_ns(f, 25, 1)));
        face.push(s.elapsed().as_nanos() as u64);
    }
    let (f50, fmean, f99) = stats(face);
    let (p50, pmean, p99) = stats(push);
    println!(
        "{name:<20} face_at: median {f50:>6} ns, trimmed mean {fmean:>6} ns, p99 {f99:>6} ns | push_audio (960 samples): median {p50:>6} ns, trimmed mean {pmean:>6} ns, p99 {p99:>7} ns"
    );
}

fn main() {
    println!("{FRAMES} frames at 25 fps, audio {RATE_HZ} Hz");
    run("idle", false, false);
    run("audio-driven speech", true, false);
    run("visemes + audio", true, true);
}
