//! Offline speech recognition from the `asr` crate (Whisper over whisper.cpp):
//! `loadWhisperModel(path)` and `WhisperModel.transcribe(pcm)`, each an `AsyncTask` on the libuv
//! thread pool, so neither the model load (~0.3 s) nor a transcription (~0.5 s for a short
//! utterance on 2 cores) blocks the event loop. One `WhisperModel` is shared by any number of
//! concurrent calls (each gets its own whisper.cpp state); how many run at once is the caller's
//! choice (libuv's pool has 4 threads by default).
//!
//! An `AbortSignal` stops a queued call before it starts (napi's `AbortError`) and a running one
//! at its next compute step (`ABORTED`). Errors keep the asr crate's codes: MODEL_NOT_FOUND,
//! MODEL_LOAD_FAILED, INVALID_ARGUMENT, ABORTED, TRANSCRIPTION_FAILED.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ::asr::{AsrError, AudioContext, ModelOptions, TranscribeOptions, Transcript};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::error::{guard, invalid_argument, js_error, rejection, ErrorCode, JsResult};

/// Most threads one transcription may use (the asr crate's limit).
const MAX_THREADS: f64 = 64.0;
/// The encoder's full context in 20 ms positions.
const FULL_AUDIO_CONTEXT: f64 = 1500.0;

/// Model loading options; every field is optional.
#[napi(object, object_to_js = false)]
pub struct WhisperModelOptions {
    /// whisper.cpp flash attention (default false).
    pub flash_attn: Option<bool>,
}

/// Options of one transcription; every field is optional.
#[napi(object, object_to_js = false)]
pub struct WhisperTranscribeOptions {
    /// ISO-639-1 code (default "en"); "auto" detects the language.
    pub language: Option<String>,
    /// Initial prompt: vocabulary and style hints.
    pub prompt: Option<String>,
    /// CPU threads for this call, 1..64 (default 2).
    pub threads: Option<f64>,
    /// Encoder context in 20 ms positions: absent = cut to the utterance (with a floor),
    /// 0 = the full 30 s, 1..1500 = at least this many.
    pub audio_context: Option<f64>,
}

/// A final piece of the transcript, in ms from the start of the audio.
#[napi(object, object_from_js = false)]
pub struct WhisperSegment {
    pub text: String,
    pub start_ms: f64,
    pub end_ms: f64,
}

#[napi(object, object_from_js = false)]
pub struct WhisperTranscript {
    /// The segments' texts joined and trimmed.
    pub text: String,
    pub segments: Vec<WhisperSegment>,
    /// The language used (requested or detected); absent when detection had no audio.
    pub language: Option<String>,
}

fn asr_error(err: AsrError) -> napi::Error<ErrorCode> {
    js_error(ErrorCode::custom(err.code()), err.to_string())
}

fn task<T: Task>(task: T, signal: Option<AbortSignal>) -> AsyncTask<T> {
    AsyncTask::with_optional_signal(task, signal)
}

/// A loaded Whisper model (whisper.cpp ggml file). Opaque; holds no JavaScript memory.
#[napi]
pub struct WhisperModel {
    model: ::asr::WhisperModel,
}

#[napi]
impl WhisperModel {
    /// Not constructible from JavaScript: use `loadWhisperModel`.
    #[napi(constructor)]
    pub fn new() -> Result<Self, ErrorCode> {
        Err(invalid_argument(
            "WhisperModel is created by loadWhisperModel(path)",
        ))
    }

    /// Whether the model knows languages other than English.
    #[napi(getter)]
    pub fn multilingual(&self) -> bool {
        self.model.is_multilingual()
    }

    /// Transcribes mono float audio (-1..1) at 16 kHz on the thread pool.
    #[napi(ts_return_type = "Promise<WhisperTranscript>")]
    pub fn transcribe(
        &self,
        pcm: Float32Array,
        options: Option<WhisperTranscribeOptions>,
        signal: Option<AbortSignal>,
    ) -> AsyncTask<Transcribe> {
        let abort = Arc::new(AtomicBool::new(false));
        if let Some(signal) = &signal {
            let flag = abort.clone();
            signal.on_abort(move || flag.store(true, std::sync::atomic::Ordering::Release));
        }
        let request = guard("WhisperModel.transcribe()", || {
            Ok(TranscribeRequest {
                pcm: pcm.to_vec(),
                options: transcribe_options(options)?,
            })
        });
        task(
            Transcribe {
                model: self.model.clone(),
                request: Some(request),
                abort,
            },
            signal,
        )
    }
}

fn transcribe_options(o: Option<WhisperTranscribeOptions>) -> JsResult<TranscribeOptions> {
    let d = TranscribeOptions::default();
    let Some(o) = o else { return Ok(d) };
    let threads = match o.threads {
        None => d.threads,
        Some(t) if t.is_finite() && t.fract() == 0.0 && (1.0..=MAX_THREADS).contains(&t) => {
            t as usize
        }
        Some(t) => {
            return Err(invalid_argument(format!(
                "options.threads must be an integer from 1 to {MAX_THREADS}, got {t}"
            )))
        }
    };
    let audio_context = match o.audio_context {
        None => AudioContext::Auto,
        Some(0.0) => AudioContext::Full,
        Some(n) if n.is_finite() && n.fract() == 0.0 && (1.0..=FULL_AUDIO_CONTEXT).contains(&n) => {
            AudioContext::Fixed(n as usize)
        }
        Some(n) => {
            return Err(invalid_argument(format!(
                "options.audioContext must be an integer from 0 to {FULL_AUDIO_CONTEXT}, got {n}"
            )))
        }
    };
    let language = match o.language {
        None => d.language,
        Some(l) if l == "auto" => None,
        Some(l) => Some(l),
    };
    Ok(TranscribeOptions {
        language,
        prompt: o.prompt,
        threads,
        audio_context,
    })
}

pub struct TranscribeRequest {
    pcm: Vec<f32>,
    options: TranscribeOptions,
}

pub struct Transcribe {
    model: ::asr::WhisperModel,
    /// The checked request, or why it was refused (rejected like every other failure).
    request: Option<JsResult<TranscribeRequest>>,
    abort: Arc<AtomicBool>,
}

impl Task for Transcribe {
    type Output = JsResult<Transcript>;
    type JsValue = WhisperTranscript;

    fn compute(&mut self) -> Result<Self::Output> {
        let request = self.request.take();
        let (model, abort) = (&self.model, &self.abort);
        Ok(guard("WhisperModel.transcribe()", move || match request {
            Some(Ok(r)) => model
                .transcribe(&r.pcm, &r.options, None, Some(abort))
                .map_err(asr_error),
            Some(Err(err)) => Err(err),
            None => Err(js_error(
                ErrorCode::NATIVE_PANIC,
                "WhisperModel.transcribe(): task ran twice",
            )),
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        match output {
            Ok(t) => Ok(WhisperTranscript {
                text: t.text,
                segments: t
                    .segments
                    .into_iter()
                    .map(|s| WhisperSegment {
                        text: s.text,
                        start_ms: s.start_ms as f64,
                        end_ms: s.end_ms as f64,
                    })
                    .collect(),
                language: t.language,
            }),
            Err(err) => Err(rejection(&env, err)),
        }
    }
}

pub struct LoadModel {
    path: PathBuf,
    options: ModelOptions,
}

impl Task for LoadModel {
    type Output = JsResult<::asr::WhisperModel>;
    type JsValue = WhisperModel;

    fn compute(&mut self) -> Result<Self::Output> {
        let (path, options) = (&self.path, &self.options);
        Ok(guard("loadWhisperModel()", move || {
            ::asr::WhisperModel::load(path, options).map_err(asr_error)
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        match output {
            Ok(model) => Ok(WhisperModel { model }),
            Err(err) => Err(rejection(&env, err)),
        }
    }
}

/// Loads a whisper.cpp ggml model file on the thread pool. Rejects with MODEL_NOT_FOUND or
/// MODEL_LOAD_FAILED.
#[napi(ts_return_type = "Promise<WhisperModel>")]
pub fn load_whisper_model(
    path: String,
    options: Option<WhisperModelOptions>,
    signal: Option<AbortSignal>,
) -> AsyncTask<LoadModel> {
    let options = ModelOptions {
        flash_attn: options.and_then(|o| o.flash_attn).unwrap_or(false),
    };
    task(
        LoadModel {
            path: PathBuf::from(path),
            options,
        },
        signal,
    )
}
