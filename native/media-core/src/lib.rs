//! Media plane core: turns speech (PCM + optional viseme timings) into a talking face, encoded
//! for the client: H.264 access units, VP8 RTP packets, JPEG frames, raw I420 frames, raw Opus
//! packets and PCM chunks, all stamped on one session clock in integer nanoseconds.
//!
//! ```text
//!  push_audio ──▶ playout queue (24 kHz) ──┐
//!                                          ▼
//!        render thread: FrameProducer ─▶ I420 (pooled) ───────┬─▶ h264 pipeline ─▶ H264 events
//!   (one tick per frame, pts(i); CPU: animator ─▶ renderer)   ├─▶ vp8 pipeline  ─▶ Vp8Rtp events
//!                                                             ├─▶ jpeg pipeline ─▶ Jpeg events
//!                                                             ├─▶ I420 events (a copy, no GStreamer)
//!                      tick audio (same pts) ─────────────────┼─▶ opus pipeline ─▶ Opus events
//!                                                             └─▶ Pcm events (no GStreamer)
//! ```
//!
//! Modules: `session` (the public `MediaSession`, with its thread as the child module
//! `session::render_loop`), `frames` (the renderer seam: the `FrameProducer` trait the render
//! loop drives, and its CPU implementation `frames::cpu`), `opus_decode` (a caller's microphone, Opus to 24 kHz PCM), `playout`
//! (speech queue and timing), `resample` (any rate to 24 kHz), `pipeline` (pipeline files and
//! launched pipelines), `encoders` (what is installed), `events` (what comes out), `stats`.
//! Pipelines are data: `pipelines/*.pipeline`, loaded by name from `SessionConfig::pipelines_dir`.
//!
//! No N-API types here: `native/media-node` is the binding. Nothing in this crate panics across
//! a GStreamer callback; errors while running arrive as `MediaEvent::Error`.

pub mod encoders;
pub mod error;
pub mod events;
pub mod frames;
pub mod opus_decode;
pub mod pipeline;
pub mod playout;
pub mod resample;
pub mod session;
pub mod stats;

use std::sync::OnceLock;

pub use encoders::{detect_encoders, EncoderCaps};
pub use error::MediaError;
pub use events::{EventSink, MediaEvent};
pub use frames::{
    FaceAsset, FrameInfo, FrameProducer, FrameSpec, PreparedFace, ProducerError, ProducerFactory,
    Tick,
};
pub use pipeline::{PipelineError, PipelineVars};
pub use playout::{InterruptResult, PushResult, SESSION_RATE_HZ};
pub use resample::{ResampleError, Resampler};
pub use session::{MediaSession, Outputs, Pacing, SessionConfig};
pub use stats::SessionStats;

/// Initialises GStreamer once per process; later calls return the first result. Safe from any
/// thread.
pub fn init() -> Result<(), MediaError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| gstreamer::init().map_err(|e| e.to_string()))
        .clone()
        .map_err(MediaError::Init)
}
