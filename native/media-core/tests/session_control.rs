//! MediaSession control over the real renderer and animator: interrupts, key frame requests,
//! face and motion changes, pacing, errors, re-entrant sinks and teardown.
mod common;

use std::sync::Arc;

use animation::{DrivingMotion, Viseme, VisemeEvent};
use common::*;
use media_core::{MediaError, MediaEvent, MediaSession, Outputs, Pacing};

const FRAME_NS: u64 = 40_000_000;

#[test]
fn interrupt_drops_speech_and_the_next_frame_is_idle() {
    let events = Collector::default();
    let outputs = Outputs {
        pcm: true,
        ..Outputs::default()
    };
    let session = start_manual(outputs, &events);
    // Syllables with an open vowel in the middle of every 250 ms: the mouth is open mid-speech.
    let speech = speech_like(24_000, 3.0);
    let vis: Vec<VisemeEvent> = (0..12u64)
        .map(|i| VisemeEvent::new(i * 250_000_000, (i + 1) * 250_000_000, Viseme::Open))
        .collect();
    session.push_audio(&speech, 24_000, &vis, None).unwrap();
    session.advance(25).unwrap();
    assert!(
        session.last_mouth_opening() > 0.05,
        "speaking: mouth open ({})",
        session.last_mouth_opening()
    );
    let r = session.interrupt().unwrap();
    assert_eq!(r.pts_ns, 1_000_000_000);
    assert_eq!(r.played_ns, 1_000_000_000);
    assert_eq!(r.dropped_ns, 2_000_000_000);
    assert_eq!(session.stats().audio_queued_ns, 0);
    session.advance(1).unwrap();
    assert_eq!(
        session.last_mouth_opening(),
        0.0,
        "the frame after interrupt is idle"
    );
    session.advance(4).unwrap();
    assert_eq!(session.last_mouth_opening(), 0.0);
    session.close().unwrap();
    let events = events.events();
    let tail: Vec<&MediaEvent> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                MediaEvent::SpeechStarted { .. }
                    | MediaEvent::SpeechEnded { .. }
                    | MediaEvent::Interrupted { .. }
            )
        })
        .collect();
    assert_eq!(
        tail,
        vec![
            &MediaEvent::SpeechStarted { pts_ns: 0 },
            &MediaEvent::SpeechEnded {
                pts_ns: 1_000_000_000
            },
            &MediaEvent::Interrupted {
                pts_ns: 1_000_000_000,
                played_ns: 1_000_000_000,
                dropped_ns: 2_000_000_000
            },
        ]
    );
    // No speech audio after the cut.
    let after: Vec<&MediaEvent> = events
        .iter()
        .filter(|e| matches!(e, MediaEvent::Pcm { pts_ns, .. } if *pts_ns >= 1_000_000_000))
        .collect();
    assert_eq!(after.len(), 5);
    assert!(after
        .iter()
        .all(|e| matches!(e, MediaEvent::Pcm { data, .. } if data.iter().all(|&b| b == 0))));
}

#[test]
fn request_keyframe_makes_the_next_frame_a_key_frame_on_every_video_output() {
    let events = Collector::default();
    let outputs = Outputs {
        h264: true,
        vp8: true,
        ..Outputs::default()
    };
    let session = start_manual(outputs, &events);
    session.advance(10).unwrap();
    session.request_keyframe();
    session.advance(5).unwrap();
    session.close().unwrap();
    let events = events.events();
    let h264_keys: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::H264 {
                pts_ns,
                keyframe: true,
                data,
            } => {
                assert!(
                    nal_units(data).iter().any(|n| n.0 == 7),
                    "key frames carry SPS"
                );
                Some(*pts_ns / FRAME_NS)
            }
            _ => None,
        })
        .collect();
    assert_eq!(h264_keys, vec![0, 10]);
    let mut vp8_keys: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Vp8Rtp {
                pts_ns,
                keyframe: true,
                ..
            } => Some(*pts_ns / FRAME_NS),
            _ => None,
        })
        .collect();
    vp8_keys.dedup();
    assert_eq!(vp8_keys, vec![0, 10]);
}

#[test]
fn close_is_idempotent_and_closed_is_the_last_event() {
    let events = Collector::default();
    let outputs = Outputs {
        h264: true,
        opus: true,
        ..Outputs::default()
    };
    let session = start_manual(outputs, &events);
    session.advance(3).unwrap();
    session.close().unwrap();
    session.close().unwrap();
    assert!(matches!(session.advance(1), Err(MediaError::Closed)));
    assert!(matches!(
        session.push_audio(&[0; 160], 16_000, &[], None),
        Err(MediaError::Closed)
    ));
    drop(session);
    let events = events.events();
    assert_eq!(events.last(), Some(&MediaEvent::Closed));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, MediaEvent::Closed))
            .count(),
        1
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, MediaEvent::H264 { .. }))
            .count(),
        3
    );
}

#[test]
fn a_session_dropped_without_close_drains_and_cleans_up() {
    let events = Collector::default();
    let outputs = Outputs {
        h264: true,
        jpeg: true,
        opus: true,
        ..Outputs::default()
    };
    let session = start_manual(outputs, &events);
    session.advance(4).unwrap();
    drop(session);
    let events = events.events();
    assert_eq!(events.last(), Some(&MediaEvent::Closed));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, MediaEvent::H264 { .. }))
            .count(),
        4
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, MediaEvent::Jpeg { .. }))
            .count(),
        4
    );
    // The sink (and everything it captured) is released: only our handle is left.
    assert_eq!(Arc::strong_count(&events_arc_probe()), 1);
}

/// A sink that holds an Arc: after the session is dropped, the session must have released it.
fn events_arc_probe() -> Arc<()> {
    let probe = Arc::new(());
    let held = probe.clone();
    let sink: media_core::EventSink = Arc::new(move |_| {
        let _ = &held;
    });
    let outputs = Outputs {
        opus: true,
        ..Outputs::default()
    };
    let session = MediaSession::start(
        manual_config(outputs),
        default_face(),
        DrivingMotion::rest(),
        sink,
    )
    .unwrap();
    session.advance(2).unwrap();
    drop(session);
    probe
}

#[test]
fn realtime_pacing_produces_frames_at_the_target_rate() {
    let events = Collector::default();
    let mut config = manual_config(Outputs {
        jpeg: true,
        pcm: true,
        ..Outputs::default()
    });
    config.pacing = Pacing::RealTime;
    let session =
        MediaSession::start(config, default_face(), DrivingMotion::rest(), events.sink()).unwrap();
    assert!(matches!(
        session.advance(1),
        Err(MediaError::InvalidState(_))
    ));
    // Wait on the clock: the session is paced by it.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let stats = session.stats();
    session.close().unwrap();
    // Never faster than the clock: at most 25 frames in 1 s (+1 for frame 0, due at once, +1
    // for the read racing the next tick). A loaded machine may render fewer, but then it counts
    // them late and still never skips a PTS.
    assert!(
        stats.frames_rendered <= 27,
        "frames {}",
        stats.frames_rendered
    );
    assert!(
        stats.frames_rendered >= 10,
        "frames {}",
        stats.frames_rendered
    );
    let indices: Vec<u64> = events
        .events()
        .iter()
        .filter_map(|e| {
            if let MediaEvent::Jpeg { frame_index, .. } = e {
                Some(*frame_index)
            } else {
                None
            }
        })
        .collect();
    assert!(indices.len() as u64 >= stats.frames_rendered);
    assert!(
        indices.iter().enumerate().all(|(i, &f)| f == i as u64),
        "consecutive frames, no PTS skipped"
    );
}

#[test]
fn a_pipeline_error_becomes_an_error_event_and_stops_the_session() {
    // A jpeg.pipeline that cannot negotiate with the session's I420 input.
    let dir = std::env::temp_dir().join(format!("media-core-bad-pipelines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("jpeg.pipeline"), "# broken on purpose\nappsrc name=src ! video/x-raw,format=RGB ! jpegenc ! appsink name=sink\n")
        .unwrap();
    let events = Collector::default();
    let mut config = manual_config(Outputs {
        jpeg: true,
        ..Outputs::default()
    });
    config.pipelines_dir = dir.clone();
    let session =
        MediaSession::start(config, default_face(), DrivingMotion::rest(), events.sink()).unwrap();
    session.advance(1).unwrap();
    // The error surfaces asynchronously on the pipeline's streaming thread.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while session.stats().pipeline_errors == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(session.stats().pipeline_errors >= 1);
    assert!(matches!(session.advance(1), Err(MediaError::Failed(_))));
    session.close().unwrap();
    let events = events.events();
    let error = events
        .iter()
        .find(|e| matches!(e, MediaEvent::Error { .. }))
        .expect("an Error event");
    match error {
        MediaEvent::Error { code, element, .. } => {
            assert_eq!(code, "PIPELINE_ERROR");
            assert!(element.is_some());
        }
        _ => unreachable!(),
    }
    assert_eq!(events.last(), Some(&MediaEvent::Closed));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn start_rejects_bad_config_and_missing_pipelines() {
    let sink: media_core::EventSink = Arc::new(|_| {});
    let mut config = manual_config(Outputs {
        h264: true,
        ..Outputs::default()
    });
    config.width = 511;
    let err = MediaSession::start(config, default_face(), DrivingMotion::rest(), sink.clone())
        .err()
        .unwrap();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
    let mut config = manual_config(Outputs {
        h264: true,
        ..Outputs::default()
    });
    config.pipelines_dir = "/nonexistent".into();
    let err = MediaSession::start(config, default_face(), DrivingMotion::rest(), sink.clone())
        .err()
        .unwrap();
    assert_eq!(err.code(), "PIPELINE_NOT_FOUND");
    let session = MediaSession::start(
        manual_config(Outputs::default()),
        default_face(),
        DrivingMotion::rest(),
        sink,
    )
    .unwrap();
    let err = session
        .push_audio(&[1, 2, 3], 96_000, &[], None)
        .unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
}

#[test]
fn a_sink_calling_back_into_the_session_is_refused_not_deadlocked() {
    use std::sync::{Mutex, OnceLock};
    let session_slot: Arc<OnceLock<Arc<MediaSession>>> = Arc::new(OnceLock::new());
    let results: Arc<Mutex<Vec<String>>> = Arc::default();
    let (slot, res) = (session_slot.clone(), results.clone());
    let sink: media_core::EventSink = Arc::new(move |e| {
        if let (MediaEvent::SpeechStarted { .. }, Some(s)) = (&e, slot.get()) {
            let _ = s.stats(); // lock-free
            let pushed = s.push_audio(&[0; 160], 16_000, &[], None);
            let interrupted = s.interrupt();
            let closed = s.close();
            let mut r = res.lock().unwrap();
            r.push(
                pushed
                    .err()
                    .map(|e| e.code().to_string())
                    .unwrap_or_default(),
            );
            r.push(
                interrupted
                    .err()
                    .map(|e| e.code().to_string())
                    .unwrap_or_default(),
            );
            r.push(
                closed
                    .err()
                    .map(|e| e.code().to_string())
                    .unwrap_or_default(),
            );
        }
    });
    let outputs = Outputs {
        pcm: true,
        ..Outputs::default()
    };
    let session = Arc::new(
        MediaSession::start(
            manual_config(outputs),
            default_face(),
            DrivingMotion::rest(),
            sink,
        )
        .unwrap(),
    );
    session_slot.set(session.clone()).ok().unwrap();
    session
        .push_audio(&speech_like(16_000, 0.2), 16_000, &[], None)
        .unwrap();
    session.advance(2).unwrap();
    assert_eq!(
        *results.lock().unwrap(),
        vec!["INVALID_STATE", "INVALID_STATE", "INVALID_STATE"]
    );
    session.close().unwrap();
}

#[test]
fn set_face_and_set_motion_apply_from_the_next_frame() {
    let events = Collector::default();
    let outputs = Outputs {
        jpeg: true,
        ..Outputs::default()
    };
    let session = start_manual(outputs, &events);
    session.advance(2).unwrap();
    // A nod: pitch swinging +-8 degrees at 25 fps.
    let flat: Vec<f32> = (0..50)
        .flat_map(|i| {
            let pitch = 8.0 * (i as f32 / 50.0 * std::f32::consts::TAU).sin();
            [pitch, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0, -1.0]
        })
        .collect();
    session
        .set_motion(DrivingMotion::from_flat(25.0, &flat).unwrap())
        .unwrap();
    session.set_face(default_face()).unwrap();
    session.advance(20).unwrap();
    session.close().unwrap();
    let jpegs: Vec<Vec<u8>> = events
        .events()
        .iter()
        .filter_map(|e| {
            if let MediaEvent::Jpeg { data, .. } = e {
                Some(data.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(jpegs.len(), 22);
    // The head moves once the new motion has faded in: later frames differ from the first.
    assert_ne!(jpegs[0], jpegs[21]);
    assert!(!events
        .events()
        .iter()
        .any(|e| matches!(e, MediaEvent::Error { .. })));
}
