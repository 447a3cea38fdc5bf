//! Tests against the real model (models/weights/asr/ggml-base.bin, made by `src/cli/setup.sh`, or
//! the file named by ASR_WHISPER_MODEL); each test that needs it says so and passes without it.
//! Speech comes from espeak-ng (installed by setup.sh).

use super::*;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn model() -> Option<WhisperModel> {
    static MODEL: OnceLock<Option<WhisperModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = std::env::var_os("ASR_WHISPER_MODEL")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                        .join("../../models/weights/asr/ggml-base.bin")
                });
            if !path.is_file() {
                eprintln!(
                    "skipping: no Whisper model at {} (run src/cli/setup.sh to make it)",
                    path.display()
                );
                return None;
            }
            Some(WhisperModel::load(&path, &ModelOptions::default()).expect("model loads"))
        })
        .clone()
}

/// `text` spoken by espeak-ng (en-us, 22.05 kHz 16-bit WAV) at 16 kHz, -1..1.
fn speech(text: &str) -> Vec<f32> {
    let out = Command::new("espeak-ng")
        .args(["--stdout", "-v", "en-us", text])
        .output()
        .expect("espeak-ng runs");
    assert!(out.status.success(), "espeak-ng failed");
    let wav = out.stdout;
    // espeak-ng writes a canonical 44-byte header; its data size fields are unset on a pipe.
    let rate = u32::from_le_bytes(wav[24..28].try_into().unwrap()) as usize;
    let samples: Vec<f32> = wav[44..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 / 32768.0)
        .collect();
    // Windowed-sinc interpolation with the cutoff below 8 kHz, so nothing aliases into the band
    // Whisper hears (plain linear interpolation measurably hurt recognition).
    const HALF_TAPS: i64 = 16;
    let ratio = rate as f64 / SAMPLE_RATE_HZ as f64;
    let cutoff = 0.9 * SAMPLE_RATE_HZ as f64 / 2.0 / rate as f64; // cycles per input sample
    let n_out = samples.len() * SAMPLE_RATE_HZ / rate;
    (0..n_out)
        .map(|i| {
            let t = i as f64 * ratio;
            let centre = t.floor() as i64;
            let mut acc = 0.0;
            for j in (centre - HALF_TAPS + 1)..=(centre + HALF_TAPS) {
                if j < 0 || j as usize >= samples.len() {
                    continue;
                }
                let x = t - j as f64;
                let sinc = if x == 0.0 {
                    2.0 * cutoff
                } else {
                    (2.0 * std::f64::consts::PI * cutoff * x).sin() / (std::f64::consts::PI * x)
                };
                let window = 0.5 + 0.5 * (std::f64::consts::PI * x / HALF_TAPS as f64).cos();
                acc += samples[j as usize] as f64 * sinc * window;
            }
            acc as f32
        })
        .collect()
}

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Word error rate: word-level edit distance over the reference length.
fn wer(reference: &str, hypothesis: &str) -> f64 {
    let (r, h) = (words(reference), words(hypothesis));
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for i in 1..=r.len() {
        let mut cur = vec![i; h.len() + 1];
        for j in 1..=h.len() {
            let sub = prev[j - 1] + usize::from(r[i - 1] != h[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[h.len()] as f64 / r.len().max(1) as f64
}

#[test]
fn audio_ctx_for_cuts_the_context_to_the_utterance_with_a_floor() {
    // 1 s: 50 positions + tail, below the floor.
    assert_eq!(
        audio_ctx_for(16_000, AudioContext::Auto).unwrap(),
        MIN_AUDIO_CTX
    );
    // 5 s: 250 + 10 = 260, still below the floor; 10 s: 500 + 10 = 510, rounded up to 512.
    assert_eq!(
        audio_ctx_for(80_000, AudioContext::Auto).unwrap(),
        MIN_AUDIO_CTX
    );
    assert_eq!(audio_ctx_for(160_000, AudioContext::Auto).unwrap(), 512);
    // 29.9 s and 40 s need the full context (0 = whisper.cpp's default).
    assert_eq!(audio_ctx_for(478_400, AudioContext::Auto).unwrap(), 0);
    assert_eq!(audio_ctx_for(640_000, AudioContext::Auto).unwrap(), 0);
    assert_eq!(audio_ctx_for(16_000, AudioContext::Full).unwrap(), 0);
    // A fixed context never cuts audio off, and keeps the floor.
    assert_eq!(
        audio_ctx_for(160_000, AudioContext::Fixed(400)).unwrap(),
        510
    );
    assert_eq!(
        audio_ctx_for(16_000, AudioContext::Fixed(400)).unwrap(),
        400
    );
    assert_eq!(
        audio_ctx_for(16_000, AudioContext::Fixed(100)).unwrap(),
        MIN_AUDIO_CTX
    );
    assert!(matches!(
        audio_ctx_for(16_000, AudioContext::Fixed(0)),
        Err(AsrError::InvalidArgument(_))
    ));
    assert!(matches!(
        audio_ctx_for(16_000, AudioContext::Fixed(1501)),
        Err(AsrError::InvalidArgument(_))
    ));
}

#[test]
fn is_annotation_recognises_whole_segment_non_speech_marks_only() {
    for t in [" [BLANK_AUDIO]", "(music)", " [Applause] ", "*laughs*"] {
        assert!(is_annotation(t), "{t}");
    }
    for t in [" Hello [world]", "(a) and (b)", "", " ok", "[a] [b]"] {
        assert!(!is_annotation(t), "{t}");
    }
}

#[test]
fn transcribe_gives_no_text_for_silence() {
    let Some(model) = model() else { return };
    let t = model
        .transcribe(
            &vec![0.0; 2 * SAMPLE_RATE_HZ],
            &TranscribeOptions::default(),
            None,
            None,
        )
        .unwrap();
    assert_eq!(t.text, "");
}

#[test]
fn wer_counts_word_edits() {
    assert_eq!(wer("the quick brown fox", "The quick, brown fox."), 0.0);
    assert_eq!(wer("the quick brown fox", "the quick fox"), 0.25);
    assert_eq!(wer("a b", "a c d"), 1.0);
}

#[test]
fn load_reports_a_missing_file_as_model_not_found() {
    let err = WhisperModel::load(
        Path::new("/nonexistent/ggml-base.bin"),
        &ModelOptions::default(),
    )
    .err()
    .unwrap();
    assert_eq!(err.code(), "MODEL_NOT_FOUND");
}

#[test]
fn load_refuses_a_file_that_is_not_a_ggml_model() {
    let path = std::env::temp_dir().join(format!("asr-not-a-model-{}.bin", std::process::id()));
    std::fs::write(&path, b"this is not a whisper model").unwrap();
    let err = WhisperModel::load(&path, &ModelOptions::default())
        .err()
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(err.code(), "MODEL_LOAD_FAILED");
}

#[test]
fn transcribe_recognises_espeak_speech_with_a_low_word_error_rate() {
    let Some(model) = model() else { return };
    let reference = "Good morning, how are you today?";
    let mut seen = Vec::new();
    let mut sink = |s: &Segment| seen.push(s.clone());
    let t = model
        .transcribe(
            &speech(reference),
            &TranscribeOptions::default(),
            Some(&mut sink),
            None,
        )
        .unwrap();
    let rate = wer(reference, &t.text);
    assert!(rate <= 0.2, "WER {rate} for '{}'", t.text);
    assert_eq!(t.language.as_deref(), Some("en"));
    assert_eq!(
        seen, t.segments,
        "the callback sees every segment, in order"
    );
    assert_eq!(
        t.segments
            .iter()
            .map(|s| s.text.as_str())
            .collect::<String>()
            .trim(),
        t.text
    );
}

#[test]
fn transcribe_detects_the_language_when_none_is_given() {
    let Some(model) = model() else { return };
    let options = TranscribeOptions {
        language: None,
        ..TranscribeOptions::default()
    };
    let t = model
        .transcribe(&speech("What time is it in London?"), &options, None, None)
        .unwrap();
    assert_eq!(t.language.as_deref(), Some("en"));
    assert!(
        wer("what time is it in london", &t.text) <= 0.34,
        "got '{}'",
        t.text
    );
}

#[test]
fn transcribe_returns_nothing_for_audio_shorter_than_100_ms() {
    let Some(model) = model() else { return };
    let t = model
        .transcribe(&[0.0; 800], &TranscribeOptions::default(), None, None)
        .unwrap();
    assert_eq!(t.text, "");
    assert!(t.segments.is_empty());
}

#[test]
fn transcribe_stops_with_aborted_when_the_flag_is_set() {
    let Some(model) = model() else { return };
    let pcm = speech("This sentence will never be transcribed because the call is aborted.");
    let flag = AtomicBool::new(true);
    let err = model
        .transcribe(&pcm, &TranscribeOptions::default(), None, Some(&flag))
        .err()
        .unwrap();
    assert_eq!(err.code(), "ABORTED");

    // Set from the first window's segment (audio of 40 s has two 30 s windows): the second
    // window's encoder sees the flag and the call stops there.
    let mut long = pcm.clone();
    long.resize(40 * SAMPLE_RATE_HZ, 0.0);
    let flag = AtomicBool::new(false);
    let mut segments = 0;
    let mut sink = |_: &Segment| {
        segments += 1;
        flag.store(true, Ordering::Release);
    };
    let result = model.transcribe(
        &long,
        &TranscribeOptions::default(),
        Some(&mut sink),
        Some(&flag),
    );
    assert_eq!(result.err().map(|e| e.code()), Some("ABORTED"));
    assert_eq!(segments, 1);
}

#[test]
fn transcribe_refuses_bad_options() {
    let Some(model) = model() else { return };
    let pcm = vec![0.0; 16_000];
    let bad = [
        TranscribeOptions {
            threads: 0,
            ..TranscribeOptions::default()
        },
        TranscribeOptions {
            language: Some("xx".into()),
            ..TranscribeOptions::default()
        },
        TranscribeOptions {
            prompt: Some("a\0b".into()),
            ..TranscribeOptions::default()
        },
        TranscribeOptions {
            audio_context: AudioContext::Fixed(2000),
            ..TranscribeOptions::default()
        },
    ];
    for options in bad {
        let err = model.transcribe(&pcm, &options, None, None).err().unwrap();
        assert_eq!(err.code(), "INVALID_ARGUMENT", "{options:?}");
    }
}

#[test]
fn transcribe_runs_on_several_threads_at_once_over_one_model() {
    let Some(model) = model() else { return };
    let sentences = ["Please open the window.", "What time is it in London?"];
    let handles: Vec<_> = sentences
        .iter()
        .map(|s| {
            let model = model.clone();
            let pcm = speech(s);
            let options = TranscribeOptions {
                threads: 1,
                ..TranscribeOptions::default()
            };
            std::thread::spawn(move || model.transcribe(&pcm, &options, None, None).unwrap().text)
        })
        .collect();
    for (sentence, handle) in sentences.iter().zip(handles) {
        let text = handle.join().unwrap();
        assert!(wer(sentence, &text) <= 0.25, "'{sentence}' -> '{text}'");
    }
}
