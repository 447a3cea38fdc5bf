//! AudioLips on real speech (the committed espeak-ng utterance) and on synthetic signals.

mod common;

use animation::audio::AudioLips;
use animation::MouthShape;
use common::*;

const FRAME_NS: u64 = 40_000_000;
const MS: u64 = 1_000_000;

/// Drives `AudioLips` the way the media engine does at 25 fps: push the frame's audio
/// `[t, t + 40 ms)`, then ask for the mouth at `t`. Runs 0.5 s past the end of the audio.
fn run_per_frame(rate: u32, samples: &[i16]) -> Vec<MouthShape> {
    let mut lips = AudioLips::new(rate);
    let per_frame = (rate as u64 * FRAME_NS / 1_000_000_000) as usize;
    let frames = samples.len().div_ceil(per_frame) + 12;
    (0..frames)
        .map(|i| {
            let a = (i * per_frame).min(samples.len());
            let b = ((i + 1) * per_frame).min(samples.len());
            lips.push(i as u64 * FRAME_NS, &samples[a..b]);
            lips.shape_at(i as u64 * FRAME_NS)
        })
        .collect()
}

struct LagScan {
    best_lag_ms: i64,
    best_r: f64,
    r_at_zero: f64,
}

/// Correlates `open` at each frame time `t` with the energy of the audio `[t + lag, t + lag +
/// 40 ms)` (the frame's own audio at lag 0), for lags -100..=100 ms in 5 ms steps. A positive best
/// lag means the mouth leads the sound, a negative one that it trails.
fn lag_scan(rate: u32, samples: &[i16], opens: &[f64], energy_db: bool) -> LagScan {
    let per_ms = rate as i64 / 1000;
    let mut best = (i64::MIN, f64::MIN);
    let mut r0 = 0.0;
    for lag in (-100..=100).step_by(5) {
        let e: Vec<f64> = (0..opens.len())
            .map(|i| {
                let from = (i as i64 * 40 + lag) * per_ms;
                let r = rms(samples, from, from + 40 * per_ms);
                if energy_db { db(r).max(-60.0) } else { r }
            })
            .collect();
        let r = pearson(&e, opens);
        if lag == 0 {
            r0 = r;
        }
        if r > best.1 {
            best = (lag, r);
        }
    }
    LagScan { best_lag_ms: best.0, best_r: best.1, r_at_zero: r0 }
}

#[test]
fn mouth_follows_the_energy_of_real_speech() {
    let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
    assert_eq!(rate, 16_000);
    assert!(samples.len() <= 3 * 16_000);
    let shapes = run_per_frame(rate, &samples);
    let opens: Vec<f64> = shapes.iter().map(|s| s.open as f64).collect();
    let lin = lag_scan(rate, &samples, &opens, false);
    let log = lag_scan(rate, &samples, &opens, true);
    println!(
        "RMS energy: best r {:.3} at lag {} ms (r {:.3} at 0); dB energy: best r {:.3} at lag {} ms (r {:.3} at 0)",
        lin.best_r, lin.best_lag_ms, lin.r_at_zero, log.best_r, log.best_lag_ms, log.r_at_zero
    );
    assert!(lin.best_r >= 0.7, "r = {:.3} against RMS energy", lin.best_r);
    assert!(lin.best_lag_ms.abs() <= 20, "best lag {} ms against RMS energy", lin.best_lag_ms);
    assert!(log.best_r >= 0.7, "r = {:.3} against dB energy", log.best_r);
    assert!(log.best_lag_ms.abs() <= 20, "best lag {} ms against dB energy", log.best_lag_ms);
    // It opens fully somewhere, and stays in range.
    let max_open = opens.iter().cloned().fold(0.0, f64::max);
    assert!(max_open > 0.6, "max open {max_open}");
    assert!(shapes.iter().all(|s| (0.0..=1.0).contains(&s.open) && (-1.0..=1.0).contains(&s.wide) && (0.0..=1.0).contains(&s.press)));
}

#[test]
fn mouth_is_closed_in_silence_stretches() {
    let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
    let shapes = run_per_frame(rate, &samples);
    let per_ms = rate as i64 / 1000;
    // Frames whose surroundings (100 ms before to 60 ms after) are silent (< -50 dBFS per 10 ms).
    let silent = |from_ms: i64, to_ms: i64| (from_ms..to_ms).step_by(10).all(|m| db(rms(&samples, m * per_ms, (m + 10) * per_ms)) < -50.0);
    let mut checked = 0;
    for (i, s) in shapes.iter().enumerate() {
        let t = i as i64 * 40;
        if silent(t - 100, t + 60) {
            assert!(s.open < 0.05, "frame at {t} ms in silence: {s:?}");
            checked += 1;
        }
    }
    // Leading silence, the pause between the sentences and the tail all count.
    assert!(checked >= 10, "only {checked} silent frames found");
    let mid_pause = (1000..2000).step_by(40).any(|t| silent(t - 100, t + 60));
    assert!(mid_pause, "the utterance should contain a pause between its sentences");
}

#[test]
fn loud_and_quiet_voices_open_alike() {
    let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
    // -20 dB: a tenth of the amplitude.
    let quiet: Vec<i16> = samples.iter().map(|&v| (v as f32 * 0.1).round() as i16).collect();
    let loud = run_per_frame(rate, &samples);
    let soft = run_per_frame(rate, &quiet);
    let mean = |v: &[MouthShape]| v.iter().map(|s| s.open as f64).sum::<f64>() / v.len() as f64;
    let max_diff = loud.iter().zip(&soft).map(|(a, b)| (a.open - b.open).abs()).fold(0.0f32, f32::max);
    let mean_diff = loud.iter().zip(&soft).map(|(a, b)| (a.open - b.open).abs() as f64).sum::<f64>() / loud.len() as f64;
    for (i, (a, b)) in loud.iter().zip(&soft).enumerate() {
        if (a.open - b.open).abs() > 0.05 { println!("frame {i}: loud {:.3} quiet {:.3}", a.open, b.open); }
    }
    println!("mean open loud {:.3} quiet {:.3}; |diff| mean {mean_diff:.4} max {max_diff:.3}", mean(&loud), mean(&soft));
    assert!((mean(&loud) - mean(&soft)).abs() < 0.03);
    assert!(mean_diff < 0.03 && max_diff < 0.15, "mean {mean_diff} max {max_diff}");
    let max_soft = soft.iter().map(|s| s.open).fold(0.0, f32::max);
    assert!(max_soft > 0.6, "the quiet voice opens fully too: {max_soft}");
}

#[test]
fn chunking_does_not_change_the_result() {
    let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
    let per_frame = run_per_frame(rate, &samples);
    // All audio pushed up front, in odd chunk sizes.
    let mut lips = AudioLips::new(rate);
    let mut pos = 0;
    for (i, size) in [1usize, 333, 4096, 17, 10_000].iter().cycle().enumerate() {
        if pos >= samples.len() {
            break;
        }
        let end = (pos + size + i).min(samples.len());
        lips.push(pos as u64 * 1_000_000_000 / rate as u64, &samples[pos..end]);
        pos = end;
    }
    for (i, s) in per_frame.iter().enumerate() {
        let t = i as u64 * FRAME_NS;
        if (t as usize) < samples.len() * 62_500 - 40 * MS as usize {
            assert_eq!(lips.shape_at(t), *s, "frame {i}");
        }
    }
}

#[test]
fn real_speech_presses_on_bilabial_closures() {
    let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
    let shapes = run_per_frame(rate, &samples);
    let presses = shapes.windows(2).filter(|w| w[0].press < 0.5 && w[1].press >= 0.5).count();
    println!("press events: {presses}; press per frame: {:?}", shapes.iter().map(|s| (s.press * 9.0).round() as u8).collect::<Vec<_>>());
    // "Bob made a map of the moon": b-b, m, p, m (and the stops of "made", "map").
    assert!(presses >= 3, "{presses} presses");
    // Presses come with a closing jaw, not in the middle of a vowel.
    for s in &shapes {
        assert!(s.press < 0.9 || s.open < 0.5, "{s:?}");
    }
}

/// A vowel-like signal: harmonics of `f0` shaped by two formant resonances.
fn vowel(rate: u32, ms: u64, f0: f32, f1: f32, f2: f32, amp: f32, phase0: usize) -> Vec<i16> {
    let n = (rate as u64 * ms / 1000) as usize;
    let gain = |f: f32, fc: f32, bw: f32| 1.0 / (1.0 + ((f - fc) / bw).powi(2));
    let harmonics: Vec<(f32, f32)> = (1..)
        .map(|h| h as f32 * f0)
        .take_while(|&f| f < rate as f32 / 2.0 - 200.0)
        .map(|f| (f, (gain(f, f1, 80.0) + 0.7 * gain(f, f2, 120.0)) / (f / f0).sqrt()))
        .collect();
    let norm: f32 = harmonics.iter().map(|h| h.1).sum();
    (0..n)
        .map(|i| {
            let t = (i + phase0) as f32 / rate as f32;
            let v: f32 = harmonics.iter().map(|&(f, a)| a * (2.0 * std::f32::consts::PI * f * t).sin()).sum();
            (v / norm * amp * 32767.0) as i16
        })
        .collect()
}

fn mean_over(shapes: &[MouthShape], from_ms: u64, to_ms: u64, f: impl Fn(&MouthShape) -> f32) -> f32 {
    let v: Vec<f32> = (from_ms / 40..to_ms / 40).map(|i| f(&shapes[i as usize])).collect();
    v.iter().sum::<f32>() / v.len() as f32
}

#[test]
fn spectral_shape_spreads_for_ee_and_rounds_for_oo() {
    let rate = 16_000;
    let mut s = Vec::new();
    // Alternate /i/ (F1 270, F2 2290) and /u/ (F1 300, F2 870): 300 ms vowel + 100 ms pause, 4 s.
    for k in 0..10 {
        let (f1, f2) = if k % 2 == 0 { (270.0, 2290.0) } else { (300.0, 870.0) };
        s.extend(vowel(rate, 300, 120.0, f1, f2, 0.3, s.len()));
        s.extend(vec![0i16; 1600]);
    }
    let shapes = run_per_frame(rate, &s);
    for k in 4..10u64 {
        let w = mean_over(&shapes, k * 400 + 80, k * 400 + 280, |s| s.wide);
        if k % 2 == 0 {
            assert!(w > 0.2, "ee segment {k}: wide {w}");
        } else {
            assert!(w < -0.2, "oo segment {k}: wide {w}");
        }
    }
}

#[test]
fn silence_and_steady_noise_stay_closed() {
    let rate = 16_000;
    let zeros = vec![0i16; 32_000];
    assert!(run_per_frame(rate, &zeros).iter().all(|s| *s == MouthShape::CLOSED));
    // Steady noise at about -31 dBFS (deterministic LCG).
    let mut x = 12345u32;
    let noise: Vec<i16> = (0..64_000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            ((x >> 16) as i16 as i32 * 3 / 100) as i16
        })
        .collect();
    // After 2 s the floor has learnt the noise (until then it assumes quiet came first).
    let shapes = run_per_frame(rate, &noise);
    let late = &shapes[55..];
    assert!(late.iter().all(|s| s.open < 0.05), "{:?}", late.iter().map(|s| s.open).fold(0.0, f32::max));

}

#[test]
fn mouth_closes_after_the_audio_ends_and_after_clear() {
    let rate = 16_000;
    let v = vowel(rate, 600, 110.0, 700.0, 1200.0, 0.3, 0);
    let mut lips = AudioLips::new(rate);
    lips.push(0, &v);
    assert!(lips.shape_at(400 * MS).open > 0.6);
    // 600 ms of audio: ~100 ms after its end the mouth is closed.
    assert!(lips.shape_at(560 * MS).open > 0.1);
    assert!(lips.shape_at(700 * MS).open < 0.05);
    assert_eq!(lips.shape_at(800 * MS), MouthShape::CLOSED);
    // clear() closes at once; new audio later is analysed afresh.
    lips.push(1_000 * MS, &v);
    assert!(lips.shape_at(1_300 * MS).open > 0.6);
    lips.clear();
    assert_eq!(lips.shape_at(1_340 * MS), MouthShape::CLOSED);
    lips.push(2_000 * MS, &v);
    assert!(lips.shape_at(2_300 * MS).open > 0.6);
    assert!(lips.is_voiced_near(2_300 * MS, 0, 0));
    assert!(!lips.is_voiced_near(3_000 * MS, 100 * MS, 0));
}

/// Not a check: prints the per-frame mouth on the real utterance for inspection
/// (`cargo test -p animation --test audio_lips dump -- --ignored --nocapture`).
#[test]
#[ignore]
fn dump_real_speech() {
    let (rate, samples) = read_wav_mono16(UTTERANCE_WAV);
    for (i, s) in run_per_frame(rate, &samples).iter().enumerate() {
        println!("{:5} ms open {:.2} wide {:+.2} press {:.2}", i * 40, s.open, s.wide, s.press);
    }
}
