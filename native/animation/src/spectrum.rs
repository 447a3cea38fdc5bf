//! A small power-spectrum helper for the audio lip analysis: Hann window, then the real frame's
//! FFT computed as a half-size complex FFT (even samples as real part, odd as imaginary) and
//! split into the real spectrum, power per bin. In-place iterative radix-2, precomputed
//! twiddles and bit-reversal.
//!
//! Invariants: the size is a power of two fixed at construction; twiddles, window and buffers
//! are allocated once, so `power` does not allocate. Results are deterministic (plain f32 math in
//! a fixed order).
//!
//! It is not a general FFT library: one real frame at a time, no inverse, no SIMD.

/// Power spectrum of real frames of a fixed length, zero-padded to a power of two.
#[derive(Clone, Debug)]
pub(crate) struct Spectrum {
    size: usize,
    window: Vec<f32>,
    /// `cos`, `-sin` of `2 pi k / size` for `k < size / 2`.
    twiddles: Vec<(f32, f32)>,
    /// Bit-reversal permutation of `0 .. size / 2`.
    bitrev: Vec<u32>,
    /// The padded frame, then its half-size transform: `size / 2` complex values.
    re: Vec<f32>,
    im: Vec<f32>,
    power: Vec<f32>,
}

impl Spectrum {
    /// For frames of `frame_len` samples (Hann-windowed), padded to the next power of two.
    pub(crate) fn new(frame_len: usize) -> Spectrum {
        let size = frame_len.max(4).next_power_of_two();
        let n = frame_len.max(1) as f32;
        let window = (0..frame_len)
            .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * (i as f32 + 0.5) / n).cos())
            .collect();
        let twiddles = (0..size / 2)
            .map(|k| {
                let a = 2.0 * std::f64::consts::PI * k as f64 / size as f64;
                (a.cos() as f32, -a.sin() as f32)
            })
            .collect();
        let half = size / 2;
        let bits = half.trailing_zeros();
        let bitrev = (0..half as u32).map(|i| if bits == 0 { 0 } else { i.reverse_bits() >> (32 - bits) }).collect();
        Spectrum { size, window, twiddles, bitrev, re: vec![0.0; half], im: vec![0.0; half], power: vec![0.0; half + 1] }
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Power of bins `0 ..= size / 2` of the windowed `frame` (`frame.len()` must be the
    /// constructor's `frame_len`; samples in any unit).
    pub(crate) fn power(&mut self, frame: &[f32]) -> &[f32] {
        debug_assert_eq!(frame.len(), self.window.len());
        let half = self.size / 2;
        // Pack: z[n] = x[2n] + i x[2n + 1], in bit-reversed order for the in-place FFT.
        for n in 0..half {
            let (a, b) = (2 * n, 2 * n + 1);
            let x = |i: usize| if i < frame.len() { frame[i] * self.window[i] } else { 0.0 };
            let j = self.bitrev[n] as usize;
            self.re[j] = x(a);
            self.im[j] = x(b);
        }
        fft_bitreversed(&mut self.re, &mut self.im, &self.twiddles, 2);
        // Split: X[k] = E[k] + W^k O[k], E = (Z[k] + conj Z[h-k]) / 2, O = (Z[k] - conj Z[h-k]) / 2i.
        for k in 0..=half {
            let (i, j) = (if k == half { 0 } else { k }, if k == 0 { 0 } else { half - k });
            let (zr, zi) = (self.re[i], self.im[i]);
            let (cr, ci) = (self.re[j], -self.im[j]);
            let (er, ei) = (0.5 * (zr + cr), 0.5 * (zi + ci));
            let (or, oi) = (0.5 * (zi - ci), -0.5 * (zr - cr));
            let (wr, wi) = if k < half { self.twiddles[k] } else { (-1.0, 0.0) };
            let xr = er + wr * or - wi * oi;
            let xi = ei + wr * oi + wi * or;
            self.power[k] = xr * xr + xi * xi;
        }
        &self.power
    }
}

/// Iterative radix-2 decimation-in-time FFT of input already in bit-reversed order; `re.len()`
/// a power of two; `twiddles[k * tw_step]` is `exp(-2 pi i k / n)`.
fn fft_bitreversed(re: &mut [f32], im: &mut [f32], twiddles: &[(f32, f32)], tw_step: usize) {
    let n = re.len();
    let mut len = 2;
    while len <= n {
        let half = len / 2;
        let stride = n / len * tw_step;
        for start in (0..n).step_by(len) {
            for k in 0..half {
                let (wr, wi) = twiddles[k * stride];
                let (a, b) = (start + k, start + k + half);
                let tr = re[b] * wr - im[b] * wi;
                let ti = re[b] * wi + im[b] * wr;
                re[b] = re[a] - tr;
                im[b] = im[a] - ti;
                re[a] += tr;
                im[a] += ti;
            }
        }
        len *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_matches_a_direct_dft() {
        for frame_len in [5usize, 64, 400, 600] {
            let x: Vec<f32> = (0..frame_len).map(|i| ((i * 7 % 13) as f32 - 6.0) / 6.0 + (i as f32 * 0.3).sin()).collect();
            let mut s = Spectrum::new(frame_len);
            let n = s.size();
            let w: Vec<f64> = s.window.iter().map(|&v| v as f64).collect();
            let p = s.power(&x).to_vec();
            assert_eq!(p.len(), n / 2 + 1);
            for (k, &pk) in p.iter().enumerate() {
                let (mut dr, mut di) = (0.0f64, 0.0f64);
                for (i, &v) in x.iter().enumerate() {
                    let a = -2.0 * std::f64::consts::PI * (k * i) as f64 / n as f64;
                    dr += v as f64 * w[i] * a.cos();
                    di += v as f64 * w[i] * a.sin();
                }
                let direct = dr * dr + di * di;
                assert!((pk as f64 - direct).abs() <= 1e-3 * (1.0 + direct), "len {frame_len} bin {k}: {pk} vs {direct}");
            }
        }
    }

    #[test]
    fn a_sine_peaks_in_its_bin() {
        let rate = 16_000.0;
        let frame_len = 400;
        let mut s = Spectrum::new(frame_len);
        assert_eq!(s.size(), 512);
        let f = 1_000.0;
        let x: Vec<f32> = (0..frame_len).map(|i| (2.0 * std::f32::consts::PI * f * i as f32 / rate).sin()).collect();
        let p = s.power(&x);
        let peak = (0..p.len()).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
        assert_eq!(peak, (f * 512.0 / rate).round() as usize);
    }
}
