//! Session counters: written lock-free by the render thread, streaming threads and bus handlers,
//! read as a `SessionStats` snapshot. Nothing here is reset during a session.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A snapshot of a session's counters. Times in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Frames rendered and pushed (all video outputs and the audio tick) since start.
    pub frames_rendered: u64,
    /// Frames that finished more than one frame duration after their due time (RealTime).
    pub late_frames: u64,
    /// Largest (finish - due) seen (RealTime; 0 under Manual pacing).
    pub max_lateness_ns: u64,
    /// Time spent producing frames: animator + renderer + RGB->I420 conversion.
    pub render_ns_total: u64,
    pub render_ns_max: u64,
    /// Speech queued and not yet played.
    pub audio_queued_ns: u64,
    /// Events delivered to the sink.
    pub events_emitted: u64,
    /// Errors posted on the pipelines' buses.
    pub pipeline_errors: u64,
    /// Session time of the next frame to render ("now" on the session clock).
    pub current_pts_ns: u64,
    /// Buffers not pushed into a pipeline: its queue was over its bound (an encoder slower than
    /// real time) or it was stopping. Each pipeline counts separately.
    pub dropped_buffers: u64,
    /// Events not delivered: the sink panicked, or they came after `Closed`.
    pub events_dropped: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub frames_rendered: AtomicU64,
    pub late_frames: AtomicU64,
    pub max_lateness_ns: AtomicU64,
    pub render_ns_total: AtomicU64,
    pub render_ns_max: AtomicU64,
    pub pipeline_errors: AtomicU64,
    pub current_pts_ns: AtomicU64,
    pub dropped_buffers: AtomicU64,
    /// Set on the first pipeline error or render thread panic: the session stops producing.
    pub failed: AtomicBool,
    /// `f32` bits of the renderer's last mouth opening (diagnostics and tests).
    pub last_mouth_opening: AtomicU32,
}

impl Counters {
    pub(crate) fn record_render(&self, ns: u64) {
        self.render_ns_total.fetch_add(ns, Ordering::Relaxed);
        self.render_ns_max.fetch_max(ns, Ordering::Relaxed);
    }

    pub(crate) fn record_lateness(&self, lateness_ns: u64, frame_ns: u64) {
        self.max_lateness_ns
            .fetch_max(lateness_ns, Ordering::Relaxed);
        if lateness_ns > frame_ns {
            self.late_frames.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}
