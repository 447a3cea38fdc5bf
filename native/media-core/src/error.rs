//! The error every public call of this crate returns, with a stable string `code()` for the
//! binding (JS receives it as `err.code`). Module-level errors (`PipelineError`,
//! `ResampleError`) convert into it and keep their own message.
//!
//! Errors that happen while a session runs (GStreamer bus errors, a panic in the render thread,
//! a pipeline that does not drain at close) are not returned from calls: they arrive as
//! `MediaEvent::Error` with one of the codes listed in `events`.

use crate::pipeline::PipelineError;
use crate::resample::ResampleError;

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// gst::init failed (GStreamer missing or broken).
    #[error("GStreamer initialisation failed: {0}")]
    Init(String),
    /// A config value or call argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An output was requested whose encoder is not installed.
    #[error("encoder not available: {0}")]
    EncoderUnavailable(String),
    /// Loading, launching or draining a pipeline failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error(transparent)]
    Resample(#[from] ResampleError),
    /// The face rig or renderer could not be built.
    #[error("renderer: {0}")]
    Render(String),
    /// The call is not valid in the session's current state (e.g. `advance` under RealTime
    /// pacing, `close` from inside the event sink).
    #[error("invalid state: {0}")]
    InvalidState(String),
    /// The session was closed.
    #[error("session is closed")]
    Closed,
    /// The session stopped producing after an error (reported as `MediaEvent::Error`).
    #[error("session failed: {0}")]
    Failed(String),
    /// The render thread could not be started or is gone.
    #[error("render thread: {0}")]
    Thread(String),
}

impl MediaError {
    /// Stable UPPER_SNAKE code for the binding's error mapping.
    pub fn code(&self) -> &'static str {
        match self {
            MediaError::Init(_) => "GST_INIT_FAILED",
            MediaError::InvalidArgument(_) => "INVALID_ARGUMENT",
            MediaError::EncoderUnavailable(_) => "ENCODER_UNAVAILABLE",
            MediaError::Pipeline(e) => e.code(),
            MediaError::Resample(_) => "INVALID_ARGUMENT",
            MediaError::Render(_) => "RENDERER_FAILED",
            MediaError::InvalidState(_) => "INVALID_STATE",
            MediaError::Closed => "SESSION_CLOSED",
            MediaError::Failed(_) => "SESSION_FAILED",
            MediaError::Thread(_) => "THREAD_FAILED",
        }
    }
}
