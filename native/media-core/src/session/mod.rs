//! A media session: one avatar talking, encoded for the outputs a client asked for.
//!
//! Threads: the caller's (any thread: `push_audio`, `interrupt`, `set_*`, `stats`, `close`), one
//! render thread per session (owns the session's `FrameProducer`, runs `render_loop`), and
//! GStreamer's streaming threads (one or more per pipeline: encode, deliver outputs to the sink).
//!
//! Clock: session time starts at 0 with frame 0. Frame `i` is at `frame_pts_ns(i, fps, 1)` and
//! carries the 24 kHz samples from `ns_to_samples(pts(i))` to `ns_to_samples(pts(i + 1))`; its
//! audio buffer (Opus, Pcm) gets the same PTS as its video buffers (H.264, VP8, JPEG, I420). So
//! the frame on screen when a sound plays is the frame rendered for it.
//!
//! Lifecycle and teardown order (`close`, also run by `Drop`):
//! 1. refuse new calls (`Closed`), stop the render thread after its current frame and join it;
//! 2. send EOS into every pipeline and wait until it reached the appsink (all outputs delivered),
//!    at most `DRAIN_TIMEOUT` per pipeline (`DRAIN_TIMEOUT` error event otherwise);
//! 3. set every pipeline to NULL (no streaming thread left);
//! 4. emit `Closed`, the last event.
//!
//! After a pipeline error (`MediaEvent::Error`) or a render thread panic the session stops
//! producing frames and rejects `advance`/`push_audio` with `Failed`; the owner closes it.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use gstreamer as gst;

use crate::encoders::detect_encoders;
use crate::error::MediaError;
use crate::events::{in_sink, Emitter, EventSink, MediaEvent};
use crate::frames::renderers;
use crate::frames::{
    Control, DrivingMotion, FaceAsset, PreparedFace, ProducerFactory, VisemeEvent,
};
use crate::pipeline::{EncoderPipeline, LaunchSpec, OutputKind, PipelineVars};
use crate::playout::{InterruptResult, Playout, PushResult, SESSION_RATE_HZ};
mod render_loop;

use render_loop::{Command, RenderSetup};
use crate::stats::{Counters, SessionStats};

/// How long `close` waits for one pipeline to drain: 5 s. Draining takes a few ms (the encoders
/// hold at most a frame or two); this only bounds a wedged encoder.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// RealTime pacing: how much raw video/audio one pipeline's input queue may hold before
/// further buffers are dropped (and counted): 1 s. An encoder that far behind real time cannot
/// catch up; holding more would only add latency and memory (25 raw 512x512 frames = 10 MB).
const MAX_QUEUED_NS: u64 = 1_000_000_000;

/// Which outputs a session produces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    pub h264: bool,
    pub vp8: bool,
    pub jpeg: bool,
    pub opus: bool,
    /// `Pcm` events: the session audio, s16le mono 24 kHz, one per frame tick (no GStreamer).
    pub pcm: bool,
    /// `I420` events: every rendered frame raw, the planes the video encoders get, packed (no
    /// GStreamer; one copy of the frame into the event's buffer, none when off). For consumers
    /// that take raw video themselves (LiveKit) and would otherwise decode JPEG again.
    pub i420: bool,
    /// `Motion` events: the face's parameters each frame (`frames::FaceParams`), for a face the
    /// client draws. With no video output and no `i420` the face is not drawn here at all.
    pub motion: bool,
}

/// How frames are clocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// Frame `i` is rendered when `start + pts(i)` arrives on the monotonic clock.
    RealTime,
    /// Frames are produced only by `advance(n)` (tests and benchmarks).
    Manual,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    /// Output size, even, 16..=4096.
    pub width: u32,
    pub height: u32,
    /// Frames per second, 1..=120.
    pub fps: u32,
    pub outputs: Outputs,
    /// 1..=100.
    pub jpeg_quality: u8,
    /// Key frame at least every this many frames (H.264, VP8), >= 1.
    pub keyframe_interval_frames: u32,
    /// Video bitrate (H.264, VP8), 50..=50000 kbit/s.
    pub video_bitrate_kbps: u32,
    pub pacing: Pacing,
    /// Where the `*.pipeline` files are.
    pub pipelines_dir: PathBuf,
    /// Seeds the animator's randomness (blinks, idle motion): same seed, same video.
    pub seed: u64,
    /// The renderer, by name (`frames::renderers`; "cpu" unless another is registered).
    pub renderer: String,
    /// Supersampling divisor, 1..=4 (the renderer checks it): the face drawn at 1/factor of the
    /// output size and scaled up.
    pub upsample_factor: f32,
}

impl Default for SessionConfig {
    /// 512x512 at 25 fps, no outputs, key frame every 2 s, 1 Mbit/s, RealTime, `./pipelines`.
    fn default() -> Self {
        SessionConfig {
            width: 512,
            height: 512,
            fps: 25,
            outputs: Outputs::default(),
            jpeg_quality: 80,
            keyframe_interval_frames: 50,
            video_bitrate_kbps: 1000,
            pacing: Pacing::RealTime,
            pipelines_dir: PathBuf::from("pipelines"),
            seed: 0,
            renderer: renderers::DEFAULT_RENDERER.to_string(),
            upsample_factor: 1.0,
        }
    }
}

impl SessionConfig {
    fn validate(&self) -> Result<(), MediaError> {
        let bad = |m: String| Err(MediaError::InvalidArgument(m));
        if !(16..=4096).contains(&self.width)
            || !(16..=4096).contains(&self.height)
            || !self.width.is_multiple_of(2)
            || !self.height.is_multiple_of(2)
        {
            return bad(format!(
                "size {}x{}: both must be even and within 16..=4096",
                self.width, self.height
            ));
        }
        if !(1..=120).contains(&self.fps) {
            return bad(format!("fps {} outside 1..=120", self.fps));
        }
        if !(1..=100).contains(&self.jpeg_quality) {
            return bad(format!(
                "jpeg_quality {} outside 1..=100",
                self.jpeg_quality
            ));
        }
        if self.keyframe_interval_frames == 0 {
            return bad("keyframe_interval_frames must be >= 1".into());
        }
        if !(50..=50_000).contains(&self.video_bitrate_kbps) {
            return bad(format!(
                "video_bitrate_kbps {} outside 50..=50000",
                self.video_bitrate_kbps
            ));
        }
        Ok(())
    }

    fn vars(&self) -> PipelineVars {
        PipelineVars {
            width: self.width,
            height: self.height,
            fps: self.fps,
            keyint: self.keyframe_interval_frames,
            jpeg_quality: self.jpeg_quality,
            bitrate_kbps: self.video_bitrate_kbps,
        }
    }
}

thread_local! {
    /// Set while this thread holds the playout lock and runs the sink (speech events are emitted
    /// under the lock, so their order matches the queue's). A sink that calls `push_audio` or
    /// `interrupt` right there is refused instead of deadlocking.
    static IN_PLAYOUT: Cell<bool> = const { Cell::new(false) };
}

/// State shared by the caller's thread and the render thread.
pub(crate) struct Shared {
    playout: Mutex<Playout>,
    /// `Playout::queued_ns` after the last change, so `stats()` never takes the lock.
    queued_ns: AtomicU64,
    pub counters: Arc<Counters>,
    pub emitter: Arc<Emitter>,
    pub keyframe_requested: AtomicBool,
}

impl Shared {
    /// Runs `f` on the playout queue under its lock; events it emits go to the sink in order.
    /// A panic while holding the lock (a bug) leaves consistent-enough data: keep going.
    pub(crate) fn with_playout<R>(
        &self,
        f: impl FnOnce(&mut Playout, &mut dyn FnMut(MediaEvent)) -> R,
    ) -> Result<R, MediaError> {
        if IN_PLAYOUT.with(|c| c.get()) {
            return Err(MediaError::InvalidState(
                "push_audio()/interrupt() called from the event sink while it handles a speech event".into(),
            ));
        }
        let mut playout = self.playout.lock().unwrap_or_else(|p| p.into_inner());
        IN_PLAYOUT.with(|c| c.set(true));
        let emitter = &self.emitter;
        let result = f(&mut playout, &mut |e| emitter.emit(e));
        IN_PLAYOUT.with(|c| c.set(false));
        self.queued_ns.store(playout.queued_ns(), Ordering::Relaxed);
        Ok(result)
    }
}

/// One running session. `Send + Sync`: every method takes `&self` and may be called from any
/// thread. Blocking calls: `start`, `advance`, `close` (and `Drop`).
pub struct MediaSession {
    shared: Arc<Shared>,
    pipelines: Arc<Vec<EncoderPipeline>>,
    factory: Arc<dyn ProducerFactory>,
    /// The name of the renderer it started with (`SessionConfig::renderer`).
    renderer: String,
    commands: Mutex<Option<mpsc::Sender<Command>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    pacing: Pacing,
    closing: AtomicBool,
    close_lock: Mutex<bool>,
}

impl MediaSession {
    /// `start_with` the process's renderer named by `config.renderer` (`frames::renderers`);
    /// `face` must have been prepared by it (for "cpu", an `Arc<face_render::FaceRig>`). An
    /// unknown name is `InvalidArgument`.
    pub fn start(
        config: SessionConfig,
        face: PreparedFace,
        motion: DrivingMotion,
        sink: EventSink,
    ) -> Result<MediaSession, MediaError> {
        let factory = renderers::renderer(&config.renderer)
            .map_err(|e| MediaError::InvalidArgument(e.to_string()))?;
        MediaSession::start_with(config, factory, face, motion, sink)
    }

    /// Launches the pipelines for `config.outputs`, builds `factory`'s producer for `face` on a
    /// new render thread, and starts producing frames (RealTime) or waits for `advance`
    /// (Manual). Blocks until all of that is up (tens of ms). `face` must come from the same
    /// kind of factory (`prepare_face`), else `Render` (the face is for another renderer).
    pub fn start_with(
        config: SessionConfig,
        factory: Arc<dyn ProducerFactory>,
        face: PreparedFace,
        motion: DrivingMotion,
        sink: EventSink,
    ) -> Result<MediaSession, MediaError> {
        crate::init()?;
        config.validate()?;
        let counters = Arc::new(Counters::default());
        let emitter = Emitter::new(sink);
        let pipelines = launch_pipelines(&config, &emitter, &counters)?;
        let pipelines = Arc::new(pipelines);
        let shared = Arc::new(Shared {
            playout: Mutex::new(Playout::default()),
            queued_ns: AtomicU64::new(0),
            counters,
            emitter,
            keyframe_requested: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel();
        let setup = RenderSetup {
            width: config.width,
            height: config.height,
            fps: config.fps,
            pcm: config.outputs.pcm,
            i420: config.outputs.i420,
            motion: config.outputs.motion,
            pixels: !config.outputs.motion || config.outputs.h264 || config.outputs.vp8 || config.outputs.jpeg || config.outputs.i420,
            pacing: config.pacing,
            seed: config.seed,
            upsample_factor: config.upsample_factor,
        };
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let thread = {
            let shared = shared.clone();
            let pipelines = pipelines.clone();
            let factory = factory.clone();
            std::thread::Builder::new()
                .name("media-render".into())
                .spawn(move || {
                    render_loop::run(
                        setup, factory, face, motion, shared, pipelines, rx, ready_tx,
                    )
                })
                .map_err(|e| MediaError::Thread(e.to_string()))?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(MediaError::Thread(
                    "render thread exited during start".into(),
                ));
            }
        }
        Ok(MediaSession {
            shared,
            pipelines,
            factory,
            renderer: config.renderer.clone(),
            commands: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            pacing: config.pacing,
            closing: AtomicBool::new(false),
            close_lock: Mutex::new(false),
        })
    }

    fn check_open(&self) -> Result<(), MediaError> {
        if self.closing.load(Ordering::Acquire) {
            return Err(MediaError::Closed);
        }
        if self.shared.counters.is_failed() {
            return Err(MediaError::Failed(
                "a pipeline or the renderer failed; see the Error event".into(),
            ));
        }
        Ok(())
    }

    fn send(&self, command: Command) -> Result<(), MediaError> {
        let guard = self.commands.lock().unwrap_or_else(|p| p.into_inner());
        let tx = guard.as_ref().ok_or(MediaError::Closed)?;
        tx.send(command)
            .map_err(|_| MediaError::Thread("render thread is gone".into()))
    }

    /// Queues PCM16 mono speech at `sample_rate_hz` (8000..=48000; resampled to 24 kHz) right
    /// after what is already queued, or at the next frame when idle, or at session time
    /// `pts_ns` (clamped to the next unplayed sample; overlapping speech is mixed). `visemes`
    /// are relative to the chunk's start. Returns the session times the chunk plays at.
    /// Non-blocking (a short lock; resampling runs on the caller's thread).
    pub fn push_audio(
        &self,
        samples: &[i16],
        sample_rate_hz: u32,
        visemes: &[VisemeEvent],
        pts_ns: Option<u64>,
    ) -> Result<PushResult, MediaError> {
        self.check_open()?;
        if let Some(v) = visemes.iter().find(|v| v.end_ns < v.start_ns) {
            return Err(MediaError::InvalidArgument(format!(
                "viseme ends before it starts: {v:?}"
            )));
        }
        self.shared
            .with_playout(|p, _| p.push(samples, sample_rate_hz, visemes, pts_ns))?
    }

    /// Drops queued speech at once: the next frame rendered is idle (mouth closing from where it
    /// is, no more speech audio). Emits `SpeechEnded` (if speech was playing) and `Interrupted`.
    pub fn interrupt(&self) -> Result<InterruptResult, MediaError> {
        if self.closing.load(Ordering::Acquire) {
            return Err(MediaError::Closed);
        }
        self.shared.with_playout(|p, emit| p.interrupt(emit))
    }

    /// The name of this session's renderer.
    pub fn renderer(&self) -> &str {
        &self.renderer
    }

    /// Prepares a face for this session's renderer (heavy: call it off latency-critical
    /// threads), for `set_face` here or in any session with the same kind of renderer.
    pub fn prepare_face(&self, face: FaceAsset) -> Result<PreparedFace, MediaError> {
        self.factory
            .prepare_face(face)
            .map_err(|e| MediaError::Render(e.to_string()))
    }

    /// Shows another face from the next frame on. A face prepared for another kind of renderer
    /// fails the session (`RENDERER_FAILED` event) when the render thread applies it.
    pub fn set_face(&self, face: PreparedFace) -> Result<(), MediaError> {
        self.check_open()?;
        self.send(Command::Control(Control::SetFace(face)))
    }

    /// Switches the idle/driving motion from the next frame on.
    pub fn set_motion(&self, motion: DrivingMotion) -> Result<(), MediaError> {
        self.check_open()?;
        self.send(Command::Control(Control::SetMotion(motion)))
    }

    /// Whether the user is speaking: the face listens (attention, nods; see animation's
    /// `listening`) from the next frame on, and settles back to idle when set false.
    pub fn set_listening(&self, on: bool) -> Result<(), MediaError> {
        self.check_open()?;
        self.send(Command::Control(Control::SetListening(on)))
    }

    /// The next video frame is a key frame (with SPS/PPS for H.264) on every video output.
    pub fn request_keyframe(&self) {
        self.shared
            .keyframe_requested
            .store(true, Ordering::Release);
    }

    /// Changes the H.264/VP8 encoders' target bitrate (kbit/s, 50..=50000) from their next
    /// frame on: a call's sender follows the bandwidth its receiver reports. Returns whether a
    /// video encoder took it (false: no video output, or an encoder without a bitrate property).
    pub fn set_video_bitrate(&self, kbps: u32) -> Result<bool, MediaError> {
        self.check_open()?;
        if !(50..=50_000).contains(&kbps) {
            return Err(MediaError::InvalidArgument(format!(
                "video bitrate {kbps} kbit/s outside 50..=50000"
            )));
        }
        let mut applied = false;
        for p in self
            .pipelines
            .iter()
            .filter(|p| matches!(p.kind, OutputKind::H264 | OutputKind::Vp8))
        {
            applied |= p.set_bitrate_kbps(kbps);
        }
        Ok(applied)
    }

    /// Manual pacing only: renders and pushes `frames` frames now, then returns. Encoded
    /// outputs arrive asynchronously (all of them by the time `close` returns).
    pub fn advance(&self, frames: u32) -> Result<(), MediaError> {
        if self.pacing != Pacing::Manual {
            return Err(MediaError::InvalidState(
                "advance() needs Pacing::Manual".into(),
            ));
        }
        if in_sink() {
            return Err(MediaError::InvalidState(
                "advance() called from inside the event sink".into(),
            ));
        }
        self.check_open()?;
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        self.send(Command::Advance {
            frames,
            reply: reply_tx,
        })?;
        reply_rx
            .recv()
            .map_err(|_| MediaError::Thread("render thread is gone".into()))?
    }

    pub fn stats(&self) -> SessionStats {
        let c = &self.shared.counters;
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        SessionStats {
            frames_rendered: l(&c.frames_rendered),
            late_frames: l(&c.late_frames),
            max_lateness_ns: l(&c.max_lateness_ns),
            render_ns_total: l(&c.render_ns_total),
            render_ns_max: l(&c.render_ns_max),
            audio_queued_ns: self.shared.queued_ns.load(Ordering::Relaxed),
            events_emitted: self.shared.emitter.emitted(),
            pipeline_errors: l(&c.pipeline_errors),
            current_pts_ns: l(&c.current_pts_ns),
            dropped_buffers: l(&c.dropped_buffers),
            events_dropped: self.shared.emitter.dropped(),
        }
    }

    /// Mouth opening of the last rendered frame (0 closed .. 1), from the renderer. A test and
    /// diagnostics hook: `interrupt()` then one frame must read 0 once the mouth has closed.
    pub fn last_mouth_opening(&self) -> f32 {
        f32::from_bits(
            self.shared
                .counters
                .last_mouth_opening
                .load(Ordering::Relaxed),
        )
    }

    /// Stops and drains everything, then emits `Closed` (see the module doc for the order).
    /// Idempotent; a second call returns Ok at once (or after the first finished). Blocks for
    /// the drain (a few ms; at most `DRAIN_TIMEOUT` per pipeline). Must not be called from
    /// inside the event sink (returns `InvalidState`: it would wait on its own thread).
    /// The session is closed even when this returns an error (a pipeline that did not drain).
    pub fn close(&self) -> Result<(), MediaError> {
        if in_sink() {
            return Err(MediaError::InvalidState(
                "close() called from inside the event sink".into(),
            ));
        }
        let mut closed = self.close_lock.lock().unwrap_or_else(|p| p.into_inner());
        if *closed {
            return Ok(());
        }
        self.closing.store(true, Ordering::Release);
        if let Some(tx) = self
            .commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = tx.send(Command::Stop);
        }
        if let Some(handle) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // The loop catches its own panics; a join error would be a panic outside it.
            let _ = handle.join();
        }
        let mut result = Ok(());
        for p in self.pipelines.iter() {
            if let Err(e) = p.finish(DRAIN_TIMEOUT) {
                self.shared.emitter.emit(MediaEvent::Error {
                    code: "DRAIN_TIMEOUT".into(),
                    message: e.to_string(),
                    element: Some(p.name().to_string()),
                    debug: None,
                });
                if result.is_ok() {
                    result = Err(MediaError::Pipeline(e));
                }
            }
        }
        *closed = true;
        self.shared.emitter.emit_closed();
        result
    }
}

impl Drop for MediaSession {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn launch_pipelines(
    config: &SessionConfig,
    emitter: &Arc<Emitter>,
    counters: &Arc<Counters>,
) -> Result<Vec<EncoderPipeline>, MediaError> {
    let caps = detect_encoders();
    let video_caps = gst::Caps::builder("video/x-raw")
        .field("format", "I420")
        .field("width", config.width as i32)
        .field("height", config.height as i32)
        .field("framerate", gst::Fraction::new(config.fps as i32, 1))
        .field("pixel-aspect-ratio", gst::Fraction::new(1, 1))
        .field("interlace-mode", "progressive")
        // Producers write BT.601, limited range (see `frames`): say so (H.264 VUI).
        .field("colorimetry", "bt601")
        .build();
    // The JPEG pipeline gets the same frame expanded to full range (JFIF): BT.601 matrix, 0..255.
    let mut jpeg_caps = video_caps.clone();
    jpeg_caps.make_mut().set("colorimetry", "1:4:0:0");
    let audio_caps = gst::Caps::builder("audio/x-raw")
        .field("format", "S16LE")
        .field("layout", "interleaved")
        .field("rate", SESSION_RATE_HZ as i32)
        .field("channels", 1i32)
        .build();
    let mut wanted: Vec<(OutputKind, &'static str)> = Vec::new();
    let o = &config.outputs;
    if o.h264 {
        let file = caps.h264_pipeline().ok_or_else(|| {
            MediaError::EncoderUnavailable("no H.264 encoder (x264enc, nvh264enc)".into())
        })?;
        wanted.push((OutputKind::H264, file));
    }
    if o.vp8 {
        if !caps.vp8 {
            return Err(MediaError::EncoderUnavailable("vp8enc/rtpvp8pay".into()));
        }
        wanted.push((OutputKind::Vp8, "vp8"));
    }
    if o.jpeg {
        if !caps.jpeg {
            return Err(MediaError::EncoderUnavailable("jpegenc".into()));
        }
        wanted.push((OutputKind::Jpeg, "jpeg"));
    }
    if o.opus {
        if !caps.opus {
            return Err(MediaError::EncoderUnavailable("opusenc".into()));
        }
        wanted.push((OutputKind::Opus, "opus"));
    }
    let vars = config.vars();
    let max_queued_ns = match config.pacing {
        Pacing::RealTime => Some(MAX_QUEUED_NS),
        Pacing::Manual => None,
    };
    let mut pipelines = Vec::with_capacity(wanted.len());
    for (kind, file) in wanted {
        let src_caps = match kind {
            OutputKind::Opus => audio_caps.clone(),
            OutputKind::Jpeg => jpeg_caps.clone(),
            OutputKind::H264 | OutputKind::Vp8 => video_caps.clone(),
        };
        // On error, the pipelines launched so far are dropped (set to NULL) with `pipelines`.
        pipelines.push(EncoderPipeline::launch(LaunchSpec {
            kind,
            file,
            dir: &config.pipelines_dir,
            vars: &vars,
            src_caps,
            max_queued_ns,
            emitter: emitter.clone(),
            counters: counters.clone(),
        })?);
    }
    Ok(pipelines)
}
