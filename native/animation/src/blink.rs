//! Procedural blinks for driving motions that carry no eye data.
//!
//! Time is cut into slots of `SLOT_NS`; slot `k` holds one blink starting at
//! `(k + 0.5) * SLOT_NS + jitter(k)`, `|jitter| <= JITTER_NS`, so consecutive blinks start
//! between 2.5 s and 6 s apart. Each blink lasts 150–250 ms: a fast close (60–80 ms), a short
//! hold shut, and a slower reopening; about one blink in eight is a double blink. Everything about
//! slot `k` is drawn from a hash of `(seed, k)`, so `eye_open_at` is a pure function of the seed
//! and `t`: deterministic, O(1) at any session time, and identical whatever the call pattern.
//! Both eyes blink together.
//!
//! It does not look at speech or gaze; the animator decides when to use it.

/// Slot length: 4.25 s, the middle of the 2.5–6 s range between blinks (adults at rest blink
/// 10–20 times a minute; a talking head looks calmer at the low end).
pub const SLOT_NS: u64 = 4_250_000_000;
/// Largest shift of a blink within its slot: ±0.875 s, so intervals span 4.25 ± 1.75 s.
pub const JITTER_NS: u64 = 875_000_000;
/// Closing phase: 60–80 ms (the lid falls fast).
const CLOSE_MIN_NS: u64 = 60_000_000;
const CLOSE_SPAN_NS: u64 = 20_000_000;
/// Whole blink: 150–250 ms; what remains after closing and a 10–30 ms hold is the slower opening.
const TOTAL_MIN_NS: u64 = 150_000_000;
const TOTAL_SPAN_NS: u64 = 100_000_000;
const HOLD_MIN_NS: u64 = 10_000_000;
const HOLD_SPAN_NS: u64 = 20_000_000;
/// Chance of a double blink, in 1/256: 32/256 = 12.5 %. The second follows 80–160 ms after the
/// first ends, which reads as a deliberate flutter rather than two blinks.
const DOUBLE_CHANCE_OF_256: u64 = 32;
const DOUBLE_GAP_MIN_NS: u64 = 80_000_000;
const DOUBLE_GAP_SPAN_NS: u64 = 80_000_000;

/// SplitMix64: a small, well-known mixing function; good enough to decorrelate slots.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One lid movement: shut at `start + close`, open again at `start + total`.
#[derive(Clone, Copy, Debug)]
struct Lid {
    start_ns: u64,
    close_ns: u64,
    hold_ns: u64,
    total_ns: u64,
}

impl Lid {
    fn from_bits(start_ns: u64, bits: u64) -> Lid {
        let close_ns = CLOSE_MIN_NS + (bits & 0xFFFF) * CLOSE_SPAN_NS / 0xFFFF;
        let hold_ns = HOLD_MIN_NS + ((bits >> 32) & 0xFFFF) * HOLD_SPAN_NS / 0xFFFF;
        let drawn = TOTAL_MIN_NS + ((bits >> 16) & 0xFFFF) * TOTAL_SPAN_NS / 0xFFFF;
        // Opening always takes at least 1.5x the closing (so total stays <= 2.5 * 80 + 30 ms).
        let total_ns = drawn.max(close_ns + hold_ns + close_ns * 3 / 2);
        Lid { start_ns, close_ns, hold_ns, total_ns }
    }

    fn end_ns(&self) -> u64 {
        self.start_ns + self.total_ns
    }

    /// Openness at `t_ns`: 1 outside the blink, 0 while shut, eased cosine ramps between.
    fn openness(&self, t_ns: u64) -> f32 {
        if t_ns < self.start_ns || t_ns >= self.end_ns() {
            return 1.0;
        }
        let dt = t_ns - self.start_ns;
        let pi = std::f32::consts::PI;
        if dt < self.close_ns {
            let x = dt as f32 / self.close_ns as f32;
            0.5 + 0.5 * (pi * x).cos()
        } else if dt < self.close_ns + self.hold_ns {
            0.0
        } else {
            let opening = self.total_ns - self.close_ns - self.hold_ns;
            let x = (dt - self.close_ns - self.hold_ns) as f32 / opening as f32;
            0.5 - 0.5 * (pi * x).cos()
        }
    }
}

/// Deterministic blink generator; see the module comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blinker {
    seed: u64,
}

impl Blinker {
    pub fn new(seed: u64) -> Blinker {
        Blinker { seed }
    }

    /// The blink of slot `k`, and the second lid movement of a double blink.
    fn slot(&self, k: u64) -> (Lid, Option<Lid>) {
        let h1 = mix(self.seed ^ mix(k));
        let h2 = mix(h1);
        let jitter = (h1 >> 32) % (2 * JITTER_NS + 1); // 0 ..= 2 * JITTER_NS
        let start = k * SLOT_NS + SLOT_NS / 2 + jitter - JITTER_NS;
        let first = Lid::from_bits(start, h2);
        let second = if (h1 & 0xFF) < DOUBLE_CHANCE_OF_256 {
            let gap = DOUBLE_GAP_MIN_NS + ((h2 >> 48) & 0xFFFF) * DOUBLE_GAP_SPAN_NS / 0xFFFF;
            Some(Lid::from_bits(first.end_ns() + gap, mix(h2)))
        } else {
            None
        };
        (first, second)
    }

    /// Eye openness (left, right) at `t_ns`: 1 open .. 0 shut.
    pub fn eye_open_at(&self, t_ns: u64) -> [f32; 2] {
        let k = t_ns / SLOT_NS;
        let mut v = 1.0f32;
        // A blink of slot k starts within [k*S + S/2 - J, k*S + S/2 + J] and lasts < 1 s, so
        // only this slot and the previous one can cover t.
        for slot in k.saturating_sub(1)..=k {
            let (a, b) = self.slot(slot);
            v = v.min(a.openness(t_ns));
            if let Some(b) = b {
                v = v.min(b.openness(t_ns));
            }
        }
        [v, v]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Lid movements seen by sampling every millisecond: (start, end, min openness).
    fn observe(b: &Blinker, from_ns: u64, to_ns: u64) -> Vec<(u64, u64, f32)> {
        let mut out = Vec::new();
        let mut cur: Option<(u64, f32)> = None;
        let mut t = from_ns;
        while t < to_ns {
            let [l, r] = b.eye_open_at(t);
            assert_eq!(l, r);
            assert!((0.0..=1.0).contains(&l));
            match (&mut cur, l < 1.0) {
                (None, true) => cur = Some((t, l)),
                (Some((_, m)), true) => *m = m.min(l),
                (Some((s, m)), false) => {
                    out.push((*s, t, *m));
                    cur = None;
                }
                (None, false) => {}
            }
            t += MS;
        }
        out
    }

    #[test]
    fn blinks_are_deterministic_from_the_seed() {
        let a = Blinker::new(42);
        let b = Blinker::new(42);
        let c = Blinker::new(43);
        let mut differs = false;
        for t in (0..120_000u64).step_by(7) {
            assert_eq!(a.eye_open_at(t * MS), b.eye_open_at(t * MS));
            differs |= a.eye_open_at(t * MS) != c.eye_open_at(t * MS);
        }
        assert!(differs, "another seed blinks at other times");
    }

    #[test]
    fn blink_timing_stays_in_range() {
        for seed in [0u64, 1, 7, 99, 0xDEAD_BEEF] {
            let b = Blinker::new(seed);
            // Ten minutes, and again ten hours in.
            for from in [0u64, 36_000_000 * MS] {
                let lids = observe(&b, from, from + 600_000 * MS);
                let mut events: Vec<(u64, usize)> = Vec::new(); // (start, lid count)
                for (i, &(s, e, min)) in lids.iter().enumerate() {
                    let dur = e - s;
                    assert!((148 * MS..=252 * MS).contains(&dur), "seed {seed}: blink of {} ms", dur / MS);
                    assert!(min < 0.01, "seed {seed}: blink only closes to {min}");
                    if i > 0 && s - lids[i - 1].1 < 200 * MS {
                        events.last_mut().unwrap().1 += 1; // second half of a double blink
                    } else {
                        events.push((s, 1));
                    }
                }
                for w in events.windows(2) {
                    let gap = w[1].0 - w[0].0;
                    assert!((2_498 * MS..=6_002 * MS).contains(&gap), "seed {seed}: {} ms between blinks", gap / MS);
                }
                let doubles = events.iter().filter(|e| e.1 == 2).count();
                assert!(events.iter().all(|e| e.1 <= 2));
                assert!(events.len() >= 100 && events.len() <= 240, "{} blinks in 10 min", events.len());
                assert!(doubles >= 2 && doubles * 3 < events.len(), "{doubles} double blinks of {}", events.len());
            }
        }
    }

    #[test]
    fn lids_close_fast_and_open_slowly() {
        let b = Blinker::new(5);
        for (s, e, _) in observe(&b, 0, 300_000 * MS) {
            let shut = (s..e).step_by(MS as usize).find(|&t| b.eye_open_at(t)[0] == 0.0).unwrap();
            let reopened = (0..(e - s) / MS).rev().map(|i| s + i * MS).find(|&t| b.eye_open_at(t)[0] == 0.0).unwrap();
            let closing = shut - s;
            let opening = e - reopened;
            assert!((58 * MS..=82 * MS).contains(&closing), "closing took {} ms", closing / MS);
            assert!(opening >= closing * 3 / 2 - 2 * MS, "opening {} ms vs closing {} ms", opening / MS, closing / MS);
        }
        // Eyes are open at the very start of a session.
        assert_eq!(b.eye_open_at(0), [1.0, 1.0]);
    }
}
