//! The renderer seam: what the render loop asks of whatever makes the pixels.
//!
//! The render loop (`session::render_loop`) owns pacing, the playout queue, the buffer pool, the
//! encoders and the events; once per tick it hands a [`FrameProducer`] that tick's inputs
//! ([`Tick`]) and one I420 buffer of the session's size to fill, and gets back what it reports
//! about the frame ([`FrameInfo`]). A [`ProducerFactory`] builds the producer on the render
//! thread from the session's fixed [`FrameSpec`], a [`PreparedFace`] and a driving motion, and
//! prepares faces ([`FaceAsset`] → [`PreparedFace`]) on any thread beforehand.
//!
//! The CPU mesh-warp renderer (`face-render` + `animation`) is the first implementation,
//! [`cpu::CpuProducer`]; the loop names no type of it. A neural or GPU renderer is a second
//! implementation of the same two traits: its factory loads weights and prepares faces (say,
//! source features on the device) into its own `PreparedFace`; its producer keeps its device
//! state, runs on each `Tick` (the audio and visemes are there for an audio-driven model), and
//! supplies its own buffers through [`FrameProducer::buffer_pool`] (a pool over pinned host
//! memory, so the device-to-host copy of the I420 planes lands in the very buffer the encoders
//! read; no extra copy on the host).
//!
//! Invariants: `produce` is called exactly once per tick, in tick order, with pts strictly
//! increasing; the output is packed I420 (Y, then U, then V; no strides), BT.601 limited range
//! (the caps the encoders get say so), exactly `i420_size(width, height)` bytes; `control` is
//! applied between ticks, from the next frame on. A producer lives on the render thread only
//! (`Send`, `&mut self`); a panic in it is caught by the loop (`RENDER_PANIC`), an error stops
//! the session like a pipeline error (`RENDERER_FAILED`).

pub mod cpu;
pub mod renderers;

use std::any::Any;
use std::sync::Arc;

use gstreamer as gst;

pub use animation::motion::DrivingMotion;
pub use animation::timeline::{frame_pts_ns, ns_to_samples, samples_to_ns};
pub use animation::track::VisemeEvent;
pub use animation::viseme::{viseme_for_phoneme, Viseme};
pub use face_render::{i420_size, ClientFace, ClientOpening, RgbImage, BASE_ORDER};

/// What a session's producer is fixed to for its whole life.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameSpec {
    /// Frame size in pixels, even.
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    /// Seeds the producer's randomness (blinks, idle motion): same seed, same video.
    pub seed: u64,
    /// Supersampling divisor, 1..=4: above 1 the face may be drawn at 1/factor of the frame size
    /// and scaled up (cheaper, softer). A renderer that cannot do this ignores it.
    pub upsample_factor: f32,
    /// Whether anyone may take pixels: false when the face is drawn by the client from the
    /// motion stream (`Outputs::motion`, no video output), so a producer skips the drawing it
    /// can skip and reports the face's parameters only.
    pub pixels: bool,
}

/// The face one frame shows, as a renderer's input (the motion stream of a client-drawn face):
/// head pose in degrees (pitch: head down positive; yaw: toward the image's left; roll:
/// clockwise), translation as a fraction of the face width, scale 1 as photographed; the mouth
/// (`open` 0..1, `wide` -1 rounded..+1 spread, `press` 0..1 lips pressed, `tongue` 0 low..1 tip
/// raised); the eyes' openness (image left, right; 0 shut..1 as photographed); brows (-1 knit..+1
/// raised) and cheeks (0..1 raised); `listening` while the face listens to the user.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaceParams {
    pub pitch_deg: f32,
    pub yaw_deg: f32,
    pub roll_deg: f32,
    pub tx: f32,
    pub ty: f32,
    pub scale: f32,
    pub mouth_open: f32,
    pub mouth_wide: f32,
    pub mouth_press: f32,
    pub tongue: f32,
    pub eye_open: [f32; 2],
    pub brow: f32,
    pub cheek: f32,
    pub listening: bool,
}

/// One tick's inputs; borrowed for the one `produce` call.
#[derive(Clone, Copy, Debug)]
pub struct Tick<'a> {
    /// Frame index from 0.
    pub index: u64,
    /// The frame's session time and how long it shows, in ns.
    pub pts_ns: u64,
    pub duration_ns: u64,
    /// The session audio this frame shows (24 kHz mono, `SESSION_RATE_HZ`), silence when idle.
    /// Starts at the sample at `pts_ns`.
    pub audio: &'a [i16],
    /// Viseme timings queued since the last tick, in session time.
    pub new_visemes: &'a [VisemeEvent],
    /// Speech was interrupted at this session time: apply before anything else this tick.
    pub interrupt_at: Option<u64>,
}

/// What the loop learns about the frame just produced.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameInfo {
    /// Mouth opening of this frame, 0 (closed) ..= 1; `MediaSession::last_mouth_opening`.
    pub mouth_opening: f32,
    /// The face this frame shows, for the motion stream; None from a producer that cannot say.
    pub face: Option<FaceParams>,
}

/// A face made ready for one kind of producer (e.g. `face_render::FaceRig` for the CPU one),
/// shared: one prepared face can serve many sessions. The producer downcasts it; another
/// kind is `ProducerError::WrongFace`.
pub type PreparedFace = Arc<dyn Any + Send + Sync>;

/// A face as given, producer-neutral: an RGB photo and its face landmarks (MediaPipe's 478,
/// `[x, y, z]` in photo pixels).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaceAsset {
    pub width: u32,
    pub height: u32,
    /// `width * height * 3` bytes, RGB.
    pub rgb: Vec<u8>,
    pub landmarks: Vec<[f32; 3]>,
}

/// A change applied between ticks, from the next frame on.
pub enum Control {
    SetFace(PreparedFace),
    SetMotion(DrivingMotion),
    /// The user is speaking: the face listens; false settles back to idle.
    SetListening(bool),
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Control::SetFace(_) => f.write_str("SetFace(..)"),
            Control::SetMotion(_) => f.write_str("SetMotion(..)"),
            Control::SetListening(on) => write!(f, "SetListening({on})"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    /// The prepared face is for another kind of producer.
    #[error("the face was prepared for another renderer")]
    WrongFace,
    /// A face asset that cannot be used (size, landmarks).
    #[error("face: {0}")]
    InvalidFace(String),
    /// The spec asks for something this producer cannot do (size, fps).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The output buffer is not `i420_size(width, height)` bytes.
    #[error("output buffer is {got} bytes, the frame needs {want}")]
    BufferSize { got: usize, want: usize },
    #[error("{0}")]
    Failed(String),
}

/// Makes one session's frames, on the render thread.
pub trait FrameProducer: Send {
    /// Applies a change from the next frame on.
    fn control(&mut self, control: Control) -> Result<(), ProducerError>;

    /// Advances to `tick` and, when `out` is given, writes the frame into it (packed I420,
    /// BT.601 limited range, `i420_size(width, height)` bytes). `out` is None when nobody takes
    /// this frame's pixels (no video output and no I420 event): the producer still advances its
    /// state and reports `FrameInfo`, and may skip the pixel work it can skip.
    fn produce(&mut self, tick: &Tick, out: Option<&mut [u8]>) -> Result<FrameInfo, ProducerError>;

    /// Buffers for the video encoders: None (the default) lets the loop make an ordinary pool.
    /// A producer that owns its memory (pinned host memory a GPU copies into) returns a pool
    /// of buffers of at least `i420_size(width, height)` bytes, activated; the loop acquires
    /// from it, passes the mapped buffer to `produce`, and deactivates it at the end.
    fn buffer_pool(&self) -> Option<gst::BufferPool> {
        None
    }
}

/// Builds producers and prepares faces for them. Shared by the sessions that use it.
pub trait ProducerFactory: Send + Sync {
    /// Turns a face into what this factory's producers show. Heavy (ms to s): call it off the
    /// render thread, e.g. on a worker pool, and reuse the result.
    fn prepare_face(&self, face: FaceAsset) -> Result<PreparedFace, ProducerError>;

    /// A producer for one session, called on its render thread before the first tick.
    fn create(
        &self,
        spec: FrameSpec,
        face: PreparedFace,
        motion: DrivingMotion,
    ) -> Result<Box<dyn FrameProducer>, ProducerError>;
}

/// Checks that `out` is one frame of `spec`'s size.
pub fn check_frame_len(spec: &FrameSpec, out: &[u8]) -> Result<(), ProducerError> {
    let want = i420_size(spec.width, spec.height);
    if out.len() != want {
        return Err(ProducerError::BufferSize {
            got: out.len(),
            want,
        });
    }
    Ok(())
}
