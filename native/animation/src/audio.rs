//! The mouth from the audio itself, for speech that comes without phoneme timings.
//!
//! Audio is placed on the session timeline by its pts and analysed on a fixed grid of hops
//! (`HOP_NS`, hop `k` centred at `k * HOP_NS`) with a `WINDOW_NS` window. Per hop:
//! - RMS level in dBFS, normalised between an adaptive floor/peak pair: the peak follows the
//!   loudest recent speech (instant rise, slow decay, held in pauses), the noise floor is the
//!   quietest hop of the last 2 s, and the lower bound is `DYN_RANGE_DB` under the peak (or just
//!   above the noise floor, or the absolute gate, whichever is higher), so quiet and loud voices
//!   both reach full openness and anything under the lower bound is closed;
//! - openness from that level through an attack/release follower;
//! - wide/rounded from the spectral centroid (200 Hz .. 5 kHz) relative to the speaker's running
//!   mean: front vowels and sibilants have energy high up (spread lips), rounded back vowels
//!   concentrate it under 1 kHz;
//! - a brief press when the level falls sharply from voiced speech into a low-pitched murmur or
//!   near silence (the closure of p b m, and of the other stops and nasals, which look alike
//!   from the sound), released as soon as the sound comes back.
//!
//! `shape_at(t)` reads the hop analysis at `t + LOOKAHEAD_NS`: the media engine pushes a frame's
//! audio `[t, t + 1/fps)` before asking for the face at `t`, so the middle of that audio is there,
//! and looking ahead compensates the follower's lag (lips move slightly before the sound, as real
//! ones do). Past the end of the pushed audio the mouth relaxes to closed.
//!
//! Invariants: the analysis depends only on the samples and their pts (deterministic; pushing in
//! one chunk or many gives the same hops); overlapping audio is trimmed (the first push wins),
//! gaps up to `MAX_GAP_NS` are silence, longer ones restart the analysis; memory is bounded by
//! `KEEP_HISTORY_NS` behind the latest query plus the audio pushed ahead of it.
//!
//! It does not resample, detect the language, or know about phonemes. It is not a voice activity
//! detector: steady noise is recognised as noise once it has lasted 2 s (the floor window), and
//! until then (if it follows quiet) may move the lips.

use crate::spectrum::Spectrum;
use crate::timeline::{ns_to_samples, samples_to_ns};
use face_render::MouthShape;
use std::collections::VecDeque;

/// Hop between analysis frames: 10 ms, the usual speech-analysis rate; four hops per 40 ms
/// video frame is plenty for a mouth.
pub const HOP_NS: u64 = 10_000_000;
/// Analysis window: 25 ms, long enough to span two pitch periods of a low voice (80 Hz) and to
/// resolve formants, short enough to follow syllables.
pub const WINDOW_NS: u64 = 25_000_000;
/// How far ahead of the queried time the analysis is read: 20 ms, the middle of a 25 fps frame's
/// audio (which is pushed before the frame is asked for; the 25 ms window then ends 32.5 ms ahead,
/// inside it).
pub const LOOKAHEAD_NS: u64 = 20_000_000;
/// Openness follower: rise time constant 15 ms and fall 35 ms, i.e. ~30 ms to open (10->90 %
/// takes 2.2 tau ~ 33 ms) and ~80 ms to close. Faster than this shows every pitch-period
/// ripple; slower lags the syllables visibly.
const OPEN_ATTACK_TAU_NS: f32 = 15_000_000.0;
const OPEN_RELEASE_TAU_NS: f32 = 35_000_000.0;
/// Lip spreading/rounding follower: 40 ms, lips change shape a little more slowly than the jaw.
const WIDE_TAU_NS: f32 = 40_000_000.0;
/// After the last pushed audio the mouth relaxes with this time constant: 40 ms.
const TAIL_TAU_NS: f32 = 40_000_000.0;
/// Where the tongue is drawn when only the audio drives the lips: mid and neutral (the Mid and
/// Closed visemes' position), since energy and the spectrum do not say where it is.
const AUDIO_TONGUE: f32 = 0.3;
/// Openness by which audio-only lips show that tongue fully: 0.1, a lips-apart slit.
const AUDIO_TONGUE_OPEN: f32 = 0.1;
/// Openness at the adaptive peak: 0.8, the same as the `Open` viseme.
const OPEN_MAX: f32 = 0.8;

/// Level of digital silence: -120 dBFS (the RMS is floored there before taking the log).
const SILENCE_DBFS: f32 = -120.0;
/// Absolute gate: -70 dBFS. Under it is silence whatever the adaptation says (TTS silence is
/// digital zero or dither at -90 dBFS and below; the consonants of a voice 20 dB quieter than
/// usual, around -55 dBFS, must still pass, or loud and quiet voices would differ).
pub const ABS_GATE_DBFS: f32 = -70.0;
/// Range of levels mapped to openness below the peak: 30 dB. Vowels sit within ~10 dB of the
/// peak, voiced consonants 10-25 dB below, closures and pauses further down.
const DYN_RANGE_DB: f32 = 30.0;
/// The lower bound stays this far above the noise floor: 6 dB, so steady noise never opens.
const FLOOR_MARGIN_DB: f32 = 6.0;
/// The noise floor is the quietest hop of the last 2 s (minimum statistics): speech has a
/// closure or pause far more often than that, steady noise never dips under itself.
const FLOOR_WINDOW_HOPS: u64 = 200;
/// Until 2 s of audio have been seen, the floor is at most -80 dBFS (as if the audio had been
/// preceded by quiet), so that speech starting right at the first sample still opens the mouth.
const FLOOR_PRIOR_DBFS: f32 = -80.0;
/// The peak decays by 2 dB/s during speech (held during pauses), so a voice that gets quieter is
/// followed within a few seconds while a loud syllable does not flatten the next ones.
const PEAK_DECAY_DB_PER_S: f32 = 2.0;
/// The first peak is set this far above the first voiced hop: 6 dB (onsets rise over a few hops).
const ONSET_HEADROOM_DB: f32 = 6.0;

/// Centroid band: 200 Hz .. 5 kHz: above the fundamental of most voices, up to the sibilants.
const CENTROID_LO_HZ: f32 = 200.0;
const CENTROID_HI_HZ: f32 = 5_000.0;
/// A centroid this far from the speaker's mean maps to full spread (above) or rounding (below):
/// 400 Hz, about half the distance between the centroids of /i/ and /u/ of one voice.
const WIDE_SPAN_HZ: f32 = 400.0;
/// The speaker's mean centroid is the running mean of voiced hops, over the last ~2 s once that
/// many have been seen (a cumulative mean before, so it settles within the first words).
const CENTROID_TAU_NS: f32 = 2_000_000_000.0;
const CENTROID_START_HZ: f32 = 1_500.0;
/// Pre-emphasis before the spectrum (y[n] = x[n] - 0.95 x[n-1], the usual speech value): lifts
/// the second and third formants, which carry front/back, over the dominant first one.
const PRE_EMPHASIS: f32 = 0.95;
/// Spreading and rounding are scaled down from full (lips rarely reach their extremes in
/// running speech): +0.6 spread, -0.7 rounded.
const WIDE_MAX: f32 = 0.6;
const ROUND_MAX: f32 = 0.7;

/// Press: triggered when the level falls >= 12 dB below the loudest hop of the last 40 ms, that
/// hop being voiced (normalised level >= 0.5), and what remains is either low-pitched (centroid
/// under the speaker's mean: voice bar or nasal murmur; a fricative is high-pitched) or nearly
/// gone (level <= 0.15: a voiceless closure). Held until the level is back within 8 dB of where
/// it fell from, at most 80 ms (longer is a pause: the lips relax instead); one press per dip.
const PRESS_FROM_LEVEL: f32 = 0.5;
const PRESS_TO_LEVEL: f32 = 0.15;
const PRESS_DIP_DB: f32 = 12.0;
const PRESS_BACK_DB: f32 = 8.0;
const PRESS_LOOKBACK_HOPS: usize = 4;
const PRESS_HOLD_HOPS: u32 = 8;
const PRESS_ATTACK_TAU_NS: f32 = 10_000_000.0;
const PRESS_RELEASE_TAU_NS: f32 = 25_000_000.0;

/// A hop counts as voiced for `is_voiced_near` above this normalised level: 0.1.
const VOICED_LEVEL: f32 = 0.1;
/// A hop counts as audible for `is_audible_near` above this absolute level: -50 dBFS (RMS 0.003),
/// where a listener starts to hear speech over a quiet room, whatever the adaptation has learnt
/// (the adaptive `voiced` counts the first hop over the -70 dBFS gate, which for a TTS voice can
/// be the breath before a weak first consonant, tens of ms before it is heard).
pub const AUDIBLE_DBFS: f32 = -50.0;
/// Gaps in the pushed audio up to 1 s are filled with silence; longer ones restart the analysis
/// (levels are kept) instead of analysing a long run of zeros.
pub const MAX_GAP_NS: u64 = 1_000_000_000;
/// Hops kept behind the latest query: 1 s.
pub const KEEP_HISTORY_NS: u64 = 1_000_000_000;

/// Result of one hop.
#[derive(Clone, Copy, Debug)]
struct Hop {
    k: u64,
    shape: MouthShape,
    voiced: bool,
    audible: bool,
}

/// Level adaptation: survives `clear` (the speaker is the same after an interruption).
#[derive(Clone, Debug)]
struct Levels {
    /// Monotonic queue for the sliding minimum: (hop count, dB), increasing dB.
    floor_queue: VecDeque<(u64, f32)>,
    /// Hops analysed so far (all time).
    seen: u64,
    peak_db: Option<f32>,
    centroid_mean_hz: f32,
    voiced_hops: u64,
}

impl Levels {
    /// Adds a hop's level and returns the noise floor.
    fn floor_with(&mut self, db: f32) -> f32 {
        let n = self.seen;
        self.seen += 1;
        while self.floor_queue.back().is_some_and(|&(_, d)| d >= db) {
            self.floor_queue.pop_back();
        }
        self.floor_queue.push_back((n, db));
        while self.floor_queue.front().is_some_and(|&(i, _)| i + FLOOR_WINDOW_HOPS <= n) {
            self.floor_queue.pop_front();
        }
        let min = self.floor_queue.front().map_or(db, |&(_, d)| d);
        if self.seen < FLOOR_WINDOW_HOPS { min.min(FLOOR_PRIOR_DBFS) } else { min }
    }
}

/// Follower state: reset by `clear` and by long gaps.
#[derive(Clone, Copy, Debug)]
struct Followers {
    open: f32,
    wide: f32,
    press: f32,
    /// Hops of press left, and whether this dip already pressed (one press per dip).
    press_hold: u32,
    press_spent: bool,
    /// Level the current press fell from (dBFS).
    press_from_db: f32,
    /// (level, dB) of the last `PRESS_LOOKBACK_HOPS` hops, newest last.
    recent: [(f32, f32); PRESS_LOOKBACK_HOPS],
}

impl Default for Followers {
    fn default() -> Self {
        Followers {
            open: 0.0,
            wide: 0.0,
            press: 0.0,
            press_hold: 0,
            press_spent: false,
            press_from_db: SILENCE_DBFS,
            recent: [(0.0, SILENCE_DBFS); PRESS_LOOKBACK_HOPS],
        }
    }
}

/// Audio-driven lips; see the module comment.
#[derive(Clone, Debug)]
pub struct AudioLips {
    rate: u32,
    win_len: usize,
    spectrum: Spectrum,
    frame: Vec<f32>,
    /// Samples not yet needed by any future hop are dropped; `buf[0]` is sample `buf_start`.
    buf: VecDeque<i16>,
    buf_start: u64,
    started: bool,
    next_hop: u64,
    hops: VecDeque<Hop>,
    levels: Levels,
    f: Followers,
    /// Per-hop smoothing coefficients.
    a_open_up: f32,
    a_open_down: f32,
    a_wide: f32,
    a_press_up: f32,
    a_press_down: f32,
    a_centroid: f32,
    /// Bin range of the centroid band, and Hz per bin (centroid of the pre-emphasised power).
    bins: (usize, usize),
    hz_per_bin: f32,
}

fn coef(tau_ns: f32) -> f32 {
    1.0 - (-(HOP_NS as f32) / tau_ns).exp()
}

impl AudioLips {
    /// Lips for mono PCM16 at `sample_rate_hz` (8 kHz .. 192 kHz in practice; must be > 0).
    pub fn new(sample_rate_hz: u32) -> AudioLips {
        assert!(sample_rate_hz > 0, "sample rate must be positive");
        let win_len = ns_to_samples(WINDOW_NS, sample_rate_hz).max(2) as usize;
        let spectrum = Spectrum::new(win_len);
        let hz_per_bin = sample_rate_hz as f32 / spectrum.size() as f32;
        let nyquist_bin = spectrum.size() / 2;
        let lo = ((CENTROID_LO_HZ / hz_per_bin).ceil() as usize).min(nyquist_bin);
        let hi = ((CENTROID_HI_HZ / hz_per_bin).floor() as usize).min(nyquist_bin);
        AudioLips {
            rate: sample_rate_hz,
            win_len,
            spectrum,
            frame: vec![0.0; win_len],
            buf: VecDeque::new(),
            buf_start: 0,
            started: false,
            next_hop: 0,
            hops: VecDeque::new(),
            levels: Levels { floor_queue: VecDeque::new(), seen: 0, peak_db: None, centroid_mean_hz: CENTROID_START_HZ, voiced_hops: 0 },
            f: Followers::default(),
            a_open_up: coef(OPEN_ATTACK_TAU_NS),
            a_open_down: coef(OPEN_RELEASE_TAU_NS),
            a_wide: coef(WIDE_TAU_NS),
            a_press_up: coef(PRESS_ATTACK_TAU_NS),
            a_press_down: coef(PRESS_RELEASE_TAU_NS),
            a_centroid: coef(CENTROID_TAU_NS),
            bins: (lo, hi.max(lo)),
            hz_per_bin,
        }
    }

    pub fn sample_rate_hz(&self) -> u32 {
        self.rate
    }

    /// Appends audio whose first sample is at `pts_ns` on the session timeline, and analyses every
    /// hop whose window is now complete.
    pub fn push(&mut self, pts_ns: u64, samples: &[i16]) {
        if samples.is_empty() {
            return;
        }
        let n0 = ns_to_samples(pts_ns, self.rate);
        let end = self.buf_start + self.buf.len() as u64;
        let mut samples = samples;
        if !self.started || n0 > end + ns_to_samples(MAX_GAP_NS, self.rate) {
            self.restart(n0);
        } else if n0 > end {
            self.buf.extend(std::iter::repeat_n(0i16, (n0 - end) as usize));
        } else if n0 < end {
            let skip = (end - n0) as usize;
            if skip >= samples.len() {
                return;
            }
            samples = &samples[skip..];
        }
        self.buf.extend(samples.iter().copied());
        self.analyse();
    }

    /// Drops all audio and analysis; the mouth is closed until new audio arrives. The level
    /// adaptation (floor, peak, mean centroid) is kept.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.hops.clear();
        self.started = false;
        self.f = Followers::default();
    }

    /// Mouth at `t_ns`.
    pub fn shape_at(&mut self, t_ns: u64) -> MouthShape {
        let horizon = t_ns.saturating_sub(KEEP_HISTORY_NS) / HOP_NS;
        while self.hops.front().is_some_and(|h| h.k < horizon) && self.hops.len() > 1 {
            self.hops.pop_front();
        }
        self.peek(t_ns)
    }

    /// Whether any hop from `t_ns - before_ns` to `t_ns + after_ns` was voiced.
    pub fn is_voiced_near(&self, t_ns: u64, before_ns: u64, after_ns: u64) -> bool {
        self.any_hop_near(t_ns, before_ns, after_ns, |h| h.voiced)
    }

    /// Whether any hop from `t_ns - before_ns` to `t_ns + after_ns` was over `AUDIBLE_DBFS`.
    pub fn is_audible_near(&self, t_ns: u64, before_ns: u64, after_ns: u64) -> bool {
        self.any_hop_near(t_ns, before_ns, after_ns, |h| h.audible)
    }

    fn any_hop_near(&self, t_ns: u64, before_ns: u64, after_ns: u64, test: impl Fn(&Hop) -> bool) -> bool {
        let lo = t_ns.saturating_sub(before_ns).div_ceil(HOP_NS);
        let hi = (t_ns + after_ns) / HOP_NS;
        let i = self.hops.partition_point(|h| h.k < lo);
        self.hops.range(i..).take_while(|h| h.k <= hi).any(test)
    }

    /// `shape_at` without pruning.
    pub fn peek(&self, t_ns: u64) -> MouthShape {
        let te = t_ns + LOOKAHEAD_NS;
        let k = te / HOP_NS;
        let frac = (te % HOP_NS) as f32 / HOP_NS as f32;
        let Some(last) = self.hops.back() else { return MouthShape::CLOSED };
        if k >= last.k {
            // At or past the newest analysed hop: relax from it.
            let dt = te - last.k * HOP_NS;
            let keep = (-(dt as f32) / TAIL_TAU_NS).exp();
            if keep < 0.01 {
                return MouthShape::CLOSED;
            }
            let s = last.shape;
            return MouthShape { open: s.open * keep, wide: s.wide * keep, press: s.press * keep, tongue: s.tongue * keep };
        }
        let i = self.hops.partition_point(|h| h.k < k);
        match (self.hops.get(i), self.hops.get(i + 1)) {
            (Some(a), Some(b)) if a.k == k && b.k == k + 1 => a.shape.lerp(&b.shape, frac),
            (Some(a), _) if a.k == k => a.shape,
            _ => MouthShape::CLOSED, // before the audio, or inside a restarted gap
        }
    }

    fn restart(&mut self, n0: u64) {
        self.buf.clear();
        self.buf_start = n0;
        self.started = true;
        self.f = Followers::default();
        // First hop: the one centred at or just before the first sample (zeros before it).
        self.next_hop = samples_to_ns(n0, self.rate) / HOP_NS;
    }

    fn analyse(&mut self) {
        let end = self.buf_start + self.buf.len() as u64;
        loop {
            let centre = ns_to_samples(self.next_hop * HOP_NS, self.rate) as i64;
            let ws = centre - self.win_len as i64 / 2;
            if ws + self.win_len as i64 > end as i64 {
                break;
            }
            let mut sum_sq = 0.0f64;
            for i in 0..self.win_len {
                let abs = ws + i as i64;
                let v = if abs < self.buf_start as i64 {
                    0.0
                } else {
                    self.buf[(abs - self.buf_start as i64) as usize] as f32 / 32768.0
                };
                self.frame[i] = v;
                sum_sq += (v * v) as f64;
            }
            let db = (10.0 * (sum_sq / self.win_len as f64 + 1e-12).log10()) as f32; // >= -120
            // Silence needs no spectrum (keeps a stream of pushed silence nearly free).
            let centroid = if db > ABS_GATE_DBFS { self.centroid_hz() } else { self.levels.centroid_mean_hz };
            let hop = self.update(self.next_hop, db, centroid);
            self.hops.push_back(hop);
            self.next_hop += 1;
        }
        // Keep only what the next hop's window needs.
        let next_ws = ns_to_samples(self.next_hop * HOP_NS, self.rate) as i64 - self.win_len as i64 / 2;
        let drop = (next_ws - self.buf_start as i64).clamp(0, self.buf.len() as i64) as usize;
        self.buf.drain(..drop);
        self.buf_start += drop as u64;
    }

    fn centroid_hz(&mut self) -> f32 {
        let (lo, hi) = self.bins;
        let hz = self.hz_per_bin;
        for i in (1..self.frame.len()).rev() {
            self.frame[i] -= PRE_EMPHASIS * self.frame[i - 1];
        }
        self.frame[0] *= 1.0 - PRE_EMPHASIS;
        let p = self.spectrum.power(&self.frame);
        let (mut num, mut den) = (0.0f32, 0.0f32);
        for (k, &pk) in p.iter().enumerate().take(hi + 1).skip(lo) {
            num += pk * k as f32 * hz;
            den += pk;
        }
        if den > 0.0 {
            num / den
        } else {
            self.levels.centroid_mean_hz
        }
    }

    /// Level adaptation and followers for one hop.
    fn update(&mut self, k: u64, db: f32, centroid_hz: f32) -> Hop {
        let hop_s = HOP_NS as f32 / 1e9;
        let lv = &mut self.levels;
        let floor = lv.floor_with(db);
        let above_noise = db > ABS_GATE_DBFS && db > floor + FLOOR_MARGIN_DB;
        if above_noise {
            lv.peak_db = Some(match lv.peak_db {
                None => db + ONSET_HEADROOM_DB,
                Some(p) => db.max(p - PEAK_DECAY_DB_PER_S * hop_s),
            });
        }
        let level = match lv.peak_db {
            Some(peak) => {
                let lower = (floor + FLOOR_MARGIN_DB).max(peak - DYN_RANGE_DB).max(ABS_GATE_DBFS);
                if peak > lower + 1.0 {
                    ((db - lower) / (peak - lower)).clamp(0.0, 1.0)
                } else {
                    0.0
                }
            }
            None => 0.0,
        };
        if level > 0.3 {
            lv.voiced_hops += 1;
            let a = self.a_centroid.max(1.0 / lv.voiced_hops as f32);
            lv.centroid_mean_hz += (centroid_hz - lv.centroid_mean_hz) * a;
        }
        let f = &mut self.f;
        // Openness.
        let target = OPEN_MAX * level;
        let a = if target > f.open { self.a_open_up } else { self.a_open_down };
        f.open += (target - f.open) * a;
        // Spread / rounding, weighted by how much voice there is.
        let rel = ((centroid_hz - lv.centroid_mean_hz) / WIDE_SPAN_HZ).clamp(-1.0, 1.0);
        let wide_target = if rel >= 0.0 { rel * WIDE_MAX } else { rel * ROUND_MAX } * (2.0 * level).min(1.0);
        f.wide += (wide_target - f.wide) * self.a_wide;
        // Press on a sharp dip from voiced speech.
        let (max_level, max_db) = f.recent.iter().fold((0.0f32, f32::MIN), |m, &(l, d)| (m.0.max(l), m.1.max(d)));
        if f.press_hold > 0 {
            if db >= f.press_from_db - PRESS_BACK_DB {
                f.press_hold = 0; // the sound is back: release
            } else {
                f.press_hold -= 1;
            }
        } else if !f.press_spent
            && max_level >= PRESS_FROM_LEVEL
            && max_db - db >= PRESS_DIP_DB
            && (centroid_hz <= lv.centroid_mean_hz || level <= PRESS_TO_LEVEL)
        {
            f.press_hold = PRESS_HOLD_HOPS;
            f.press_from_db = max_db;
            f.press_spent = true;
        }
        if level >= PRESS_FROM_LEVEL {
            f.press_spent = false; // voiced again: the next dip may press
        }
        let press_target = if f.press_hold > 0 { 1.0 } else { 0.0 };
        let a = if press_target > f.press { self.a_press_up } else { self.a_press_down };
        f.press += (press_target - f.press) * a;
        f.recent.rotate_left(1);
        f.recent[PRESS_LOOKBACK_HOPS - 1] = (level, db);
        Hop {
            k,
            // `open` stays the pure energy follower: the renderer closes pressed lips itself.
            shape: MouthShape {
                open: f.open.clamp(0.0, 1.0),
                wide: f.wide.clamp(-1.0, 1.0),
                press: f.press.clamp(0.0, 1.0),
                // Audio alone cannot tell where the tongue is: a neutral, mid position once the
                // lips part, none while they are closed (a closed mouth is `MouthShape::CLOSED`).
                tongue: AUDIO_TONGUE * (f.open / AUDIO_TONGUE_OPEN).clamp(0.0, 1.0),
            },
            voiced: level > VOICED_LEVEL,
            audible: db > AUDIBLE_DBFS,
        }
    }
}
