//! Offline speech synthesis with phoneme timings, for the avatar's voice and lips.
//!
//! Two engines from Debian, reached through hand-written FFI (no bindgen): espeak-ng
//! (`espeak.rs`: formant synthesis at 22.05 kHz, phoneme events with exact sample positions, and
//! text → IPA for the Piper neural voice) and flite (`flite.rs`: CMU diphone/cluster voices slt,
//! rms, awb, kal16 at 16 kHz, phoneme end times from the utterance's Segment relation).
//!
//! Both libraries keep process-global state and are not reentrant: every call into one of them
//! holds that engine's mutex, so callers on any thread (the libuv pool, tests) are serialised
//! per engine. Results are owned Rust values; nothing here knows about N-API.
//!
//! Phoneme times are integer nanoseconds from the start of the returned audio; spans are ordered,
//! do not overlap, and cover the audio from 0 to its end (silence is the phoneme `_`).

mod espeak;
mod flite;

pub use espeak::{
    phonemize_ipa, EspeakOptions, ESPEAK_DEFAULT_WPM, ESPEAK_MAX_WPM, ESPEAK_MIN_WPM,
};
pub use flite::{FliteOptions, FLITE_VOICES};

pub use espeak::synthesize as synthesize_espeak;
pub use flite::synthesize as synthesize_flite;

/// The phoneme symbol for silence (pauses, gaps, and the audio before the first phoneme).
pub const SILENCE_PHONEME: &str = "_";

/// One phoneme and when it sounds, relative to the start of the audio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhonemeSpan {
    /// IPA (espeak-ng's IPA names; flite's CMU phones are mapped to IPA), or `_` for silence.
    pub phoneme: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Mono 16-bit speech and its phoneme timeline.
#[derive(Debug, Clone, Default)]
pub struct Synthesis {
    pub samples: Vec<i16>,
    pub sample_rate_hz: u32,
    pub phonemes: Vec<PhonemeSpan>,
}

impl Synthesis {
    pub fn duration_ns(&self) -> u64 {
        samples_to_ns(self.samples.len() as u64, self.sample_rate_hz)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    /// A bad option (unknown voice, out-of-range value, text with a NUL byte).
    #[error("{0}")]
    InvalidArgument(String),
    /// The engine could not start (its data files are missing, say).
    #[error("{0}")]
    EngineUnavailable(String),
    /// The engine failed while speaking.
    #[error("{0}")]
    SynthesisFailed(String),
}

impl SpeechError {
    /// A stable UPPER_SNAKE code for the binding (`err.code` in JavaScript).
    pub fn code(&self) -> &'static str {
        match self {
            SpeechError::InvalidArgument(_) => "INVALID_ARGUMENT",
            SpeechError::EngineUnavailable(_) => "TTS_ENGINE_UNAVAILABLE",
            SpeechError::SynthesisFailed(_) => "TTS_SYNTHESIS_FAILED",
        }
    }
}

pub(crate) fn samples_to_ns(samples: u64, rate_hz: u32) -> u64 {
    if rate_hz == 0 {
        return 0;
    }
    // u128: 10 minutes at 48 kHz times 1e9 overflows nothing, but keep the rounding exact.
    ((samples as u128 * 1_000_000_000u128) / rate_hz as u128) as u64
}

/// Turns phoneme start times into spans that cover `[0, end_ns]`: each phoneme lasts until the
/// next one starts; a gap before the first becomes silence; starts are clamped into order (an
/// engine may report two events at one position) and zero-length spans are dropped.
pub(crate) fn spans_from_starts(starts: &[(String, u64)], end_ns: u64) -> Vec<PhonemeSpan> {
    let mut out: Vec<PhonemeSpan> = Vec::with_capacity(starts.len() + 1);
    let mut cursor = 0u64;
    for (i, (phoneme, start)) in starts.iter().enumerate() {
        let start = (*start).clamp(cursor, end_ns);
        if i == 0 && start > 0 {
            out.push(PhonemeSpan {
                phoneme: SILENCE_PHONEME.into(),
                start_ns: 0,
                end_ns: start,
            });
        }
        let next = starts
            .get(i + 1)
            .map_or(end_ns, |(_, s)| (*s).clamp(start, end_ns));
        if next > start {
            out.push(PhonemeSpan {
                phoneme: phoneme.clone(),
                start_ns: start,
                end_ns: next,
            });
        }
        cursor = start;
    }
    if out.is_empty() && end_ns > 0 {
        out.push(PhonemeSpan {
            phoneme: SILENCE_PHONEME.into(),
            start_ns: 0,
            end_ns,
        });
    }
    out
}

/// Checks text before it reaches C: no NUL bytes (C strings), and returns the C string.
pub(crate) fn c_text(text: &str) -> Result<std::ffi::CString, SpeechError> {
    std::ffi::CString::new(text)
        .map_err(|_| SpeechError::InvalidArgument("text must not contain NUL characters".into()))
}

/// Takes an engine mutex even if a previous holder panicked: the guarded state is plain data
/// that every call re-establishes (voice, parameters), so poisoning carries no meaning here.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
pub(crate) mod test_util {
    /// Median autocorrelation pitch over loud 40 ms frames, 60..400 Hz: enough to compare voices.
    pub fn pitch_hz(samples: &[i16], rate: u32) -> f64 {
        let frame = (rate as usize) / 25;
        let (min_lag, max_lag) = (rate as usize / 400, rate as usize / 60);
        let mut found = Vec::new();
        for chunk in samples.chunks_exact(frame) {
            let x: Vec<f64> = chunk.iter().map(|&s| s as f64 / 32768.0).collect();
            let energy: f64 = x.iter().map(|v| v * v).sum();
            if energy / (frame as f64) < 1e-3 {
                continue;
            }
            let (mut best, mut best_lag) = (0.0, 0);
            for lag in min_lag..max_lag {
                let r: f64 = (0..frame - lag).map(|i| x[i] * x[i + lag]).sum();
                if r > best {
                    best = r;
                    best_lag = lag;
                }
            }
            if best > 0.5 * energy && best_lag > 0 {
                found.push(rate as f64 / best_lag as f64);
            }
        }
        found.sort_by(|a, b| a.partial_cmp(b).unwrap());
        found.get(found.len() / 2).copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_the_audio_in_order() {
        let starts = vec![
            ("h".to_string(), 100),
            ("ə".to_string(), 300),
            ("l".to_string(), 250),
        ];
        let spans = spans_from_starts(&starts, 1000);
        assert_eq!(
            spans[0],
            PhonemeSpan {
                phoneme: "_".into(),
                start_ns: 0,
                end_ns: 100
            }
        );
        assert_eq!(spans.last().unwrap().end_ns, 1000);
        for w in spans.windows(2) {
            assert_eq!(w[0].end_ns, w[1].start_ns);
        }
        // "ə" at 300 then "l" at 250 (out of order): "l" is clamped to 300 and "ə" vanishes.
        assert!(spans.iter().all(|s| s.end_ns > s.start_ns));
    }

    #[test]
    fn no_phonemes_is_one_silence() {
        let spans = spans_from_starts(&[], 500);
        assert_eq!(
            spans,
            vec![PhonemeSpan {
                phoneme: "_".into(),
                start_ns: 0,
                end_ns: 500
            }]
        );
    }
}
