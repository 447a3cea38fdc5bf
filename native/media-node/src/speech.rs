//! Offline speech synthesis from the `speech` crate: `synthesizeEspeak`, `synthesizeFlite` and
//! `phonemizeIpa`, each an `AsyncTask` on the libuv thread pool (the engines serialise their own
//! calls behind a mutex, so concurrent promises queue there and never block the event loop).
//!
//! Options arrive as JS numbers and are checked here (ranges are the speech crate's to judge);
//! results leave as an `Int16Array` of mono PCM, its rate, and phoneme spans in nanoseconds from
//! the start of that audio. Engine errors keep the speech crate's codes: INVALID_ARGUMENT,
//! TTS_ENGINE_UNAVAILABLE, TTS_SYNTHESIS_FAILED.

use napi::bindgen_prelude::*;
use napi_derive::napi;
use speech::{EspeakOptions, FliteOptions, SpeechError, Synthesis};

use crate::error::{guard, invalid_argument, js_error, rejection, ErrorCode, JsResult};

/// espeak-ng settings; every field is optional.
#[napi(object, object_to_js = false)]
pub struct EspeakSynthOptions {
    /// Voice and variant, e.g. "en-us", "en-us+f3" (default "en-us").
    pub voice: Option<String>,
    /// Words per minute, 80..450 (default 175).
    pub rate_wpm: Option<f64>,
    /// Base pitch 0..100 (default 50).
    pub pitch: Option<f64>,
    /// Pitch range 0..100 (default 50).
    pub range: Option<f64>,
}

/// flite settings; every field is optional.
#[napi(object, object_to_js = false)]
pub struct FliteSynthOptions {
    /// "slt" (default), "rms", "awb" or "kal16".
    pub voice: Option<String>,
    /// Speaking rate relative to the voice's own, 0.25..3 (default 1).
    pub rate: Option<f64>,
    /// Mean pitch in Hz, 50..400 (default: the voice's own).
    pub pitch_hz: Option<f64>,
}

/// One phoneme of synthesised speech (IPA, `_` for silence), in ns from the start of its audio.
#[napi(object, object_from_js = false)]
pub struct SynthPhoneme {
    pub phoneme: String,
    pub start_ns: f64,
    pub end_ns: f64,
}

/// Mono 16-bit speech and its phoneme timeline, which covers the audio from 0 to its end.
#[napi(object, object_from_js = false)]
pub struct SynthesizedSpeech {
    pub pcm: Int16Array,
    pub sample_rate_hz: u32,
    pub phonemes: Vec<SynthPhoneme>,
}

fn speech_error(err: SpeechError) -> napi::Error<ErrorCode> {
    js_error(ErrorCode::custom(err.code()), err.to_string())
}

/// A number option that must be a finite value within `min..=max`.
fn ranged(field: &str, value: Option<f64>, min: f64, max: f64, default: f64) -> JsResult<f64> {
    let v = value.unwrap_or(default);
    if !v.is_finite() || v < min || v > max {
        return Err(invalid_argument(format!(
            "{field} must be a number from {min} to {max}, got {v}"
        )));
    }
    Ok(v)
}

fn espeak_options(o: Option<EspeakSynthOptions>) -> JsResult<EspeakOptions> {
    let o = o.unwrap_or(EspeakSynthOptions {
        voice: None,
        rate_wpm: None,
        pitch: None,
        range: None,
    });
    let d = EspeakOptions::default();
    Ok(EspeakOptions {
        voice: o.voice.unwrap_or(d.voice),
        rate_wpm: ranged(
            "options.rateWpm",
            o.rate_wpm,
            speech::ESPEAK_MIN_WPM as f64,
            speech::ESPEAK_MAX_WPM as f64,
            d.rate_wpm as f64,
        )?
        .round() as u32,
        pitch: ranged("options.pitch", o.pitch, 0.0, 100.0, d.pitch as f64)?.round() as u32,
        range: ranged("options.range", o.range, 0.0, 100.0, d.range as f64)?.round() as u32,
    })
}

fn flite_options(o: Option<FliteSynthOptions>) -> JsResult<FliteOptions> {
    let o = o.unwrap_or(FliteSynthOptions {
        voice: None,
        rate: None,
        pitch_hz: None,
    });
    let d = FliteOptions::default();
    Ok(FliteOptions {
        voice: o.voice.unwrap_or(d.voice),
        // The speech crate checks the exact ranges; here only that they are numbers at all.
        rate: ranged(
            "options.rate",
            o.rate,
            f64::MIN_POSITIVE,
            1e6,
            d.rate as f64,
        )? as f32,
        pitch_hz: match o.pitch_hz {
            Some(p) => Some(ranged("options.pitchHz", Some(p), f64::MIN_POSITIVE, 1e6, p)? as f32),
            None => None,
        },
    })
}

enum Request {
    Espeak(String, EspeakOptions),
    Flite(String, FliteOptions),
}

pub struct Synthesize {
    /// The checked request, or why it was refused (rejected like every other failure).
    request: Option<JsResult<Request>>,
}

impl Task for Synthesize {
    type Output = JsResult<Synthesis>;
    type JsValue = SynthesizedSpeech;

    fn compute(&mut self) -> Result<Self::Output> {
        let request = self.request.take();
        Ok(guard("synthesize()", move || match request {
            Some(Ok(Request::Espeak(text, options))) => {
                speech::synthesize_espeak(&text, &options).map_err(speech_error)
            }
            Some(Ok(Request::Flite(text, options))) => {
                speech::synthesize_flite(&text, &options).map_err(speech_error)
            }
            Some(Err(err)) => Err(err),
            None => Err(js_error(
                ErrorCode::NATIVE_PANIC,
                "synthesize(): task ran twice",
            )),
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        match output {
            Ok(s) => Ok(SynthesizedSpeech {
                sample_rate_hz: s.sample_rate_hz,
                phonemes: s
                    .phonemes
                    .into_iter()
                    .map(|p| SynthPhoneme {
                        phoneme: p.phoneme,
                        start_ns: p.start_ns as f64,
                        end_ns: p.end_ns as f64,
                    })
                    .collect(),
                pcm: Int16Array::new(s.samples),
            }),
            Err(err) => Err(rejection(&env, err)),
        }
    }
}

fn task<T: Task>(task: T, signal: Option<AbortSignal>) -> AsyncTask<T> {
    match signal {
        Some(signal) => AsyncTask::with_signal(task, signal),
        None => AsyncTask::new(task),
    }
}

/// Speaks `text` with espeak-ng (22.05 kHz) on the thread pool. Numbers are read as words.
#[napi(ts_return_type = "Promise<SynthesizedSpeech>")]
pub fn synthesize_espeak(
    text: String,
    options: Option<EspeakSynthOptions>,
    signal: Option<AbortSignal>,
) -> AsyncTask<Synthesize> {
    let request = espeak_options(options).map(|o| Request::Espeak(text, o));
    task(
        Synthesize {
            request: Some(request),
        },
        signal,
    )
}

/// Speaks `text` with a flite CMU voice (16 kHz) on the thread pool.
#[napi(ts_return_type = "Promise<SynthesizedSpeech>")]
pub fn synthesize_flite(
    text: String,
    options: Option<FliteSynthOptions>,
    signal: Option<AbortSignal>,
) -> AsyncTask<Synthesize> {
    let request = flite_options(options).map(|o| Request::Flite(text, o));
    task(
        Synthesize {
            request: Some(request),
        },
        signal,
    )
}

pub struct Phonemize {
    text: String,
    voice: String,
}

impl Task for Phonemize {
    type Output = JsResult<Vec<String>>;
    type JsValue = Vec<String>;

    fn compute(&mut self) -> Result<Self::Output> {
        let (text, voice) = (
            std::mem::take(&mut self.text),
            std::mem::take(&mut self.voice),
        );
        Ok(guard("phonemizeIpa()", move || {
            speech::phonemize_ipa(&text, &voice).map_err(speech_error)
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        output.map_err(|err| rejection(&env, err))
    }
}

/// `text` as espeak-ng IPA (the phoneme set of Piper voices), one string per clause, each ending
/// with the clause's punctuation when it had one. `voice` picks the language ("en-us").
#[napi(ts_return_type = "Promise<string[]>")]
pub fn phonemize_ipa(
    text: String,
    voice: String,
    signal: Option<AbortSignal>,
) -> AsyncTask<Phonemize> {
    task(Phonemize { text, voice }, signal)
}
