//! Events out: media-core's `MediaEvent`s become JS objects discriminated by `type`, delivered
//! through ONE threadsafe function per session.
//!
//! Invariants:
//! - Streaming threads never wait for JavaScript: every call is `NonBlocking`.
//! - The queue is bounded twice. Media data (h264, vp8, jpeg, opus, pcm) is refused once
//!   `MEDIA_QUEUE_LIMIT` events wait for the JS thread; control events (speech_*, interrupted,
//!   error, closed) are never refused by that limit and use the `CONTROL_RESERVE` slots above
//!   it, so a stalled JS thread loses frames but never `closed` or `error`. The threadsafe
//!   function's own queue (`NATIVE_QUEUE_SIZE`) is the hard bound behind both.
//! - Nothing is lost silently: every refused or failed call is counted (`eventsDropped` in
//!   `stats()`).
//! - `closed` is delivered exactly once and last: a second one from media-core is ignored,
//!   anything after it is counted as dropped, and `finish()` sends one if media-core did not
//!   (so `await session.close()` in TypeScript cannot hang on a missing event).
//! - After `finish()` the threadsafe function is released (queued events are still
//!   delivered), so a closed session keeps neither the event loop nor the JS callback alive.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::convert::to_js_i64;
use crate::error::{from_napi, JsResult};

/// Media events that may wait for the JS thread before new ones are dropped. At 512x512@25 a
/// session emits ~150–300 events/s, so this is several seconds of backlog: enough for a
/// `advance(100)` burst in manual pacing or a GC pause, small enough to bound memory
/// (~4096 x 10 KB worst case).
pub const MEDIA_QUEUE_LIMIT: usize = 4096;
/// Slots kept free above the media limit for control events.
pub const CONTROL_RESERVE: usize = 512;
/// The threadsafe function's own bound (Node's `max_queue_size`).
pub const NATIVE_QUEUE_SIZE: usize = MEDIA_QUEUE_LIMIT + CONTROL_RESERVE;

/// What a session emits. `data` buffers are handed over without copying.
#[allow(non_camel_case_types)] // the variant names are the JS `type` strings
#[napi(discriminant = "type", object_from_js = false)]
pub enum MediaEvent {
    /// One H.264 access unit (Annex B, constrained baseline).
    h264 {
        data: Buffer,
        pts_ns: i64,
        keyframe: bool,
    },
    /// One VP8 RTP packet (payloaded by rtpvp8pay); `marker` ends a frame.
    vp8 {
        data: Buffer,
        pts_ns: i64,
        keyframe: bool,
        marker: bool,
    },
    /// One JPEG frame.
    jpeg {
        data: Buffer,
        pts_ns: i64,
        frame_index: i64,
    },
    /// One Opus packet (48 kHz).
    opus {
        data: Buffer,
        pts_ns: i64,
        duration_ns: i64,
    },
    /// Output PCM: signed 16-bit little-endian mono.
    pcm {
        data: Buffer,
        pts_ns: i64,
    },
    speech_started {
        pts_ns: i64,
    },
    speech_ended {
        pts_ns: i64,
    },
    /// Speech was cut by `interrupt()`: `played_ns` of it went out, `dropped_ns` never will.
    interrupted {
        pts_ns: i64,
        played_ns: i64,
        dropped_ns: i64,
    },
    /// A pipeline failure (GStreamer bus error or similar). The session is torn down after it.
    error {
        code: String,
        message: String,
        element: Option<String>,
        debug: Option<String>,
    },
    /// Always the last event of a session.
    closed,
}

impl MediaEvent {
    fn is_media_data(&self) -> bool {
        matches!(
            self,
            Self::h264 { .. }
                | Self::vp8 { .. }
                | Self::jpeg { .. }
                | Self::opus { .. }
                | Self::pcm { .. }
        )
    }
}

fn from_core(event: media_core::MediaEvent) -> MediaEvent {
    use media_core::MediaEvent as E;
    let ns = to_js_i64;
    match event {
        E::H264 {
            data,
            pts_ns,
            keyframe,
        } => MediaEvent::h264 {
            data: data.into(),
            pts_ns: ns(pts_ns),
            keyframe,
        },
        E::Vp8Rtp {
            data,
            pts_ns,
            keyframe,
            marker,
        } => MediaEvent::vp8 {
            data: data.into(),
            pts_ns: ns(pts_ns),
            keyframe,
            marker,
        },
        E::Jpeg {
            data,
            pts_ns,
            frame_index,
        } => MediaEvent::jpeg {
            data: data.into(),
            pts_ns: ns(pts_ns),
            frame_index: ns(frame_index),
        },
        E::Opus {
            data,
            pts_ns,
            duration_ns,
        } => MediaEvent::opus {
            data: data.into(),
            pts_ns: ns(pts_ns),
            duration_ns: ns(duration_ns),
        },
        E::Pcm { data, pts_ns } => MediaEvent::pcm {
            data: data.into(),
            pts_ns: ns(pts_ns),
        },
        E::SpeechStarted { pts_ns } => MediaEvent::speech_started { pts_ns: ns(pts_ns) },
        E::SpeechEnded { pts_ns } => MediaEvent::speech_ended { pts_ns: ns(pts_ns) },
        E::Interrupted {
            pts_ns,
            played_ns,
            dropped_ns,
        } => MediaEvent::interrupted {
            pts_ns: ns(pts_ns),
            played_ns: ns(played_ns),
            dropped_ns: ns(dropped_ns),
        },
        E::Error {
            code,
            message,
            element,
            debug,
        } => MediaEvent::error {
            code,
            message,
            element,
            debug,
        },
        E::Closed => MediaEvent::closed,
    }
}

type EventFn =
    ThreadsafeFunction<MediaEvent, (), MediaEvent, Status, false, false, NATIVE_QUEUE_SIZE>;

#[derive(Default)]
struct Counters {
    /// Events handed to Node and not yet delivered to JavaScript.
    queued: AtomicUsize,
    delivered: AtomicU64,
    dropped: AtomicU64,
}

/// The per-session event path: media-core's sink → threadsafe function → the JS callback.
pub struct EventChannel {
    tsfn: RwLock<Option<EventFn>>,
    counters: Arc<Counters>,
    closed_sent: AtomicBool,
}

impl EventChannel {
    pub fn new(callback: &Function<'_, MediaEvent, ()>) -> JsResult<Arc<EventChannel>> {
        let counters = Arc::new(Counters::default());
        let on_js_thread = Arc::clone(&counters);
        let tsfn: EventFn = callback
            .build_threadsafe_function::<MediaEvent>()
            .callee_handled::<false>()
            .weak::<false>()
            .max_queue_size::<NATIVE_QUEUE_SIZE>()
            .build_callback(move |ctx| {
                on_js_thread.queued.fetch_sub(1, Ordering::AcqRel);
                on_js_thread.delivered.fetch_add(1, Ordering::Relaxed);
                Ok(ctx.value)
            })
            .map_err(from_napi)?;
        Ok(Arc::new(EventChannel {
            tsfn: RwLock::new(Some(tsfn)),
            counters,
            closed_sent: AtomicBool::new(false),
        }))
    }

    /// The sink media-core calls from its threads.
    pub fn sink(self: &Arc<Self>) -> media_core::EventSink {
        let channel = Arc::clone(self);
        Arc::new(move |event| channel.emit(from_core(event)))
    }

    fn emit(&self, event: MediaEvent) {
        let counters = &self.counters;
        if matches!(event, MediaEvent::closed) {
            if self.closed_sent.swap(true, Ordering::AcqRel) {
                return; // already sent: `closed` is delivered once
            }
        } else if self.closed_sent.load(Ordering::Acquire) {
            counters.dropped.fetch_add(1, Ordering::Relaxed); // after `closed`: nobody listens
            return;
        }
        if event.is_media_data() && counters.queued.load(Ordering::Acquire) >= MEDIA_QUEUE_LIMIT {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // A poisoned lock only means another emitter panicked while holding a read guard;
        // the Option inside is still sound.
        let guard = self.tsfn.read().unwrap_or_else(|e| e.into_inner());
        let Some(tsfn) = guard.as_ref() else {
            counters.dropped.fetch_add(1, Ordering::Relaxed); // emitted after shutdown
            return;
        };
        counters.queued.fetch_add(1, Ordering::AcqRel);
        let status = tsfn.call(event, ThreadsafeFunctionCallMode::NonBlocking);
        if status != Status::Ok {
            // QueueFull (the hard bound) or Closing (the environment is going away).
            counters.queued.fetch_sub(1, Ordering::AcqRel);
            counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Ends the stream: sends `closed` unless media-core already did, then releases the
    /// threadsafe function (events already queued are still delivered).
    pub fn finish(&self) {
        if !self.closed_sent.load(Ordering::Acquire) {
            self.emit(MediaEvent::closed);
        }
        self.shutdown();
    }

    /// Releases the threadsafe function; events already queued are still delivered.
    pub fn shutdown(&self) {
        let tsfn = self.tsfn.write().unwrap_or_else(|e| e.into_inner()).take();
        drop(tsfn);
    }

    pub fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    pub fn delivered(&self) -> u64 {
        self.counters.delivered.load(Ordering::Relaxed)
    }

    pub fn queued(&self) -> usize {
        self.counters.queued.load(Ordering::Relaxed)
    }
}
