//! What each output costs per frame at 512x512 @ 25 fps: runs a Manual-paced session over the
//! real renderer with one output at a time (and one with none, the render baseline), pushes the
//! same speech and the same number of frames, and divides the process CPU time (all threads,
//! GStreamer's included, drain included) by the frame count.
//!
//!     cargo run --release -p media-core --example encode_cost -- [FRAMES]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use media_core::{MediaSession, Outputs};

fn run(outputs: Outputs, frames: u32, face: &Arc<face_render::FaceRig>) -> (f64, f64, f64) {
    let session = MediaSession::start(
        manual_config(outputs),
        face.clone(),
        sway_motion(),
        Arc::new(|_| {}),
    )
    .unwrap();
    let speech = speech_like(16_000, frames as f64 / 25.0);
    session.push_audio(&speech, 16_000, &[], None).unwrap();
    let (cpu0, t0) = (process_cpu_ns(), Instant::now());
    session.advance(frames).unwrap();
    let render_ms = session.stats().render_ns_total as f64 / frames as f64 / 1e6;
    session.close().unwrap();
    let cpu_ms = (process_cpu_ns() - cpu0) as f64 / frames as f64 / 1e6;
    (
        cpu_ms,
        t0.elapsed().as_secs_f64() * 1e3 / frames as f64,
        render_ms,
    )
}

fn main() {
    resample_cost();
    convert_cost();
    let frames: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(250);
    let face = default_face();
    // Warm-up (page faults, plugin loading).
    run(
        Outputs {
            h264: true,
            vp8: true,
            jpeg: true,
            opus: true,
            pcm: false,
        },
        25,
        &face,
    );
    let none = Outputs::default();
    let cases = [
        ("render only", none),
        ("h264 (x264)", Outputs { h264: true, ..none }),
        ("vp8", Outputs { vp8: true, ..none }),
        ("jpeg", Outputs { jpeg: true, ..none }),
        ("opus", Outputs { opus: true, ..none }),
        (
            "webrtc h264+opus",
            Outputs {
                h264: true,
                opus: true,
                ..none
            },
        ),
        (
            "all",
            Outputs {
                h264: true,
                vp8: true,
                jpeg: true,
                opus: true,
                pcm: true,
            },
        ),
    ];
    println!("{frames} frames, 512x512, 25 fps; CPU ms per frame (all threads)");
    println!(
        "{:<18} {:>8} {:>10} {:>10} {:>12}",
        "case", "cpu_ms", "minus_base", "wall_ms", "render_ms"
    );
    let mut base = 0.0;
    for (name, outputs) in cases {
        let (cpu, wall, render) = run(outputs, frames, &face);
        if name == "render only" {
            base = cpu;
        }
        println!(
            "{name:<18} {cpu:>8.2} {:>10.2} {wall:>10.2} {render:>12.2}",
            cpu - base
        );
    }
}

/// RGB -> I420 (BT.601) of one 512x512 frame, the render thread's share of every video output.
fn convert_cost() {
    let mut rgb = face_render::RgbImage::new(512, 512);
    for (i, v) in rgb.data.iter_mut().enumerate() {
        *v = (i * 7 % 251) as u8;
    }
    let mut out = vec![0u8; face_render::i420_size(512, 512)];
    let t = Instant::now();
    for _ in 0..200 {
        face_render::rgb_to_i420(&rgb, &mut out);
    }
    println!(
        "rgb_to_i420 512x512: {:.3} ms per frame",
        t.elapsed().as_secs_f64() * 1e3 / 200.0
    );
}

/// push_audio cost (resampling on the caller's thread) per second of input audio.
fn resample_cost() {
    for rate in [16_000u32, 22_050, 24_000, 44_100, 48_000] {
        let r = media_core::Resampler::new(rate, 24_000).unwrap();
        let input = speech_like(rate, 10.0);
        let t = Instant::now();
        let out = r.process(&input);
        let ms = t.elapsed().as_secs_f64() * 1e3 / 10.0;
        println!(
            "resample {rate} Hz -> 24 kHz: {ms:.2} ms per second of audio ({} samples out)",
            out.len()
        );
    }
}
