//! A second frame producer plugs into a real `MediaSession` through media-core's public API
//! alone (`MediaSession::start_with`, `frames`): no face-render or animation type, nothing in
//! media-node, TypeScript or the store.
//!
//! `Level` paints a solid frame whose luma follows the tick's audio (16 + peak * 219 / 32767,
//! BT.601 limited range) and whose chroma is its prepared face (`Tint`, from the photo's mean
//! colour); it logs every `Control` and `Tick` it gets. The tests check that its pixels are what
//! comes out (I420 events, decodable H.264), that the tick carries the audio the `Pcm` event of
//! the same frame carries, the visemes pushed and the interrupt, that controls reach it between
//! ticks, and that a face prepared for another renderer is refused.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use media_core::frames::{
    check_frame_len, Control, DrivingMotion, FaceAsset, FrameInfo, FrameProducer, FrameSpec,
    PreparedFace, ProducerError, ProducerFactory, Tick, Viseme, VisemeEvent,
};
use media_core::{EventSink, MediaError, MediaEvent, MediaSession, Outputs, Pacing, SessionConfig};

const W: u32 = 64;
const H: u32 = 48;

/// The prepared face of `Level`: the chroma of every frame.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Tint {
    u: u8,
    v: u8,
}

/// What the producer saw, in order.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// The factory built the producer, for a spec with this upsample factor.
    Created { upsample_factor: f32 },
    Listening(bool),
    Face(Tint),
    Motion,
    Tick {
        index: u64,
        pts_ns: u64,
        samples: usize,
        visemes: usize,
        interrupt_at: Option<u64>,
        luma: u8,
    },
}

type Log = Arc<Mutex<Vec<Seen>>>;

struct Level {
    spec: FrameSpec,
    tint: Tint,
    log: Log,
}

fn luma_of(audio: &[i16]) -> u8 {
    let peak = audio
        .iter()
        .map(|s| s.unsigned_abs() as u32)
        .max()
        .unwrap_or(0)
        .min(32767);
    (16 + peak * 219 / 32767) as u8
}

fn tint_of(face: PreparedFace) -> Result<Tint, ProducerError> {
    face.downcast::<Tint>()
        .map(|t| *t)
        .map_err(|_| ProducerError::WrongFace)
}

impl FrameProducer for Level {
    fn control(&mut self, control: Control) -> Result<(), ProducerError> {
        let seen = match control {
            Control::SetListening(on) => Seen::Listening(on),
            Control::SetMotion(_) => Seen::Motion,
            Control::SetFace(face) => {
                self.tint = tint_of(face)?;
                Seen::Face(self.tint)
            }
        };
        self.log.lock().unwrap().push(seen);
        Ok(())
    }

    fn produce(&mut self, tick: &Tick, out: Option<&mut [u8]>) -> Result<FrameInfo, ProducerError> {
        let luma = luma_of(tick.audio);
        self.log.lock().unwrap().push(Seen::Tick {
            index: tick.index,
            pts_ns: tick.pts_ns,
            samples: tick.audio.len(),
            visemes: tick.new_visemes.len(),
            interrupt_at: tick.interrupt_at,
            luma,
        });
        if let Some(out) = out {
            check_frame_len(&self.spec, out)?;
            let y_len = (self.spec.width * self.spec.height) as usize;
            let c_len = y_len / 4;
            out[..y_len].fill(luma);
            out[y_len..y_len + c_len].fill(self.tint.u);
            out[y_len + c_len..].fill(self.tint.v);
        }
        Ok(FrameInfo {
            mouth_opening: (luma - 16) as f32 / 219.0,
            face: None,
        })
    }
}

struct LevelFactory {
    log: Log,
}

impl ProducerFactory for LevelFactory {
    /// The mean colour of the photo as BT.601 chroma (landmarks are not needed).
    fn prepare_face(&self, face: FaceAsset) -> Result<PreparedFace, ProducerError> {
        let n = (face.width * face.height) as usize;
        if n == 0 || face.rgb.len() != n * 3 {
            return Err(ProducerError::InvalidFace("pixel buffer length".into()));
        }
        let mean = |c: usize| {
            face.rgb
                .iter()
                .skip(c)
                .step_by(3)
                .map(|&v| v as f32)
                .sum::<f32>()
                / n as f32
        };
        let (r, g, b) = (mean(0), mean(1), mean(2));
        let u = 128.0 - 0.148 * r - 0.291 * g + 0.439 * b;
        let v = 128.0 + 0.439 * r - 0.368 * g - 0.071 * b;
        Ok(Arc::new(Tint {
            u: u.round() as u8,
            v: v.round() as u8,
        }))
    }

    fn create(
        &self,
        spec: FrameSpec,
        face: PreparedFace,
        _motion: DrivingMotion,
    ) -> Result<Box<dyn FrameProducer>, ProducerError> {
        let upsample_factor = spec.upsample_factor;
        self.log.lock().unwrap().push(Seen::Created { upsample_factor });
        Ok(Box::new(Level {
            spec,
            tint: tint_of(face)?,
            log: self.log.clone(),
        }))
    }
}

fn config(outputs: Outputs) -> SessionConfig {
    SessionConfig {
        width: W,
        height: H,
        fps: 25,
        outputs,
        pacing: Pacing::Manual,
        pipelines_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines"),
        ..SessionConfig::default()
    }
}

fn photo(rgb: [u8; 3]) -> FaceAsset {
    FaceAsset {
        width: 4,
        height: 4,
        rgb: rgb.repeat(16),
        landmarks: Vec::new(),
    }
}

fn collector() -> (Arc<Mutex<Vec<MediaEvent>>>, EventSink) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    (
        events,
        Arc::new(move |e| sink_events.lock().unwrap().push(e)),
    )
}

/// The I420 events so far as (frame index, pts, Y, U, V of the first pixel; whether each
/// plane is uniform).
fn frames(events: &[MediaEvent]) -> Vec<(u64, u64, u8, u8, u8, bool)> {
    let y_len = (W * H) as usize;
    let c_len = y_len / 4;
    let mut frames = Vec::new();
    for e in events {
        // (width and height are the loop's, checked in session_outputs.rs)
        let MediaEvent::I420 {
            data,
            pts_ns,
            frame_index,
            ..
        } = e
        else {
            continue;
        };
        assert_eq!(data.len(), y_len * 3 / 2);
        let (y, u, v) = (data[0], data[y_len], data[y_len + c_len]);
        let uniform = data[..y_len].iter().all(|&p| p == y)
            && data[y_len..y_len + c_len].iter().all(|&p| p == u)
            && data[y_len + c_len..].iter().all(|&p| p == v);
        frames.push((*frame_index, *pts_ns, y, u, v, uniform));
    }
    frames
}

fn ticks(log: &Log) -> Vec<Seen> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|s| matches!(s, Seen::Tick { .. }))
        .cloned()
        .collect()
}

#[test]
fn a_second_producer_drives_a_real_session() {
    let log = Log::default();
    let factory = Arc::new(LevelFactory { log: log.clone() });
    let red = factory.prepare_face(photo([200, 30, 30])).unwrap();
    let blue = factory.prepare_face(photo([30, 30, 200])).unwrap();
    let (red_tint, blue_tint) = (
        *red.clone().downcast::<Tint>().unwrap(),
        *blue.clone().downcast::<Tint>().unwrap(),
    );
    assert_ne!(red_tint, blue_tint);
    let (events, sink) = collector();
    let outputs = Outputs {
        i420: true,
        h264: true,
        pcm: true,
        ..Outputs::default()
    };
    let session =
        MediaSession::start_with(config(outputs), factory, red, DrivingMotion::rest(), sink)
            .unwrap();

    // Five idle frames: black (Y 16) in the face's tint, frame i at i * 40 ms.
    session.advance(5).unwrap();
    let got = frames(&events.lock().unwrap());
    assert_eq!(got.len(), 5);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(
            *f,
            (
                i as u64,
                i as u64 * 40_000_000,
                16,
                red_tint.u,
                red_tint.v,
                true
            )
        );
    }

    // Speech at 24 kHz with visemes: the next frames are as bright as their tick's audio, the
    // audio the Pcm event of the same pts carries.
    let speech: Vec<i16> = (0..9_600).map(|i| ((i % 48) as i16 - 24) * 1_000).collect();
    let visemes = [VisemeEvent::new(0, 200_000_000, Viseme::Open)];
    session.push_audio(&speech, 24_000, &visemes, None).unwrap();
    session.set_listening(true).unwrap();
    session.advance(3).unwrap();
    {
        let events = events.lock().unwrap();
        let got = frames(&events);
        for f in &got[5..8] {
            let pcm: Vec<i16> = events
                .iter()
                .find_map(|e| match e {
                    MediaEvent::Pcm { data, pts_ns } if *pts_ns == f.1 => Some(
                        data.chunks_exact(2)
                            .map(|b| i16::from_le_bytes([b[0], b[1]]))
                            .collect(),
                    ),
                    _ => None,
                })
                .expect("a Pcm event with the frame's pts");
            assert!(f.2 > 16, "speech brightens the frame: {f:?}");
            assert_eq!(f.2, luma_of(&pcm), "frame {} follows its tick's audio", f.0);
            assert!(f.5);
        }
    }
    let seen = log.lock().unwrap().clone();
    let listening_at = seen
        .iter()
        .position(|s| *s == Seen::Listening(true))
        .expect("listening reached the producer");
    assert!(
        matches!(
            seen[listening_at + 1],
            Seen::Tick {
                index: 5,
                visemes: 1,
                samples: 960,
                ..
            }
        ),
        "applied before frame 5, which carries the visemes and 40 ms of audio: {:?}",
        &seen[listening_at..]
    );

    // An interrupt reaches the next tick, which is silent again; a new face shows from the
    // next frame on.
    let cut = session.interrupt().unwrap();
    session.set_face(blue).unwrap();
    session.advance(1).unwrap();
    let last = ticks(&log).pop().unwrap();
    assert!(
        matches!(last, Seen::Tick { index: 8, interrupt_at: Some(t), luma: 16, .. } if t == cut.pts_ns),
        "{last:?}"
    );
    assert_eq!(
        frames(&events.lock().unwrap())[8],
        (8, 320_000_000, 16, blue_tint.u, blue_tint.v, true)
    );
    assert!((session.last_mouth_opening() - 0.0).abs() < 1e-6);
    session.close().unwrap();

    // The encoder got the producer's frames: one access unit per frame, the first a key frame.
    let events = events.lock().unwrap();
    let aus: Vec<(u64, bool)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::H264 {
                pts_ns, keyframe, ..
            } => Some((*pts_ns, *keyframe)),
            _ => None,
        })
        .collect();
    assert_eq!(aus.len(), 9, "{aus:?}");
    assert_eq!(aus[0], (0, true));
    assert_eq!(session.stats().frames_rendered, 9);
}

#[test]
fn without_video_outputs_the_producer_still_runs_without_pixels() {
    let log = Log::default();
    let factory = Arc::new(LevelFactory { log: log.clone() });
    let face = factory.prepare_face(photo([90, 90, 90])).unwrap();
    let (events, sink) = collector();
    let outputs = Outputs {
        pcm: true,
        ..Outputs::default()
    };
    let session =
        MediaSession::start_with(config(outputs), factory, face, DrivingMotion::rest(), sink)
            .unwrap();
    session
        .push_audio(&[20_000; 2_400], 24_000, &[], None)
        .unwrap();
    session.advance(2).unwrap();
    session.close().unwrap();
    assert!(frames(&events.lock().unwrap()).is_empty());
    let t = ticks(&log);
    assert_eq!(t.len(), 2);
    assert!(matches!(t[0], Seen::Tick { index: 0, luma, .. } if luma > 16));
    assert!(session.last_mouth_opening() > 0.0);
}

#[test]
fn a_face_prepared_for_another_renderer_is_refused() {
    let log = Log::default();
    let factory = Arc::new(LevelFactory { log: log.clone() });
    let outputs = Outputs {
        i420: true,
        ..Outputs::default()
    };
    // At start: the factory refuses it, the session does not start.
    let (_, sink) = collector();
    let wrong: PreparedFace = Arc::new(7u32);
    let refused = MediaSession::start_with(
        config(outputs),
        factory.clone(),
        wrong,
        DrivingMotion::rest(),
        sink,
    );
    assert!(
        matches!(refused, Err(MediaError::Render(_))),
        "{:?}",
        refused.err()
    );
    // A bad photo is refused when prepared.
    let bad = factory.prepare_face(FaceAsset {
        width: 4,
        height: 4,
        rgb: vec![0; 5],
        landmarks: Vec::new(),
    });
    assert!(matches!(bad, Err(ProducerError::InvalidFace(_))));

    // Later, by set_face: the session fails with RENDERER_FAILED and produces no more frames.
    let (events, sink) = collector();
    let face = factory.prepare_face(photo([90, 90, 90])).unwrap();
    let session =
        MediaSession::start_with(config(outputs), factory, face, DrivingMotion::rest(), sink)
            .unwrap();
    session.advance(1).unwrap();
    session.set_face(Arc::new("not a tint")).unwrap();
    assert!(matches!(session.advance(1), Err(MediaError::Failed(_))));
    session.close().unwrap();
    let events = events.lock().unwrap();
    assert_eq!(frames(&events).len(), 1);
    assert!(events
        .iter()
        .any(|e| matches!(e, MediaEvent::Error { code, .. } if code == "RENDERER_FAILED")));
}

#[test]
fn a_session_names_its_renderer_from_the_process_registry() {
    use media_core::frames::renderers;
    // "cpu" is always there; a renderer registered at start-up is found by name, and a session
    // naming it is drawn by it (the frames are Level's), with its upsample factor in the spec.
    assert!(renderers::names().contains(&"cpu".to_string()));
    let log = Log::default();
    renderers::register("level", Arc::new(LevelFactory { log: log.clone() }));
    assert!(renderers::names().contains(&"level".to_string()));
    let factory = renderers::renderer("level").unwrap();
    let face = factory.prepare_face(photo([200, 30, 30])).unwrap();
    let tint = *face.clone().downcast::<Tint>().unwrap();
    let (events, sink) = collector();
    let config = SessionConfig {
        renderer: "level".into(),
        upsample_factor: 2.0,
        ..config(Outputs {
            i420: true,
            ..Outputs::default()
        })
    };
    let session = MediaSession::start(config.clone(), face, DrivingMotion::rest(), sink).unwrap();
    assert_eq!(session.renderer(), "level");
    session.advance(2).unwrap();
    session.close().unwrap();
    let got = frames(&events.lock().unwrap());
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|f| (f.3, f.4, f.5) == (tint.u, tint.v, true)), "{got:?}");
    assert_eq!(log.lock().unwrap().first(), Some(&Seen::Created { upsample_factor: 2.0 }));

    // An unknown name: no session, an InvalidArgument that names the renderers there are.
    let (_, sink) = collector();
    let unknown = SessionConfig {
        renderer: "nope".into(),
        ..config
    };
    let face = renderers::renderer("level").unwrap().prepare_face(photo([1, 2, 3])).unwrap();
    match MediaSession::start(unknown, face, DrivingMotion::rest(), sink) {
        Err(MediaError::InvalidArgument(why)) => assert!(why.contains("'nope'") && why.contains("cpu"), "{why}"),
        other => panic!("expected InvalidArgument, got {:?}", other.err()),
    }
    assert!(renderers::renderer("nope").is_err());
}
