//! Shared helpers for media-core's integration tests and examples: the standard test face (the
//! NASA astronaut photo and its landmarks fixture), an event collector, speech-like audio, and
//! GStreamer decoders that turn session outputs back into frames and samples.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use face_render::{FaceRig, RgbImage};
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use media_core::{EventSink, MediaEvent, MediaSession, Outputs, Pacing, SessionConfig};

/// Workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repo's `pipelines/`, or `$PIPELINES_DIR` when set (to try variants with the examples).
pub fn pipelines_dir() -> PathBuf {
    std::env::var_os("PIPELINES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("pipelines"))
}

/// The default face: `models/assets/faces/default.jpg` + `test/fixtures/faces/default.landmarks.json`.
pub fn default_face() -> Arc<FaceRig> {
    let root = workspace_root();
    let jpeg =
        std::fs::read(root.join("models/assets/faces/default.jpg")).expect("read default.jpg");
    let mut decoder = jpeg_decoder::Decoder::new(&jpeg[..]);
    let pixels = decoder.decode().expect("decode default.jpg");
    let info = decoder.info().expect("jpeg info");
    let rgb = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => pixels,
        jpeg_decoder::PixelFormat::L8 => pixels.iter().flat_map(|&l| [l, l, l]).collect(),
        other => panic!("unexpected pixel format {other:?}"),
    };
    let photo = RgbImage::from_raw(info.width as u32, info.height as u32, rgb).expect("photo size");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("test/fixtures/faces/default.landmarks.json"))
            .expect("read landmarks"),
    )
    .expect("parse landmarks");
    let landmarks: Vec<[f32; 3]> = json["landmarks"]
        .as_array()
        .expect("landmarks array")
        .iter()
        .map(|p| {
            let p = p.as_array().expect("point");
            [
                p[0].as_f64().unwrap() as f32,
                p[1].as_f64().unwrap() as f32,
                p[2].as_f64().unwrap() as f32,
            ]
        })
        .collect();
    Arc::new(FaceRig::new(photo, &landmarks).expect("face rig"))
}

/// A session config for tests: 512x512 at 25 fps, Manual pacing, the repo's pipelines.
pub fn manual_config(outputs: Outputs) -> SessionConfig {
    SessionConfig {
        width: 512,
        height: 512,
        fps: 25,
        outputs,
        jpeg_quality: 80,
        keyframe_interval_frames: 50,
        video_bitrate_kbps: 1000,
        pacing: Pacing::Manual,
        pipelines_dir: pipelines_dir(),
        seed: 7,
        ..SessionConfig::default()
    }
}

/// Collects every event in order.
#[derive(Clone, Default)]
pub struct Collector(pub Arc<Mutex<Vec<MediaEvent>>>);

impl Collector {
    pub fn sink(&self) -> EventSink {
        let events = self.0.clone();
        Arc::new(move |e| events.lock().unwrap().push(e))
    }

    pub fn events(&self) -> Vec<MediaEvent> {
        self.0.lock().unwrap().clone()
    }
}

/// Speech-like PCM16: a voiced source (f0 gliding 120..180 Hz, 12 harmonics with a formant-ish
/// tilt) under a 4 Hz syllable envelope, at `rate` Hz for `secs` seconds, peak about -6 dBFS.
pub fn speech_like(rate: u32, secs: f64) -> Vec<i16> {
    use std::f64::consts::PI;
    let n = (rate as f64 * secs) as usize;
    let mut phase = 0.0f64;
    (0..n)
        .map(|i| {
            let t = i as f64 / rate as f64;
            let f0 = 150.0 + 30.0 * (2.0 * PI * 0.7 * t).sin();
            phase += 2.0 * PI * f0 / rate as f64;
            let mut v = 0.0;
            for k in 1..=12 {
                let f = f0 * k as f64;
                if f > rate as f64 / 2.0 {
                    break;
                }
                let formant = 1.0 / (1.0 + ((f - 700.0) / 400.0).powi(2))
                    + 0.5 / (1.0 + ((f - 1800.0) / 500.0).powi(2));
                v += formant * (k as f64 * phase).sin() / k as f64;
            }
            let syllable = 0.5 - 0.5 * (2.0 * PI * 4.0 * t).cos();
            (v * syllable * 12_000.0).clamp(-32_000.0, 32_000.0) as i16
        })
        .collect()
}

/// One decoded video frame: running-time PTS and size.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub pts_ns: u64,
    pub width: i32,
    pub height: i32,
    pub data: Vec<u8>,
}

/// Pushes `buffers` (data, pts) through `gst-launch` description `desc` (which must have
/// `appsrc name=src` and `appsink name=sink`) and returns what comes out, with caps sizes.
pub fn run_decoder(desc: &str, src_caps: &str, buffers: &[(Vec<u8>, u64)]) -> Vec<Decoded> {
    gst::init().unwrap();
    let pipeline = gst::parse::launch(desc)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    let src = pipeline
        .by_name("src")
        .unwrap()
        .downcast::<gst_app::AppSrc>()
        .unwrap();
    let sink = pipeline
        .by_name("sink")
        .unwrap()
        .downcast::<gst_app::AppSink>()
        .unwrap();
    src.set_caps(Some(&src_caps.parse::<gst::Caps>().unwrap()));
    src.set_format(gst::Format::Time);
    sink.set_sync(false);
    let out = Arc::new(Mutex::new(Vec::new()));
    let o = out.clone();
    sink.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |s| {
                let sample = s.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                let caps = sample.caps().unwrap();
                let st = caps.structure(0).unwrap();
                let b = sample.buffer().unwrap();
                let map = b.map_readable().unwrap();
                o.lock().unwrap().push(Decoded {
                    pts_ns: b.pts().map(|p| p.nseconds()).unwrap_or(u64::MAX),
                    width: st.get::<i32>("width").unwrap_or(0),
                    height: st.get::<i32>("height").unwrap_or(0),
                    data: map.as_slice().to_vec(),
                });
                Ok(gst::FlowSuccess::Ok)
            })
            .build(),
    );
    pipeline.set_state(gst::State::Playing).unwrap();
    for (data, pts) in buffers {
        let mut b = gst::Buffer::from_slice(data.clone());
        b.get_mut()
            .unwrap()
            .set_pts(gst::ClockTime::from_nseconds(*pts));
        src.push_buffer(b).unwrap();
    }
    src.end_of_stream().unwrap();
    let bus = pipeline.bus().unwrap();
    let msg = bus
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(30),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("decoder finished");
    if let gst::MessageView::Error(e) = msg.view() {
        panic!("decoder error: {} ({:?})", e.error(), e.debug());
    }
    pipeline.set_state(gst::State::Null).unwrap();
    std::thread::sleep(Duration::from_millis(1));
    let v = out.lock().unwrap().clone();
    v
}

pub fn decode_h264(aus: &[(Vec<u8>, u64)]) -> Vec<Decoded> {
    run_decoder(
        "appsrc name=src ! h264parse ! openh264dec ! videoconvert ! video/x-raw,format=I420 ! appsink name=sink",
        "video/x-h264,stream-format=byte-stream,alignment=au",
        aus,
    )
}

pub fn decode_vp8_rtp(packets: &[(Vec<u8>, u64)]) -> Vec<Decoded> {
    run_decoder(
        "appsrc name=src ! rtpvp8depay ! vp8dec ! videoconvert ! video/x-raw,format=I420 ! appsink name=sink",
        "application/x-rtp,media=video,encoding-name=VP8,clock-rate=90000,payload=96",
        packets,
    )
}

pub fn decode_jpegs(jpegs: &[(Vec<u8>, u64)]) -> Vec<Decoded> {
    run_decoder(
        "appsrc name=src ! jpegdec ! videoconvert ! video/x-raw,format=I420 ! appsink name=sink",
        "image/jpeg,framerate=25/1",
        jpegs,
    )
}

/// Decodes raw Opus packets to S16LE mono 48 kHz; returns (pts, samples) per decoded buffer.
pub fn decode_opus(packets: &[(Vec<u8>, u64)]) -> Vec<(u64, Vec<i16>)> {
    run_decoder(
        "appsrc name=src ! opusdec ! audioconvert ! audio/x-raw,format=S16LE,channels=1,rate=48000 ! appsink name=sink",
        "audio/x-opus,channel-mapping-family=0,channels=1,rate=48000",
        packets,
    )
    .into_iter()
    .map(|d| (d.pts_ns, d.data.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect()))
    .collect()
}

/// NAL unit types of an Annex-B access unit, with their payload offsets.
pub fn nal_units(au: &[u8]) -> Vec<(u8, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < au.len() {
        if au[i] == 0 && au[i + 1] == 0 && au[i + 2] == 1 {
            out.push((au[i + 3] & 0x1f, i + 3));
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}

/// Process CPU time (user + system) in nanoseconds, via getrusage.
pub fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A gentle idle sway (yaw +-4 deg, pitch +-2 deg, roll +-1 deg, 4 s loop at 25 fps): makes the
/// renderer warp the whole head every frame, like a real driving motion.
pub fn sway_motion() -> animation::DrivingMotion {
    use std::f32::consts::TAU;
    let flat: Vec<f32> = (0..100)
        .flat_map(|i| {
            let t = i as f32 / 100.0;
            [
                2.0 * (TAU * t).sin(),
                4.0 * (TAU * t).cos(),
                (2.0 * TAU * t).sin(),
                0.0,
                0.0,
                1.0,
                -1.0,
                -1.0,
            ]
        })
        .collect();
    animation::DrivingMotion::from_flat(25.0, &flat).expect("valid motion")
}

/// A manually paced session over the astronaut face at rest, its events collected in `events`.
pub fn start_manual(outputs: Outputs, events: &Collector) -> MediaSession {
    MediaSession::start(
        manual_config(outputs),
        default_face(),
        animation::DrivingMotion::rest(),
        events.sink(),
    )
    .expect("session starts")
}
