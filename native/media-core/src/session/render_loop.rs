//! The render thread: owns the `Renderer` and the `Animator` and produces one frame per tick.
//!
//! Tick `i` (pts = `frame_pts_ns(i, fps, 1)`): take the tick's 24 kHz samples from the playout
//! queue (silence when idle) and any newly queued speech; tell the animator (interrupt first,
//! then new audio and visemes at their session times); `face_at(pts)`; render RGB; convert to
//! I420 once into a pooled buffer; push that buffer (shared, not copied) to the H.264 and VP8
//! pipelines with the tick's PTS and duration, and a full-range copy of it to the JPEG pipeline
//! (JFIF decoders read full range; `videoconvert` does not expand the range of I420 to I420);
//! emit the frame as `I420` when asked; push the audio with the same PTS to the Opus pipeline and
//! emit it as `Pcm`.
//!
//! The `I420` event owns its bytes (a `Vec` the binding hands to JavaScript without copying), so
//! it cannot share the pooled buffer: it gets one copy of it (the very bytes the encoders get;
//! pooled buffers carry no video meta, so their planes are packed by construction and the copy
//! is one memcpy), or, when no video pipeline runs (no pool), the RGB frame converted straight
//! into it. With the output off none of this runs.
//!
//! Pacing: RealTime waits for `start + pts(i)` on the monotonic clock (the one allowed sleep,
//! done as a channel receive with a deadline so commands still wake it). Falling behind never
//! skips a PTS: late frames are rendered at once and counted. Manual renders only on `advance`.
//!
//! Never panics outward: each tick runs under `catch_unwind`; a panic is reported as a
//! `RENDER_PANIC` error event and the session stops producing, like after a pipeline error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use animation::motion::DrivingMotion;
use animation::timeline::{frame_pts_ns, ns_to_samples, samples_to_ns};
use animation::Animator;
use face_render::{i420_size, rgb_to_i420, FaceRig, Renderer, RgbImage};
use gstreamer as gst;
use gstreamer::prelude::*;

use crate::error::MediaError;
use crate::events::MediaEvent;
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
    SetFace(Arc<FaceRig>),
    SetMotion(DrivingMotion),
    SetListening(bool),
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
    pub upsample_factor: f32,
    pub pcm: bool,
    pub i420: bool,
    pub pacing: Pacing,
    pub seed: u64,
}

struct RenderLoop {
    setup: RenderSetup,
    shared: Arc<Shared>,
    pipelines: Arc<Vec<EncoderPipeline>>,
    renderer: Renderer,
    animator: Animator,
    rgb: RgbImage,
    pool: Option<gst::BufferPool>,
    has_jpeg: bool,
    frame: u64,
}

/// Thread body: builds the renderer and animator, reports readiness, then runs the loop.
pub(crate) fn run(
    setup: RenderSetup,
    face: Arc<FaceRig>,
    motion: DrivingMotion,
    shared: Arc<Shared>,
    pipelines: Arc<Vec<EncoderPipeline>>,
    commands: Receiver<Command>,
    ready: SyncSender<Result<(), MediaError>>,
) {
    let built = (|| -> Result<RenderLoop, MediaError> {
        let renderer = Renderer::new(face, setup.width, setup.height, setup.upsample_factor)
            .map_err(|e| MediaError::Render(e.to_string()))?;
        let animator = Animator::new(motion, setup.seed);
        let has_video = pipelines.iter().any(|p| p.kind != OutputKind::Opus);
        let pool = if has_video {
            Some(make_pool(setup.width, setup.height)?)
        } else {
            None
        };
        let has_jpeg = pipelines.iter().any(|p| p.kind == OutputKind::Jpeg);
        Ok(RenderLoop {
            rgb: RgbImage::new(setup.width, setup.height),
            setup,
            shared,
            pipelines,
            renderer,
            animator,
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
            Command::SetFace(rig) => self.renderer.set_rig(rig),
            Command::SetMotion(motion) => self.animator.set_motion(motion),
            Command::SetListening(on) => self.animator.set_listening(on),
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
        if let Some(t) = tick.interrupt_at {
            self.animator.interrupt(t);
        }
        if !tick.new_visemes.is_empty() {
            self.animator.push_visemes(&tick.new_visemes);
        }
        // The animator hears the audio as it is played, one tick at a time, so its analysis
        // costs the same small amount every frame. Handing it whole utterances at push time
        // cost ~1 ms per second of speech on a single frame, which made frames late when
        // several sessions queued speech at once.
        self.animator
            .push_audio(pts, SESSION_RATE_HZ, &tick.samples);
        let face = self.animator.face_at(pts);
        self.renderer.render(&face, &mut self.rgb);
        let mouth = self.renderer.last_mouth_opening();
        let video = self
            .pool
            .as_ref()
            .map(|pool| self.make_video_buffer(pool, pts, next_pts - pts));
        let jpeg = match (&video, &self.pool) {
            (Some(Ok(buffer)), Some(pool)) if self.has_jpeg => Some(full_range_copy(
                pool,
                buffer,
                (self.setup.width * self.setup.height) as usize,
            )),
            _ => None,
        };
        let i420 = self.setup.i420.then(|| {
            let pooled = video.as_ref().and_then(|v| v.as_ref().ok());
            self.i420_frame(pooled)
        });
        self.shared
            .counters
            .record_render(started.elapsed().as_nanos() as u64);
        self.shared
            .counters
            .last_mouth_opening
            .store(mouth.to_bits(), Ordering::Relaxed);

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

    /// RGB -> I420 straight into a pooled buffer, stamped with the frame's PTS and duration.
    fn make_video_buffer(
        &self,
        pool: &gst::BufferPool,
        pts: u64,
        duration: u64,
    ) -> Result<gst::Buffer, gst::FlowError> {
        let mut buffer = pool.acquire_buffer(None)?;
        let b = buffer.get_mut().ok_or(gst::FlowError::Error)?;
        b.set_pts(gst::ClockTime::from_nseconds(pts));
        b.set_duration(gst::ClockTime::from_nseconds(duration));
        {
            let mut map = b.map_writable().map_err(|_| gst::FlowError::Error)?;
            rgb_to_i420(&self.rgb, map.as_mut_slice());
        }
        Ok(buffer)
    }

    /// The frame's I420 planes as an owned, packed buffer for the `I420` event: a copy of the
    /// encoders' pooled buffer when there is one, else the RGB frame converted into a new one.
    fn i420_frame(&self, pooled: Option<&gst::Buffer>) -> Vec<u8> {
        let size = i420_size(self.setup.width, self.setup.height);
        if let Some(copy) = pooled.and_then(|b| packed_copy(b, size)) {
            return copy;
        }
        let mut out = vec![0u8; size];
        rgb_to_i420(&self.rgb, &mut out);
        out
    }
}

/// The first `size` bytes of a pooled frame buffer (packed I420: the pool's buffers have no
/// video meta, no strides), or None when it cannot be read or is too short.
fn packed_copy(buffer: &gst::Buffer, size: usize) -> Option<Vec<u8>> {
    let map = buffer.map_readable().ok()?;
    map.as_slice().get(..size).map(<[u8]>::to_vec)
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

    #[test]
    fn packed_copy_takes_the_frame_bytes_or_nothing() {
        crate::init().unwrap();
        let buffer = gst::Buffer::from_slice((0..=255u8).collect::<Vec<_>>());
        assert_eq!(packed_copy(&buffer, 6), Some(vec![0, 1, 2, 3, 4, 5]));
        assert_eq!(packed_copy(&buffer, 256).map(|v| v.len()), Some(256));
        assert_eq!(packed_copy(&buffer, 257), None);
    }
}
