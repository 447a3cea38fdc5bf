//! Helpers shared by the integration tests: the committed real utterance and small statistics.

#![allow(dead_code)]

/// `tests/data/utterance_16k.wav`: "Bob made a map of the moon. We will see you soon.", 2.95 s,
/// 16 kHz mono PCM16, made with espeak-ng 1.51 (default voice) and resampled with sox:
///   espeak-ng -w /tmp/utt22k.wav "Bob made a map of the moon. We will see you soon."
///   sox /tmp/utt22k.wav -r 16000 -c 1 -b 16 tests/data/utterance_16k.wav
pub const UTTERANCE_WAV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/utterance_16k.wav");

/// Reads a PCM16 mono WAV file: (sample rate, samples).
pub fn read_wav_mono16(path: &str) -> (u32, Vec<i16>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(&bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WAVE", "{path}: not a WAV file");
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let mut pos = 12;
    let mut rate = 0;
    while pos + 8 <= bytes.len() {
        let id = &bytes[pos..pos + 4];
        let len = u32_at(pos + 4) as usize;
        let body = pos + 8;
        if id == b"fmt " {
            assert_eq!(u16_at(body), 1, "PCM only");
            assert_eq!(u16_at(body + 2), 1, "mono only");
            rate = u32_at(body + 4);
            assert_eq!(u16_at(body + 14), 16, "16-bit only");
        } else if id == b"data" {
            assert!(rate > 0, "fmt chunk must come first");
            let end = (body + len).min(bytes.len());
            let samples = bytes[body..end].chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect();
            return (rate, samples);
        }
        pos = body + len + (len & 1);
    }
    panic!("{path}: no data chunk");
}

/// Pearson correlation.
pub fn pearson(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    sab / (saa.sqrt() * sbb.sqrt())
}

/// RMS of `samples[from..to)` (clipped to the signal; outside is silence), full scale = 1.
pub fn rms(samples: &[i16], from: i64, to: i64) -> f64 {
    let n = (to - from).max(1) as f64;
    let a = from.clamp(0, samples.len() as i64) as usize;
    let b = to.clamp(0, samples.len() as i64) as usize;
    let s: f64 = samples[a..b].iter().map(|&v| (v as f64 / 32768.0).powi(2)).sum();
    (s / n).sqrt()
}

/// Level in dBFS, floored at -80.
pub fn db(rms: f64) -> f64 {
    (20.0 * rms.max(1e-4).log10()).max(-80.0)
}
