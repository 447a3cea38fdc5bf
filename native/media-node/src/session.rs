//! `MediaSession`: one media-core session seen from JavaScript. Each method converts its
//! arguments, calls media-core inside `guard` (panics become `NATIVE_PANIC`) and converts the
//! result or error back. All methods run on the JS thread; events come back through the
//! session's `EventChannel`.
//!
//! Lifecycle: `new MediaSession` (on the JS thread) or `startMediaSession` (an `AsyncTask`, on
//! the libuv pool) starts the session; `close()` (JS thread) or `closeAsync()` (libuv pool)
//! drains it (media-core emits `closed` last), frees it and releases the event channel; later
//! calls throw `SESSION_CLOSED`, except `close()`/`closeAsync()` (no-ops) and `stats()` (the
//! final numbers). `Drop` closes a session that is still open when the
//! object is finalized (at environment teardown: an open session's event channel keeps its JS
//! callback, and so usually the session object, alive).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use media_core::frames::{DrivingMotion, VisemeEvent};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::convert::{to_js_i64, to_positive_f32, to_u32, to_u64, to_u8};
use crate::error::{guard, invalid_argument, js_error, rejection, ErrorCode, JsResult};
use crate::events::{EventChannel, MediaEvent};
use crate::face::{motion_from_input, FaceData, FaceInput, MotionInput, PreparedFace};
use crate::media_error;

/// Which outputs the session produces; all default to false.
#[napi(object, object_to_js = false)]
pub struct OutputsConfig {
    pub h264: Option<bool>,
    pub vp8: Option<bool>,
    pub jpeg: Option<bool>,
    pub opus: Option<bool>,
    pub pcm: Option<bool>,
    /// Every rendered frame raw (`i420` events), without an encoder.
    pub i420: Option<bool>,
    /// The face's parameters each frame (`motion` events), for a face drawn by the client; with
    /// no video output the face is not drawn here.
    pub motion: Option<bool>,
}

#[napi(object, object_to_js = false)]
pub struct MediaSessionConfig {
    /// Output video size in pixels: even, 16..4096.
    pub width: f64,
    pub height: f64,
    /// Output frames per second, 1..120.
    pub fps: f64,
    /// Renderer supersampling divisor, 1..4 (default 1): above 1 the face is warped at
    /// 1/factor of the output size and scaled up, cheaper and softer.
    pub upsample_factor: Option<f64>,
    /// The renderer, by name (`renderers()`; default "cpu"): the face is prepared for it, and a
    /// `PreparedFace` given to `setFace` must come from `prepareFace(face, <the same name>)`.
    pub renderer: Option<String>,
    pub outputs: OutputsConfig,
    /// JPEG quality 1..100 (default 80).
    pub jpeg_quality: Option<f64>,
    /// A key frame at least every this many frames, H.264 and VP8 (default 50).
    pub keyframe_interval_frames: Option<f64>,
    /// H.264 and VP8 bitrate, 50..50000 kbit/s (default 1000).
    pub video_bitrate_kbps: Option<f64>,
    /// 'realtime': a frame every 1/fps seconds on the session clock. 'manual': frames only by
    /// `advance(frames)`, deterministic, for tests and benchmarks.
    #[napi(ts_type = "'realtime' | 'manual'")]
    pub pacing: String,
    /// Folder holding the `*.pipeline` files.
    pub pipelines_dir: String,
    /// Seeds the animator's randomness (blinks, idle variation): same seed, same video
    /// (default 0).
    pub seed: Option<f64>,
    pub face: FaceInput,
    pub motion: MotionInput,
}

/// One phoneme of the pushed audio, times relative to the start of the chunk.
#[napi(object, object_to_js = false)]
pub struct PhonemeTiming {
    /// A phoneme symbol (espeak-ng / IPA, e.g. "a", "m", "tS"); mapped to a viseme natively.
    pub phoneme: String,
    pub start_ns: f64,
    pub end_ns: f64,
}

#[napi(object, object_to_js = false)]
pub struct PushAudioOptions {
    /// Where the chunk starts on the session clock; default: right after the queued audio.
    pub pts_ns: Option<f64>,
    /// Phoneme timings for lip shapes; without them visemes come from the audio itself.
    pub phonemes: Option<Vec<PhonemeTiming>>,
}

#[napi(object, object_from_js = false)]
pub struct PushAudioResult {
    pub start_pts_ns: i64,
    pub end_pts_ns: i64,
}

#[napi(object, object_from_js = false)]
pub struct InterruptResult {
    /// Session time at which speech stopped.
    pub pts_ns: i64,
    /// How much of the queued speech went out before the cut.
    pub played_ns: i64,
    /// How much of it was discarded.
    pub dropped_ns: i64,
}

#[napi(object, object_from_js = false)]
pub struct MediaStats {
    pub frames_rendered: i64,
    /// Frames rendered after their deadline (realtime pacing).
    pub late_frames: i64,
    pub max_lateness_ns: i64,
    pub render_ns_total: i64,
    pub render_ns_max: i64,
    /// Speech queued and not yet played out.
    pub audio_queued_ns: i64,
    /// Events media-core handed to the binding.
    pub events_emitted: i64,
    /// Events that reached the JS callback.
    pub events_delivered: i64,
    /// Events waiting for the JS thread right now.
    pub events_queued: i64,
    /// Events lost on the way to JavaScript: the JS thread fell behind (the bounded event queue
    /// overflowed), or they came after `closed`. 0 in normal use.
    pub events_dropped: i64,
    /// Video/audio buffers a pipeline refused (an encoder slower than real time, or stopping).
    pub dropped_buffers: i64,
    /// Errors posted on the pipelines' buses.
    pub pipeline_errors: i64,
    /// Session time of the next frame ("now" on the session clock).
    pub current_pts_ns: i64,
    pub closed: bool,
}

#[napi]
pub struct MediaSession {
    core: Arc<CoreSlot>,
    events: Arc<EventChannel>,
    /// Set by the first `close()`/`closeAsync()`: from then on calls throw SESSION_CLOSED.
    close_started: bool,
}

/// The running media-core session, shared with an in-flight `closeAsync` task, and the stats it
/// ended with (so `stats()` answers after close while the session's memory is already freed).
struct CoreSlot {
    live: Mutex<Option<Arc<media_core::MediaSession>>>,
    final_stats: Mutex<Option<media_core::SessionStats>>,
}

impl CoreSlot {
    fn new(session: media_core::MediaSession) -> Arc<CoreSlot> {
        Arc::new(CoreSlot {
            live: Mutex::new(Some(Arc::new(session))),
            final_stats: Mutex::new(None),
        })
    }

    fn live(&self) -> Option<Arc<media_core::MediaSession>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Closes (drains, blocking: a few ms to ~50 ms with five outputs), keeps the final stats,
    /// frees the session and ends the event stream. Any thread; idempotent.
    fn shut(&self, events: &EventChannel) -> JsResult<()> {
        let result = match self.live() {
            Some(session) => {
                let result = session.close();
                *self.final_stats.lock().unwrap_or_else(|e| e.into_inner()) = Some(session.stats());
                self.live.lock().unwrap_or_else(|e| e.into_inner()).take();
                result.map_err(media_error)
            }
            None => Ok(()),
        };
        events.finish();
        result
    }
}

/// `closeAsync()`: `CoreSlot::shut` on the libuv thread pool.
pub struct CloseSession {
    core: Arc<CoreSlot>,
    events: Arc<EventChannel>,
}

impl Task for CloseSession {
    type Output = JsResult<()>;
    type JsValue = ();

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(guard("closeAsync()", || self.core.shut(&self.events)))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        output.map_err(|err| rejection(&env, err))
    }
}

#[napi]
impl MediaSession {
    /// Starts a session on the calling (JS) thread: prepares the face and launches the
    /// pipelines, tens of milliseconds to ~0.3 s of blocked event loop; `startMediaSession` does
    /// the same on the thread pool. `onEvent` receives every event, `closed` last.
    #[napi(
        constructor,
        ts_args_type = "config: MediaSessionConfig, onEvent: (event: MediaEvent) => void"
    )]
    pub fn new(
        config: MediaSessionConfig,
        on_event: Function<'_, MediaEvent, ()>,
    ) -> Result<Self, ErrorCode> {
        guard("new MediaSession()", || {
            let prepared = Prepared::from_config(&config)?;
            let events = EventChannel::new(&on_event)?;
            let core = CoreSlot::new(prepared.launch(&events)?);
            Ok(MediaSession {
                core,
                events,
                close_started: false,
            })
        })
    }

    /// Queues speech (mono, signed 16-bit, 8000..48000 Hz; resampled to 24 kHz) for playout and
    /// lip sync: right after what is queued, at the next frame when idle, or at `ptsNs`.
    /// Returns the session times the chunk plays at.
    #[napi(ts_args_type = "pcm: Int16Array, sampleRateHz: number, options?: PushAudioOptions")]
    pub fn push_audio(
        &self,
        pcm: Int16ArraySlice,
        sample_rate_hz: f64,
        options: Option<PushAudioOptions>,
    ) -> Result<PushAudioResult, ErrorCode> {
        guard("pushAudio()", || {
            let session = self.open()?;
            let rate = to_u32("sampleRateHz", sample_rate_hz)?;
            let (pts, visemes) = match &options {
                None => (None, Vec::new()),
                Some(o) => (
                    o.pts_ns.map(|v| to_u64("options.ptsNs", v)).transpose()?,
                    visemes(o.phonemes.as_deref().unwrap_or(&[]))?,
                ),
            };
            let r = session
                .push_audio(&pcm, rate, &visemes, pts)
                .map_err(media_error)?;
            Ok(PushAudioResult {
                start_pts_ns: to_js_i64(r.start_pts_ns),
                end_pts_ns: to_js_i64(r.end_pts_ns),
            })
        })
    }

    /// Drops queued speech at once: the next frame is idle. Emits `speech_ended` (if speech was
    /// playing) and `interrupted`.
    #[napi]
    pub fn interrupt(&self) -> Result<InterruptResult, ErrorCode> {
        guard("interrupt()", || {
            let r = self.open()?.interrupt().map_err(media_error)?;
            Ok(InterruptResult {
                pts_ns: to_js_i64(r.pts_ns),
                played_ns: to_js_i64(r.played_ns),
                dropped_ns: to_js_i64(r.dropped_ns),
            })
        })
    }

    /// Switches faces. A `FaceInput` is prepared here, on the JS thread; a `PreparedFace` from
    /// `prepareFace` was prepared on the thread pool.
    #[napi(ts_args_type = "face: FaceInput | PreparedFace")]
    pub fn set_face(&self, face: Either<&PreparedFace, FaceInput>) -> Result<(), ErrorCode> {
        guard("setFace()", || {
            let session = self.open()?;
            let face = match face {
                Either::A(prepared) if prepared.renderer != session.renderer() => {
                    return Err(invalid_argument(format!(
                        "face: prepared for the renderer '{}'; this session renders with '{}'",
                        prepared.renderer,
                        session.renderer()
                    )))
                }
                Either::A(prepared) => Arc::clone(&prepared.face),
                Either::B(input) => {
                    FaceData::from_input(&input, "face")?.prepare(session.renderer())?
                }
            };
            session.set_face(face).map_err(media_error)
        })
    }

    /// Replaces the driving motion (head pose, eyes) from the next frame on.
    #[napi]
    pub fn set_driving(&self, motion: MotionInput) -> Result<(), ErrorCode> {
        guard("setDriving()", || {
            let session = self.open()?;
            let motion = motion_from_input(&motion, "motion")?;
            session.set_motion(motion).map_err(media_error)
        })
    }

    /// Whether the user is speaking: the face listens (attention, nods) from the next frame on,
    /// and settles back to idle when set false.
    #[napi]
    pub fn set_listening(&self, on: bool) -> Result<(), ErrorCode> {
        guard("setListening()", || {
            self.open()?.set_listening(on).map_err(media_error)
        })
    }

    /// Makes the next H.264 and VP8 frames keyframes (a viewer joined, or a PLI/FIR came in).
    #[napi]
    pub fn request_keyframe(&self) -> Result<(), ErrorCode> {
        guard("requestKeyframe()", || {
            self.open()?.request_keyframe();
            Ok(())
        })
    }

    /// Sets the H.264/VP8 encoders' target bitrate, 50..50000 kbit/s, from their next frame on
    /// (a call's sender following the bandwidth its receiver reports). Returns whether a video
    /// encoder took it (false: the session has no video output).
    #[napi]
    pub fn set_video_bitrate(&self, kbps: f64) -> Result<bool, ErrorCode> {
        guard("setVideoBitrate()", || {
            let kbps = to_u32("kbps", kbps)?;
            self.open()?.set_video_bitrate(kbps).map_err(media_error)
        })
    }

    /// Manual pacing only: renders `frames` frames now and returns; their encoded outputs
    /// arrive as events (all of them before `closed`).
    #[napi]
    pub fn advance(&self, frames: f64) -> Result<(), ErrorCode> {
        guard("advance()", || {
            let frames = to_u32("frames", frames)?;
            self.open()?.advance(frames).map_err(media_error)
        })
    }

    #[napi]
    pub fn stats(&self) -> Result<MediaStats, ErrorCode> {
        guard("stats()", || {
            let core = match self.core.live() {
                Some(session) => session.stats(),
                None => {
                    let last = self
                        .core
                        .final_stats
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    last.clone().unwrap_or_default()
                }
            };
            Ok(MediaStats {
                frames_rendered: to_js_i64(core.frames_rendered),
                late_frames: to_js_i64(core.late_frames),
                max_lateness_ns: to_js_i64(core.max_lateness_ns),
                render_ns_total: to_js_i64(core.render_ns_total),
                render_ns_max: to_js_i64(core.render_ns_max),
                audio_queued_ns: to_js_i64(core.audio_queued_ns),
                events_emitted: to_js_i64(core.events_emitted),
                events_delivered: to_js_i64(self.events.delivered()),
                events_queued: to_js_i64(self.events.queued() as u64),
                events_dropped: to_js_i64(
                    self.events.dropped().saturating_add(core.events_dropped),
                ),
                dropped_buffers: to_js_i64(core.dropped_buffers),
                pipeline_errors: to_js_i64(core.pipeline_errors),
                current_pts_ns: to_js_i64(core.current_pts_ns),
                closed: self.close_started,
            })
        })
    }

    /// Stops and drains the session on the calling (JS) thread: a few ms, up to ~50 ms with
    /// five outputs; `closeAsync` does it on the thread pool. `closed` is the last event, also
    /// when this throws (a pipeline that did not drain). Idempotent.
    #[napi]
    pub fn close(&mut self) -> Result<(), ErrorCode> {
        guard("close()", || {
            self.close_started = true;
            self.core.shut(&self.events)
        })
    }

    /// `close()` on the libuv thread pool: resolves once the session is drained and freed (the
    /// `closed` event may arrive just before or after). Calls made meanwhile throw SESSION_CLOSED.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close_async(&mut self) -> AsyncTask<CloseSession> {
        self.close_started = true;
        AsyncTask::new(CloseSession {
            core: Arc::clone(&self.core),
            events: Arc::clone(&self.events),
        })
    }

    /// Whether `close()` or `closeAsync()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.close_started
    }

    fn open(&self) -> JsResult<Arc<media_core::MediaSession>> {
        let closed = || js_error(ErrorCode::SESSION_CLOSED, "the media session is closed");
        if self.close_started {
            return Err(closed());
        }
        self.core.live().ok_or_else(closed)
    }
}

impl Drop for MediaSession {
    fn drop(&mut self) {
        // Backstop for a session still open when its object is finalized. Errors have nowhere
        // to go here; a panic must not unwind out of a finalizer.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.core.shut(&self.events)
        }));
    }
}

/// A checked, owned copy of a `MediaSessionConfig`: everything `start` needs, on any thread.
struct Prepared {
    config: media_core::SessionConfig,
    face: FaceData,
    motion: DrivingMotion,
}

impl Prepared {
    /// On the JS thread: converts and copies the arguments (cheap).
    fn from_config(config: &MediaSessionConfig) -> JsResult<Prepared> {
        Ok(Prepared {
            config: session_config(config)?,
            motion: motion_from_input(&config.motion, "config.motion")?,
            face: FaceData::from_input(&config.face, "config.face")?,
        })
    }

    /// On any thread: prepares the face and starts the session (the slow part). The event channel
    /// is released when the start fails: no session, no events.
    fn launch(self, events: &Arc<EventChannel>) -> JsResult<media_core::MediaSession> {
        let started = media_core::init()
            .map_err(media_error)
            .and_then(|()| self.face.prepare(&self.config.renderer))
            .and_then(|face| {
                media_core::MediaSession::start(self.config, face, self.motion, events.sink())
                    .map_err(media_error)
            });
        if started.is_err() {
            events.shutdown();
        }
        started
    }
}

pub struct StartSession {
    /// The prepared start, or why the arguments were refused (reported as the rejection).
    prepared: Option<JsResult<(Prepared, Arc<EventChannel>)>>,
}

impl Task for StartSession {
    type Output = JsResult<(media_core::MediaSession, Arc<EventChannel>)>;
    type JsValue = MediaSession;

    fn compute(&mut self) -> Result<Self::Output> {
        let prepared = self.prepared.take();
        Ok(guard("startMediaSession()", move || match prepared {
            Some(p) => {
                let (prepared, events) = p?;
                Ok((prepared.launch(&events)?, events))
            }
            None => Err(js_error(
                ErrorCode::NATIVE_PANIC,
                "startMediaSession(): task ran twice",
            )),
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        match output {
            Ok((session, events)) => Ok(MediaSession {
                core: CoreSlot::new(session),
                events,
                close_started: false,
            }),
            Err(err) => Err(rejection(&env, err)),
        }
    }
}

/// `new MediaSession(config, onEvent)` without blocking the event loop: the face is prepared and
/// the pipelines launched on the libuv thread pool. Rejects with the same codes the constructor
/// throws. Events may start before the promise settles (realtime pacing): they are queued.
#[napi(
    ts_args_type = "config: MediaSessionConfig, onEvent: (event: MediaEvent) => void",
    ts_return_type = "Promise<MediaSession>"
)]
pub fn start_media_session(
    config: MediaSessionConfig,
    on_event: Function<'_, MediaEvent, ()>,
) -> AsyncTask<StartSession> {
    let prepared = guard("startMediaSession()", || {
        let prepared = Prepared::from_config(&config)?;
        Ok((prepared, EventChannel::new(&on_event)?))
    });
    AsyncTask::new(StartSession {
        prepared: Some(prepared),
    })
}

/// Absent optional fields take media-core's defaults (`SessionConfig::default()`); media-core
/// checks the ranges (INVALID_ARGUMENT), this only checks that the numbers are integers that fit.
fn session_config(c: &MediaSessionConfig) -> JsResult<media_core::SessionConfig> {
    let d = media_core::SessionConfig::default();
    let outputs = &c.outputs;
    Ok(media_core::SessionConfig {
        width: to_u32("config.width", c.width)?,
        height: to_u32("config.height", c.height)?,
        fps: to_u32("config.fps", c.fps)?,
        outputs: media_core::Outputs {
            h264: outputs.h264.unwrap_or(false),
            vp8: outputs.vp8.unwrap_or(false),
            jpeg: outputs.jpeg.unwrap_or(false),
            opus: outputs.opus.unwrap_or(false),
            pcm: outputs.pcm.unwrap_or(false),
            i420: outputs.i420.unwrap_or(false),
            motion: outputs.motion.unwrap_or(false),
        },
        jpeg_quality: opt(c.jpeg_quality, d.jpeg_quality, |v| {
            to_u8("config.jpegQuality", v)
        })?,
        keyframe_interval_frames: opt(
            c.keyframe_interval_frames,
            d.keyframe_interval_frames,
            |v| to_u32("config.keyframeIntervalFrames", v),
        )?,
        video_bitrate_kbps: opt(c.video_bitrate_kbps, d.video_bitrate_kbps, |v| {
            to_u32("config.videoBitrateKbps", v)
        })?,
        pacing: match c.pacing.as_str() {
            "realtime" => media_core::Pacing::RealTime,
            "manual" => media_core::Pacing::Manual,
            other => {
                return Err(invalid_argument(format!(
                    "config.pacing must be 'realtime' or 'manual', got '{other}'"
                )))
            }
        },
        pipelines_dir: PathBuf::from(&c.pipelines_dir),
        seed: opt(c.seed, d.seed, |v| to_u64("config.seed", v))?,
        renderer: c.renderer.clone().unwrap_or(d.renderer),
        // The renderer checks the range (RENDERER_FAILED at start).
        upsample_factor: opt(c.upsample_factor, d.upsample_factor, |v| {
            to_positive_f32("config.upsampleFactor", v)
        })?,
    })
}

fn opt<T>(value: Option<f64>, default: T, convert: impl FnOnce(f64) -> JsResult<T>) -> JsResult<T> {
    value.map(convert).transpose().map(|v| v.unwrap_or(default))
}

fn visemes(phonemes: &[PhonemeTiming]) -> JsResult<Vec<VisemeEvent>> {
    phonemes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let start_ns = to_u64(&format!("options.phonemes[{i}].startNs"), p.start_ns)?;
            let end_ns = to_u64(&format!("options.phonemes[{i}].endNs"), p.end_ns)?;
            if end_ns < start_ns {
                return Err(invalid_argument(format!(
                    "options.phonemes[{i}]: endNs is before startNs"
                )));
            }
            Ok(VisemeEvent::from_phoneme(start_ns, end_ns, &p.phoneme))
        })
        .collect()
}
