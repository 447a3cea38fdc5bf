//! Which encoders this machine has, decided at run time. H.264 prefers NVIDIA's `nvh264enc`,
//! but only when the element exists *and* a probe pipeline with it reaches PLAYING and encodes a
//! frame (the plugin can be installed on a machine with no usable GPU); otherwise `x264enc`.
//! The answer is probed once per process and cached.

use std::sync::OnceLock;
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;

/// How long the nvh264enc probe may take (CUDA context creation is slow on a cold GPU).
const NVENC_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Encoders available here. `h264` names the element the H.264 pipeline uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncoderCaps {
    /// `"nvh264enc"` or `"x264enc"`; None when neither is installed.
    pub h264: Option<String>,
    /// vp8enc and rtpvp8pay.
    pub vp8: bool,
    /// opusenc (and audioresample).
    pub opus: bool,
    /// jpegenc.
    pub jpeg: bool,
}

impl EncoderCaps {
    /// The pipeline file (without `.pipeline`) for H.264.
    pub fn h264_pipeline(&self) -> Option<&'static str> {
        match self.h264.as_deref() {
            Some("nvh264enc") => Some("h264-nvenc"),
            Some(_) => Some("h264-x264"),
            None => None,
        }
    }
}

fn has(name: &str) -> bool {
    gst::ElementFactory::find(name).is_some()
}

/// Probes the encoders (once; later calls return the cached answer). Initialises GStreamer if
/// needed; when that fails, nothing is available.
pub fn detect_encoders() -> EncoderCaps {
    static CAPS: OnceLock<EncoderCaps> = OnceLock::new();
    CAPS.get_or_init(|| {
        if crate::init().is_err() {
            return EncoderCaps {
                h264: None,
                vp8: false,
                opus: false,
                jpeg: false,
            };
        }
        let h264 = if has("nvh264enc") && nvenc_works() {
            Some("nvh264enc".to_string())
        } else if has("x264enc") {
            Some("x264enc".to_string())
        } else {
            None
        };
        EncoderCaps {
            h264,
            vp8: has("vp8enc") && has("rtpvp8pay"),
            opus: has("opusenc") && has("audioresample"),
            jpeg: has("jpegenc"),
        }
    })
    .clone()
}

/// Encodes one small frame with nvh264enc and waits for EOS: true only if that works.
fn nvenc_works() -> bool {
    let desc =
        "videotestsrc num-buffers=2 ! video/x-raw,format=I420,width=256,height=256,framerate=25/1 \
                ! nvh264enc ! video/x-h264,profile=constrained-baseline ! fakesink";
    let Ok(element) = gst::parse::launch_full(desc, None, gst::ParseFlags::FATAL_ERRORS) else {
        return false;
    };
    let Some(bus) = element.bus() else {
        return false;
    };
    if element.set_state(gst::State::Playing).is_err() {
        let _ = element.set_state(gst::State::Null);
        return false;
    }
    let ok = matches!(
        bus.timed_pop_filtered(
            gst::ClockTime::from_nseconds(NVENC_PROBE_TIMEOUT.as_nanos() as u64),
            &[gst::MessageType::Eos, gst::MessageType::Error]
        )
        .as_ref()
        .map(|m| m.type_()),
        Some(gst::MessageType::Eos)
    );
    let _ = element.set_state(gst::State::Null);
    ok
}
