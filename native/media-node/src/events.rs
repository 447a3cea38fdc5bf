//! Events out: media-core's `MediaEvent`s become JS objects discriminated by `type`, delivered
//! through ONE threadsafe function per session.
//!
//! Invariants:
//! - Streaming threads never wait for JavaScript: every call is `NonBlocking`.
//! - The queue is bounded twice. Media data (h264, vp8, jpeg, i420, opus, pcm) is refused once
//!   `MEDIA_QUEUE_LIMIT` events wait for the JS thread; control events (speech_*, interrupted,
//!   error, closed) are never refused by that limit and use the `CONTROL_RESERVE` slots above
//!   it, so a stalled JS thread loses frames but never `closed` or `error`. The threadsafe
//!   function's own queue (`NATIVE_QUEUE_SIZE`) is the hard bound behind both. Raw frames
//!   (i420: 384 KiB at 512x512, against tens of KB for an encoded frame) are also bounded in
//!   bytes (`RAW_QUEUE_BYTES_LIMIT`).
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
/// (~4096 x 10 KB worst case for encoded data; raw frames have a byte bound of their own).
pub const MEDIA_QUEUE_LIMIT: usize = 4096;
/// Bytes of raw frames (`i420`) that may wait for the JS thread before new ones are dropped:
/// 128 MiB, about 13 s of 512x512 frames at 25 fps (384 KiB each), or 43 frames of 1080p. The
/// event count alone would let 4096 raw frames (1.5 GiB at 512x512) pile up behind a stalled
/// JS thread.
pub const RAW_QUEUE_BYTES_LIMIT: usize = 128 << 20;
/// Slots kept free above the media limit for control events.
pub const CONTROL_RESERVE: usize = 512;
/// The threadsafe function's own bound (Node's `max_queue_size`).
pub const NATIVE_QUEUE_SIZE: usize = MEDIA_QUEUE_LIMIT + CONTROL_RESERVE;

/// One frame's face (media_core's `FaceParams`): pose in degrees and face widths, the mouth,
/// the eyes (image left, right), brows, cheeks, and whether the face listens. Also what
/// `PreparedFace.renderStill` takes.
#[napi(object)]
pub struct FaceParams {
    pub pitch_deg: f64,
    pub yaw_deg: f64,
    pub roll_deg: f64,
    pub tx: f64,
    pub ty: f64,
    pub scale: f64,
    pub mouth_open: f64,
    pub mouth_wide: f64,
    pub mouth_press: f64,
    pub tongue: f64,
    pub eye_open_left: f64,
    pub eye_open_right: f64,
    pub brow: f64,
    pub cheek: f64,
    pub listening: bool,
}

impl From<media_core::frames::FaceParams> for FaceParams {
    fn from(f: media_core::frames::FaceParams) -> Self {
        FaceParams {
            pitch_deg: f.pitch_deg.into(),
            yaw_deg: f.yaw_deg.into(),
            roll_deg: f.roll_deg.into(),
            tx: f.tx.into(),
            ty: f.ty.into(),
            scale: f.scale.into(),
            mouth_open: f.mouth_open.into(),
            mouth_wide: f.mouth_wide.into(),
            mouth_press: f.mouth_press.into(),
            tongue: f.tongue.into(),
            eye_open_left: f.eye_open[0].into(),
            eye_open_right: f.eye_open[1].into(),
            brow: f.brow.into(),
            cheek: f.cheek.into(),
            listening: f.listening,
        }
    }
}

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
    /// One rendered frame, raw I420 (BT.601 limited range): Y (width x height bytes), then U and
    /// V (width/2 x height/2 each), rows without padding. Same `ptsNs` and `frameIndex` as the
    /// jpeg event of that frame.
    i420 {
        data: Buffer,
        pts_ns: i64,
        frame_index: i64,
        width: u32,
        height: u32,
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
    /// The face of one frame (the `motion` output), before that frame's audio: what a client
    /// draws at `ptsNs`.
    motion {
        pts_ns: i64,
        frame_index: i64,
        face: FaceParams,
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
                | Self::i420 { .. }
                | Self::opus { .. }
                | Self::pcm { .. }
                | Self::motion { .. }
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
        E::I420 {
            data,
            pts_ns,
            frame_index,
            width,
            height,
        } => MediaEvent::i420 {
            data: data.into(),
            pts_ns: ns(pts_ns),
            frame_index: ns(frame_index),
            width,
            height,
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
        E::Motion { pts_ns, frame_index, face } => MediaEvent::motion {
            pts_ns: ns(pts_ns),
            frame_index: ns(frame_index),
            face: FaceParams::from(face),
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

/// The bytes an event counts against `RAW_QUEUE_BYTES_LIMIT`: a raw frame's size, else 0.
fn raw_bytes(event: &MediaEvent) -> usize {
    match event {
        MediaEvent::i420 { data, .. } => data.len(),
        _ => 0,
    }
}

type EventFn =
    ThreadsafeFunction<MediaEvent, (), MediaEvent, Status, false, false, NATIVE_QUEUE_SIZE>;

#[derive(Default)]
struct Counters {
    /// Events handed to Node and not yet delivered to JavaScript.
    queued: AtomicUsize,
    /// The bytes of the raw frames among them.
    raw_bytes_queued: AtomicUsize,
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
                on_js_thread
                    .raw_bytes_queued
                    .fetch_sub(raw_bytes(&ctx.value), Ordering::AcqRel);
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
        let raw = raw_bytes(&event);
        if raw > 0
            && counters.raw_bytes_queued.load(Ordering::Acquire) + raw > RAW_QUEUE_BYTES_LIMIT
        {
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
        counters.raw_bytes_queued.fetch_add(raw, Ordering::AcqRel);
        let status = tsfn.call(event, ThreadsafeFunctionCallMode::NonBlocking);
        if status != Status::Ok {
            // QueueFull (the hard bound) or Closing (the environment is going away).
            counters.queued.fetch_sub(1, Ordering::AcqRel);
            counters.raw_bytes_queued.fetch_sub(raw, Ordering::AcqRel);
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

impl From<&FaceParams> for media_core::frames::FaceParams {
    fn from(f: &FaceParams) -> Self {
        media_core::frames::FaceParams {
            pitch_deg: f.pitch_deg as f32,
            yaw_deg: f.yaw_deg as f32,
            roll_deg: f.roll_deg as f32,
            tx: f.tx as f32,
            ty: f.ty as f32,
            scale: f.scale as f32,
            mouth_open: f.mouth_open as f32,
            mouth_wide: f.mouth_wide as f32,
            mouth_press: f.mouth_press as f32,
            tongue: f.tongue as f32,
            eye_open: [f.eye_open_left as f32, f.eye_open_right as f32],
            brow: f.brow as f32,
            cheek: f.cheek as f32,
            listening: f.listening,
        }
    }
}
