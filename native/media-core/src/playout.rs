//! The speech playout queue: 24 kHz session audio waiting to be played, addressed by absolute
//! session sample index (sample `n` plays at `n * 1e9 / 24000` ns).
//!
//! - `push` resamples a chunk and overlap-adds it at its session time: right after what is
//!   queued (continuing the same resampler stream when the rate matches, so consecutive TTS chunks
//!   join without clicks), at the next unplayed sample when idle, or at an explicit time (never
//!   in the past; overlapping speech is mixed). It records the chunk's nominal span as speech and
//!   keeps the chunk (and its visemes, made absolute) for the animator.
//! - `take` hands the render thread exactly the samples of one frame tick (silence where nothing
//!   is queued) plus what the animator has to learn before rendering that frame, and reports
//!   speech starting and ending inside the tick.
//! - `interrupt` drops everything not yet taken, at once.
//!
//! Invariants: the read position only moves forward, by whole ticks; nothing before it can be
//! written; chunk spans are exact rational times (no drift over long utterances).
//! What it does not do: time-stretching, or any waiting: the caller holds the lock briefly.

use std::collections::VecDeque;

use animation::track::VisemeEvent;

use crate::error::MediaError;
use crate::events::MediaEvent;
use crate::resample::{to_i16, Resampler};

/// Session audio rate (what `Pcm` events carry and what the Opus pipeline takes).
pub const SESSION_RATE_HZ: u32 = 24_000;
/// How far ahead of the read position audio may be queued or scheduled: 10 minutes. Bounds the
/// queue's memory (4 bytes per sample, ~58 MB at the limit).
const MAX_AHEAD_SAMPLES: u64 = 10 * 60 * SESSION_RATE_HZ as u64;
/// Speech spans closer than this merge into one utterance (a rate change between two chunks
/// rounds the next start up to a whole sample).
const MERGE_GAP_NS: u64 = 1_000_000;

/// Session time of 24 kHz sample `n` (rounded, as `animation::timeline` does everywhere).
pub(crate) fn samples_to_ns(n: u64) -> u64 {
    animation::timeline::samples_to_ns(n, SESSION_RATE_HZ)
}

/// First 24 kHz sample at or after `ns`.
pub(crate) fn ns_to_samples_ceil(ns: u64) -> u64 {
    (ns as u128 * SESSION_RATE_HZ as u128).div_ceil(1_000_000_000) as u64
}

/// Session times at which a pushed chunk plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PushResult {
    pub start_pts_ns: u64,
    pub end_pts_ns: u64,
}

/// Where an interrupt cut: `pts_ns` is the first frame that no longer plays queued speech.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterruptResult {
    pub pts_ns: u64,
    /// How much of the utterance that was playing had been played (0 when idle).
    pub played_ns: u64,
    /// How much queued speech was discarded.
    pub dropped_ns: u64,
}

/// What the render thread gets for one tick.
pub(crate) struct Tick {
    pub samples: Vec<i16>,
    /// Apply `animator.interrupt(t)` before anything else.
    pub interrupt_at: Option<u64>,
    /// Viseme timings pushed since the last tick, in session time. (The audio itself reaches the
    /// animator through `samples`, tick by tick, as it is played.)
    pub new_visemes: Vec<VisemeEvent>,
}

/// A run of input samples at one rate, placed at a session sample index.
struct Stream {
    resampler: Resampler,
    origin: u64,
    consumed: u64,
}

impl Stream {
    /// Session time of this stream's input sample `k` (rounded to the nanosecond).
    fn ns_at(&self, k: u64) -> u64 {
        let rate = self.resampler.in_rate() as u128;
        let den = SESSION_RATE_HZ as u128 * rate;
        (((self.origin as u128 * rate + k as u128 * SESSION_RATE_HZ as u128) * 1_000_000_000
            + den / 2)
            / den) as u64
    }
}

#[derive(Clone, Copy, Debug)]
struct Span {
    start_ns: u64,
    end_ns: u64,
}

#[derive(Default)]
pub(crate) struct Playout {
    /// Next session sample to be taken.
    read: u64,
    /// Mix buffer for samples `read..read + buf.len()`.
    buf: VecDeque<f32>,
    /// Nominal spans of queued speech, sorted, merged.
    spans: VecDeque<Span>,
    /// Start of the utterance being played.
    speaking_since: Option<u64>,
    stream: Option<Stream>,
    /// Viseme timings not yet handed to the render thread (session time).
    pending: Vec<VisemeEvent>,
    pending_interrupt: Option<u64>,
}

impl Playout {
    /// Queues a chunk; see the module doc. `visemes` are relative to the chunk's start.
    pub(crate) fn push(
        &mut self,
        samples: &[i16],
        rate_hz: u32,
        visemes: &[VisemeEvent],
        pts_ns: Option<u64>,
    ) -> Result<PushResult, MediaError> {
        let read_ns = samples_to_ns(self.read);
        let continues = self.stream.as_ref().is_some_and(|s| {
            let end = s.ns_at(s.consumed);
            s.resampler.in_rate() == rate_hz
                && end >= read_ns
                && pts_ns.is_none_or(|t| t.abs_diff(end) <= 1_000)
        });
        if !continues {
            let origin = match pts_ns {
                Some(t) => ns_to_samples_ceil(t).max(self.read),
                None => self
                    .spans
                    .back()
                    .map_or(self.read, |s| ns_to_samples_ceil(s.end_ns).max(self.read)),
            };
            let resampler = Resampler::new(rate_hz, SESSION_RATE_HZ)?;
            self.stream = Some(Stream {
                resampler,
                origin,
                consumed: 0,
            });
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(MediaError::InvalidState("no playout stream".into()));
        };
        let first = stream.consumed;
        let end_k = first + samples.len() as u64;
        let start_ns = stream.ns_at(first);
        let end_ns = stream.ns_at(end_k);
        let end_sample = stream.origin + stream.resampler.output_len(end_k);
        if end_sample.saturating_sub(self.read) > MAX_AHEAD_SAMPLES {
            return Err(MediaError::InvalidArgument(format!(
                "audio would end {} s ahead of the playout position; at most {} s may be queued",
                (end_sample - self.read) / SESSION_RATE_HZ as u64,
                MAX_AHEAD_SAMPLES / SESSION_RATE_HZ as u64
            )));
        }
        let (n0, values) = stream.resampler.contribute(samples, first);
        let base = stream.origin as i64 + n0;
        stream.consumed = end_k;
        for (i, v) in values.into_iter().enumerate() {
            let idx = base + i as i64;
            if idx < self.read as i64 {
                continue; // kernel ringing onto samples already played
            }
            let off = (idx as u64 - self.read) as usize;
            if off >= self.buf.len() {
                self.buf.resize(off + 1, 0.0);
            }
            self.buf[off] += v;
        }
        if end_ns > start_ns {
            self.add_span(Span { start_ns, end_ns });
            self.pending.extend(visemes.iter().map(|v| VisemeEvent {
                start_ns: v.start_ns + start_ns,
                end_ns: v.end_ns + start_ns,
                ..*v
            }));
        }
        Ok(PushResult {
            start_pts_ns: start_ns,
            end_pts_ns: end_ns,
        })
    }

    fn add_span(&mut self, span: Span) {
        let pos = self
            .spans
            .iter()
            .position(|s| s.start_ns > span.start_ns)
            .unwrap_or(self.spans.len());
        self.spans.insert(pos, span);
        // Merge neighbours that touch or overlap.
        let mut merged: VecDeque<Span> = VecDeque::with_capacity(self.spans.len());
        for s in self.spans.drain(..) {
            match merged.back_mut() {
                Some(last) if s.start_ns <= last.end_ns + MERGE_GAP_NS => {
                    last.end_ns = last.end_ns.max(s.end_ns)
                }
                _ => merged.push_back(s),
            }
        }
        self.spans = merged;
    }

    /// Takes session samples `s0..s1` (`s0` must be the read position; a gap is skipped),
    /// which play from `t0_ns` to `t1_ns`, emitting speech start/end inside that window.
    pub(crate) fn take(&mut self, s0: u64, s1: u64, emit: &mut dyn FnMut(MediaEvent)) -> Tick {
        if s0 > self.read {
            let skip = ((s0 - self.read) as usize).min(self.buf.len());
            self.buf.drain(..skip);
            self.read = s0;
        }
        let n = s1.saturating_sub(self.read) as usize;
        let from_buf = n.min(self.buf.len());
        let mut samples: Vec<i16> = self.buf.drain(..from_buf).map(to_i16).collect();
        samples.resize(n, 0);
        let (t0, t1) = (samples_to_ns(self.read), samples_to_ns(s1));
        self.read = s1;
        loop {
            match self.speaking_since {
                None => match self.spans.front() {
                    Some(s) if s.start_ns < t1 => {
                        let at = s.start_ns.max(t0);
                        self.speaking_since = Some(at);
                        emit(MediaEvent::SpeechStarted { pts_ns: at });
                    }
                    _ => break,
                },
                Some(_) => match self.spans.front() {
                    Some(s) if s.end_ns <= t1 => {
                        emit(MediaEvent::SpeechEnded { pts_ns: s.end_ns });
                        self.spans.pop_front();
                        self.speaking_since = None;
                    }
                    Some(_) => break,
                    None => {
                        // Spans were cleared under us (cannot happen: interrupt resets both).
                        self.speaking_since = None;
                        break;
                    }
                },
            }
        }
        if self.spans.is_empty() && self.buf.iter().all(|&v| v == 0.0) {
            // Only kernel ringing (or nothing) left: release the memory.
            self.buf.clear();
        }
        Tick {
            samples,
            interrupt_at: self.pending_interrupt.take(),
            new_visemes: std::mem::take(&mut self.pending),
        }
    }

    /// Drops all queued speech from the read position on.
    pub(crate) fn interrupt(&mut self, emit: &mut dyn FnMut(MediaEvent)) -> InterruptResult {
        let at = samples_to_ns(self.read);
        let played_ns = self.speaking_since.map_or(0, |s| at.saturating_sub(s));
        let dropped_ns = self
            .spans
            .iter()
            .map(|s| s.end_ns.saturating_sub(s.start_ns.max(at)))
            .sum();
        if self.speaking_since.take().is_some() {
            emit(MediaEvent::SpeechEnded { pts_ns: at });
        }
        let result = InterruptResult {
            pts_ns: at,
            played_ns,
            dropped_ns,
        };
        emit(MediaEvent::Interrupted {
            pts_ns: at,
            played_ns,
            dropped_ns,
        });
        self.buf.clear();
        self.spans.clear();
        self.stream = None;
        self.pending.clear();
        self.pending_interrupt = Some(at);
        result
    }

    /// Queued speech not yet played.
    pub(crate) fn queued_ns(&self) -> u64 {
        let at = samples_to_ns(self.read);
        self.spans
            .iter()
            .map(|s| s.end_ns.saturating_sub(s.start_ns.max(at)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_back_to_back_and_reports_speech_edges() {
        let mut p = Playout::default();
        let mut events = Vec::new();
        // 100 ms at 24 kHz, then 50 ms more: contiguous.
        let a = p.push(&vec![1000i16; 2400], 24_000, &[], None).unwrap();
        let b = p.push(&vec![1000i16; 1200], 24_000, &[], None).unwrap();
        assert_eq!(
            a,
            PushResult {
                start_pts_ns: 0,
                end_pts_ns: 100_000_000
            }
        );
        assert_eq!(
            b,
            PushResult {
                start_pts_ns: 100_000_000,
                end_pts_ns: 150_000_000
            }
        );
        assert_eq!(p.queued_ns(), 150_000_000);
        let mut ticks = Vec::new();
        for i in 0..5u64 {
            let t = p.take(i * 960, (i + 1) * 960, &mut |e| events.push(e));
            ticks.push(t);
        }
        assert!(ticks[0].new_visemes.is_empty());
        assert!(ticks[0].samples.iter().all(|&s| s == 1000));
        assert!(ticks[3].samples[..720].iter().all(|&s| s == 1000));
        assert!(ticks[3].samples[720..].iter().all(|&s| s == 0));
        assert_eq!(
            events,
            vec![
                MediaEvent::SpeechStarted { pts_ns: 0 },
                MediaEvent::SpeechEnded {
                    pts_ns: 150_000_000
                }
            ]
        );
        // Idle: the next push starts at the next unplayed sample.
        let c = p.push(&vec![5i16; 480], 24_000, &[], None).unwrap();
        assert_eq!(c.start_pts_ns, 200_000_000);
    }

    #[test]
    fn explicit_time_is_never_in_the_past() {
        let mut p = Playout::default();
        let mut sink = |_e: MediaEvent| {};
        p.take(0, 960, &mut sink);
        let r = p.push(&vec![1i16; 160], 16_000, &[], Some(10)).unwrap();
        assert_eq!(r.start_pts_ns, 40_000_000);
        assert_eq!(r.end_pts_ns, 50_000_000);
        let r = p
            .push(&vec![1i16; 160], 16_000, &[], Some(1_000_000_000))
            .unwrap();
        assert_eq!(r.start_pts_ns, 1_000_000_000);
        assert!(p
            .push(&[1i16; 10], 16_000, &[], Some(3_600_000_000_000))
            .is_err());
    }

    #[test]
    fn chunked_16k_stream_has_no_seams_and_no_drift() {
        // 2 s of a 16 kHz tone pushed in 20 ms chunks equals the one-shot conversion.
        let tone: Vec<i16> = (0..32_000)
            .map(|i| {
                (8000.0 * (2.0 * std::f64::consts::PI * 440.0 * i as f64 / 16_000.0).sin()) as i16
            })
            .collect();
        let mut p = Playout::default();
        let mut last = None;
        for chunk in tone.chunks(320) {
            last = Some(p.push(chunk, 16_000, &[], None).unwrap());
        }
        assert_eq!(last.unwrap().end_pts_ns, 2_000_000_000);
        let mut sink = |_e: MediaEvent| {};
        let got: Vec<i16> = p.take(0, 48_000, &mut sink).samples;
        let want = Resampler::new(16_000, 24_000).unwrap().process(&tone);
        let max = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (*a as i32 - *b as i32).abs())
            .max()
            .unwrap();
        assert!(max <= 1, "max difference {max}");
    }

    #[test]
    fn interrupt_drops_queue_and_reports_played() {
        let mut p = Playout::default();
        let mut events = Vec::new();
        p.push(&vec![100i16; 24_000], 24_000, &[], None).unwrap(); // 1 s
        for i in 0..10u64 {
            p.take(i * 960, (i + 1) * 960, &mut |e| events.push(e));
        }
        let r = p.interrupt(&mut |e| events.push(e));
        assert_eq!(
            r,
            InterruptResult {
                pts_ns: 400_000_000,
                played_ns: 400_000_000,
                dropped_ns: 600_000_000
            }
        );
        let t = p.take(9600, 10_560, &mut |e| events.push(e));
        assert_eq!(t.interrupt_at, Some(400_000_000));
        assert!(t.samples.iter().all(|&s| s == 0));
        assert_eq!(p.queued_ns(), 0);
        assert_eq!(
            events,
            vec![
                MediaEvent::SpeechStarted { pts_ns: 0 },
                MediaEvent::SpeechEnded {
                    pts_ns: 400_000_000
                },
                MediaEvent::Interrupted {
                    pts_ns: 400_000_000,
                    played_ns: 400_000_000,
                    dropped_ns: 600_000_000
                },
            ]
        );
    }
}
