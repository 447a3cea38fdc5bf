//! Pipelines as data: loads `<dir>/<name>.pipeline` (gst-launch syntax, `#` comment lines),
//! substitutes its `${PLACEHOLDER}`s, launches it with `gst::parse::launch`, and finds its one
//! `appsrc name=src` and one `appsink name=sink` by name.
//!
//! An `EncoderPipeline` is one launched output: the render thread pushes raw buffers into its
//! appsrc; its appsink's `new_sample` callback turns each encoded buffer into a `MediaEvent`
//! (on the GStreamer streaming thread, never blocking, never panicking); a bus sync handler turns
//! bus errors into `MediaEvent::Error`, marks the session failed, and records end of stream so
//! `finish` can wait for the drain without a bus thread or main loop.
//!
//! The files name only the topology; what the app side needs (appsrc caps, live mode, time
//! format, appsink sync=false) is set here, so the same files run under gst-launch-1.0 with test
//! sources (see pipelines/README.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use crate::events::{parse_vp8_rtp, Emitter, MediaEvent};
use crate::stats::Counters;

/// Every placeholder a pipeline file may use.
pub const PLACEHOLDERS: [&str; 6] = [
    "WIDTH",
    "HEIGHT",
    "FPS",
    "KEYINT",
    "JPEG_QUALITY",
    "BITRATE_KBPS",
];

/// Pipeline file names (without `.pipeline`) this crate loads.
pub const PIPELINE_NAMES: [&str; 5] = ["h264-x264", "h264-nvenc", "vp8", "opus", "jpeg"];

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("pipeline file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("pipeline {name}: unknown placeholder ${{{placeholder}}}")]
    UnknownPlaceholder { name: String, placeholder: String },
    #[error("pipeline {name}: unterminated placeholder")]
    UnterminatedPlaceholder { name: String },
    #[error("pipeline {name}: gst_parse_launch failed: {message}")]
    Parse { name: String, message: String },
    #[error("pipeline {name}: no element named {element} of type {expected}")]
    MissingElement {
        name: String,
        element: &'static str,
        expected: &'static str,
    },
    #[error("pipeline {name}: cannot set state {state}: {message}")]
    StateChange {
        name: String,
        state: &'static str,
        message: String,
    },
    #[error("pipeline {name}: end of stream not reached within {timeout_ms} ms")]
    DrainTimeout { name: String, timeout_ms: u64 },
}

impl PipelineError {
    pub fn code(&self) -> &'static str {
        match self {
            PipelineError::Read { .. } => "PIPELINE_NOT_FOUND",
            PipelineError::UnknownPlaceholder { .. }
            | PipelineError::UnterminatedPlaceholder { .. } => "PIPELINE_INVALID",
            PipelineError::Parse { .. } | PipelineError::MissingElement { .. } => {
                "PIPELINE_INVALID"
            }
            PipelineError::StateChange { .. } => "PIPELINE_START_FAILED",
            PipelineError::DrainTimeout { .. } => "DRAIN_TIMEOUT",
        }
    }
}

/// Values substituted into pipeline files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineVars {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub keyint: u32,
    pub jpeg_quality: u8,
    pub bitrate_kbps: u32,
}

impl PipelineVars {
    fn lookup(&self, key: &str) -> Option<String> {
        Some(match key {
            "WIDTH" => self.width.to_string(),
            "HEIGHT" => self.height.to_string(),
            "FPS" => self.fps.to_string(),
            "KEYINT" => self.keyint.to_string(),
            "JPEG_QUALITY" => self.jpeg_quality.to_string(),
            "BITRATE_KBPS" => self.bitrate_kbps.to_string(),
            _ => return None,
        })
    }
}

/// Reads `<dir>/<name>.pipeline`, drops `#` comment lines, joins the rest into one line and
/// substitutes every `${PLACEHOLDER}`. Fails on an unknown or unterminated placeholder, so the
/// result never contains `${`.
pub fn load_description(
    dir: &Path,
    name: &str,
    vars: &PipelineVars,
) -> Result<String, PipelineError> {
    let path = dir.join(format!("{name}.pipeline"));
    let text = std::fs::read_to_string(&path).map_err(|source| PipelineError::Read {
        path: path.clone(),
        source,
    })?;
    substitute(name, &text, vars)
}

fn substitute(name: &str, text: &str, vars: &PipelineVars) -> Result<String, PipelineError> {
    let body: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let joined = body.join(" ");
    let mut out = String::with_capacity(joined.len());
    let mut rest = joined.as_str();
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| PipelineError::UnterminatedPlaceholder {
                name: name.to_string(),
            })?;
        let key = &after[..end];
        let value = vars
            .lookup(key)
            .ok_or_else(|| PipelineError::UnknownPlaceholder {
                name: name.to_string(),
                placeholder: key.to_string(),
            })?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Which output a pipeline produces; decides how samples become events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutputKind {
    H264,
    Vp8,
    Jpeg,
    Opus,
}

/// Everything `EncoderPipeline::launch` needs.
pub(crate) struct LaunchSpec<'a> {
    pub kind: OutputKind,
    pub file: &'a str,
    pub dir: &'a Path,
    pub vars: &'a PipelineVars,
    /// Caps of what the session pushes into appsrc.
    pub src_caps: gst::Caps,
    /// RealTime pacing: drop (and count) a buffer when appsrc already holds this much; None:
    /// unbounded (Manual pacing, where the caller decides how much to push).
    pub max_queued_ns: Option<u64>,
    pub emitter: Arc<Emitter>,
    pub counters: Arc<Counters>,
}

/// End-of-stream bookkeeping shared with the bus sync handler.
#[derive(Default)]
struct DrainState {
    /// (eos seen, error seen)
    flags: Mutex<(bool, bool)>,
    cond: Condvar,
}

/// One launched output pipeline. Dropping it sets it to NULL.
pub(crate) struct EncoderPipeline {
    pub kind: OutputKind,
    name: String,
    pipeline: gst::Pipeline,
    appsrc: gst_app::AppSrc,
    drain: Arc<DrainState>,
    max_queued_ns: Option<u64>,
    counters: Arc<Counters>,
}

impl EncoderPipeline {
    /// Loads, launches and starts (PLAYING) one pipeline. Its outputs go to the emitter.
    pub(crate) fn launch(spec: LaunchSpec<'_>) -> Result<EncoderPipeline, PipelineError> {
        let name = spec.file.to_string();
        let description = load_description(spec.dir, spec.file, spec.vars)?;
        let element = gst::parse::launch_full(&description, None, gst::ParseFlags::FATAL_ERRORS)
            .map_err(|e| PipelineError::Parse {
                name: name.clone(),
                message: e.to_string(),
            })?;
        let pipeline = element
            .downcast::<gst::Pipeline>()
            .map_err(|_| PipelineError::Parse {
                name: name.clone(),
                message: "not a pipeline (single element?)".into(),
            })?;
        let appsrc = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or_else(|| PipelineError::MissingElement {
                name: name.clone(),
                element: "src",
                expected: "appsrc",
            })?;
        let appsink = pipeline
            .by_name("sink")
            .and_then(|e| e.downcast::<gst_app::AppSink>().ok())
            .ok_or_else(|| PipelineError::MissingElement {
                name: name.clone(),
                element: "sink",
                expected: "appsink",
            })?;

        // The live-appsrc recipe (gstreamer-utils StreamProducer::configure_consumer_with): time
        // format, live, our own timestamps, no blocking push, no automatic EOS.
        appsrc.set_caps(Some(&spec.src_caps));
        appsrc.set_format(gst::Format::Time);
        appsrc.set_is_live(true);
        appsrc.set_do_timestamp(false);
        appsrc.set_block(false);
        appsrc.set_stream_type(gst_app::AppStreamType::Stream);
        appsrc.set_automatic_eos(false);
        // We bound the queue ourselves (and count what we drop), so appsrc's own limits are off.
        appsrc.set_max_bytes(0);
        appsrc.set_max_buffers(0);
        appsrc.set_max_time(gst::ClockTime::ZERO);

        appsink.set_sync(false);
        appsink.set_property("enable-last-sample", false);
        appsink.set_max_buffers(0);
        appsink.set_drop(false);
        let mut convert = Converter::new(spec.kind, spec.vars.fps);
        let emitter = spec.emitter.clone();
        appsink.set_callbacks(
            gst_app::AppSinkCallbacks::builder()
                .new_sample(move |sink| {
                    let sample = sink.pull_sample().map_err(|_| gst::FlowError::Flushing)?;
                    match convert.convert(&sample) {
                        Ok(event) => {
                            emitter.emit(event);
                            Ok(gst::FlowSuccess::Ok)
                        }
                        Err(why) => {
                            // House style: post to the bus and return an error, never panic.
                            gst::element_error!(
                                sink,
                                gst::StreamError::Format,
                                ("cannot convert output: {}", why)
                            );
                            Err(gst::FlowError::Error)
                        }
                    }
                })
                .build(),
        );

        let drain = Arc::new(DrainState::default());
        let bus = pipeline.bus().ok_or_else(|| PipelineError::Parse {
            name: name.clone(),
            message: "pipeline has no bus".into(),
        })?;
        {
            let drain = drain.clone();
            let emitter = spec.emitter.clone();
            let counters = spec.counters.clone();
            // Runs on whatever thread posts the message; only flags, counters and a non-blocking sink call.
            bus.set_sync_handler(move |_, msg| {
                match msg.view() {
                    gst::MessageView::Eos(_) => {
                        if let Ok(mut f) = drain.flags.lock() {
                            f.0 = true;
                        }
                        drain.cond.notify_all();
                    }
                    gst::MessageView::Error(err) => {
                        counters.pipeline_errors.fetch_add(1, Ordering::Relaxed);
                        counters.failed.store(true, Ordering::Release);
                        if let Ok(mut f) = drain.flags.lock() {
                            f.1 = true;
                        }
                        drain.cond.notify_all();
                        emitter.emit(MediaEvent::Error {
                            code: "PIPELINE_ERROR".into(),
                            message: err.error().to_string(),
                            element: msg.src().map(|s| s.path_string().to_string()),
                            debug: err.debug().map(|d| d.to_string()),
                        });
                    }
                    _ => {}
                }
                gst::BusSyncReply::Drop
            });
        }

        let this = EncoderPipeline {
            kind: spec.kind,
            name,
            pipeline,
            appsrc,
            drain,
            max_queued_ns: spec.max_queued_ns,
            counters: spec.counters,
        };
        this.pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| PipelineError::StateChange {
                name: this.name.clone(),
                state: "PLAYING",
                message: e.to_string(),
            })?;
        Ok(this)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Pushes one buffer (PTS and duration set). Returns false when it was dropped (queue over
    /// its bound, or the pipeline is stopping); drops are counted in `dropped_buffers`.
    pub(crate) fn push(&self, buffer: gst::Buffer) -> bool {
        if let Some(limit) = self.max_queued_ns {
            if self.appsrc.current_level_time().nseconds() >= limit {
                self.counters
                    .dropped_buffers
                    .fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        match self.appsrc.push_buffer(buffer) {
            Ok(_) => true,
            Err(_) => {
                self.counters
                    .dropped_buffers
                    .fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Asks the encoder to make the next pushed frame a key frame (with SPS/PPS for H.264): a
    /// downstream force-key-unit event, serialized with the buffers in appsrc's queue.
    pub(crate) fn force_key_unit(&self) -> bool {
        let event = gstreamer_video::DownstreamForceKeyUnitEvent::builder()
            .all_headers(true)
            .build();
        self.appsrc.send_event(event)
    }

    /// Changes the video encoder's target bitrate while it runs (the call's receiver reported a
    /// narrower link): the first element of the pipeline that is a video encoder gets `bitrate`
    /// in kbit/s (x264enc, nvh264enc) or, lacking that, `target-bitrate` in bit/s (vp8enc). Both
    /// are mutable in PLAYING; the encoders apply them from their next frame. False when the
    /// pipeline has no such element or property (the pipeline file names another encoder).
    pub(crate) fn set_bitrate_kbps(&self, kbps: u32) -> bool {
        let mut elements = self.pipeline.iterate_elements();
        while let Ok(Some(element)) = elements.next() {
            let is_encoder = element
                .factory()
                .map(|f| f.klass().contains("Encoder/Video"))
                .unwrap_or(false);
            if !is_encoder {
                continue;
            }
            if let Some(pspec) = element.find_property("bitrate") {
                if pspec.value_type() == u32::static_type() {
                    element.set_property("bitrate", kbps);
                    return true;
                }
            }
            if let Some(pspec) = element.find_property("target-bitrate") {
                let bps = kbps.saturating_mul(1000);
                if pspec.value_type() == i32::static_type() {
                    element.set_property("target-bitrate", i32::try_from(bps).unwrap_or(i32::MAX));
                    return true;
                }
                if pspec.value_type() == u32::static_type() {
                    element.set_property("target-bitrate", bps);
                    return true;
                }
            }
            return false;
        }
        false
    }

    /// Sends end of stream and waits up to `timeout` until every output has been delivered
    /// (EOS reached the sink), then sets the pipeline to NULL. A pipeline that already failed
    /// is not waited for.
    pub(crate) fn finish(&self, timeout: Duration) -> Result<(), PipelineError> {
        let _ = self.appsrc.end_of_stream();
        let result = self.wait_drained(timeout);
        self.stop();
        result
    }

    fn wait_drained(&self, timeout: Duration) -> Result<(), PipelineError> {
        let Ok(guard) = self.drain.flags.lock() else {
            return Ok(());
        };
        match self
            .drain
            .cond
            .wait_timeout_while(guard, timeout, |f| !f.0 && !f.1)
        {
            Ok((flags, _)) if flags.0 || flags.1 => Ok(()),
            Ok(_) => Err(PipelineError::DrainTimeout {
                name: self.name.clone(),
                timeout_ms: timeout.as_millis() as u64,
            }),
            Err(_) => Ok(()),
        }
    }

    /// Stops at once (NULL), dropping whatever was queued.
    pub(crate) fn stop(&self) {
        let _ = self.pipeline.set_state(gst::State::Null);
        if let Some(bus) = self.pipeline.bus() {
            bus.unset_sync_handler();
        }
    }
}

impl Drop for EncoderPipeline {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Turns encoded samples into events; per-pipeline state (VP8: is the current frame a key
/// frame; Opus: where the next packet starts).
struct Converter {
    kind: OutputKind,
    fps: u32,
    vp8_key_frame: bool,
    opus_next_pts: Option<u64>,
}

impl Converter {
    fn new(kind: OutputKind, fps: u32) -> Converter {
        Converter {
            kind,
            fps,
            vp8_key_frame: false,
            opus_next_pts: None,
        }
    }

    fn convert(&mut self, sample: &gst::Sample) -> Result<MediaEvent, &'static str> {
        let buffer = sample.buffer().ok_or("sample without buffer")?;
        let pts = buffer.pts().ok_or("buffer without PTS")?;
        // Session time is running time: encoders may shift PTS and segment together (x264enc
        // adds 1000 h so that DTS never goes negative), running time stays what we pushed.
        let pts_ns = sample
            .segment()
            .and_then(|s| s.downcast_ref::<gst::ClockTime>())
            .and_then(|s| s.to_running_time(pts))
            .unwrap_or(pts)
            .nseconds();
        let map = buffer.map_readable().map_err(|_| "buffer not readable")?;
        let data = map.as_slice().to_vec();
        Ok(match self.kind {
            OutputKind::H264 => MediaEvent::H264 {
                data,
                pts_ns,
                keyframe: !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
            },
            OutputKind::Vp8 => {
                let (marker, start) = parse_vp8_rtp(&data).ok_or("malformed VP8 RTP packet")?;
                if let Some(key) = start {
                    self.vp8_key_frame = key;
                }
                MediaEvent::Vp8Rtp {
                    data,
                    pts_ns,
                    keyframe: self.vp8_key_frame,
                    marker,
                }
            }
            OutputKind::Jpeg => MediaEvent::Jpeg {
                data,
                pts_ns,
                frame_index: animation::timeline::frame_index_at(pts_ns, self.fps, 1),
            },
            OutputKind::Opus => {
                let gst_duration = buffer.duration().map(|d| d.nseconds());
                let duration_ns = opus_packet_duration_ns(&data)
                    .or(gst_duration)
                    .ok_or("Opus packet without duration")?;
                let gst_end = pts_ns + gst_duration.unwrap_or(duration_ns);
                // GStreamer trims the encoder's lookahead (6.5 ms) off the first packet and shifts
                // the rest by it; a transport wants whole packets back to back (RTP timestamps
                // advancing by each packet's sample count). So packets follow each other from the
                // first one's PTS, re-anchored only if GStreamer's timeline jumps by more than a
                // packet (a gap in the input). The first packet is anchored at its end.
                let pts_ns = match self.opus_next_pts {
                    Some(next) if next.abs_diff(pts_ns) < duration_ns => next,
                    _ => gst_end.saturating_sub(duration_ns),
                };
                self.opus_next_pts = Some(pts_ns + duration_ns);
                MediaEvent::Opus {
                    data,
                    pts_ns,
                    duration_ns,
                }
            }
        })
    }
}

/// Decoded duration of an Opus packet from its TOC byte (RFC 6716 section 3.1): frame size from
/// the configuration number times the frame count from the code. None for an empty or
/// malformed packet.
pub(crate) fn opus_packet_duration_ns(packet: &[u8]) -> Option<u64> {
    let toc = *packet.first()?;
    let config = toc >> 3;
    // Frame size in units of 0.5 ms... expressed in ns directly.
    let frame_ns: u64 = match config {
        0..=11 => [10_000_000, 20_000_000, 40_000_000, 60_000_000][(config % 4) as usize], // SILK
        12..=15 => [10_000_000, 20_000_000][(config % 2) as usize],                        // Hybrid
        _ => [2_500_000, 5_000_000, 10_000_000, 20_000_000][(config % 4) as usize],        // CELT
    };
    let frames: u64 = match toc & 0x03 {
        0 => 1,
        1 | 2 => 2,
        _ => (*packet.get(1)? & 0x3f) as u64,
    };
    (frames > 0).then_some(frame_ns * frames)
}

/// Substitution results for all files in `dir`, for diagnostics and tests.
pub fn load_all(
    dir: &Path,
    vars: &PipelineVars,
) -> HashMap<&'static str, Result<String, PipelineError>> {
    PIPELINE_NAMES
        .iter()
        .map(|&n| (n, load_description(dir, n, vars)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> PipelineVars {
        PipelineVars {
            width: 512,
            height: 384,
            fps: 25,
            keyint: 50,
            jpeg_quality: 80,
            bitrate_kbps: 900,
        }
    }

    #[test]
    fn substitutes_and_strips_comments() {
        let text = "# diagram\n#  src -> sink\nappsrc name=src ! video/x-raw,width=${WIDTH},height=${HEIGHT}\n  ! fakesink bitrate=${BITRATE_KBPS}000\n";
        let s = substitute("t", text, &vars()).unwrap();
        assert_eq!(
            s,
            "appsrc name=src ! video/x-raw,width=512,height=384 ! fakesink bitrate=900000"
        );
    }

    #[test]
    fn opus_toc_durations() {
        // CELT fullband 20 ms, one frame; SILK 60 ms; code 3 with 3 CELT 10 ms frames.
        assert_eq!(opus_packet_duration_ns(&[0xf8, 0]), Some(20_000_000));
        assert_eq!(opus_packet_duration_ns(&[0x18]), Some(60_000_000));
        assert_eq!(
            opus_packet_duration_ns(&[0xf2 | 0x03, 0x03]),
            Some(30_000_000)
        );
        assert_eq!(opus_packet_duration_ns(&[]), None);
    }

    #[test]
    fn rejects_unknown_and_unterminated_placeholders() {
        assert!(matches!(
            substitute("t", "a ${NOPE} b", &vars()),
            Err(PipelineError::UnknownPlaceholder { placeholder, .. }) if placeholder == "NOPE"
        ));
        assert!(matches!(
            substitute("t", "a ${WIDTH", &vars()),
            Err(PipelineError::UnterminatedPlaceholder { .. })
        ));
    }
}
