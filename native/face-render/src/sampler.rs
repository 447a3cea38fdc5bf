//! The photo as the warp reads it, and the bilinear sampler.
//!
//! `Source` stores pixels as `u32` words `0x00BBGGRR` with a replicated border of `PAD` pixels,
//! so a bilinear tap never needs clamping as long as the sample position stays within the
//! photo (plus the border). A `Source` can be a box-filtered reduction of the photo by an
//! integer factor, which the renderer uses when the output is much smaller than the photo
//! (bilinear sampling alone would alias).
//!
//! Sample positions are fixed point with `FRAC_BITS` fractional bits, in *padded source pixel*
//! units with the half-pixel already removed: position (x, y) means "between pixel centres",
//! so integer positions return a pixel exactly. `sample` returns the packed word; the red and
//! blue lanes are blended in one multiply, green in another, with 8-bit weights summing to 256
//! (exact at rest, at most one level of rounding otherwise).
//!
//! Not here: geometry, and any allocation after construction.

use crate::image::RgbImage;

/// Replicated border around the photo, in pixels. The mesh border bulges up to 0.5 px outside
/// the photo and bilinear reads one more pixel, so 2 is enough.
pub const PAD: usize = 2;
/// Fractional bits of sample positions.
pub const FRAC_BITS: u32 = 16;
pub const FRAC_ONE: f64 = (1u32 << FRAC_BITS) as f64;

/// A padded RGBX copy of the photo, possibly reduced by `factor`.
#[derive(Clone, Debug)]
pub struct Source {
    pub data: Vec<u32>,
    /// Padded width (row stride, in pixels) and height.
    pub stride: usize,
    pub height: usize,
    /// Photo pixels per source pixel.
    pub factor: usize,
}

#[inline]
pub fn pack(c: [u8; 3]) -> u32 {
    c[0] as u32 | (c[1] as u32) << 8 | (c[2] as u32) << 16
}

impl Source {
    /// Copies (`factor` = 1) or box-reduces the photo by `factor` and pads it.
    pub fn from_photo(photo: &RgbImage, factor: usize) -> Source {
        let factor = factor.max(1);
        let (pw, ph) = (photo.width as usize, photo.height as usize);
        let (w, h) = (pw.div_ceil(factor), ph.div_ceil(factor));
        let (stride, height) = (w + 2 * PAD, h + 2 * PAD);
        let mut data = vec![0u32; stride * height];
        for y in 0..h {
            for x in 0..w {
                let (mut acc, mut n) = ([0u32; 3], 0u32);
                for yy in y * factor..((y + 1) * factor).min(ph) {
                    for xx in x * factor..((x + 1) * factor).min(pw) {
                        let i = (yy * pw + xx) * 3;
                        for (k, a) in acc.iter_mut().enumerate() {
                            *a += photo.data[i + k] as u32;
                        }
                        n += 1;
                    }
                }
                let c = acc.map(|a| ((a + n / 2) / n) as u8);
                data[(y + PAD) * stride + x + PAD] = pack(c);
            }
        }
        // Replicate the border.
        for y in PAD..PAD + h {
            let row = y * stride;
            let (l, r) = (data[row + PAD], data[row + PAD + w - 1]);
            for x in 0..PAD {
                data[row + x] = l;
                data[row + PAD + w + x] = r;
            }
        }
        for y in 0..PAD {
            let (top, bottom) = (PAD * stride, (PAD + h - 1) * stride);
            data.copy_within(top..top + stride, y * stride);
            data.copy_within(bottom..bottom + stride, (PAD + h + y) * stride);
        }
        Source {
            data,
            stride,
            height,
            factor,
        }
    }

    /// Largest fixed-point sample coordinate (x, y) that keeps all four taps inside.
    #[inline]
    pub fn max_fixed(&self) -> (i64, i64) {
        (
            ((self.stride - 2) as i64) << FRAC_BITS,
            ((self.height - 2) as i64) << FRAC_BITS,
        )
    }

    /// Photo pixel coordinates (continuous, pixel centres at +0.5) → sample coordinates.
    #[inline]
    pub fn to_sample(&self, p: [f64; 2]) -> [f64; 2] {
        let k = self.factor as f64;
        [p[0] / k - 0.5 + PAD as f64, p[1] / k - 0.5 + PAD as f64]
    }

    /// Bilinear sample at fixed-point (x, y), clamped into range (slow path for edge cases).
    #[inline]
    pub fn sample_clamped(&self, x: i64, y: i64) -> u32 {
        let (mx, my) = self.max_fixed();
        self.sample(x.clamp(0, mx) as u32, y.clamp(0, my) as u32)
    }

    /// Bilinear sample; the caller guarantees `x <= max_fixed().0` and `y <= max_fixed().1`.
    #[inline(always)]
    pub fn sample(&self, x: u32, y: u32) -> u32 {
        let i = (y >> FRAC_BITS) as usize * self.stride + (x >> FRAC_BITS) as usize;
        let fx = (x >> (FRAC_BITS - 8)) & 0xFF;
        let fy = (y >> (FRAC_BITS - 8)) & 0xFF;
        let d = &self.data[i..i + self.stride + 2];
        blend4(d[0], d[1], d[self.stride], d[self.stride + 1], fx, fy)
    }
}

/// Bilinear blend of four packed pixels with 8-bit fractions.
#[inline(always)]
pub fn blend4(p00: u32, p01: u32, p10: u32, p11: u32, fx: u32, fy: u32) -> u32 {
    const M: u32 = 0x00FF_00FF;
    let w11 = (fx * fy) >> 8;
    let w01 = fx - w11;
    let w10 = fy - w11;
    let w00 = 256 + w11 - fx - fy;
    // Red and blue lanes 16 bits apart: each lane sum stays below 256 * 255 + 128.
    let rb = ((p00 & M) * w00 + (p01 & M) * w01 + (p10 & M) * w10 + (p11 & M) * w11 + 0x0080_0080)
        >> 8
        & M;
    let g = (((p00 >> 8) & 0xFF) * w00
        + ((p01 >> 8) & 0xFF) * w01
        + ((p10 >> 8) & 0xFF) * w10
        + ((p11 >> 8) & 0xFF) * w11
        + 0x80)
        >> 8;
    rb | (g << 8)
}

/// Writes a packed pixel into an RGB8 slot.
#[inline(always)]
pub fn store(px: &mut [u8], c: u32) {
    px[0] = c as u8;
    px[1] = (c >> 8) as u8;
    px[2] = (c >> 16) as u8;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_positions_return_pixels_exactly() {
        let mut photo = RgbImage::new(4, 3);
        for (i, b) in photo.data.iter_mut().enumerate() {
            *b = (i * 7 % 256) as u8;
        }
        let s = Source::from_photo(&photo, 1);
        for y in 0..3u32 {
            for x in 0..4u32 {
                let p = s.to_sample([x as f64 + 0.5, y as f64 + 0.5]);
                let c = s.sample((p[0] * FRAC_ONE) as u32, (p[1] * FRAC_ONE) as u32);
                assert_eq!(c, pack(photo.pixel(x, y)));
            }
        }
    }

    #[test]
    fn half_way_blends_evenly_and_border_replicates() {
        let photo = RgbImage::from_raw(2, 1, vec![0, 100, 200, 100, 200, 0]).unwrap();
        let s = Source::from_photo(&photo, 1);
        let p = s.to_sample([1.0, 0.5]);
        let c = s.sample((p[0] * FRAC_ONE) as u32, (p[1] * FRAC_ONE) as u32);
        assert_eq!(c, pack([50, 150, 100]));
        // Outside the photo: the edge pixel.
        let p = s.to_sample([-0.4, 0.5]);
        let c = s.sample((p[0] * FRAC_ONE) as u32, (p[1] * FRAC_ONE) as u32);
        assert_eq!(c, pack([0, 100, 200]));
    }

    #[test]
    fn reduction_averages_blocks() {
        let photo = RgbImage::from_raw(
            2,
            2,
            vec![0, 0, 0, 100, 100, 100, 200, 200, 200, 100, 100, 100],
        )
        .unwrap();
        let s = Source::from_photo(&photo, 2);
        assert_eq!(s.data[PAD * s.stride + PAD], pack([100, 100, 100]));
    }
}
