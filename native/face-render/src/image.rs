//! Raw frames: packed RGB8 (what the renderer draws and the face photo is stored as) and planar
//! I420 (what the encoders take), with a BT.601 limited-range converter between them.

/// Packed 8-bit RGB, row-major, no padding (stride = 3 * width).
#[derive(Clone, Debug, PartialEq)]
pub struct RgbImage {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl RgbImage {
    pub fn new(width: u32, height: u32) -> RgbImage {
        RgbImage { width, height, data: vec![0; (width * height * 3) as usize] }
    }

    /// Wraps existing RGB bytes; None when the length does not match the size.
    pub fn from_raw(width: u32, height: u32, data: Vec<u8>) -> Option<RgbImage> {
        (data.len() == (width as usize) * (height as usize) * 3).then_some(RgbImage { width, height, data })
    }

    #[inline]
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.width + x) * 3) as usize;
        [self.data[i], self.data[i + 1], self.data[i + 2]]
    }
}

/// Size in bytes of an I420 frame (Y full size, U and V at half width and height, rounded up).
pub fn i420_size(width: u32, height: u32) -> usize {
    let (w, h) = (width as usize, height as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    w * h + 2 * cw * ch
}

/// RGB -> I420, BT.601 limited range (what x264, vp8enc and jpegenc expect from browsers'
/// point of view). Chroma is the average of each 2x2 block. `out` must hold `i420_size` bytes.
pub fn rgb_to_i420(src: &RgbImage, out: &mut [u8]) {
    let (w, h) = (src.width as usize, src.height as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    assert!(out.len() >= i420_size(src.width, src.height), "I420 buffer too small");
    let (y_plane, chroma) = out.split_at_mut(w * h);
    let (u_plane, v_plane) = chroma.split_at_mut(cw * ch);
    let rgb = &src.data;
    // Fixed point, 8 fractional bits: Y = 16 + (66R + 129G + 25B + 128) >> 8, etc.
    for y in 0..h {
        let row = &rgb[y * w * 3..(y + 1) * w * 3];
        let out_row = &mut y_plane[y * w..(y + 1) * w];
        for x in 0..w {
            let (r, g, b) = (row[3 * x] as i32, row[3 * x + 1] as i32, row[3 * x + 2] as i32);
            out_row[x] = (((66 * r + 129 * g + 25 * b + 128) >> 8) + 16) as u8;
        }
    }
    for cy in 0..ch {
        for cx in 0..cw {
            let (mut r, mut g, mut b, mut n) = (0i32, 0i32, 0i32, 0i32);
            for dy in 0..2 {
                for dx in 0..2 {
                    let (x, y) = (cx * 2 + dx, cy * 2 + dy);
                    if x < w && y < h {
                        let i = (y * w + x) * 3;
                        r += rgb[i] as i32;
                        g += rgb[i + 1] as i32;
                        b += rgb[i + 2] as i32;
                        n += 1;
                    }
                }
            }
            let (r, g, b) = (r / n, g / n, b / n);
            u_plane[cy * cw + cx] = (((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128) as u8;
            v_plane[cy * cw + cx] = (((112 * r - 94 * g - 18 * b + 128) >> 8) + 128) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_primaries_to_bt601_limited_range() {
        let mut img = RgbImage::new(2, 2);
        img.data.copy_from_slice(&[255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0]);
        let mut out = vec![0; i420_size(2, 2)];
        rgb_to_i420(&img, &mut out);
        assert_eq!(&out[..4], &[235, 235, 16, 16]);
        assert_eq!(out[4], 128);
        assert_eq!(out[5], 128);

        let red = RgbImage::from_raw(1, 1, vec![255, 0, 0]).unwrap();
        let mut out = vec![0; i420_size(1, 1)];
        rgb_to_i420(&red, &mut out);
        assert_eq!(out, vec![82, 90, 240]);
    }

    #[test]
    fn odd_sizes_round_chroma_up() {
        assert_eq!(i420_size(5, 3), 15 + 2 * 3 * 2);
        let img = RgbImage::new(5, 3);
        let mut out = vec![0; i420_size(5, 3)];
        rgb_to_i420(&img, &mut out);
        assert!(out[..15].iter().all(|&y| y == 16));
    }
}
