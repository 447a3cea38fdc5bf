//! The pipeline files in `pipelines/`: they load, every placeholder is substituted, each has its
//! diagram, one `appsrc name=src` and one `appsink name=sink`, and each launches here (nvenc only
//! where nvh264enc exists). Encoder detection picks x264enc on a machine without NVENC.

mod common;

use common::pipelines_dir;
use gstreamer as gst;
use gstreamer::prelude::*;
use media_core::pipeline::{load_all, PIPELINE_NAMES, PLACEHOLDERS};
use media_core::{detect_encoders, PipelineVars};

fn vars() -> PipelineVars {
    PipelineVars {
        width: 640,
        height: 360,
        fps: 30,
        keyint: 60,
        jpeg_quality: 77,
        bitrate_kbps: 1234,
    }
}

#[test]
fn every_pipeline_file_loads_with_all_placeholders_substituted() {
    let loaded = load_all(&pipelines_dir(), &vars());
    for name in PIPELINE_NAMES {
        let desc = loaded[name]
            .as_ref()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            !desc.contains("${"),
            "{name}: unsubstituted placeholder in {desc}"
        );
        assert!(!desc.contains('#'), "{name}: comment left in {desc}");
        assert_eq!(desc.matches("appsrc name=src").count(), 1, "{name}");
        assert_eq!(desc.matches("appsink name=sink").count(), 1, "{name}");
        let raw =
            std::fs::read_to_string(pipelines_dir().join(format!("{name}.pipeline"))).unwrap();
        assert!(
            raw.lines().next().unwrap().starts_with('#'),
            "{name}: starts with its comment"
        );
        assert!(
            raw.lines()
                .take_while(|l| l.starts_with('#'))
                .any(|l| l.contains("-->")),
            "{name}: has a diagram"
        );
        if name != "opus" {
            assert!(
                desc.contains("width=640,height=360,framerate=30/1"),
                "{name}: {desc}"
            );
        }
    }
    // Every placeholder is used somewhere, with the right values.
    let all: String = PIPELINE_NAMES
        .iter()
        .map(|n| loaded[n].as_ref().unwrap().clone())
        .collect::<Vec<_>>()
        .join(" ");
    for p in PLACEHOLDERS {
        let raw: String = PIPELINE_NAMES
            .iter()
            .map(|n| {
                std::fs::read_to_string(pipelines_dir().join(format!("{n}.pipeline"))).unwrap()
            })
            .collect();
        assert!(raw.contains(&format!("${{{p}}}")), "placeholder {p} unused");
    }
    assert!(all.contains("key-int-max=60") && all.contains("keyframe-max-dist=60"));
    assert!(all.contains("quality=77"));
    assert!(all.contains("bitrate=1234 ") && all.contains("target-bitrate=1234000"));
}

#[test]
fn x264_pipeline_pins_i420_in_and_constrained_baseline_out() {
    let desc = load_all(&pipelines_dir(), &vars())
        .remove("h264-x264")
        .unwrap()
        .unwrap();
    let x264 = desc.find("x264enc").unwrap();
    assert!(desc[..x264].contains("video/x-raw,format=I420"));
    assert!(desc[x264..].contains("video/x-h264,profile=constrained-baseline"));
    for p in [
        "speed-preset=ultrafast",
        "tune=zerolatency",
        "bframes=0",
        "byte-stream=true",
        "alignment=au",
    ] {
        assert!(desc.contains(p), "{p}");
    }
}

#[test]
fn every_available_pipeline_launches() {
    media_core::init().unwrap();
    let loaded = load_all(&pipelines_dir(), &vars());
    for name in PIPELINE_NAMES {
        let desc = loaded[name].as_ref().unwrap();
        let result = gst::parse::launch_full(desc, None, gst::ParseFlags::FATAL_ERRORS);
        if name == "h264-nvenc" && gst::ElementFactory::find("nvh264enc").is_none() {
            assert!(result.is_err(), "nvh264enc is absent here");
            continue;
        }
        let pipeline = result
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .downcast::<gst::Pipeline>()
            .unwrap();
        assert!(
            pipeline
                .by_name("src")
                .is_some_and(|e| e.factory().unwrap().name() == "appsrc"),
            "{name}"
        );
        assert!(
            pipeline
                .by_name("sink")
                .is_some_and(|e| e.factory().unwrap().name() == "appsink"),
            "{name}"
        );
    }
}

#[test]
fn encoder_detection_picks_x264_without_nvenc() {
    let caps = detect_encoders();
    media_core::init().unwrap();
    if gst::ElementFactory::find("nvh264enc").is_none() {
        assert_eq!(caps.h264.as_deref(), Some("x264enc"));
        assert_eq!(caps.h264_pipeline(), Some("h264-x264"));
    }
    assert!(caps.vp8 && caps.opus && caps.jpeg);
    assert_eq!(detect_encoders(), caps, "cached");
}
