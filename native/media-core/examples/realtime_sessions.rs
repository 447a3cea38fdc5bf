//! Runs N RealTime sessions side by side for a while, as the server would, and prints per
//! session frames, late frames, render time, and the process CPU time per session. Feeds the
//! capacity benchmark in `benchmarks/`.
//!
//!     cargo run --release -p media-core --example realtime_sessions -- [N] [SECONDS] [OUTPUTS]
//!
//! N defaults to 4, SECONDS to 10, OUTPUTS (comma list of h264,vp8,jpeg,opus,pcm,i420) to h264,opus
//! (a WebRTC session). Each session sways its head (a synthetic idle motion) and speaks 3 s of
//! speech-like audio every 4 s. The last line, `RESULT {...}`, is JSON for scripts.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use media_core::{MediaEvent, MediaSession, Outputs, Pacing};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let list = args.get(3).cloned().unwrap_or_else(|| "h264,opus".into());
    let mut outputs = Outputs::default();
    for o in list.split(',') {
        match o {
            "h264" => outputs.h264 = true,
            "vp8" => outputs.vp8 = true,
            "jpeg" => outputs.jpeg = true,
            "opus" => outputs.opus = true,
            "pcm" => outputs.pcm = true,
            "i420" => outputs.i420 = true,
            other => panic!("unknown output {other}"),
        }
    }
    let face = default_face();
    let speech = speech_like(16_000, 3.0);
    let cpu0 = process_cpu_ns();
    let t0 = Instant::now();
    let mut sessions = Vec::new();
    let mut bytes = Vec::new();
    for i in 0..n {
        let mut config = manual_config(outputs);
        config.pacing = Pacing::RealTime;
        config.seed = i as u64;
        let counter = Arc::new(AtomicU64::new(0));
        let c = counter.clone();
        let sink: media_core::EventSink = Arc::new(move |e| {
            let len = match &e {
                MediaEvent::H264 { data, .. }
                | MediaEvent::Vp8Rtp { data, .. }
                | MediaEvent::Jpeg { data, .. }
                | MediaEvent::I420 { data, .. } => data.len(),
                MediaEvent::Opus { data, .. } | MediaEvent::Pcm { data, .. } => data.len(),
                _ => 0,
            };
            c.fetch_add(len as u64, Ordering::Relaxed);
        });
        sessions
            .push(MediaSession::start(config, face.clone(), sway_motion(), sink).expect("start"));
        bytes.push(counter);
    }
    let started = Instant::now();
    let mut next_speech = Instant::now();
    while started.elapsed() < Duration::from_secs(secs) {
        if Instant::now() >= next_speech {
            for s in &sessions {
                s.push_audio(&speech, 16_000, &[], None).expect("push");
            }
            next_speech += Duration::from_secs(4);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats: Vec<_> = sessions.iter().map(|s| s.stats()).collect();
    for s in &sessions {
        s.close().expect("close");
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (process_cpu_ns() - cpu0) as f64 / 1e9;
    println!(
        "{n} sessions x {secs} s, outputs {list}, 512x512 @ 25 fps, {} cores",
        std::thread::available_parallelism().map_or(0, |p| p.get())
    );
    println!("session  frames  late  max_late_ms  render_avg_ms  render_max_ms  dropped  kbit/s");
    for (i, st) in stats.iter().enumerate() {
        println!(
            "{i:>7}  {:>6}  {:>4}  {:>11.1}  {:>13.2}  {:>13.2}  {:>7}  {:>6.0}",
            st.frames_rendered,
            st.late_frames,
            st.max_lateness_ns as f64 / 1e6,
            st.render_ns_total as f64 / st.frames_rendered.max(1) as f64 / 1e6,
            st.render_ns_max as f64 / 1e6,
            st.dropped_buffers,
            bytes[i].load(Ordering::Relaxed) as f64 * 8.0 / 1000.0 / secs as f64,
        );
    }
    let per_session = cpu / wall / n as f64 * 100.0;
    println!(
        "process CPU {cpu:.2} s over {wall:.2} s wall: {per_session:.1} % of one core per session"
    );
    let late: u64 = stats.iter().map(|s| s.late_frames).sum();
    let frames: u64 = stats.iter().map(|s| s.frames_rendered).sum();
    let render_avg =
        stats.iter().map(|s| s.render_ns_total).sum::<u64>() as f64 / frames.max(1) as f64 / 1e6;
    println!(
        "RESULT {{\"sessions\":{n},\"seconds\":{secs},\"outputs\":\"{list}\",\"frames\":{frames},\"late_frames\":{late},\"render_avg_ms\":{render_avg:.3},\"cpu_percent_per_session\":{per_session:.2}}}"
    );
}
