//! Exact frame and sample timestamps on the session timeline.
//!
//! Everything is integer nanoseconds computed from the frame or sample index with 128-bit
//! intermediates and round-half-up, never by accumulating durations, so there is no drift: frame
//! 900 000 at 25 fps is exactly 10 h, and at 30000/1001 fps every pts is within half a nanosecond
//! of `index * 1001 / 30000 s`. Invariants: `frame_index_at(frame_pts_ns(i)) == i`,
//! `ns_to_samples(samples_to_ns(n)) == n` (for rates up to 1 GHz), and the per-frame sample counts
//! of `samples_in_frame` add up exactly to the samples of the whole span.
//!
//! It does not know about clocks, base times or GStreamer; callers pass running time from zero.
//! Frame rates are given as a rational `fps_num / fps_den` (both > 0, panics otherwise).

/// Nanoseconds per second.
pub const NS_PER_S: u64 = 1_000_000_000;

/// `round(a * b / c)` with half rounded up, saturating at `u64::MAX`.
fn mul_div_round(a: u64, b: u64, c: u64) -> u64 {
    assert!(c > 0, "division by zero in timestamp arithmetic");
    let v = (a as u128 * b as u128 + (c as u128) / 2) / c as u128;
    u64::try_from(v).unwrap_or(u64::MAX)
}

fn check_fps(fps_num: u32, fps_den: u32) {
    assert!(fps_num > 0 && fps_den > 0, "frame rate must be positive: {fps_num}/{fps_den}");
}

/// Presentation time of frame `frame_index`: `round(index * 1e9 * den / num)`.
pub fn frame_pts_ns(frame_index: u64, fps_num: u32, fps_den: u32) -> u64 {
    check_fps(fps_num, fps_den);
    let v = (frame_index as u128 * NS_PER_S as u128 * fps_den as u128 + fps_num as u128 / 2)
        / fps_num as u128;
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Duration of frame `frame_index`: the difference between its pts and the next one's. At
/// 30000/1001 fps this alternates between 33 366 666 and 33 366 667 ns so that the sum is exact.
pub fn frame_duration_ns(frame_index: u64, fps_num: u32, fps_den: u32) -> u64 {
    frame_pts_ns(frame_index + 1, fps_num, fps_den) - frame_pts_ns(frame_index, fps_num, fps_den)
}

/// Index of the frame showing at `pts_ns`: the largest `i` with `frame_pts_ns(i) <= pts_ns`.
pub fn frame_index_at(pts_ns: u64, fps_num: u32, fps_den: u32) -> u64 {
    check_fps(fps_num, fps_den);
    // Estimate with floor division, then correct for the rounding in `frame_pts_ns` (at most one
    // step either way).
    let den = NS_PER_S as u128 * fps_den as u128;
    let mut i = ((pts_ns as u128 * fps_num as u128) / den) as u64;
    while i > 0 && frame_pts_ns(i, fps_num, fps_den) > pts_ns {
        i -= 1;
    }
    while frame_pts_ns(i + 1, fps_num, fps_den) <= pts_ns {
        i += 1;
    }
    i
}

/// Time of sample `samples` at `rate` Hz: `round(samples * 1e9 / rate)`.
pub fn samples_to_ns(samples: u64, rate: u32) -> u64 {
    mul_div_round(samples, NS_PER_S, rate as u64)
}

/// Sample index nearest to `ns` at `rate` Hz: `round(ns * rate / 1e9)`.
pub fn ns_to_samples(ns: u64, rate: u32) -> u64 {
    mul_div_round(ns, rate as u64, NS_PER_S)
}

/// How many audio samples belong to frame `frame_index`: those from the sample nearest its pts up
/// to (excluding) the sample nearest the next frame's pts. At 25 fps and 16 kHz always 640; at
/// 30000/1001 fps and 48 kHz 1601 or 1602, summing exactly over any span.
pub fn samples_in_frame(frame_index: u64, fps_num: u32, fps_den: u32, rate: u32) -> u64 {
    let a = ns_to_samples(frame_pts_ns(frame_index, fps_num, fps_den), rate);
    let b = ns_to_samples(frame_pts_ns(frame_index + 1, fps_num, fps_den), rate);
    b - a
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_HOURS_NS: u64 = 10 * 3600 * NS_PER_S;

    fn check_exact_over_ten_hours(num: u32, den: u32, rate: u32) {
        let frames = frame_index_at(TEN_HOURS_NS, num, den) + 1;
        let nominal = NS_PER_S as f64 * den as f64 / num as f64;
        let (lo, hi) = (nominal.floor() as u64, nominal.ceil() as u64);
        let mut prev = frame_pts_ns(0, num, den);
        assert_eq!(prev, 0);
        let mut sample_sum = 0u64;
        for i in 0..frames {
            let pts = frame_pts_ns(i, num, den);
            // Exact against the rational definition.
            let exact = i as u128 * NS_PER_S as u128 * den as u128;
            let err = pts as i128 * num as i128 - exact as i128;
            assert!(err.unsigned_abs() * 2 <= num as u128, "frame {i}: pts {pts} off by {err}/{num} ns");
            if i > 0 {
                let d = pts - prev;
                assert!(d == lo || d == hi, "frame {i}: duration {d} not in {lo}..={hi}");
                assert_eq!(frame_duration_ns(i - 1, num, den), d);
            }
            assert_eq!(frame_index_at(pts, num, den), i);
            if pts > 0 {
                assert_eq!(frame_index_at(pts - 1, num, den), i - 1);
            }
            sample_sum += samples_in_frame(i, num, den, rate);
            prev = pts;
        }
        assert_eq!(sample_sum, ns_to_samples(frame_pts_ns(frames, num, den), rate));
    }

    #[test]
    fn frame_pts_are_exact_over_ten_hours_at_25_fps() {
        assert_eq!(frame_pts_ns(900_000, 25, 1), TEN_HOURS_NS);
        assert_eq!(frame_duration_ns(123_456, 25, 1), 40_000_000);
        assert_eq!(samples_in_frame(777_777, 25, 1, 16_000), 640);
        check_exact_over_ten_hours(25, 1, 16_000);
    }

    #[test]
    fn frame_pts_are_exact_over_ten_hours_at_ntsc_rate() {
        // 30000/1001: 1001 frames take exactly 33.3666.. s * 1001 / 1000 = 33.3667 s.
        assert_eq!(frame_pts_ns(30_000, 30_000, 1001), 1001 * NS_PER_S);
        assert_eq!(frame_pts_ns(1, 30_000, 1001), 33_366_667);
        assert_eq!(frame_pts_ns(2, 30_000, 1001), 66_733_333);
        check_exact_over_ten_hours(30_000, 1001, 48_000);
    }

    #[test]
    fn samples_and_ns_round_trip() {
        for &rate in &[8_000u32, 16_000, 22_050, 24_000, 44_100, 48_000] {
            for n in (0..2_000_000u64).step_by(997).chain([36_000 * rate as u64 - 1]) {
                assert_eq!(ns_to_samples(samples_to_ns(n, rate), rate), n, "rate {rate} n {n}");
            }
            // Ten hours of samples land exactly on ten hours.
            let n = 36_000 * rate as u64;
            assert_eq!(samples_to_ns(n, rate), TEN_HOURS_NS);
            assert_eq!(ns_to_samples(TEN_HOURS_NS, rate), n);
        }
        assert_eq!(samples_to_ns(1, 22_050), 45_351); // 45351.47 rounds down
        assert_eq!(samples_to_ns(1, 48_000), 20_833); // 20833.33
        assert_eq!(ns_to_samples(31_250, 16_000), 1); // 0.5 rounds up
    }

    #[test]
    fn frame_index_at_is_the_frame_showing() {
        assert_eq!(frame_index_at(0, 25, 1), 0);
        assert_eq!(frame_index_at(39_999_999, 25, 1), 0);
        assert_eq!(frame_index_at(40_000_000, 25, 1), 1);
        assert_eq!(frame_index_at(33_366_666, 30_000, 1001), 0);
        assert_eq!(frame_index_at(33_366_667, 30_000, 1001), 1);
    }

    #[test]
    #[should_panic]
    fn zero_frame_rate_panics() {
        frame_pts_ns(1, 0, 1);
    }
}
