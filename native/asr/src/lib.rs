//! Offline speech recognition with Whisper (whisper.cpp, compiled from source by `whisper-rs-sys`
//! with the build machine's CPU flags, and llamafile's float16 kernels: see .cargo/config.toml).
//!
//! A [`WhisperModel`] is loaded once per process and shared (`Clone` is an `Arc` clone); every
//! [`WhisperModel::transcribe`] call runs on its own whisper.cpp state (KV cache and compute
//! buffers; states of finished calls are kept for reuse), so calls on different threads run side by
//! side on one copy of the weights. Each call is tuned for short voice-turn utterances: greedy
//! decoding without temperature fallback, no timestamps, one segment per 30 s window, 300 ms of
//! silence put in front, and an encoder context cut down to the utterance (the encoder's cost
//! grows with its context, and 30 s of context for 2 s of speech is mostly padding). Audio without
//! signal and segments that are only a non-speech mark ("[BLANK_AUDIO]") give no text.
//!
//! Pure Rust over whisper.cpp: no N-API types here (the binding is `media-node/src/asr.rs`). Not
//! here: resampling (input is mono f32 at 16 kHz), voice activity detection, queueing.

use std::ffi::{c_void, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};

use whisper_rs::whisper_rs_sys;
use whisper_rs::{
    FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperState,
};

/// Whisper's input sample rate.
pub const SAMPLE_RATE_HZ: usize = 16_000;
/// One encoder position covers 20 ms of audio (10 ms mel hop, then a stride-2 convolution).
const SAMPLES_PER_AUDIO_CTX: usize = 320;
/// The encoder's full context: 30 s.
const FULL_AUDIO_CTX: usize = 1500;
/// Extra encoder positions past the utterance's end (200 ms): the model expects to see a little
/// silence after the last word, and cutting exactly at the end clips final consonants.
const AUDIO_CTX_TAIL: usize = 10;
/// Smallest reduced context (384 positions = 7.68 s). Measured on espeak sentences of 1.5-3 s:
/// with 128 or 256 positions the model (trained on 30 s windows) often repeats the sentence until
/// the token limit; from 384 on all were transcribed once. Still ~4x less encoder work than 1500.
const MIN_AUDIO_CTX: usize = 384;
/// The reduced context is rounded up to a multiple of this so similar lengths share compute
/// graph sizes.
const AUDIO_CTX_STEP: usize = 32;
/// whisper.cpp refuses inputs shorter than 100 ms; shorter audio is transcribed as "" (as is
/// audio without signal: see SILENCE_PEAK).
const MIN_SAMPLES: usize = SAMPLE_RATE_HZ / 10;
/// Token budget per segment: generous for speech (fast speech is ~4 tokens/s with punctuation),
/// so it only ends a decoder stuck repeating itself, which would otherwise run to 224 tokens.
const MAX_TOKENS_PER_SECOND: usize = 10;
const MAX_TOKENS_BASE: usize = 24;
/// Idle whisper.cpp states kept for reuse: making one allocates its KV caches and compute
/// buffers (~25 ms, ~5% of a short transcription). Bounded so a burst of concurrent calls does not
/// keep its memory forever.
const MAX_IDLE_STATES: usize = 2;
/// Silence put before the audio (300 ms, what OpenAI's server VAD keeps as prefix padding). Whisper
/// garbles the first words of audio that starts with speech at once; measured on espeak
/// sentences: "Hello there" -> "Hello nera" and "...fox jumps over..." -> "...fox jump, so verve..."
/// without it, both right with it. The end needs none: whisper.cpp pads it with zeros itself.
const LEAD_IN_SAMPLES: usize = SAMPLE_RATE_HZ * 3 / 10;
/// Audio whose loudest sample is below this (-80 dBFS, ~3 steps of 16-bit PCM) holds no signal at
/// all; Whisper "hears" words in pure digital silence ("you"), so such audio is transcribed as "".
const SILENCE_PEAK: f32 = 1e-4;
/// Most threads one call may use.
const MAX_THREADS: usize = 64;

/// What went wrong; `code()` is the stable string the binding hands to JavaScript.
#[derive(Debug, thiserror::Error)]
pub enum AsrError {
    #[error("the Whisper model file {0} does not exist")]
    ModelNotFound(String),
    #[error("whisper.cpp could not load the model {path}: {reason}")]
    ModelLoad { path: String, reason: String },
    #[error("{0}")]
    InvalidArgument(String),
    #[error("the transcription was aborted")]
    Aborted,
    #[error("whisper.cpp failed: {0}")]
    Failed(String),
}

impl AsrError {
    pub fn code(&self) -> &'static str {
        match self {
            AsrError::ModelNotFound(_) => "MODEL_NOT_FOUND",
            AsrError::ModelLoad { .. } => "MODEL_LOAD_FAILED",
            AsrError::InvalidArgument(_) => "INVALID_ARGUMENT",
            AsrError::Aborted => "ABORTED",
            AsrError::Failed(_) => "TRANSCRIPTION_FAILED",
        }
    }
}

/// How a model is loaded.
#[derive(Debug, Clone, Default)]
pub struct ModelOptions {
    /// Flash attention in whisper.cpp (off by default: on this CPU build it is not faster).
    pub flash_attn: bool,
}

/// The encoder context of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AudioContext {
    /// Cut to the utterance (plus a short tail, with a floor) when it is shorter than 30 s.
    #[default]
    Auto,
    /// Always the model's full 30 s.
    Full,
    /// This many encoder positions (20 ms each), 1..=1500; inputs longer than this are still
    /// transcribed completely (the context is widened to cover them).
    Fixed(usize),
}

/// Options of one transcription.
#[derive(Debug, Clone)]
pub struct TranscribeOptions {
    /// ISO-639-1 code ("en"); `None` detects the language.
    pub language: Option<String>,
    /// Initial prompt: vocabulary and style hints.
    pub prompt: Option<String>,
    /// CPU threads for this call (1..=64).
    pub threads: usize,
    pub audio_context: AudioContext,
}

impl Default for TranscribeOptions {
    fn default() -> Self {
        TranscribeOptions {
            language: Some("en".into()),
            prompt: None,
            threads: 2,
            audio_context: AudioContext::Auto,
        }
    }
}

/// A piece of the transcript, final when it is reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Text as Whisper wrote it (usually with a leading space).
    pub text: String,
    /// Times in ms from the start of the given audio (with no timestamps decoded, a segment spans
    /// its whole 30 s window, cut to the audio).
    pub start_ms: u64,
    pub end_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The segments' texts joined, trimmed.
    pub text: String,
    pub segments: Vec<Segment>,
    /// The language used: the requested one, or the detected one (`None` when detection had no
    /// audio to work on).
    pub language: Option<String>,
}

/// A loaded Whisper model, shared by every clone.
#[derive(Clone)]
pub struct WhisperModel {
    ctx: Arc<WhisperContext>,
    /// States of finished calls, reused by the next ones (one per concurrent call at most).
    idle: Arc<Mutex<Vec<WhisperState>>>,
}

impl WhisperModel {
    /// Loads a whisper.cpp ggml model file (blocking: ~0.2 s for base from the page cache).
    pub fn load(path: &Path, options: &ModelOptions) -> Result<Self, AsrError> {
        silence_native_logs();
        if !path.is_file() {
            return Err(AsrError::ModelNotFound(path.display().to_string()));
        }
        let mut params = WhisperContextParameters::default();
        params.use_gpu(false).flash_attn(options.flash_attn);
        let ctx =
            WhisperContext::new_with_params(path, params).map_err(|e| AsrError::ModelLoad {
                path: path.display().to_string(),
                reason: format!("{e:?} (is it a whisper.cpp ggml file?)"),
            })?;
        Ok(WhisperModel {
            ctx: Arc::new(ctx),
            idle: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Whether the model knows languages other than English.
    pub fn is_multilingual(&self) -> bool {
        self.ctx.is_multilingual()
    }

    /// Transcribes mono f32 audio at 16 kHz. `on_segment` sees each segment as soon as it is final,
    /// in order, on the calling thread. `abort`, when set to true from any thread, stops the call
    /// at the next compute step with [`AsrError::Aborted`].
    pub fn transcribe(
        &self,
        pcm: &[f32],
        options: &TranscribeOptions,
        on_segment: Option<&mut dyn FnMut(&Segment)>,
        abort: Option<&AtomicBool>,
    ) -> Result<Transcript, AsrError> {
        let threads = options.threads;
        if threads == 0 || threads > MAX_THREADS {
            return Err(AsrError::InvalidArgument(format!(
                "threads must be from 1 to {MAX_THREADS}, got {threads}"
            )));
        }
        let language = match options.language.as_deref() {
            None | Some("auto") => None,
            Some(code) => {
                if whisper_rs::get_lang_id(code).is_none() {
                    return Err(AsrError::InvalidArgument(format!(
                        "unknown language '{code}'"
                    )));
                }
                if code != "en" && !self.is_multilingual() {
                    return Err(AsrError::InvalidArgument(format!(
                        "this model is English-only, cannot use '{code}'"
                    )));
                }
                Some(code.to_string())
            }
        };
        if let Some(prompt) = &options.prompt {
            if prompt.contains('\0') {
                return Err(AsrError::InvalidArgument(
                    "prompt must not contain NUL characters".into(),
                ));
            }
        }
        let audio_ctx = audio_ctx_for(pcm.len() + LEAD_IN_SAMPLES, options.audio_context)?;
        if abort.is_some_and(|a| a.load(Ordering::Acquire)) {
            return Err(AsrError::Aborted);
        }
        if pcm.len() < MIN_SAMPLES || pcm.iter().all(|x| x.abs() < SILENCE_PEAK) {
            return Ok(Transcript {
                text: String::new(),
                segments: Vec::new(),
                language,
            });
        }

        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut state = match idle {
            Some(state) => state,
            None => self
                .ctx
                .create_state()
                .map_err(|e| AsrError::Failed(format!("creating a state: {e:?}")))?,
        };
        let mut params = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
        params.set_n_threads(threads as i32);
        params.set_language(Some(language.as_deref().unwrap_or("auto")));
        params.set_translate(false);
        params.set_no_context(true);
        params.set_no_timestamps(true);
        params.set_single_segment(true);
        params.set_print_special(false);
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_timestamps(false);
        params.set_suppress_blank(true);
        // No temperature fallback: a re-decode at a higher temperature would double or triple the
        // latency of exactly the turns that are already slow, for a rare gain on short speech.
        params.set_temperature(0.0);
        params.set_temperature_inc(0.0);
        params.set_audio_ctx(audio_ctx as i32);
        let window_seconds = pcm.len().min(30 * SAMPLE_RATE_HZ).div_ceil(SAMPLE_RATE_HZ);
        params.set_max_tokens((MAX_TOKENS_BASE + MAX_TOKENS_PER_SECOND * window_seconds) as i32);
        if let Some(prompt) = options.prompt.as_deref().filter(|p| !p.trim().is_empty()) {
            params.set_initial_prompt(prompt);
        }

        let mut collector = SegmentCollector {
            segments: Vec::new(),
            sink: on_segment,
        };
        // SAFETY: `collector` and `abort` outlive `state.full`, the only call that uses these
        // pointers; whisper.cpp calls both callbacks on this thread, during that call.
        unsafe {
            params.set_new_segment_callback(Some(on_new_segment));
            params.set_new_segment_callback_user_data(
                &mut collector as *mut SegmentCollector as *mut c_void,
            );
            if let Some(flag) = abort {
                params.set_abort_callback(Some(should_abort));
                params.set_abort_callback_user_data(flag as *const AtomicBool as *mut c_void);
            }
        }
        let mut padded = vec![0.0f32; LEAD_IN_SAMPLES + pcm.len()];
        padded[LEAD_IN_SAMPLES..].copy_from_slice(pcm);
        let result = state.full(params, &padded);
        if abort.is_some_and(|a| a.load(Ordering::Acquire)) {
            return Err(AsrError::Aborted);
        }
        result.map_err(|e| AsrError::Failed(format!("{e:?}")))?;

        let language = language.or_else(|| {
            whisper_rs::get_lang_str(state.full_lang_id_from_state()).map(str::to_string)
        });
        let segments = collector.segments;
        // Only a state whose call completed goes back: an aborted or failed one is dropped.
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_STATES {
            idle.push(state);
        }
        drop(idle);
        let text = segments
            .iter()
            .map(|s| s.text.as_str())
            .collect::<String>()
            .trim()
            .to_string();
        Ok(Transcript {
            text,
            segments,
            language,
        })
    }
}

/// The encoder context (in 20 ms positions) for `samples` of 16 kHz audio; 0 means whisper.cpp's
/// default (the full 30 s).
pub fn audio_ctx_for(samples: usize, mode: AudioContext) -> Result<usize, AsrError> {
    let needed = samples.div_ceil(SAMPLES_PER_AUDIO_CTX) + AUDIO_CTX_TAIL;
    let ctx = match mode {
        AudioContext::Full => return Ok(0),
        AudioContext::Auto => needed.div_ceil(AUDIO_CTX_STEP) * AUDIO_CTX_STEP,
        AudioContext::Fixed(n) => {
            if n == 0 || n > FULL_AUDIO_CTX {
                return Err(AsrError::InvalidArgument(format!(
                    "audio context must be from 1 to {FULL_AUDIO_CTX}, got {n}"
                )));
            }
            n.max(needed)
        }
    };
    let ctx = ctx.max(MIN_AUDIO_CTX);
    Ok(if ctx >= FULL_AUDIO_CTX { 0 } else { ctx })
}

struct SegmentCollector<'a> {
    segments: Vec<Segment>,
    sink: Option<&'a mut dyn FnMut(&Segment)>,
}

unsafe extern "C" fn on_new_segment(
    _ctx: *mut whisper_rs_sys::whisper_context,
    state: *mut whisper_rs_sys::whisper_state,
    n_new: std::ffi::c_int,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the SegmentCollector set in transcribe(), alive for the whole call;
    // `state` is whisper.cpp's state for that call, valid during the callback.
    let collector = unsafe { &mut *(user_data as *mut SegmentCollector) };
    let total = unsafe { whisper_rs_sys::whisper_full_n_segments_from_state(state) };
    for i in (total - n_new).max(0)..total {
        let (text, t0, t1) = unsafe {
            let ptr = whisper_rs_sys::whisper_full_get_segment_text_from_state(state, i);
            let text = if ptr.is_null() {
                String::new()
            } else {
                CStr::from_ptr(ptr).to_string_lossy().into_owned()
            };
            (
                text,
                whisper_rs_sys::whisper_full_get_segment_t0_from_state(state, i),
                whisper_rs_sys::whisper_full_get_segment_t1_from_state(state, i),
            )
        };
        // t0/t1 are in 10 ms units.
        let lead_in_ms = (LEAD_IN_SAMPLES * 1000 / SAMPLE_RATE_HZ) as u64;
        let ms = |t: i64| (t.max(0) as u64 * 10).saturating_sub(lead_in_ms);
        let segment = Segment {
            text,
            start_ms: ms(t0),
            end_ms: ms(t1),
        };
        if is_annotation(&segment.text) {
            continue;
        }
        if let Some(sink) = collector.sink.as_mut() {
            sink(&segment);
        }
        collector.segments.push(segment);
    }
}

/// Whisper marks audio without speech with a bracketed annotation instead of text
/// ("[BLANK_AUDIO]", "(music)", "[Applause]"); such a segment is no transcript at all. (whisper.cpp's
/// suppress_nst option removes those tokens, but then silence comes out as a hallucinated "you".)
pub fn is_annotation(text: &str) -> bool {
    let t = text.trim();
    let bracketed = |open: char, close: char| {
        t.starts_with(open) && t.ends_with(close) && !t[1..t.len() - 1].contains([open, close])
    };
    t.len() >= 2 && (bracketed('[', ']') || bracketed('(', ')') || bracketed('*', '*'))
}

unsafe extern "C" fn should_abort(user_data: *mut c_void) -> bool {
    // SAFETY: user_data is the &AtomicBool given to transcribe(), alive for the whole call.
    unsafe { &*(user_data as *const AtomicBool) }.load(Ordering::Acquire)
}

/// whisper.cpp and ggml print model details and timings to stderr on every load and call; the
/// process log is the server's structured log, so their chatter is dropped (errors still reach
/// callers as `AsrError`s).
fn silence_native_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(whisper_rs::install_logging_hooks);
}

#[cfg(test)]
mod tests;
