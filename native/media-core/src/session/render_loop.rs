//! The render thread: owns the session's `FrameProducer` (see `frames`) and produces one frame
//! per tick.
//!
//! Tick `i` (pts = `frame_pts_ns(i, fps, 1)`): take the tick's 24 kHz samples from the playout
//! queue (silence when idle) and any newly queued speech; hand them to the producer as a `Tick`
//! with a pooled buffer to write the frame into (I420, once); push that buffer (shared, not copied) to the H.264 and VP8
//! pipelines with the tick's PTS and duration, and a full-range copy of it to the JPEG pipeline
//! (JFIF decoders read full range; `videoconvert` does not expand the range of I420 to I420);
//! emit the frame as `I420` when asked; push the audio with the same PTS to the Opus pipeline and
//! emit it as `Pcm`. With the motion output, the producer's `FaceParams` go out as `Motion`
//! before the tick's audio.
//!
//! The `I420` event owns its bytes (a `Vec` the binding hands to JavaScript without copying), so
//! it cannot share the pooled buffer: it gets one copy of it (the very bytes the encoders get;
//! pooled buffers carry no video meta, so their planes are packed by construction and the copy
//! is one memcpy), or, when no video pipeline runs (no pool), the producer writes straight into
//! it. With the output off none of this runs; with no video output either the producer is told
//! nobody takes the pixels (it still advances and reports the mouth opening).
//!
//! Pacing: RealTime waits for `start + pts(i)` on the monotonic clock (the one allowed sleep,
//! done as a channel receive with a deadline so commands still wake it). Falling behind never
//! skips a PTS: late frames are rendered at once and counted. Manual renders only on `advance`.
//!
//! Never panics outward: each tick runs under `catch_unwind`; a panic is reported as a
//! `RENDER_PANIC` error event and the session stops producing, like after a pipeline error; a
//! producer error (`control`, `produce`) is a `RENDERER_FAILED` error event, with the same effect.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;

use crate::error::MediaError;
use crate::events::MediaEvent;
use crate::frames::{
    frame_pts_ns, i420_size, ns_to_samples, samples_to_ns, Control, DrivingMotion, FrameProducer,
    FrameSpec, PreparedFace, ProducerError, ProducerFactory, Tick,
};
use crate::pipeline::{EncoderPipeline, OutputKind};
use crate::playout::SESSION_RATE_HZ;
use super::{Pacing, Shared};

/// BT.601 limited range (Y 16..=235, Cb/Cr 16..=240) to full range (0..=255), as JFIF wants.
const fn range_luts() -> ([u8; 256], [u8; 256]) {
    let (mut y, mut c) = ([0u8; 256], [0u8; 256]);
    let mut i = 0;
    while i < 256 {
        // Rounded fixed point: (v - 16) * 255 / 219 and (v - 128) * 255 / 224 + 128, clamped.
        let yv = ((i as i32 - 16) * 255 * 2 + 219) / (219 * 2);
        y[i] = if yv < 0 {
            0
        } else if yv > 255 {
            255
        } else {
            yv as u8
        };
        let d = (i as i32 - 128) * 255 * 2;
        let cv = 128
            + if d >= 0 {
                (d + 224) / 448
            } else {
                -((-d + 224) / 448)
            };
        c[i] = if cv < 0 {
            0
        } else if cv > 255 {
            255
        } else {
            cv as u8
        };
        i += 1;
    }
    (y, c)
}
const RANGE_LUTS: ([u8; 256], [u8; 256]) = range_luts();

/// A copy of a limited-range I420 frame expanded to full range, from the same pool.
fn full_range_copy(
    pool: &gst::BufferPool,
    src: &gst::Buffer,
    y_len: usize,
) -> Result<gst::Buffer, gst::FlowError> {
    let mut out = pool.acquire_buffer(None)?;
    {
        let o = out.get_mut().ok_or(gst::FlowError::Error)?;
        o.set_pts(src.pts());
        o.set_duration(src.duration());
        let from = src.map_readable().map_err(|_| gst::FlowError::Error)?;
        let mut to = o.map_writable().map_err(|_| gst::FlowError::Error)?;
        expand_range(from.as_slice(), to.as_mut_slice(), y_len);
    }
    Ok(out)
}

/// `y_len` bytes of luma, then chroma.
fn expand_range(from: &[u8], to: &mut [u8], y_len: usize) {
    let (ylut, clut) = &RANGE_LUTS;
    for (d, s) in to[..y_len].iter_mut().zip(&from[..y_len]) {
        *d = ylut[*s as usize];
    }
    for (d, s) in to[y_len..].iter_mut().zip(&from[y_len..]) {
        *d = clut[*s as usize];
    }
}

/// Raw frames kept ready in the buffer pool: 4 covers the frames in flight in three encoders
/// without allocating per frame; more are allocated on demand (pool max 0 = unbounded).
const POOL_MIN_BUFFERS: u32 = 4;

pub(crate) enum Command {
    Control(Control),
    Advance {
        frames: u32,
        reply: SyncSender<Result<(), MediaError>>,
    },
    Stop,
}

pub(crate) struct RenderSetup {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub pcm: bool,
    pub i420: bool,
    /// `Motion` events each tick, before the tick's audio.
    pub motion: bool,
    /// Whether anyone takes pixels (`FrameSpec::pixels`).
    pub pixels: bool,
    pub pacing: Pacing,
    pub seed: u64,
    pub upsample_factor: f32,
}

struct RenderLoop {
    setup: RenderSetup,
    shared: Arc<Shared>,
    pipelines: Arc<Vec<EncoderPipeline>>,
    producer: Box<dyn FrameProducer>,
    /// `i420_size(width, height)`: the bytes of one frame.
    frame_len: usize,
    pool: Option<gst::BufferPool>,
    has_jpeg: bool,
    frame: u64,
}

/// Thread body: builds the producer, reports readiness, then runs the loop.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    setup: RenderSetup,
    factory: Arc<dyn ProducerFactory>,
    face: PreparedFace,
    motion: DrivingMotion,
    shared: Arc<Shared>,
    pipelines: Arc<Vec<EncoderPipeline>>,
    commands: Receiver<Command>,
    ready: SyncSender<Result<(), MediaError>>,
) {
    let built = (|| -> Result<RenderLoop, MediaError> {
        let spec = FrameSpec {
            width: setup.width,
            height: setup.height,
            fps: setup.fps,
            seed: setup.seed,
            upsample_factor: setup.upsample_factor,
            pixels: setup.pixels,
        };
        let producer = factory
            .create(spec, face, motion)
            .map_err(|e| MediaError::Render(e.to_string()))?;
        let has_video = pipelines.iter().any(|p| p.kind != OutputKind::Opus);
        let pool = if has_video {
            match producer.buffer_pool() {
                Some(own) => Some(own),
                None => Some(make_pool(setup.width, setup.height)?),
            }
        } else {
            None
        };
        let has_jpeg = pipelines.iter().any(|p| p.kind == OutputKind::Jpeg);
        Ok(RenderLoop {
            frame_len: i420_size(setup.width, setup.height),
            setup,
            shared,
            pipelines,
            producer,
            pool,
            has_jpeg,
            frame: 0,
        })
    })();
    let mut lp = match built {
        Ok(lp) => {
            let _ = ready.send(Ok(()));
            lp
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    match lp.setup.pacing {
        Pacing::RealTime => lp.run_realtime(&commands),
        Pacing::Manual => lp.run_manual(&commands),
    }
    if let Some(pool) = &lp.pool {
        let _ = pool.set_active(false);
    }
}

fn make_pool(width: u32, height: u32) -> Result<gst::BufferPool, MediaError> {
    let pool = gst::BufferPool::new();
    let mut config = pool.config();
    config.set_params(None, i420_size(width, height) as u32, POOL_MIN_BUFFERS, 0);
    pool.set_config(config)
        .map_err(|e| MediaError::Thread(format!("buffer pool config: {e}")))?;
    pool.set_active(true)
        .map_err(|e| MediaError::Thread(format!("buffer pool: {e}")))?;
    Ok(pool)
}

impl RenderLoop {
    /// Applies a command; false means stop.
    fn handle(&mut self, command: Command) -> bool {
        match command {
            Command::Control(control) => {
                if let Err(e) = self.producer.control(control) {
                    self.producer_failed(e);
                }
            }
            Command::Advance { frames, reply } => {
                let result = match self.setup.pacing {
                    Pacing::Manual => self.advance(frames),
                    Pacing::RealTime => Err(MediaError::InvalidState(
                        "advance() needs Pacing::Manual".into(),
                    )),
                };
                let _ = reply.send(result);
            }
            Command::Stop => return false,
        }
        true
    }

    fn advance(&mut self, frames: u32) -> Result<(), MediaError> {
        for _ in 0..frames {
            if self.shared.counters.is_failed() {
                return Err(MediaError::Failed(
                    "a pipeline or the renderer failed; see the Error event".into(),
                ));
            }
            self.guarded_tick();
        }
        Ok(())
    }

    fn run_manual(&mut self, commands: &Receiver<Command>) {
        while let Ok(command) = commands.recv() {
            if !self.handle(command) {
                return;
            }
        }
    }

    fn run_realtime(&mut self, commands: &Receiver<Command>) {
        let start = Instant::now();
        loop {
            let due = start + Duration::from_nanos(frame_pts_ns(self.frame, self.setup.fps, 1));
            // Wait for the frame's due time, serving commands meanwhile.
            loop {
                let timeout = due.saturating_duration_since(Instant::now());
                match commands.recv_timeout(timeout) {
                    Ok(command) => {
                        if !self.handle(command) {
                            return;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            if self.shared.counters.is_failed() {
                // Stop producing; only wait to be stopped.
                while let Ok(command) = commands.recv() {
                    if !self.handle(command) {
                        return;
                    }
                }
                return;
            }
            self.guarded_tick();
            let lateness = Instant::now().saturating_duration_since(due).as_nanos() as u64;
            let frame_ns = frame_pts_ns(self.frame, self.setup.fps, 1)
                - frame_pts_ns(self.frame - 1, self.setup.fps, 1);
            self.shared.counters.record_lateness(lateness, frame_ns);
        }
    }

    fn guarded_tick(&mut self) {
        if catch_unwind(AssertUnwindSafe(|| self.tick())).is_err() {
            self.shared.counters.failed.store(true, Ordering::Release);
            self.shared.emitter.emit(MediaEvent::Error {
                code: "RENDER_PANIC".into(),
                message: format!("render thread panicked at frame {}", self.frame),
                element: None,
                debug: None,
            });
            // Do not retry the same frame forever.
            self.frame += 1;
        }
    }

    fn tick(&mut self) {
        let fps = self.setup.fps;
        let i = self.frame;
        let pts = frame_pts_ns(i, fps, 1);
        let next_pts = frame_pts_ns(i + 1, fps, 1);
        let (s0, s1) = (
            ns_to_samples(pts, SESSION_RATE_HZ),
            ns_to_samples(next_pts, SESSION_RATE_HZ),
        );
        let Ok(tick) = self.shared.with_playout(|p, emit| p.take(s0, s1, emit)) else {
            // Only refused on a sink thread; the render thread never runs inside the sink.
            return;
        };

        let started = Instant::now();
        let inputs = Tick {
            index: i,
            pts_ns: pts,
            duration_ns: next_pts - pts,
            audio: &tick.samples,
            new_visemes: &tick.new_visemes,
            interrupt_at: tick.interrupt_at,
        };
        let mut video = self
            .pool
            .as_ref()
            .map(|pool| stamped_buffer(pool, pts, next_pts - pts));
        let (produced, i420) = self.produce(&inputs, &mut video);
        let info = match produced {
            Ok(info) => info,
            Err(e) => {
                self.producer_failed(e);
                self.frame += 1;
                return;
            }
        };
        let jpeg = match (&video, &self.pool) {
            (Some(Ok(buffer)), Some(pool)) if self.has_jpeg => Some(full_range_copy(
                pool,
                buffer,
                (self.setup.width * self.setup.height) as usize,
            )),
            _ => None,
        };
        self.shared
            .counters
            .record_render(started.elapsed().as_nanos() as u64);
        self.shared
            .counters
            .last_mouth_opening
            .store(info.mouth_opening.to_bits(), Ordering::Relaxed);

        if let Some(video) = video {
            match video {
                Ok(buffer) => {
                    if self.shared.keyframe_requested.swap(false, Ordering::AcqRel) {
                        for p in self
                            .pipelines
                            .iter()
                            .filter(|p| matches!(p.kind, OutputKind::H264 | OutputKind::Vp8))
                        {
                            p.force_key_unit();
                        }
                    }
                    for p in self
                        .pipelines
                        .iter()
                        .filter(|p| matches!(p.kind, OutputKind::H264 | OutputKind::Vp8))
                    {
                        p.push(buffer.clone());
                    }
                    if let Some(p) = self.pipelines.iter().find(|p| p.kind == OutputKind::Jpeg) {
                        match jpeg {
                            Some(Ok(full)) => {
                                p.push(full);
                            }
                            _ => {
                                self.shared
                                    .counters
                                    .dropped_buffers
                                    .fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
                Err(_) => {
                    // No buffer from the pool (only while it is being shut down): the frame is lost.
                    let n = self
                        .pipelines
                        .iter()
                        .filter(|p| p.kind != OutputKind::Opus)
                        .count() as u64;
                    self.shared
                        .counters
                        .dropped_buffers
                        .fetch_add(n, Ordering::Relaxed);
                }
            }
        }
        if let Some(data) = i420 {
            self.shared.emitter.emit(MediaEvent::I420 {
                data,
                pts_ns: pts,
                frame_index: i,
                width: self.setup.width,
                height: self.setup.height,
            });
        }

        // The face's parameters go out before the audio they belong to (a client draws them).
        if let (true, Some(face)) = (self.setup.motion, info.face) {
            self.shared.emitter.emit(MediaEvent::Motion { pts_ns: pts, frame_index: i, face });
        }

        let audio_pts = samples_to_ns(s0, SESSION_RATE_HZ);
        let audio_end = samples_to_ns(s1, SESSION_RATE_HZ);
        let bytes: Vec<u8> = tick.samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        if let Some(opus) = self.pipelines.iter().find(|p| p.kind == OutputKind::Opus) {
            let mut buffer = gst::Buffer::from_slice(bytes.clone());
            if let Some(b) = buffer.get_mut() {
                b.set_pts(gst::ClockTime::from_nseconds(audio_pts));
                b.set_duration(gst::ClockTime::from_nseconds(audio_end - audio_pts));
            }
            opus.push(buffer);
        }
        if self.setup.pcm {
            self.shared.emitter.emit(MediaEvent::Pcm {
                data: bytes,
                pts_ns: audio_pts,
            });
        }

        self.frame += 1;
        let c = &self.shared.counters;
        c.frames_rendered.fetch_add(1, Ordering::Relaxed);
        c.current_pts_ns.store(next_pts, Ordering::Relaxed);
    }

    /// Runs the producer once for this tick: into the pooled buffer when there is one (and
    /// copies it for the `I420` event when asked), else into the event's own buffer when asked,
    /// else without pixels. A pooled buffer that cannot be mapped becomes a lost frame (`Err`).
    fn produce(
        &mut self,
        inputs: &Tick,
        video: &mut Option<Result<gst::Buffer, gst::FlowError>>,
    ) -> (Result<crate::frames::FrameInfo, ProducerError>, Option<Vec<u8>>) {
        let size = self.frame_len;
        let mut unmappable = false;
        if let Some(Ok(buffer)) = video.as_mut() {
            let mut mapped = buffer.get_mut().and_then(|b| b.map_writable().ok());
            match mapped.as_mut().and_then(|m| m.as_mut_slice().get_mut(..size)) {
                Some(out) => {
                    let produced = self.producer.produce(inputs, Some(&mut *out));
                    let i420 = self.setup.i420.then(|| out.to_vec());
                    return (produced, i420);
                }
                None => unmappable = true,
            }
        }
        if unmappable {
            *video = Some(Err(gst::FlowError::Error));
        }
        if self.setup.i420 {
            let mut out = vec![0u8; size];
            let produced = self.producer.produce(inputs, Some(&mut out));
            (produced, Some(out))
        } else {
            (self.producer.produce(inputs, None), None)
        }
    }

    /// A producer error: the session stops producing, like after a pipeline error.
    fn producer_failed(&mut self, e: ProducerError) {
        let e = MediaError::Render(e.to_string());
        self.shared.counters.failed.store(true, Ordering::Release);
        self.shared.emitter.emit(MediaEvent::Error {
            code: e.code().into(),
            message: format!("{e} (frame {})", self.frame),
            element: None,
            debug: None,
        });
    }
}

/// A buffer from the pool stamped with the frame's PTS and duration, for the producer to fill.
fn stamped_buffer(
    pool: &gst::BufferPool,
    pts: u64,
    duration: u64,
) -> Result<gst::Buffer, gst::FlowError> {
    let mut buffer = pool.acquire_buffer(None)?;
    let b = buffer.get_mut().ok_or(gst::FlowError::Error)?;
    b.set_pts(gst::ClockTime::from_nseconds(pts));
    b.set_duration(gst::ClockTime::from_nseconds(duration));
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_range_expands_to_full_range() {
        let from = [16u8, 235, 126, 0, 255, 16, 240, 128];
        let mut to = [0u8; 8];
        expand_range(&from, &mut to, 5);
        assert_eq!(&to[..5], &[0, 255, 128, 0, 255]);
        assert_eq!(&to[5..], &[0, 255, 128]);
    }
}
