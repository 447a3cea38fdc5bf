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
    i420_copy_cost();
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
            i420: false,
            motion: false,
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
        ("i420", Outputs { i420: true, ..none }),
        (
            "jpeg+i420",
            Outputs {
                jpeg: true,
                i420: true,
                ..none
            },
        ),
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
                i420: true,
                motion: false,
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

/// The `I420` output's own work beside a video pipeline: one 512x512 frame out of a pooled
/// GStreamer buffer (a pool configured as the session's) into an owned Vec, as the render loop
/// does it; the last few Vecs stay alive, as they would while JavaScript holds them.
fn i420_copy_cost() {
    use gstreamer::prelude::*;
    media_core::init().unwrap();
    let size = face_render::i420_size(512, 512);
    let pool = gstreamer::BufferPool::new();
    let mut config = pool.config();
    config.set_params(None, size as u32, 4, 0);
    pool.set_config(config).unwrap();
    pool.set_active(true).unwrap();
    let mut held = std::collections::VecDeque::new();
    let n = 2000;
    let mut total = std::time::Duration::ZERO;
    for i in 0..n {
        let mut buffer = pool.acquire_buffer(None).unwrap();
        buffer.get_mut().unwrap().map_writable().unwrap()[i % size] = i as u8;
        let t = Instant::now();
        let copy = buffer.map_readable().unwrap().as_slice()[..size].to_vec();
        total += t.elapsed();
        held.push_back(copy);
        if held.len() > 8 {
            held.pop_front();
        }
    }
    pool.set_active(false).unwrap();
    println!(
        "i420 frame copy 512x512 ({size} bytes, pooled buffer to Vec): {:.1} us per frame",
        total.as_secs_f64() * 1e6 / n as f64
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
