//! flite 2.2 (Debian libflite1) with the CMU US voices slt (female), rms (male, low), awb
//! (Scottish male) and kal16 (US male, diphone), all 16 kHz.
//!
//! `flite_synth_text` returns an utterance holding the wave and the relations built on the way;
//! phoneme timings are the items of its `Segment` relation (`name` a CMU phone, `end` in seconds),
//! mapped here to IPA so the animation crate reads them like espeak-ng's. Rate is the voice
//! feature `duration_stretch` (1 / rate), pitch `int_f0_target_mean` (Hz).
//!
//! Voices are registered once per process and their features are shared: each call sets the
//! features it needs (restoring the voice's own defaults for what it leaves unset) while holding
//! `FLITE`, so calls are serialised. flite's fatal-error path (`cst_error`) exits the process, so
//! inputs are checked here first; flite only ever sees non-empty ASCII-compatible text.

use std::ffi::{c_char, c_int, c_short, c_void, CStr};
use std::sync::Mutex;

use crate::{
    c_text, lock, samples_to_ns, spans_from_starts, SpeechError, Synthesis, SILENCE_PHONEME,
};

/// The voices linked in, as `FliteOptions::voice` names them.
pub const FLITE_VOICES: &[&str] = &["slt", "rms", "awb", "kal16"];
/// Pitch range flite's intonation model handles without breaking up, Hz.
const FLITE_MIN_PITCH_HZ: f32 = 50.0;
const FLITE_MAX_PITCH_HZ: f32 = 400.0;
/// Rate range: duration_stretch 1/0.25 .. 1/3.
const FLITE_MIN_RATE: f32 = 0.25;
const FLITE_MAX_RATE: f32 = 3.0;

mod ffi {
    use super::*;

    /// `cst_voice`: only `features` is read.
    #[repr(C)]
    pub struct Voice {
        pub name: *const c_char,
        pub features: *mut c_void,
        pub ffunctions: *mut c_void,
        pub utt_init: *mut c_void,
    }

    /// `cst_wave`.
    #[repr(C)]
    pub struct Wave {
        pub kind: *const c_char,
        pub sample_rate: c_int,
        pub num_samples: c_int,
        pub num_channels: c_int,
        pub samples: *mut c_short,
    }

    extern "C" {
        pub fn flite_init() -> c_int;
        pub fn register_cmu_us_slt(voxdir: *const c_char) -> *mut Voice;
        pub fn register_cmu_us_rms(voxdir: *const c_char) -> *mut Voice;
        pub fn register_cmu_us_awb(voxdir: *const c_char) -> *mut Voice;
        pub fn register_cmu_us_kal16(voxdir: *const c_char) -> *mut Voice;
        pub fn flite_synth_text(text: *const c_char, voice: *mut Voice) -> *mut c_void;
        pub fn utt_wave(utt: *mut c_void) -> *mut Wave;
        pub fn utt_relation(utt: *const c_void, name: *const c_char) -> *mut c_void;
        pub fn relation_head(relation: *mut c_void) -> *mut c_void;
        pub fn item_next(item: *const c_void) -> *mut c_void;
        pub fn item_feat_float(item: *const c_void, name: *const c_char) -> f32;
        pub fn item_feat_string(item: *const c_void, name: *const c_char) -> *const c_char;
        pub fn delete_utterance(utt: *mut c_void);
        pub fn feat_set_float(features: *mut c_void, name: *const c_char, value: f32);
        pub fn get_param_float(features: *const c_void, name: *const c_char, default: f32) -> f32;
        pub fn feat_present(features: *const c_void, name: *const c_char) -> c_int;
        pub fn feat_remove(features: *mut c_void, name: *const c_char) -> c_int;
    }
}

/// How flite speaks.
#[derive(Debug, Clone, PartialEq)]
pub struct FliteOptions {
    /// One of `FLITE_VOICES`.
    pub voice: String,
    /// Speaking rate relative to the voice's own, 0.25..3 (1 = normal).
    pub rate: f32,
    /// Mean pitch in Hz (50..400); `None` keeps the voice's own.
    pub pitch_hz: Option<f32>,
}

impl Default for FliteOptions {
    fn default() -> Self {
        FliteOptions {
            voice: "slt".into(),
            rate: 1.0,
            pitch_hz: None,
        }
    }
}

struct RegisteredVoice {
    name: &'static str,
    voice: *mut ffi::Voice,
    /// The voice's own values of the features a call may set; `None` where the voice leaves the
    /// feature unset (its models then decide), so a call without that option removes it again.
    default_stretch: Option<f32>,
    default_pitch_hz: Option<f32>,
}

struct Engine {
    voices: Vec<RegisteredVoice>,
}

// SAFETY: the voice pointers are only dereferenced by flite while `FLITE` is held.
unsafe impl Send for Engine {}

static FLITE: Mutex<Option<Engine>> = Mutex::new(None);

const FEAT_STRETCH: &CStr = c"duration_stretch";
const FEAT_PITCH: &CStr = c"int_f0_target_mean";

fn engine(slot: &mut Option<Engine>) -> Result<&mut Engine, SpeechError> {
    if slot.is_none() {
        type Register = unsafe extern "C" fn(*const c_char) -> *mut ffi::Voice;
        let registers: [(&'static str, Register); 4] = [
            ("slt", ffi::register_cmu_us_slt),
            ("rms", ffi::register_cmu_us_rms),
            ("awb", ffi::register_cmu_us_awb),
            ("kal16", ffi::register_cmu_us_kal16),
        ];
        // SAFETY: under the FLITE lock, once per process.
        unsafe { ffi::flite_init() };
        let mut voices = Vec::new();
        for (name, register) in registers {
            // SAFETY: under the FLITE lock; the voices are compiled into their libraries and
            // need no directory (null).
            let voice = unsafe { register(std::ptr::null()) };
            if voice.is_null() {
                return Err(SpeechError::EngineUnavailable(format!(
                    "flite voice cmu_us_{name} failed to register"
                )));
            }
            // SAFETY: `voice` is a live registered voice; its feature set outlives the process.
            let (default_stretch, default_pitch_hz) = unsafe {
                let features = (*voice).features;
                let read = |name: &CStr| {
                    (ffi::feat_present(features, name.as_ptr()) != 0)
                        .then(|| ffi::get_param_float(features, name.as_ptr(), 0.0))
                };
                (read(FEAT_STRETCH), read(FEAT_PITCH))
            };
            voices.push(RegisteredVoice {
                name,
                voice,
                default_stretch,
                default_pitch_hz,
            });
        }
        *slot = Some(Engine { voices });
    }
    Ok(slot.as_mut().expect("initialised above"))
}

/// Speaks `text` with `options`. flite reads digits as numbers and expands common abbreviations.
pub fn synthesize(text: &str, options: &FliteOptions) -> Result<Synthesis, SpeechError> {
    if !(FLITE_MIN_RATE..=FLITE_MAX_RATE).contains(&options.rate) {
        return Err(SpeechError::InvalidArgument(format!(
            "flite rate must be {FLITE_MIN_RATE}..{FLITE_MAX_RATE}, got {}",
            options.rate
        )));
    }
    if let Some(p) = options.pitch_hz {
        if !(FLITE_MIN_PITCH_HZ..=FLITE_MAX_PITCH_HZ).contains(&p) {
            return Err(SpeechError::InvalidArgument(format!(
                "flite pitch must be {FLITE_MIN_PITCH_HZ}..{FLITE_MAX_PITCH_HZ} Hz, got {p}"
            )));
        }
    }
    let c = c_text(text)?;
    let mut guard = lock(&FLITE);
    let engine = engine(&mut guard)?;
    let voice = engine
        .voices
        .iter()
        .find(|v| v.name == options.voice)
        .ok_or_else(|| {
            SpeechError::InvalidArgument(format!(
                "flite has no voice '{}' (voices: {})",
                options.voice,
                FLITE_VOICES.join(", ")
            ))
        })?;
    if text.trim().is_empty() {
        // flite synthesises nothing useful (and some voices misbehave) for empty input.
        return Ok(Synthesis {
            samples: Vec::new(),
            sample_rate_hz: 16_000,
            phonemes: Vec::new(),
        });
    }
    // SAFETY: under the FLITE lock; `voice.voice` is registered and alive; `c` outlives the call.
    // The utterance is deleted on every path below.
    unsafe {
        let features = (*voice.voice).features;
        let stretch = voice.default_stretch.unwrap_or(1.0) / options.rate;
        ffi::feat_set_float(features, FEAT_STRETCH.as_ptr(), stretch);
        match options.pitch_hz.or(voice.default_pitch_hz) {
            Some(pitch) => ffi::feat_set_float(features, FEAT_PITCH.as_ptr(), pitch),
            None => {
                ffi::feat_remove(features, FEAT_PITCH.as_ptr());
            }
        }
        let utt = ffi::flite_synth_text(c.as_ptr(), voice.voice);
        if utt.is_null() {
            return Err(SpeechError::SynthesisFailed(
                "flite_synth_text returned no utterance".into(),
            ));
        }
        let result = read_utterance(utt);
        ffi::delete_utterance(utt);
        result
    }
}

/// Copies the wave and the Segment timings out of a synthesised utterance.
///
/// # Safety
/// `utt` must be a live utterance from `flite_synth_text`, and `FLITE` held.
unsafe fn read_utterance(utt: *mut c_void) -> Result<Synthesis, SpeechError> {
    let wave = ffi::utt_wave(utt);
    if wave.is_null() {
        return Err(SpeechError::SynthesisFailed(
            "flite produced no wave".into(),
        ));
    }
    let w = &*wave;
    if w.num_channels != 1 || w.sample_rate <= 0 || w.num_samples < 0 {
        return Err(SpeechError::SynthesisFailed(format!(
            "flite produced an unexpected wave: {} channels at {} Hz",
            w.num_channels, w.sample_rate
        )));
    }
    let samples = if w.num_samples == 0 || w.samples.is_null() {
        Vec::new()
    } else {
        std::slice::from_raw_parts(w.samples, w.num_samples as usize).to_vec()
    };
    let rate = w.sample_rate as u32;
    let end_ns = samples_to_ns(samples.len() as u64, rate);
    let mut starts: Vec<(String, u64)> = Vec::new();
    let relation = ffi::utt_relation(utt, c"Segment".as_ptr());
    let mut item = if relation.is_null() {
        std::ptr::null_mut()
    } else {
        ffi::relation_head(relation)
    };
    let mut previous_end_ns = 0u64;
    while !item.is_null() {
        let name_ptr = ffi::item_feat_string(item, c"name".as_ptr());
        let name = if name_ptr.is_null() {
            String::new()
        } else {
            CStr::from_ptr(name_ptr).to_string_lossy().into_owned()
        };
        let end_s = ffi::item_feat_float(item, c"end".as_ptr());
        let end = if end_s.is_finite() && end_s > 0.0 {
            (end_s as f64 * 1e9) as u64
        } else {
            previous_end_ns
        };
        starts.push((cmu_to_ipa(&name).to_owned(), previous_end_ns));
        previous_end_ns = end.max(previous_end_ns);
        item = ffi::item_next(item);
    }
    Ok(Synthesis {
        phonemes: spans_from_starts(&starts, end_ns),
        samples,
        sample_rate_hz: rate,
    })
}

/// CMU (ARPAbet-style, lower case) phones to IPA; pauses are silence. Unknown names pass through.
pub(crate) fn cmu_to_ipa(phone: &str) -> &str {
    match phone {
        "pau" | "h#" | "brth" | "" => SILENCE_PHONEME,
        "aa" => "ɑ",
        "ae" => "æ",
        "ah" => "ʌ",
        "ao" => "ɔ",
        "aw" => "aʊ",
        "ax" => "ə",
        "axr" => "ɚ",
        "ay" => "aɪ",
        "b" => "b",
        "ch" => "tʃ",
        "d" => "d",
        "dh" => "ð",
        "dx" => "ɾ",
        "eh" => "ɛ",
        "el" => "l",
        "em" => "m",
        "en" => "n",
        "er" => "ɝ",
        "ey" => "eɪ",
        "f" => "f",
        "g" => "ɡ",
        "hh" | "hv" => "h",
        "ih" => "ɪ",
        "ix" => "ɨ",
        "iy" => "i",
        "jh" => "dʒ",
        "k" => "k",
        "l" => "l",
        "m" => "m",
        "n" => "n",
        "nx" => "ɾ̃",
        "ng" => "ŋ",
        "ow" => "oʊ",
        "oy" => "ɔɪ",
        "p" => "p",
        "r" => "ɹ",
        "s" => "s",
        "sh" => "ʃ",
        "t" => "t",
        "th" => "θ",
        "uh" => "ʊ",
        "uw" => "u",
        "v" => "v",
        "w" => "w",
        "y" => "j",
        "z" => "z",
        "zh" => "ʒ",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::pitch_hz;

    #[test]
    fn every_voice_speaks_with_timed_ipa_phonemes() {
        for &name in FLITE_VOICES {
            let out = synthesize(
                "Hello world, this is a test.",
                &FliteOptions {
                    voice: name.into(),
                    ..FliteOptions::default()
                },
            )
            .unwrap();
            assert_eq!(out.sample_rate_hz, 16_000, "{name}");
            let seconds = out.samples.len() as f64 / 16_000.0;
            assert!((1.0..5.0).contains(&seconds), "{name}: {seconds} s");
            assert_eq!(out.phonemes.first().unwrap().start_ns, 0);
            assert_eq!(out.phonemes.last().unwrap().end_ns, out.duration_ns());
            for w in out.phonemes.windows(2) {
                assert_eq!(w[0].end_ns, w[1].start_ns);
            }
            let names: Vec<&str> = out.phonemes.iter().map(|p| p.phoneme.as_str()).collect();
            assert!(
                names.contains(&"h") && names.contains(&"oʊ") && names.contains(&"ð"),
                "{name}: {names:?}"
            );
        }
    }

    #[test]
    fn rate_stretches_and_pitch_moves_the_voice() {
        let text = "The quick brown fox jumps over the lazy dog.";
        let normal = synthesize(text, &FliteOptions::default()).unwrap();
        let slow = synthesize(
            text,
            &FliteOptions {
                rate: 0.5,
                ..FliteOptions::default()
            },
        )
        .unwrap();
        let ratio = slow.samples.len() as f64 / normal.samples.len() as f64;
        assert!((1.6..2.4).contains(&ratio), "ratio {ratio}");
        // The default is restored when a call leaves the rate unset.
        let again = synthesize(text, &FliteOptions::default()).unwrap();
        assert_eq!(again.samples.len(), normal.samples.len());
        let low = synthesize(
            text,
            &FliteOptions {
                voice: "kal16".into(),
                pitch_hz: Some(80.0),
                ..FliteOptions::default()
            },
        )
        .unwrap();
        let high = synthesize(
            text,
            &FliteOptions {
                voice: "kal16".into(),
                pitch_hz: Some(200.0),
                ..FliteOptions::default()
            },
        )
        .unwrap();
        let (lo, hi) = (
            pitch_hz(&low.samples, 16_000),
            pitch_hz(&high.samples, 16_000),
        );
        assert!(
            hi > lo * 1.5,
            "80 Hz asked: {lo} Hz measured; 200 Hz asked: {hi} Hz measured"
        );
    }

    #[test]
    fn without_a_pitch_each_voice_keeps_its_own() {
        let text = "The quick brown fox jumps over the lazy dog.";
        // A call with a pitch must not leave it behind for the next call without one.
        synthesize(
            text,
            &FliteOptions {
                pitch_hz: Some(100.0),
                ..FliteOptions::default()
            },
        )
        .unwrap();
        let slt = synthesize(text, &FliteOptions::default()).unwrap();
        let rms = synthesize(
            text,
            &FliteOptions {
                voice: "rms".into(),
                ..FliteOptions::default()
            },
        )
        .unwrap();
        let (f, m) = (
            pitch_hz(&slt.samples, 16_000),
            pitch_hz(&rms.samples, 16_000),
        );
        assert!(
            f > 140.0 && m < 130.0 && f > m * 1.3,
            "slt {f} Hz, rms {m} Hz"
        );
    }

    #[test]
    fn bad_options_are_invalid_arguments() {
        for options in [
            FliteOptions {
                voice: "nope".into(),
                ..FliteOptions::default()
            },
            FliteOptions {
                rate: 0.0,
                ..FliteOptions::default()
            },
            FliteOptions {
                pitch_hz: Some(1000.0),
                ..FliteOptions::default()
            },
        ] {
            assert_eq!(
                synthesize("hi", &options).unwrap_err().code(),
                "INVALID_ARGUMENT"
            );
        }
    }

    #[test]
    fn empty_text_is_empty_audio() {
        let out = synthesize("  ", &FliteOptions::default()).unwrap();
        assert!(out.samples.is_empty() && out.phonemes.is_empty());
    }

    #[test]
    fn cmu_phones_map_to_ipa() {
        assert_eq!(cmu_to_ipa("pau"), "_");
        assert_eq!(cmu_to_ipa("th"), "θ");
        assert_eq!(cmu_to_ipa("ay"), "aɪ");
    }
}
