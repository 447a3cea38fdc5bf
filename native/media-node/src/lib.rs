//! N-API binding of media-core, exported to JavaScript as `native/media-node/index.js`
//! (generated, with `index.d.ts`, by `npm run build:native`; never edit them by hand).
//!
//! Thin by design: this crate converts arguments, results, events and errors, and nothing else.
//! Media logic lives in `media-core`; the TypeScript facade over this binding is `src/media/`,
//! the only code that loads it.
//!
//! Exports: `MediaSession` and `startMediaSession` (session.rs), `MediaEvent` objects through one
//! threadsafe function per session (events.rs), `prepareFace` / `PreparedFace` (face.rs),
//! `detectEncoders`, `gstreamerVersion`, `OpusDecoder` (opus.rs). Error codes: error.rs. Argument
//! checks: convert.rs.

// The exports are reached through napi-rs's module registration, which the unit-test build
// leaves out: without this, `cargo test` reports every free exported function as dead code.
#![cfg_attr(test, allow(dead_code))]

mod asr;
mod convert;
mod error;
mod events;
mod face;
mod opus;
mod session;
mod speech;

use napi::Result;
use napi_derive::napi;

use crate::error::{guard, js_error, ErrorCode};

/// Which encoders this machine's GStreamer offers.
#[napi(object, object_from_js = false)]
pub struct EncoderCaps {
    /// The H.264 encoder element that sessions will use (e.g. "x264enc", "nvh264enc"), if any.
    pub h264: Option<String>,
    pub vp8: bool,
    pub opus: bool,
    pub jpeg: bool,
}

/// Probes GStreamer's registry for the encoders the pipelines need.
#[napi]
pub fn detect_encoders() -> Result<EncoderCaps, ErrorCode> {
    guard("detectEncoders()", || {
        media_core::init().map_err(media_error)?;
        let caps = media_core::detect_encoders();
        Ok(EncoderCaps {
            h264: caps.h264,
            vp8: caps.vp8,
            opus: caps.opus,
            jpeg: caps.jpeg,
        })
    })
}

/// The GStreamer runtime version, e.g. "GStreamer 1.22.0".
#[napi]
pub fn gstreamer_version() -> Result<String, ErrorCode> {
    guard("gstreamerVersion()", || {
        media_core::init().map_err(media_error)?;
        Ok(gstreamer::version_string().to_string())
    })
}

/// media-core errors keep media-core's own stable code (`MediaError::code()`: INVALID_ARGUMENT,
/// SESSION_CLOSED, ENCODER_UNAVAILABLE, PIPELINE_NOT_FOUND, ...).
pub(crate) fn media_error(err: media_core::MediaError) -> napi::Error<ErrorCode> {
    js_error(ErrorCode::custom(err.code()), err.to_string())
}
