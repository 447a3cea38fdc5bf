//! Transcribes 16 kHz mono 16-bit WAV files and prints the text and the time taken:
//! `cargo run -p asr --release --example transcribe -- MODEL FILE.wav... [--ctx full|auto|N] [--threads N]
//! [--runs N] [--detect] [--prompt TEXT] [--flash]`
use std::path::Path;
use std::time::Instant;

use asr::{AudioContext, ModelOptions, TranscribeOptions, WhisperModel};

fn read_wav(path: &str) -> Vec<f32> {
    let bytes = std::fs::read(path).expect("read wav");
    // Find the "data" chunk.
    let mut at = 12;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        if id == b"data" {
            let end = (at + 8 + len).min(bytes.len());
            return bytes[at + 8..end]
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 / 32768.0)
                .collect();
        }
        at += 8 + len + (len & 1);
    }
    panic!("no data chunk in {path}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut options = TranscribeOptions::default();
    let mut runs = 3;
    let mut model_options = ModelOptions::default();
    let mut files = Vec::new();
    let mut it = args.iter();
    let model_path = it.next().expect("model path");
    while let Some(a) = it.next() {
        match a.as_str() {
            "--ctx" => {
                options.audio_context = match it.next().unwrap().as_str() {
                    "full" => AudioContext::Full,
                    "auto" => AudioContext::Auto,
                    n => AudioContext::Fixed(n.parse().unwrap()),
                }
            }
            "--threads" => options.threads = it.next().unwrap().parse().unwrap(),
            "--runs" => runs = it.next().unwrap().parse().unwrap(),
            "--detect" => options.language = None,
            "--flash" => model_options.flash_attn = true,
            "--prompt" => options.prompt = Some(it.next().unwrap().clone()),
            f => files.push(f.to_string()),
        }
    }
    let t = Instant::now();
    let model = WhisperModel::load(Path::new(model_path), &model_options).expect("load");
    println!("load {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
    for f in files {
        let pcm = read_wav(&f);
        let mut times = Vec::new();
        let mut text = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            let r = model
                .transcribe(&pcm, &options, None, None)
                .expect("transcribe");
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            text = r.text;
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "{f} ({:.2} s): median {:.0} ms (min {:.0}) '{text}'",
            pcm.len() as f64 / 16000.0,
            times[times.len() / 2],
            times[0]
        );
    }
}
