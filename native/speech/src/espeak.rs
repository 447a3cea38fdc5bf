//! espeak-ng over its classic C API (`speak_lib.h`, libespeak-ng 1.51 from Debian).
//!
//! Initialised once per process in `AUDIO_OUTPUT_SYNCHRONOUS` mode with phoneme events named in
//! IPA: `espeak_Synth` then runs on the calling thread and hands audio and events to our callback
//! before it returns. Each phoneme event carries its exact sample position (`sample`), which
//! becomes the phoneme's start; a phoneme ends where the next one starts, the last at the end of
//! the audio. `phonemize_ipa` runs `espeak_TextToPhonemes` clause by clause for the Piper voice
//! (whose phoneme set is espeak-ng's IPA) and keeps each clause's closing punctuation, as Piper's
//! own phonemizer does.
//!
//! espeak-ng's state (voice, parameters, the callback, internal buffers) is global and not
//! thread-safe: every call holds `ESPEAK` for its whole duration, and the audio collector lives in
//! a thread-local that only the thread holding the lock touches.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_short, c_uint, c_void, CStr};
use std::sync::Mutex;

use crate::{c_text, lock, samples_to_ns, spans_from_starts, SpeechError, Synthesis};

/// espeak-ng's own default rate, words per minute (`espeakRATE_NORMAL`).
pub const ESPEAK_DEFAULT_WPM: u32 = 175;
/// The rate range espeak-ng accepts (`espeakRATE_MINIMUM`..`espeakRATE_MAXIMUM`).
pub const ESPEAK_MIN_WPM: u32 = 80;
pub const ESPEAK_MAX_WPM: u32 = 450;
/// Milliseconds of audio per callback: small enough to keep the collector's copies cheap, large
/// enough that a sentence takes a handful of calls.
const CALLBACK_BUFFER_MS: c_int = 200;

mod ffi {
    use super::*;

    pub const AUDIO_OUTPUT_SYNCHRONOUS: c_int = 2;
    pub const INITIALIZE_PHONEME_EVENTS: c_int = 0x0001;
    pub const INITIALIZE_PHONEME_IPA: c_int = 0x0002;
    /// Without it, a failed initialisation calls `exit()` inside the library.
    pub const INITIALIZE_DONT_EXIT: c_int = 0x8000;
    pub const EVENT_LIST_TERMINATED: c_int = 0;
    pub const EVENT_PHONEME: c_int = 7;
    pub const CHARS_UTF8: c_uint = 1;
    /// A sentence pause after the text: without it consecutive sentences (one call each) run
    /// into each other.
    pub const ENDPAUSE: c_uint = 0x1000;
    pub const POS_CHARACTER: c_int = 1;
    pub const PHONEMES_IPA: c_int = 0x02;
    pub const PARAM_RATE: c_int = 1;
    pub const PARAM_PITCH: c_int = 3;
    pub const PARAM_RANGE: c_int = 4;
    pub const EE_OK: c_int = 0;

    /// `espeak_EVENT`. The C enum `type` is an int.
    #[repr(C)]
    pub struct Event {
        pub kind: c_int,
        pub unique_identifier: c_uint,
        pub text_position: c_int,
        pub length: c_int,
        /// Milliseconds from the start of the message.
        pub audio_position: c_int,
        /// Samples from the start of the message (documented as internal; exact where
        /// `audio_position` is rounded to milliseconds).
        pub sample: c_int,
        pub user_data: *mut c_void,
        pub id: EventId,
    }

    #[repr(C)]
    pub union EventId {
        pub number: c_int,
        pub name: *const c_char,
        /// Phoneme names: UTF-8, NUL-terminated unless all 8 bytes are used.
        pub string: [u8; 8],
    }

    pub type SynthCallback =
        unsafe extern "C" fn(wav: *mut c_short, numsamples: c_int, events: *mut Event) -> c_int;

    extern "C" {
        pub fn espeak_Initialize(
            output: c_int,
            buflength: c_int,
            path: *const c_char,
            options: c_int,
        ) -> c_int;
        pub fn espeak_SetSynthCallback(callback: SynthCallback);
        pub fn espeak_SetVoiceByName(name: *const c_char) -> c_int;
        pub fn espeak_SetParameter(parameter: c_int, value: c_int, relative: c_int) -> c_int;
        #[allow(clippy::too_many_arguments)]
        pub fn espeak_Synth(
            text: *const c_void,
            size: usize,
            position: c_uint,
            position_type: c_int,
            end_position: c_uint,
            flags: c_uint,
            unique_identifier: *mut c_uint,
            user_data: *mut c_void,
        ) -> c_int;
        pub fn espeak_TextToPhonemes(
            textptr: *mut *const c_void,
            textmode: c_int,
            phonememode: c_int,
        ) -> *const c_char;
    }
}

/// How espeak-ng speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspeakOptions {
    /// An espeak-ng voice, optionally with a variant: "en-us", "en-us+f3", "en+m3".
    pub voice: String,
    /// Words per minute, 80..450 (175 is espeak-ng's normal rate).
    pub rate_wpm: u32,
    /// Base pitch 0..100 (50 is the voice's normal pitch).
    pub pitch: u32,
    /// Pitch range 0..100 (0 monotone, 50 normal).
    pub range: u32,
}

impl Default for EspeakOptions {
    fn default() -> Self {
        EspeakOptions {
            voice: "en-us".into(),
            rate_wpm: ESPEAK_DEFAULT_WPM,
            pitch: 50,
            range: 50,
        }
    }
}

impl EspeakOptions {
    fn check(&self) -> Result<(), SpeechError> {
        if !(ESPEAK_MIN_WPM..=ESPEAK_MAX_WPM).contains(&self.rate_wpm) {
            return Err(SpeechError::InvalidArgument(format!(
                "espeak-ng rate must be {ESPEAK_MIN_WPM}..{ESPEAK_MAX_WPM} words per minute, got {}",
                self.rate_wpm
            )));
        }
        if self.pitch > 100 || self.range > 100 {
            return Err(SpeechError::InvalidArgument(format!(
                "espeak-ng pitch and range must be 0..100, got {} and {}",
                self.pitch, self.range
            )));
        }
        let ok = !self.voice.is_empty()
            && self.voice.len() <= 64
            && self
                .voice
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-+_".contains(&b));
        if !ok {
            return Err(SpeechError::InvalidArgument(format!(
                "espeak-ng voice must be a voice name like 'en-us' or 'en-us+f3', got '{}'",
                self.voice
            )));
        }
        Ok(())
    }
}

/// The engine after `espeak_Initialize`: its output rate and the voice last selected (loading a
/// voice reads its files, so it is only done when the voice changes).
struct Engine {
    sample_rate_hz: u32,
    voice: Option<String>,
}

/// `None` until first use; `Some(Err)` when initialisation failed (it is not retried: the data
/// files do not appear while the process runs).
static ESPEAK: Mutex<Option<Result<Engine, String>>> = Mutex::new(None);

/// What the callback gathers for the one `espeak_Synth` in progress on this thread.
#[derive(Default)]
struct Collector {
    samples: Vec<i16>,
    /// (IPA name, sample position) of each phoneme event.
    phonemes: Vec<(String, u64)>,
}

thread_local! {
    static COLLECTOR: RefCell<Option<Collector>> = const { RefCell::new(None) };
}

unsafe extern "C" fn synth_callback(
    wav: *mut c_short,
    numsamples: c_int,
    events: *mut ffi::Event,
) -> c_int {
    // A panic must not unwind into C: catch it and ask espeak-ng to stop (non-zero return).
    let result = std::panic::catch_unwind(|| {
        COLLECTOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            let Some(collector) = slot.as_mut() else {
                return;
            };
            if !wav.is_null() && numsamples > 0 {
                // SAFETY: espeak-ng passes `numsamples` valid samples at `wav` for this call.
                let chunk = unsafe { std::slice::from_raw_parts(wav, numsamples as usize) };
                collector.samples.extend_from_slice(chunk);
            }
            let mut event = events;
            while !event.is_null() {
                // SAFETY: `events` is an array terminated by an EVENT_LIST_TERMINATED entry.
                let e = unsafe { &*event };
                if e.kind == ffi::EVENT_LIST_TERMINATED {
                    break;
                }
                if e.kind == ffi::EVENT_PHONEME {
                    // SAFETY: phoneme events use the `string` member of the union.
                    let raw = unsafe { e.id.string };
                    let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                    let name = String::from_utf8_lossy(&raw[..len]).into_owned();
                    if !name.is_empty() {
                        collector.phonemes.push((name, e.sample.max(0) as u64));
                    }
                }
                // SAFETY: still inside the terminated array (this entry was not the terminator).
                event = unsafe { event.add(1) };
            }
        })
    });
    match result {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

fn engine(slot: &mut Option<Result<Engine, String>>) -> Result<&mut Engine, SpeechError> {
    if slot.is_none() {
        let options = ffi::INITIALIZE_PHONEME_EVENTS
            | ffi::INITIALIZE_PHONEME_IPA
            | ffi::INITIALIZE_DONT_EXIT;
        // SAFETY: called once, under the ESPEAK lock; a null path means espeak-ng's default data
        // directory (Debian: /usr/lib/x86_64-linux-gnu/espeak-ng-data).
        let rate = unsafe {
            ffi::espeak_Initialize(
                ffi::AUDIO_OUTPUT_SYNCHRONOUS,
                CALLBACK_BUFFER_MS,
                std::ptr::null(),
                options,
            )
        };
        *slot = Some(if rate > 0 {
            // SAFETY: the callback is a plain function that lives for the whole process.
            unsafe { ffi::espeak_SetSynthCallback(synth_callback) };
            Ok(Engine {
                sample_rate_hz: rate as u32,
                voice: None,
            })
        } else {
            Err(format!(
                "espeak-ng could not be initialised (code {rate}): is espeak-ng-data installed (apt-get install espeak-ng)?"
            ))
        });
    }
    match slot.as_mut() {
        Some(Ok(engine)) => Ok(engine),
        Some(Err(message)) => Err(SpeechError::EngineUnavailable(message.clone())),
        None => unreachable!("initialised above"),
    }
}

fn select_voice(engine: &mut Engine, voice: &str) -> Result<(), SpeechError> {
    if engine.voice.as_deref() == Some(voice) {
        return Ok(());
    }
    let name = c_text(voice)?;
    // SAFETY: under the ESPEAK lock; `name` is a valid C string for the call.
    let rc = unsafe { ffi::espeak_SetVoiceByName(name.as_ptr()) };
    if rc != ffi::EE_OK {
        engine.voice = None;
        return Err(SpeechError::InvalidArgument(format!(
            "espeak-ng has no voice '{voice}' (code {rc})"
        )));
    }
    engine.voice = Some(voice.to_owned());
    Ok(())
}

/// Speaks `text` (UTF-8; numbers are read as words) with `options`.
pub fn synthesize(text: &str, options: &EspeakOptions) -> Result<Synthesis, SpeechError> {
    options.check()?;
    let text = c_text(text)?;
    let mut guard = lock(&ESPEAK);
    let engine = engine(&mut guard)?;
    select_voice(engine, &options.voice)?;
    for (param, value) in [
        (ffi::PARAM_RATE, options.rate_wpm),
        (ffi::PARAM_PITCH, options.pitch),
        (ffi::PARAM_RANGE, options.range),
    ] {
        // SAFETY: under the ESPEAK lock; plain integer parameters.
        let rc = unsafe { ffi::espeak_SetParameter(param, value as c_int, 0) };
        if rc != ffi::EE_OK {
            return Err(SpeechError::SynthesisFailed(format!(
                "espeak_SetParameter({param}, {value}) failed (code {rc})"
            )));
        }
    }
    COLLECTOR.with(|cell| *cell.borrow_mut() = Some(Collector::default()));
    let bytes = text.as_bytes_with_nul();
    // SAFETY: under the ESPEAK lock; synchronous mode runs the callback on this thread before
    // returning, and `text` outlives the call.
    let rc = unsafe {
        ffi::espeak_Synth(
            bytes.as_ptr() as *const c_void,
            bytes.len(),
            0,
            ffi::POS_CHARACTER,
            0,
            ffi::CHARS_UTF8 | ffi::ENDPAUSE,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    let collected = COLLECTOR
        .with(|cell| cell.borrow_mut().take())
        .unwrap_or_default();
    if rc != ffi::EE_OK {
        return Err(SpeechError::SynthesisFailed(format!(
            "espeak_Synth failed (code {rc})"
        )));
    }
    let rate = engine.sample_rate_hz;
    let end_ns = samples_to_ns(collected.samples.len() as u64, rate);
    let mut starts: Vec<(String, u64)> = collected
        .phonemes
        .into_iter()
        .map(|(name, sample)| (name, samples_to_ns(sample, rate)))
        .collect();
    // The end pause has no phoneme event: without a silence there, the last phoneme (and the
    // mouth shape) would be held through it.
    let quiet_from = samples_to_ns(trailing_silence_start(&collected.samples, rate), rate);
    if starts.last().is_some_and(|(_, start)| quiet_from > *start) && quiet_from < end_ns {
        starts.push((crate::SILENCE_PHONEME.to_owned(), quiet_from));
    }
    Ok(Synthesis {
        phonemes: spans_from_starts(&starts, end_ns),
        samples: collected.samples,
        sample_rate_hz: rate,
    })
}

/// Peak level below which a 5 ms frame counts as silence (about -40 dBFS).
const SILENCE_PEAK: u16 = 330;

/// The sample where the audio's trailing silence starts (the length when it ends loud).
fn trailing_silence_start(samples: &[i16], rate: u32) -> u64 {
    let frame = (rate as usize / 200).max(1);
    let mut end = samples.len();
    while end > 0 {
        let start = end.saturating_sub(frame);
        if samples[start..end]
            .iter()
            .any(|s| s.unsigned_abs() > SILENCE_PEAK)
        {
            break;
        }
        end = start;
    }
    end as u64
}

/// The clause-closing punctuation Piper's phoneme map knows, kept after each clause.
const CLAUSE_PUNCTUATION: &[char] = &['.', ',', ';', ':', '!', '?'];

/// `text` as espeak-ng IPA, one string per clause (espeak-ng splits at sentence ends and at
/// commas, semicolons, colons), words separated by spaces, each clause followed by its closing
/// punctuation when it had one. `voice` picks the language rules ("en-us").
pub fn phonemize_ipa(text: &str, voice: &str) -> Result<Vec<String>, SpeechError> {
    EspeakOptions {
        voice: voice.to_owned(),
        ..EspeakOptions::default()
    }
    .check()?;
    let text = c_text(text)?;
    let mut guard = lock(&ESPEAK);
    let engine = engine(&mut guard)?;
    select_voice(engine, voice)?;
    let bytes = text.as_bytes();
    let base = text.as_ptr();
    let mut ptr: *const c_void = base as *const c_void;
    let mut clauses = Vec::new();
    while !ptr.is_null() {
        let before = ptr as usize - base as usize;
        // SAFETY: under the ESPEAK lock; `ptr` points into `text` (NUL-terminated, alive for
        // the loop); espeak-ng advances it or sets it to null at the end. The returned buffer
        // is espeak-ng's own and is copied before the next call.
        let out = unsafe {
            ffi::espeak_TextToPhonemes(&mut ptr, ffi::CHARS_UTF8 as c_int, ffi::PHONEMES_IPA)
        };
        let after = if ptr.is_null() {
            bytes.len()
        } else {
            (ptr as usize - base as usize).min(bytes.len())
        };
        if out.is_null() {
            break;
        }
        // SAFETY: a NUL-terminated string owned by espeak-ng, valid until the next call.
        let ipa = unsafe { CStr::from_ptr(out) }
            .to_string_lossy()
            .trim()
            .to_owned();
        let consumed = String::from_utf8_lossy(&bytes[before.min(after)..after]);
        let punctuation = closing_punctuation(&consumed);
        if !ipa.is_empty() {
            clauses.push(match punctuation {
                Some(p) => format!("{ipa}{p}"),
                None => ipa,
            });
        }
        if after <= before && !ptr.is_null() {
            // No progress: stop rather than loop forever on text espeak-ng cannot consume.
            break;
        }
    }
    Ok(clauses)
}

/// The punctuation that closed a clause. espeak-ng advances the text pointer one character into
/// the next clause (its look-ahead), so the consumed slice is e.g. "Hello there, h": the answer is
/// the last clause mark followed by whitespace or the end ("3.5" holds no clause mark).
fn closing_punctuation(consumed: &str) -> Option<char> {
    let chars: Vec<char> = consumed.chars().collect();
    (0..chars.len()).rev().find_map(|i| {
        let c = chars[i];
        let closes = chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        (CLAUSE_PUNCTUATION.contains(&c) && closes).then_some(c)
    })
}

/// Only for tests in this crate: the output rate of espeak-ng.
#[cfg(test)]
pub(crate) fn sample_rate_hz() -> u32 {
    let mut guard = lock(&ESPEAK);
    engine(&mut guard).map(|e| e.sample_rate_hz).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::pitch_hz;

    #[test]
    fn speaks_a_sentence_with_phonemes_covering_the_audio() {
        let out = synthesize("Hello world, I have 42 apples.", &EspeakOptions::default()).unwrap();
        assert_eq!(out.sample_rate_hz, sample_rate_hz());
        let seconds = out.samples.len() as f64 / out.sample_rate_hz as f64;
        assert!((1.0..5.0).contains(&seconds), "{seconds} s");
        assert!(out.phonemes.len() > 15, "{:?}", out.phonemes);
        assert_eq!(out.phonemes.first().unwrap().start_ns, 0);
        assert_eq!(out.phonemes.last().unwrap().end_ns, out.duration_ns());
        for w in out.phonemes.windows(2) {
            assert_eq!(w[0].end_ns, w[1].start_ns);
            assert!(w[0].end_ns > w[0].start_ns);
        }
        // IPA names: "world" has a rhotic vowel and an l; "forty-two" is read as words (t, uː).
        // The end pause is silence, not the last vowel held.
        let last = out.phonemes.last().unwrap();
        assert_eq!(last.phoneme, "_");
        assert!(last.end_ns - last.start_ns > 150_000_000, "{last:?}");
        let names: String = out.phonemes.iter().map(|p| p.phoneme.as_str()).collect();
        assert!(
            names.contains('w') && names.contains('l') && names.contains('t'),
            "{names}"
        );
    }

    #[test]
    fn rate_and_pitch_change_the_audio() {
        let text = "The quick brown fox jumps over the lazy dog.";
        let normal = synthesize(text, &EspeakOptions::default()).unwrap();
        let fast = synthesize(
            text,
            &EspeakOptions {
                rate_wpm: 350,
                ..EspeakOptions::default()
            },
        )
        .unwrap();
        assert!(fast.samples.len() < normal.samples.len() * 3 / 4);
        let low = synthesize(
            text,
            &EspeakOptions {
                pitch: 10,
                ..EspeakOptions::default()
            },
        )
        .unwrap();
        let high = synthesize(
            text,
            &EspeakOptions {
                pitch: 90,
                ..EspeakOptions::default()
            },
        )
        .unwrap();
        let (lo, hi) = (
            pitch_hz(&low.samples, low.sample_rate_hz),
            pitch_hz(&high.samples, high.sample_rate_hz),
        );
        assert!(hi > lo * 1.3, "low {lo} Hz, high {hi} Hz");
    }

    #[test]
    fn an_unknown_voice_is_an_invalid_argument() {
        let err = synthesize(
            "hi",
            &EspeakOptions {
                voice: "xx-nope".into(),
                ..EspeakOptions::default()
            },
        )
        .unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        // And the engine still works afterwards with a good voice.
        assert!(!synthesize("hi", &EspeakOptions::default())
            .unwrap()
            .samples
            .is_empty());
    }

    #[test]
    fn out_of_range_options_are_refused() {
        let err = synthesize(
            "hi",
            &EspeakOptions {
                rate_wpm: 20,
                ..EspeakOptions::default()
            },
        )
        .unwrap_err();
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert!(synthesize("a\0b", &EspeakOptions::default()).is_err());
    }

    #[test]
    fn phonemize_ipa_returns_clauses_with_their_punctuation() {
        let clauses = phonemize_ipa("Hello there, how are you? Fine.", "en-us").unwrap();
        assert_eq!(clauses.len(), 3, "{clauses:?}");
        assert!(clauses[0].ends_with(','), "{clauses:?}");
        assert!(clauses[1].ends_with('?'), "{clauses:?}");
        assert!(clauses[2].ends_with('.'), "{clauses:?}");
        assert!(clauses[0].contains('ð'), "{clauses:?}"); // "there"
        assert!(clauses[0].contains('ˈ'), "{clauses:?}"); // stress marks, as Piper expects
    }

    #[test]
    fn closing_punctuation_ignores_the_look_ahead_and_decimal_points() {
        assert_eq!(closing_punctuation("Hello there, h"), Some(','));
        assert_eq!(closing_punctuation("ine."), Some('.'));
        assert_eq!(closing_punctuation("I have 3.5 apples"), None);
    }

    #[test]
    fn calls_from_many_threads_are_serialised() {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    let text = format!("Thread number {i} is speaking now.");
                    let out = synthesize(&text, &EspeakOptions::default()).unwrap();
                    let ipa = phonemize_ipa(&text, "en-us").unwrap();
                    (out.samples.len(), ipa.len())
                })
            })
            .collect();
        for h in handles {
            let (samples, clauses) = h.join().unwrap();
            assert!(samples > 10_000);
            assert_eq!(clauses, 1);
        }
    }
}
