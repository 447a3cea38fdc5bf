//! MediaSession outputs over the real renderer (astronaut face) and animator: every output
//! decodes back to the frames rendered, looks like them, and audio and video share one clock.
mod common;

use animation::{frame_pts_ns, DrivingMotion, Viseme, VisemeEvent};
use common::*;
use media_core::{MediaEvent, MediaSession, Outputs};

const FRAME_NS: u64 = 40_000_000;

fn all_outputs() -> Outputs {
    Outputs {
        h264: true,
        vp8: true,
        jpeg: true,
        opus: true,
        pcm: true,
        i420: true,
        motion: false,
    }
}

/// Visemes cycling every 125 ms over `secs`, relative to the chunk start.
fn visemes(secs: f64) -> Vec<VisemeEvent> {
    let cycle = [
        Viseme::Open,
        Viseme::Mid,
        Viseme::Closed,
        Viseme::Wide,
        Viseme::Rounded,
        Viseme::Narrow,
    ];
    let n = (secs * 8.0) as u64;
    (0..n)
        .map(|i| VisemeEvent::new(i * 125_000_000, (i + 1) * 125_000_000, cycle[i as usize % cycle.len()]))
        .collect()
}

#[test]
fn media_session_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<MediaSession>();
}

#[test]
fn manual_session_outputs_decode_to_the_rendered_frames_and_stay_aligned() {
    let events = Collector::default();
    let session = MediaSession::start(
        manual_config(all_outputs()),
        default_face(),
        DrivingMotion::rest(),
        events.sink(),
    )
    .unwrap();
    // 3 s of speech at 16 kHz, queued before frame 0: it plays from pts 0.
    let speech = speech_like(16_000, 3.0);
    let r = session
        .push_audio(&speech, 16_000, &visemes(3.0), None)
        .unwrap();
    assert_eq!((r.start_pts_ns, r.end_pts_ns), (0, 3_000_000_000));
    session.advance(75).unwrap();
    assert!(
        session.stats().audio_queued_ns == 0,
        "3 s played in 75 frames"
    );
    session.advance(10).unwrap(); // idle frames after the speech
    let stats = session.stats();
    assert_eq!(stats.frames_rendered, 85);
    assert_eq!(stats.current_pts_ns, 85 * FRAME_NS);
    session.close().unwrap();
    let events = events.events();
    assert_eq!(events.last(), Some(&MediaEvent::Closed));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, MediaEvent::Closed))
            .count(),
        1
    );
    assert!(
        !events.iter().any(|e| matches!(e, MediaEvent::Error { .. })),
        "no errors"
    );
    assert_eq!(session.stats().dropped_buffers, 0);

    // H.264: one AU per frame; the first is a key frame with SPS/PPS, constrained baseline.
    let aus: Vec<(Vec<u8>, u64, bool)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::H264 {
                data,
                pts_ns,
                keyframe,
            } => Some((data.clone(), *pts_ns, *keyframe)),
            _ => None,
        })
        .collect();
    assert_eq!(aus.len(), 85);
    for (i, (_, pts, _)) in aus.iter().enumerate() {
        assert_eq!(
            *pts,
            frame_pts_ns(i as u64, 25, 1),
            "H.264 PTS of frame {i}"
        );
    }
    let (first, _, key) = &aus[0];
    assert!(key, "first access unit is a key frame");
    let nals = nal_units(first);
    let types: Vec<u8> = nals.iter().map(|n| n.0).collect();
    assert!(
        types.contains(&7) && types.contains(&8) && types.contains(&5),
        "SPS, PPS, IDR in {types:?}"
    );
    let sps = nals.iter().find(|n| n.0 == 7).unwrap().1;
    assert_eq!(first[sps + 1], 66, "profile_idc baseline");
    assert!(
        first[sps + 2] & 0x40 != 0,
        "constraint_set1_flag (constrained baseline)"
    );
    assert!(
        aus[1..]
            .iter()
            .filter(|a| a.2)
            .all(|a| a.1 == 50 * FRAME_NS),
        "only keyint key frames"
    );
    let decoded = decode_h264(&aus.iter().map(|a| (a.0.clone(), a.1)).collect::<Vec<_>>());
    assert_eq!(decoded.len(), 85);
    assert!(decoded.iter().all(|d| d.width == 512 && d.height == 512));

    // VP8 RTP: decodes to the same frames; key frame first; marker on each frame's last packet.
    let packets: Vec<(Vec<u8>, u64, bool, bool)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Vp8Rtp {
                data,
                pts_ns,
                keyframe,
                marker,
            } => Some((data.clone(), *pts_ns, *keyframe, *marker)),
            _ => None,
        })
        .collect();
    assert!(packets[0].2, "VP8 starts with a key frame");
    assert_eq!(
        packets.iter().filter(|p| p.3).count(),
        85,
        "one marker per frame"
    );
    let decoded = decode_vp8_rtp(
        &packets
            .iter()
            .map(|p| (p.0.clone(), p.1))
            .collect::<Vec<_>>(),
    );
    assert_eq!(decoded.len(), 85);
    assert!(decoded.iter().all(|d| d.width == 512 && d.height == 512));

    // JPEG: one per frame with its index; decodes to 512x512.
    let jpegs: Vec<(Vec<u8>, u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Jpeg {
                data,
                pts_ns,
                frame_index,
            } => Some((data.clone(), *pts_ns, *frame_index)),
            _ => None,
        })
        .collect();
    assert_eq!(jpegs.len(), 85);
    for (i, j) in jpegs.iter().enumerate() {
        assert_eq!((j.2, j.1), (i as u64, frame_pts_ns(i as u64, 25, 1)));
    }
    let decoded = decode_jpegs(&jpegs.iter().map(|j| (j.0.clone(), j.1)).collect::<Vec<_>>());
    assert_eq!(decoded.len(), 85);
    assert!(decoded.iter().all(|d| d.width == 512 && d.height == 512));

    // I420: one raw frame per frame, on the JPEG frames' clock.
    let raw = i420_frames(&events);
    assert_eq!(raw.len(), 85);
    for (r, j) in raw.iter().zip(&jpegs) {
        assert_eq!((r.frame_index, r.pts_ns), (j.2, j.1));
        assert_eq!(r.data.len(), 512 * 512 * 3 / 2);
    }

    // PCM: one chunk per frame tick, same PTS as the frame, 40 ms of 24 kHz s16le.
    let pcm: Vec<(Vec<u8>, u64)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Pcm { data, pts_ns } => Some((data.clone(), *pts_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(pcm.len(), 85);
    for (i, (data, pts)) in pcm.iter().enumerate() {
        assert_eq!(*pts, aus[i].1, "PCM tick {i} shares the video frame's PTS");
        assert_eq!(data.len(), 960 * 2);
    }
    let speech_ticks = pcm
        .iter()
        .filter(|p| {
            p.0.chunks_exact(2)
                .any(|s| i16::from_le_bytes([s[0], s[1]]) != 0)
        })
        .count();
    assert!(
        (74..=76).contains(&speech_ticks),
        "3 s of speech = 75 ticks, got {speech_ticks}"
    );

    // Opus: back-to-back 20 ms packets covering everything pushed (85 ticks = 3.4 s).
    let opus: Vec<(Vec<u8>, u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Opus {
                data,
                pts_ns,
                duration_ns,
            } => Some((data.clone(), *pts_ns, *duration_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(opus[0].1, 0);
    for w in opus.windows(2) {
        assert_eq!(w[0].1 + w[0].2, w[1].1, "Opus packets back to back");
    }
    let covered = opus.last().map(|o| o.1 + o.2).unwrap();
    assert!(covered >= 85 * FRAME_NS, "Opus covers {covered} ns");
    assert!(covered <= 85 * FRAME_NS + 40_000_000);

    // Speech events bracket the utterance.
    let speech: Vec<&MediaEvent> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                MediaEvent::SpeechStarted { .. } | MediaEvent::SpeechEnded { .. }
            )
        })
        .collect();
    assert_eq!(
        speech,
        vec![
            &MediaEvent::SpeechStarted { pts_ns: 0 },
            &MediaEvent::SpeechEnded {
                pts_ns: 3_000_000_000
            }
        ]
    );
}

/// First sample above `threshold` (absolute) in `samples` starting at `pts` at `rate`.
fn onset_ns(chunks: &[(u64, Vec<i16>)], rate: u64, threshold: i16) -> Option<u64> {
    chunks.iter().find_map(|(pts, s)| {
        s.iter()
            .position(|&v| v.abs() > threshold)
            .map(|i| pts + i as u64 * 1_000_000_000 / rate)
    })
}

#[test]
fn audio_and_video_share_one_clock_within_40ms() {
    // A burst at a known session time: it must come out of PCM and of the decoded Opus stream
    // at the PTS of the frame rendered for it, and the mouth must open on that frame.
    let events = Collector::default();
    let outputs = Outputs {
        h264: true,
        vp8: false,
        jpeg: false,
        opus: true,
        pcm: true,
        i420: false,
        motion: false,
    };
    let session = start_manual(outputs, &events);
    session.advance(5).unwrap();
    // Scheduled at 1.0 s; 22.05 kHz to exercise the resampler's timing too.
    let burst = speech_like(22_050, 1.0);
    let r = session
        .push_audio(&burst, 22_050, &[], Some(1_000_000_000))
        .unwrap();
    assert_eq!(r.start_pts_ns, 1_000_000_000);
    let mut mouth = Vec::new();
    for _ in 0..55 {
        session.advance(1).unwrap();
        mouth.push(session.last_mouth_opening());
    }
    session.close().unwrap();
    let events = events.events();

    let pcm: Vec<(u64, Vec<i16>)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Pcm { data, pts_ns } => Some((
                *pts_ns,
                data.chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    let pcm_onset = onset_ns(&pcm, 24_000, 300).expect("burst in PCM");
    assert!(
        pcm_onset.abs_diff(1_000_000_000) <= 40_000_000,
        "PCM onset at {pcm_onset}"
    );

    let packets: Vec<(Vec<u8>, u64)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Opus { data, pts_ns, .. } => Some((data.clone(), *pts_ns)),
            _ => None,
        })
        .collect();
    let decoded = decode_opus(&packets);
    let opus_onset = onset_ns(&decoded, 48_000, 300).expect("burst in Opus");
    assert!(
        opus_onset.abs_diff(1_000_000_000) <= 40_000_000,
        "Opus onset at {opus_onset}"
    );

    let video_pts: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::H264 { pts_ns, .. } => Some(*pts_ns),
            _ => None,
        })
        .collect();
    assert_eq!(video_pts.len(), 60);
    let frame_of_burst = video_pts
        .iter()
        .position(|&p| p == 1_000_000_000)
        .expect("a frame at 1.0 s");
    assert_eq!(frame_of_burst, 25);
    // The mouth opens within a frame of the audio onset (mouth[k] is frame 5 + k).
    let first_open = mouth
        .iter()
        .position(|&m| m > 0.02)
        .map(|k| 5 + k)
        .expect("mouth opens");
    let open_pts = frame_pts_ns(first_open as u64, 25, 1);
    assert!(
        open_pts.abs_diff(pcm_onset) <= 40_000_000,
        "mouth opens at {open_pts}, audio at {pcm_onset}"
    );
}

#[test]
fn every_video_output_shows_the_rendered_face() {
    // Frame 0 of an idle session with the rest motion is the rest face: compare what each
    // output decodes to with the renderer's own picture (catches range, colour and size bugs).
    let face = default_face();
    let mut renderer = face_render::Renderer::new(face.clone(), 512, 512, 1.0).unwrap();
    let mut reference = face_render::RgbImage::new(512, 512);
    let mut animator = animation::Animator::new(DrivingMotion::rest(), 7);
    renderer.render(&animator.face_at(0), &mut reference);
    let mut reference_i420 = vec![0u8; face_render::i420_size(512, 512)];
    face_render::rgb_to_i420(&reference, &mut reference_i420);

    let events = Collector::default();
    let outputs = Outputs {
        h264: true,
        vp8: true,
        jpeg: true,
        ..Outputs::default()
    };
    let session = MediaSession::start(
        manual_config(outputs),
        face,
        DrivingMotion::rest(),
        events.sink(),
    )
    .unwrap();
    session.advance(1).unwrap();
    session.close().unwrap();
    let events = events.events();

    let psnr_y = |y: &[u8]| {
        let mse = y[..512 * 512]
            .iter()
            .zip(&reference_i420[..512 * 512])
            .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
            .sum::<f64>()
            / (512.0 * 512.0);
        10.0 * (255.0 * 255.0 / mse.max(1e-9)).log10()
    };
    let h264: Vec<(Vec<u8>, u64)> = events
        .iter()
        .filter_map(|e| {
            if let MediaEvent::H264 { data, pts_ns, .. } = e {
                Some((data.clone(), *pts_ns))
            } else {
                None
            }
        })
        .collect();
    let frame = &decode_h264(&h264)[0];
    let p = psnr_y(&frame.data);
    eprintln!(
        "H.264: luma PSNR {p:.1} dB, key frame {} bytes",
        h264[0].0.len()
    );
    assert!(p > 30.0, "H.264 luma PSNR {p:.1} dB");
    let vp8: Vec<(Vec<u8>, u64)> = events
        .iter()
        .filter_map(|e| {
            if let MediaEvent::Vp8Rtp { data, pts_ns, .. } = e {
                Some((data.clone(), *pts_ns))
            } else {
                None
            }
        })
        .collect();
    let frame = &decode_vp8_rtp(&vp8)[0];
    let p = psnr_y(&frame.data);
    eprintln!(
        "VP8: luma PSNR {p:.1} dB, key frame {} bytes",
        vp8.iter().map(|v| v.0.len()).sum::<usize>()
    );
    assert!(p > 28.0, "VP8 luma PSNR {p:.1} dB");

    // JPEG is decoded as a browser would (JFIF, full range) and compared in RGB.
    let jpeg = events
        .iter()
        .find_map(|e| {
            if let MediaEvent::Jpeg { data, .. } = e {
                Some(data.clone())
            } else {
                None
            }
        })
        .unwrap();
    let mut decoder = jpeg_decoder::Decoder::new(&jpeg[..]);
    let rgb = decoder.decode().unwrap();
    assert_eq!(rgb.len(), reference.data.len());
    let n = rgb.len() as f64;
    let mean = |v: &[u8]| v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let mad = rgb
        .iter()
        .zip(&reference.data)
        .map(|(a, b)| (*a as f64 - *b as f64).abs())
        .sum::<f64>()
        / n;
    let (m_out, m_ref) = (mean(&rgb), mean(&reference.data));
    assert!(
        (m_out - m_ref).abs() < 2.0,
        "JPEG brightness {m_out:.1} vs rendered {m_ref:.1} (range bug?)"
    );
    // 4:2:0 chroma on this detailed photo costs ~10 levels of mean error whatever the quality
    // (4:4:4 would be ~3 at three times the size); luma must be close.
    assert!(mad < 14.0, "JPEG mean abs difference {mad:.2}");
    let contrast = |v: &[u8]| {
        let m = mean(v);
        (v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n).sqrt()
    };
    let (c_out, c_ref) = (contrast(&rgb), contrast(&reference.data));
    assert!(
        (c_out / c_ref - 1.0).abs() < 0.03,
        "JPEG contrast {c_out:.1} vs rendered {c_ref:.1}"
    );
    // Luma (full-range BT.601) PSNR.
    let luma = |v: &[u8]| {
        v.chunks_exact(3)
            .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
            .collect::<Vec<f64>>()
    };
    let (lo, lr) = (luma(&rgb), luma(&reference.data));
    let mse = lo
        .iter()
        .zip(&lr)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        / lo.len() as f64;
    let p = 10.0 * (255.0 * 255.0 / mse).log10();
    eprintln!("JPEG: luma PSNR {p:.1} dB, brightness {m_out:.1}/{m_ref:.1}, contrast {c_out:.1}/{c_ref:.1}, {} bytes", jpeg.len());
    assert!(p > 30.0, "JPEG luma PSNR {p:.1} dB");
}

/// One `I420` event's fields.
struct RawFrame {
    data: Vec<u8>,
    pts_ns: u64,
    frame_index: u64,
    width: u32,
    height: u32,
}

fn i420_frames(events: &[MediaEvent]) -> Vec<RawFrame> {
    events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::I420 {
                data,
                pts_ns,
                frame_index,
                width,
                height,
            } => Some(RawFrame {
                data: data.clone(),
                pts_ns: *pts_ns,
                frame_index: *frame_index,
                width: *width,
                height: *height,
            }),
            _ => None,
        })
        .collect()
}

/// Population standard deviation of some bytes.
fn std_dev(v: &[u8]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt()
}

#[test]
fn i420_events_carry_every_frame_packed_with_the_jpeg_frames_pts() {
    let events = Collector::default();
    let outputs = Outputs {
        jpeg: true,
        i420: true,
        ..Outputs::default()
    };
    let session = MediaSession::start(
        manual_config(outputs),
        default_face(),
        sway_motion(),
        events.sink(),
    )
    .unwrap();
    session.advance(12).unwrap();
    session.close().unwrap();
    let events = events.events();
    assert!(!events.iter().any(|e| matches!(e, MediaEvent::Error { .. })));
    assert_eq!(session.stats().dropped_buffers, 0);

    let raw = i420_frames(&events);
    assert_eq!(raw.len(), 12, "one I420 event per frame");
    let jpeg_pts: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Jpeg {
                pts_ns,
                frame_index,
                ..
            } => Some((*frame_index, *pts_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(jpeg_pts.len(), 12);
    let (w, h) = (512usize, 512usize);
    for (i, r) in raw.iter().enumerate() {
        assert_eq!((r.width, r.height), (512, 512));
        assert_eq!(r.data.len(), w * h * 3 / 2, "Y + U + V, rows packed");
        assert_eq!(r.frame_index, i as u64);
        assert_eq!(r.pts_ns, frame_pts_ns(i as u64, 25, 1));
        assert_eq!(
            (r.frame_index, r.pts_ns),
            jpeg_pts[i],
            "the JPEG event of the same frame has the same index and PTS"
        );
        // A face, not a flat or blank frame: luma varies widely, chroma somewhat.
        let (y, chroma) = r.data.split_at(w * h);
        let sd = std_dev(y);
        assert!(sd > 20.0, "frame {i}: luma std dev {sd:.1}");
        assert!(
            y.iter().all(|&v| (16..=235).contains(&v)),
            "limited-range luma"
        );
        assert!(std_dev(chroma) > 1.0, "frame {i}: chroma varies");
    }
    // The head sways: frames differ.
    assert_ne!(raw[0].data, raw[11].data);
}

#[test]
fn i420_alone_runs_no_pipeline_and_is_exactly_the_encoders_input() {
    // Frame 0 at rest is the renderer's rest face: the I420 event must be its BT.601 conversion
    // byte for byte, whether it comes from the converted RGB (no video pipeline, so no pool) or
    // as a copy of the pooled buffer the encoders get.
    let face = default_face();
    let mut renderer = face_render::Renderer::new(face.clone(), 512, 512, 1.0).unwrap();
    let mut reference = face_render::RgbImage::new(512, 512);
    let mut animator = animation::Animator::new(DrivingMotion::rest(), 7);
    renderer.render(&animator.face_at(0), &mut reference);
    let mut reference_i420 = vec![0u8; face_render::i420_size(512, 512)];
    face_render::rgb_to_i420(&reference, &mut reference_i420);

    let run = |outputs: Outputs| {
        let events = Collector::default();
        let session = MediaSession::start(
            manual_config(outputs),
            face.clone(),
            DrivingMotion::rest(),
            events.sink(),
        )
        .unwrap();
        session.advance(3).unwrap();
        session.close().unwrap();
        assert_eq!(session.stats().dropped_buffers, 0);
        let events = events.events();
        assert!(!events.iter().any(|e| matches!(e, MediaEvent::Error { .. })));
        assert_eq!(events.last(), Some(&MediaEvent::Closed));
        i420_frames(&events)
    };
    let alone = run(Outputs {
        i420: true,
        ..Outputs::default()
    });
    let beside_h264 = run(Outputs {
        h264: true,
        i420: true,
        ..Outputs::default()
    });
    assert_eq!(alone.len(), 3);
    assert_eq!(beside_h264.len(), 3);
    assert!(
        alone[0].data == reference_i420,
        "frame 0 is the rendered face's I420"
    );
    for (a, b) in alone.iter().zip(&beside_h264) {
        assert!(
            a.data == b.data,
            "frame {}: same bytes on both paths",
            a.frame_index
        );
        assert_eq!((a.pts_ns, a.frame_index), (b.pts_ns, b.frame_index));
    }
}

#[test]
fn i420_output_off_emits_no_raw_frames() {
    let events = Collector::default();
    let session = start_manual(
        Outputs {
            jpeg: true,
            pcm: true,
            ..Outputs::default()
        },
        &events,
    );
    session.advance(3).unwrap();
    session.close().unwrap();
    assert!(!events
        .events()
        .iter()
        .any(|e| matches!(e, MediaEvent::I420 { .. })));
}

#[test]
fn motion_events_carry_every_frames_face_before_its_audio_the_same_face_drawn_or_not() {
    // A face drawn by the client: the motion output alone (with the audio) runs no video
    // pipeline and draws nothing, yet gives each tick's face, before that tick's audio, equal to
    // what a session drawing the same face (same seed) renders.
    let run = |outputs: Outputs| {
        let events = Collector::default();
        let session = start_manual(outputs, &events);
        session.advance(2).unwrap();
        let speech = speech_like(24_000, 1.0);
        session.push_audio(&speech, 24_000, &visemes(1.0), Some(200_000_000)).unwrap();
        session.advance(38).unwrap();
        session.close().unwrap();
        let events = events.events();
        assert!(!events.iter().any(|e| matches!(e, MediaEvent::Error { .. })));
        events
    };
    let client = run(Outputs { motion: true, pcm: true, ..Outputs::default() });
    let drawn = run(Outputs { motion: true, i420: true, ..Outputs::default() });
    let motion = |events: &[MediaEvent]| -> Vec<(u64, u64, media_core::frames::FaceParams)> {
        events
            .iter()
            .filter_map(|e| match e {
                MediaEvent::Motion { pts_ns, frame_index, face } => Some((*pts_ns, *frame_index, *face)),
                _ => None,
            })
            .collect()
    };
    let (m, d) = (motion(&client), motion(&drawn));
    assert_eq!(m.len(), 40, "one motion event a frame");
    assert_eq!(m.iter().map(|f| f.1).collect::<Vec<_>>(), (0..40).collect::<Vec<_>>());
    for (i, f) in m.iter().enumerate() {
        assert_eq!(f.0, frame_pts_ns(i as u64, 25, 1));
    }
    assert_eq!(m, d, "the same face whether it is drawn here or not");
    assert!(!client.iter().any(|e| matches!(e, MediaEvent::I420 { .. } | MediaEvent::Jpeg { .. })));
    // Each tick's motion comes before its audio.
    let position = |pred: &dyn Fn(&MediaEvent) -> bool| client.iter().position(pred).unwrap();
    for f in m.iter().step_by(7) {
        let motion_at = position(&|e| matches!(e, MediaEvent::Motion { frame_index, .. } if *frame_index == f.1));
        let audio_at = position(&|e| matches!(e, MediaEvent::Pcm { pts_ns, .. } if *pts_ns == f.0));
        assert!(motion_at < audio_at, "frame {}: motion before its audio", f.1);
    }
    // The mouth moves with the speech and rests before it.
    let opening: Vec<f32> = m.iter().map(|f| f.2.mouth_open * (1.0 - f.2.mouth_press)).collect();
    assert!(opening[..4].iter().all(|&o| o < 0.05), "at rest before the speech: {:?}", &opening[..4]);
    assert!(opening[8..30].iter().any(|&o| o > 0.2), "open while speaking: {opening:?}");
}
