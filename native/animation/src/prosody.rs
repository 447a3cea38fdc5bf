//! The voice's melody and loudness from the speech audio, for the speaking face (`expression`):
//! per 10 ms hop (the same grid as `audio`: hop `k` centred at `k * HOP_NS`) the level and the
//! pitch (F0), and from them pitch accents, rising ends and phrase ends.
//!
//! - The audio is reduced to about 8 kHz (a box average over `rate / 8 kHz` samples: enough for
//!   60..400 Hz voices) and analysed in a `WINDOW_NS` window per hop.
//! - Level: RMS in dBFS, normalised under a peak that follows the loudest speech (instant rise,
//!   2 dB/s decay), 0 at `LEVEL_RANGE_DB` under it .. 1 at it. (`audio` has its own level for the
//!   lips; this one is computed on the reduced signal, a pass over 160 samples, so the two
//!   analyses stay independent.)
//! - F0 by YIN (the cumulative-mean-normalised difference function; the first dip under
//!   `YIN_THRESHOLD` between 60 and 400 Hz, refined by a parabola); a hop is voiced when it has
//!   one and is loud enough.
//! - The speaker's pitch: running mean and deviation of F0 in semitones over voiced hops (a
//!   cumulative mean over the first 2 s of voicing, then an exponential one with `SPEAKER_TAU_NS`).
//!   `pitch_z` is a hop's distance from that mean in deviations.
//! - A pitch accent starts on a loud voiced hop that lies `ACCENT_ST` or more above the mean
//!   (once per excursion: the next needs the pitch to fall back under `ACCENT_RESET_ST` or a
//!   break in voicing). A hop is `rising` when the voiced hops of the last `RISE_SPAN_NS` climb
//!   faster than `RISE_ST_PER_S` (a question's end, with or without a question mark). A phrase
//!   ends (`phrase_end`, once) when `PHRASE_PAUSE_NS` of silence follow speech.
//!
//! Invariants: deterministic, and pushing the audio in one piece or many gives the same hops;
//! overlapping audio is trimmed (the first push wins), gaps up to `MAX_GAP_NS` are silence, longer
//! ones restart the analysis (the speaker's statistics are kept); hops are handed out once, in
//! order, by `take_until`, and at most `MAX_PENDING_HOPS` wait (the oldest are dropped).
//!
//! Not here: what the face does with them (`expression`), the lips (`audio`).

use crate::audio::{HOP_NS, MAX_GAP_NS};
use crate::timeline::ns_to_samples;
use std::collections::VecDeque;

/// Rate the audio is reduced to before the analysis: about 8 kHz.
pub const ANALYSIS_RATE_HZ: u32 = 8_000;
/// The difference window: 20 ms, over a period of the lowest voice, two of most.
pub const WINDOW_NS: u64 = 20_000_000;
/// Pitch range: 60..400 Hz, low male to high child voices.
pub const MIN_F0_HZ: f32 = 60.0;
pub const MAX_F0_HZ: f32 = 400.0;
/// YIN's dip threshold (the usual 0.1..0.2; the higher end keeps breathy vowels voiced).
const YIN_THRESHOLD: f32 = 0.2;
/// Levels are normalised over 30 dB under the running peak; a voiced hop needs 0.2 of it and
/// -60 dBFS at least.
const LEVEL_RANGE_DB: f32 = 30.0;
const VOICED_LEVEL: f32 = 0.2;
const ABS_GATE_DBFS: f32 = -60.0;
const PEAK_DECAY_DB_PER_S: f32 = 2.0;
/// The speaker's pitch statistics: ~2 s memory; deviation at least 1 semitone (a monotone voice
/// must not turn every wobble into an accent) and 2 before anything is known.
pub const SPEAKER_TAU_NS: f32 = 2_000_000_000.0;
const MIN_DEVIATION_ST: f32 = 1.0;
const PRIOR_DEVIATION_ST: f32 = 2.0;
/// A pitch accent: 2 semitones over the mean on a hop at least this loud; reset under 1 semitone.
pub const ACCENT_ST: f32 = 2.0;
const ACCENT_RESET_ST: f32 = 1.0;
const ACCENT_LEVEL: f32 = 0.5;
/// Rising: the last 300 ms of voicing climb faster than 3 semitones a second (with at least
/// 150 ms of them voiced).
pub const RISE_SPAN_NS: u64 = 300_000_000;
pub const RISE_ST_PER_S: f32 = 3.0;
const RISE_MIN_HOPS: usize = 15;
/// Silence after speech that ends a phrase: 250 ms.
pub const PHRASE_PAUSE_NS: u64 = 250_000_000;
/// Hops waiting to be taken: 2 s worth (audio is pushed about a frame ahead of the face).
const MAX_PENDING_HOPS: usize = 200;

/// What one hop says.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProsodyHop {
    /// Centre of the hop on the session timeline.
    pub t_ns: u64,
    /// Loudness 0 (quiet) .. 1 (the speaker's loudest).
    pub level: f32,
    pub voiced: bool,
    /// F0 in Hz (0 when unvoiced).
    pub f0_hz: f32,
    /// F0 against the speaker's mean, in deviations (0 when unvoiced).
    pub pitch_z: f32,
    /// A pitch accent starts here.
    pub accent: bool,
    /// The pitch has been rising over the last `RISE_SPAN_NS`.
    pub rising: bool,
    /// `PHRASE_PAUSE_NS` of silence after speech end here.
    pub phrase_end: bool,
}

/// The speaker's running statistics and the per-phrase state; kept across `clear`.
#[derive(Clone, Debug, Default)]
struct Speaker {
    voiced_hops: u64,
    mean_st: f32,
    var_st: f32,
    peak_db: Option<f32>,
    in_accent: bool,
    /// (time, semitones) of the voiced hops of the last `RISE_SPAN_NS`.
    trail: VecDeque<(u64, f32)>,
    silent_hops: u64,
    had_speech: bool,
}

/// See the module comment.
#[derive(Clone, Debug)]
pub struct Prosody {
    rate: u32,
    /// Input samples per reduced sample, and the reduced rate.
    factor: u64,
    fs: f64,
    win: usize,
    lag_min: usize,
    lag_max: usize,
    started: bool,
    /// Next input sample index expected, input samples still to skip, and the reduction's
    /// running sum and count.
    next_in: u64,
    skip: u64,
    acc: i64,
    acc_n: u64,
    /// Reduced samples; `buf[0]` is reduced sample `buf_start`.
    buf: VecDeque<f32>,
    buf_start: u64,
    next_hop: u64,
    hops: VecDeque<ProsodyHop>,
    speaker: Speaker,
    frame: Vec<f32>,
    diff: Vec<f32>,
}

/// Semitones of `hz` above 100 Hz.
fn semitones(hz: f32) -> f32 {
    12.0 * (hz / 100.0).log2()
}

impl Prosody {
    /// An analysis of mono PCM16 at `sample_rate_hz` (> 0).
    pub fn new(sample_rate_hz: u32) -> Prosody {
        assert!(sample_rate_hz > 0, "sample rate must be positive");
        let factor = ((sample_rate_hz as f64 / ANALYSIS_RATE_HZ as f64).round() as u64).max(1);
        let fs = sample_rate_hz as f64 / factor as f64;
        let win = ((WINDOW_NS as f64 * 1e-9 * fs).round() as usize).max(8);
        let lag_min = ((fs / MAX_F0_HZ as f64).floor() as usize).max(2);
        let lag_max = ((fs / MIN_F0_HZ as f64).ceil() as usize).max(lag_min + 2);
        Prosody {
            rate: sample_rate_hz,
            factor,
            fs,
            win,
            lag_min,
            lag_max,
            started: false,
            next_in: 0,
            skip: 0,
            acc: 0,
            acc_n: 0,
            buf: VecDeque::new(),
            buf_start: 0,
            next_hop: 0,
            hops: VecDeque::new(),
            speaker: Speaker::default(),
            frame: vec![0.0; win + lag_max],
            diff: vec![0.0; lag_max + 2],
        }
    }

    pub fn sample_rate_hz(&self) -> u32 {
        self.rate
    }

    /// Appends audio whose first sample is at `pts_ns`, and analyses every hop now complete.
    pub fn push(&mut self, pts_ns: u64, samples: &[i16]) {
        if samples.is_empty() {
            return;
        }
        let n0 = ns_to_samples(pts_ns, self.rate);
        let mut samples = samples;
        if !self.started || n0 > self.next_in + ns_to_samples(MAX_GAP_NS, self.rate) {
            self.restart(n0);
        } else if n0 > self.next_in {
            for _ in self.next_in..n0 {
                self.feed(0);
            }
        } else if n0 < self.next_in {
            let skip = (self.next_in - n0) as usize;
            if skip >= samples.len() {
                return;
            }
            samples = &samples[skip..];
        }
        for &s in samples {
            self.feed(s);
        }
        self.analyse();
    }

    /// Drops the audio and the hops not yet taken; the speaker's statistics stay.
    pub fn clear(&mut self) {
        self.started = false;
        self.buf.clear();
        self.hops.clear();
        self.speaker.trail.clear();
        self.speaker.in_accent = false;
        self.speaker.had_speech = false;
        self.speaker.silent_hops = 0;
    }

    /// Hands out the analysed hops centred at or before `t_ns`, oldest first.
    pub fn take_until(&mut self, t_ns: u64) -> impl Iterator<Item = ProsodyHop> + '_ {
        let n = self.hops.partition_point(|h| h.t_ns <= t_ns);
        self.hops.drain(..n)
    }

    fn restart(&mut self, n0: u64) {
        let d0 = n0.div_ceil(self.factor);
        self.started = true;
        self.buf.clear();
        self.buf_start = d0;
        self.acc = 0;
        self.acc_n = 0;
        // The input samples before the first whole reduction block are skipped.
        self.skip = d0 * self.factor - n0;
        self.next_in = n0;
        let first_centre = d0 + self.half() as u64;
        self.next_hop = (first_centre as f64 / self.fs * 1e9 / HOP_NS as f64).ceil() as u64;
        self.speaker.trail.clear();
    }

    fn half(&self) -> usize {
        (self.win + self.lag_max) / 2
    }

    fn feed(&mut self, s: i16) {
        self.next_in += 1;
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        self.acc += s as i64;
        self.acc_n += 1;
        if self.acc_n == self.factor {
            self.buf.push_back(self.acc as f32 / (self.factor as f32 * 32768.0));
            self.acc = 0;
            self.acc_n = 0;
        }
    }

    /// Reduced sample index of hop `k`'s centre.
    fn centre(&self, k: u64) -> u64 {
        (k as f64 * HOP_NS as f64 * 1e-9 * self.fs).round() as u64
    }

    fn analyse(&mut self) {
        let len = self.win + self.lag_max;
        let half = self.half() as u64;
        loop {
            let c = self.centre(self.next_hop);
            let end = self.buf_start + self.buf.len() as u64;
            if c < half || c - half < self.buf_start {
                self.next_hop += 1;
                continue;
            }
            let start = c - half;
            if start + len as u64 > end {
                break;
            }
            let at = (start - self.buf_start) as usize;
            for (j, v) in self.frame[..len].iter_mut().enumerate() {
                *v = self.buf[at + j];
            }
            let hop = self.hop(self.next_hop * HOP_NS);
            if self.hops.len() >= MAX_PENDING_HOPS {
                self.hops.pop_front();
            }
            self.hops.push_back(hop);
            self.next_hop += 1;
        }
        let keep_from = self.centre(self.next_hop).saturating_sub(half);
        while self.buf_start < keep_from && !self.buf.is_empty() {
            self.buf.pop_front();
            self.buf_start += 1;
        }
    }

    /// F0 of `frame` by YIN, or None.
    fn f0(&mut self) -> Option<f32> {
        let (w, x) = (self.win, &self.frame);
        let d = &mut self.diff;
        d[0] = 0.0;
        for tau in 1..=self.lag_max {
            let mut sum = 0.0f32;
            for j in 0..w {
                let e = x[j] - x[j + tau];
                sum += e * e;
            }
            d[tau] = sum;
        }
        // Cumulative-mean normalisation, in place.
        let mut running = 0.0f32;
        for tau in 1..=self.lag_max {
            running += d[tau];
            d[tau] = if running > 0.0 { d[tau] * tau as f32 / running } else { 1.0 };
        }
        let mut tau = self.lag_min;
        while tau < self.lag_max && d[tau] >= YIN_THRESHOLD {
            tau += 1;
        }
        if tau >= self.lag_max {
            return None;
        }
        while tau + 1 < self.lag_max && d[tau + 1] < d[tau] {
            tau += 1;
        }
        let (a, b, c) = (d[tau - 1], d[tau], d[tau + 1]);
        let den = a - 2.0 * b + c;
        let shift = if den > 1e-9 { (0.5 * (a - c) / den).clamp(-0.5, 0.5) } else { 0.0 };
        Some(self.fs as f32 / (tau as f32 + shift))
    }

    fn hop(&mut self, t_ns: u64) -> ProsodyHop {
        let off = self.lag_max / 2;
        let energy = self.frame[off..off + self.win].iter().map(|v| v * v).sum::<f32>() / self.win as f32;
        let db = 10.0 * energy.max(1e-12).log10();
        let hop_s = HOP_NS as f32 * 1e-9;
        let sp = &mut self.speaker;
        let peak = match sp.peak_db {
            Some(p) => (p - PEAK_DECAY_DB_PER_S * hop_s).max(db),
            None => db.max(ABS_GATE_DBFS + LEVEL_RANGE_DB * 0.5),
        };
        let loud = db > ABS_GATE_DBFS;
        if loud {
            sp.peak_db = Some(peak);
        }
        let level = if loud { ((db - (peak - LEVEL_RANGE_DB)) / LEVEL_RANGE_DB).clamp(0.0, 1.0) } else { 0.0 };
        let f0 = if level >= VOICED_LEVEL { self.f0() } else { None };
        let sp = &mut self.speaker;
        let mut out = ProsodyHop { t_ns, level, ..ProsodyHop::default() };
        while sp.trail.front().is_some_and(|&(t, _)| t + RISE_SPAN_NS < t_ns) {
            sp.trail.pop_front();
        }
        match f0 {
            Some(hz) => {
                let st = semitones(hz);
                if sp.voiced_hops == 0 {
                    sp.mean_st = st;
                    sp.var_st = PRIOR_DEVIATION_ST * PRIOR_DEVIATION_ST;
                }
                let dev = sp.var_st.sqrt().max(MIN_DEVIATION_ST);
                let above = st - sp.mean_st;
                out.voiced = true;
                out.f0_hz = hz;
                out.pitch_z = above / dev;
                if above >= ACCENT_ST && level >= ACCENT_LEVEL && !sp.in_accent {
                    out.accent = true;
                    sp.in_accent = true;
                } else if above < ACCENT_RESET_ST {
                    sp.in_accent = false;
                }
                sp.trail.push_back((t_ns, st));
                out.rising = sp.trail.len() >= RISE_MIN_HOPS && slope_st_per_s(&sp.trail) > RISE_ST_PER_S;
                sp.voiced_hops += 1;
                let n_tau = (SPEAKER_TAU_NS / HOP_NS as f32) as u64;
                let a = if sp.voiced_hops < n_tau { 1.0 / sp.voiced_hops as f32 } else { 1.0 - (-1.0 / n_tau as f32).exp() };
                sp.mean_st += a * above;
                sp.var_st += a * (above * above - sp.var_st);
                sp.silent_hops = 0;
                sp.had_speech = true;
            }
            None => {
                sp.in_accent = false;
                if level < VOICED_LEVEL {
                    sp.silent_hops += 1;
                } else {
                    sp.silent_hops = 0;
                }
                if sp.had_speech && sp.silent_hops * HOP_NS >= PHRASE_PAUSE_NS {
                    out.phrase_end = true;
                    sp.had_speech = false;
                    sp.trail.clear();
                }
            }
        }
        out
    }
}

/// Least-squares slope of (time, semitones) points, semitones per second.
fn slope_st_per_s(pts: &VecDeque<(u64, f32)>) -> f32 {
    let n = pts.len() as f32;
    let t0 = pts[0].0;
    let x = |t: u64| (t - t0) as f32 * 1e-9;
    let (mx, my) = (pts.iter().map(|p| x(p.0)).sum::<f32>() / n, pts.iter().map(|p| p.1).sum::<f32>() / n);
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for p in pts {
        let dx = x(p.0) - mx;
        sxy += dx * (p.1 - my);
        sxx += dx * dx;
    }
    if sxx > 0.0 { sxy / sxx } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const RATE: u32 = 24_000;

    /// A voice-like tone (ten harmonics falling 6 dB an octave) whose F0 follows `f0(t_s)`.
    fn voice(secs: f32, amp: f32, f0: impl Fn(f32) -> f32) -> Vec<i16> {
        let n = (secs * RATE as f32) as usize;
        let mut phase = 0.0f32;
        (0..n)
            .map(|i| {
                let t = i as f32 / RATE as f32;
                phase = (phase + f0(t) / RATE as f32).fract();
                let v: f32 = (1..=10).map(|h| (std::f32::consts::TAU * phase * h as f32).sin() / h as f32).sum();
                (v * amp * 10_000.0) as i16
            })
            .collect()
    }

    fn analyse(chunks: &[Vec<i16>], chunk_ns: u64) -> Vec<ProsodyHop> {
        let mut p = Prosody::new(RATE);
        let all: Vec<i16> = chunks.concat();
        let step = ns_to_samples(chunk_ns, RATE) as usize;
        let mut out = Vec::new();
        for (i, c) in all.chunks(step).enumerate() {
            p.push(i as u64 * chunk_ns, c);
            out.extend(p.take_until(u64::MAX));
        }
        out
    }

    #[test]
    fn a_steady_tone_is_voiced_at_its_pitch_with_no_accent_or_rise() {
        let hops = analyse(&[voice(3.0, 1.0, |_| 150.0)], 40 * MS);
        let voiced: Vec<_> = hops.iter().filter(|h| h.voiced).collect();
        assert!(voiced.len() > 280, "{} voiced hops", voiced.len());
        for h in &voiced {
            assert!((h.f0_hz - 150.0).abs() < 2.0, "{h:?}");
            assert!(h.pitch_z.abs() < 0.2 && !h.rising, "{h:?}");
        }
        assert!(hops.iter().all(|h| !h.accent && !h.phrase_end));
        // Other voices and rates.
        for (rate, hz) in [(16_000u32, 95.0f32), (48_000, 320.0), (22_050, 210.0)] {
            let mut p = Prosody::new(rate);
            let n = rate as usize;
            let x: Vec<i16> = (0..n).map(|i| (8_000.0 * (std::f32::consts::TAU * hz * i as f32 / rate as f32).sin()) as i16).collect();
            p.push(0, &x);
            let f: Vec<f32> = p.take_until(u64::MAX).filter(|h| h.voiced).map(|h| h.f0_hz).collect();
            assert!(f.len() > 80 && f.iter().all(|f| (f - hz).abs() < hz * 0.02), "{rate} Hz rate, {hz} Hz: {f:?}");
        }
    }

    #[test]
    fn a_glide_rises_a_bump_is_one_accent_and_silence_ends_the_phrase() {
        // 1.5 s at 150 Hz, then a 0.5 s glide to 220 Hz.
        let glide = voice(2.0, 1.0, |t| if t < 1.5 { 150.0 } else { 150.0 + 140.0 * (t - 1.5) });
        let hops = analyse(&[glide], 40 * MS);
        let rising_at: Vec<u64> = hops.iter().filter(|h| h.rising).map(|h| h.t_ns / MS).collect();
        assert!(!rising_at.is_empty() && rising_at.iter().all(|&t| t > 1_500), "{rising_at:?}");
        assert!(hops.iter().any(|h| h.rising && h.t_ns > 1_900 * MS));
        // A 200 ms bump of +4 semitones in a flat tone: one accent, at the bump.
        let bump = voice(3.0, 1.0, |t| if (1.5..1.7).contains(&t) { 190.0 } else { 150.0 });
        let silence = vec![0i16; RATE as usize];
        let hops = analyse(&[bump, silence], 40 * MS);
        let accents: Vec<u64> = hops.iter().filter(|h| h.accent).map(|h| h.t_ns / MS).collect();
        assert_eq!(accents.len(), 1, "{accents:?}");
        assert!((1_500..1_560).contains(&accents[0]), "{accents:?}");
        let ends: Vec<u64> = hops.iter().filter(|h| h.phrase_end).map(|h| h.t_ns / MS).collect();
        assert_eq!(ends.len(), 1, "{ends:?}");
        assert!((3_230..3_320).contains(&ends[0]), "{ends:?}");
    }

    #[test]
    fn chunking_does_not_change_the_hops() {
        let x = [voice(1.0, 0.5, |t| 120.0 + 60.0 * t), vec![0; 9_000], voice(0.8, 1.0, |_| 200.0)];
        let whole = analyse(&x, 1_000 * MS);
        assert!(whole.len() > 200);
        for chunk_ms in [40, 7] {
            let other = analyse(&x, chunk_ms * MS);
            assert_eq!(whole.len(), other.len(), "{chunk_ms} ms chunks");
            if let Some(i) = (0..whole.len()).find(|&i| whole[i] != other[i]) {
                panic!("{chunk_ms} ms chunks: hop {i} differs: {:?} vs {:?}", whole[i], other[i]);
            }
        }
    }
}
