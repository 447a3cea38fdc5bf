//! Triangle rasteriser for the warp: fills the pixels of a destination triangle by inverse
//! mapping each pixel centre to the source photo (one affine map per triangle, stepped in fixed
//! point along the row and from row to row) and sampling it bilinearly.
//!
//! Speed: a framed head-and-shoulders frame re-warps most of its pixels every frame (the head
//! moves), so the span loop is the renderer's hot loop. On CPUs with AVX2 it runs eight pixels
//! at a time (taps read from a two-row window of the photo, or gathered when the span is steep
//! or scaled), with the scalar arithmetic of `blend4` in vector lanes: both paths give the same
//! bytes (a unit test holds them to it), so output does not depend on the CPU.
//!
//! Coverage rule: a pixel belongs to a triangle when its centre is inside, with half-open
//! intervals in both directions (left and top edges inclusive). Each edge's crossing with a
//! row is computed from the edge's endpoints in one canonical order, so two triangles sharing
//! an edge agree bit for bit: no pixel is drawn twice and none is missed along shared edges
//! (no seams).
//!
//! Not here: deciding which triangles to draw, clipping against anything but the target,
//! blending. Triangles whose orientation differs from `winding` (folded by the deformation)
//! or that are degenerate draw nothing.

use crate::geom::Affine;
use crate::sampler::{blend4, store, Source, FRAC_BITS, FRAC_ONE};

/// An RGB8 pixel buffer being drawn into.
pub struct Target<'a> {
    pub data: &'a mut [u8],
    pub width: usize,
    pub height: usize,
}

/// Half-open pixel rectangle `[x0, x1) x [y0, y1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Rect {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl Rect {
    pub const EMPTY: Rect = Rect {
        x0: i32::MAX,
        y0: i32::MAX,
        x1: i32::MIN,
        y1: i32::MIN,
    };

    pub fn is_empty(&self) -> bool {
        self.x0 >= self.x1 || self.y0 >= self.y1
    }

    pub fn union(&self, o: &Rect) -> Rect {
        if o.is_empty() {
            return *self;
        }
        if self.is_empty() {
            return *o;
        }
        Rect {
            x0: self.x0.min(o.x0),
            y0: self.y0.min(o.y0),
            x1: self.x1.max(o.x1),
            y1: self.y1.max(o.y1),
        }
    }

    pub fn clip(&self, w: usize, h: usize) -> Rect {
        Rect {
            x0: self.x0.max(0),
            y0: self.y0.max(0),
            x1: self.x1.min(w as i32),
            y1: self.y1.min(h as i32),
        }
    }

    /// Pixels touched by a set of points' bounding box.
    pub fn around(pts: &[[f32; 2]]) -> Rect {
        let mut r = Rect::EMPTY;
        for p in pts {
            r.x0 = r.x0.min(p[0].floor() as i32);
            r.y0 = r.y0.min(p[1].floor() as i32);
            r.x1 = r.x1.max(p[0].ceil() as i32 + 1);
            r.y1 = r.y1.max(p[1].ceil() as i32 + 1);
        }
        r
    }
}

/// `ceil` for values well inside the i32 range, without a libm call (the baseline x86-64
/// target has no rounding instruction).
#[inline(always)]
pub fn ceil_i32(x: f32) -> i32 {
    let i = x as i32;
    i + ((i as f32) < x) as i32
}

/// Round-to-nearest of an f64 to i64, without a libm call.
#[inline(always)]
pub fn round_i64(x: f64) -> i64 {
    let y = x + 0.5;
    let i = y as i64;
    i - ((i as f64) > y) as i64
}

/// Twice the signed area of a triangle.
#[inline]
pub fn orientation(a: [f32; 2], b: [f32; 2], c: [f32; 2]) -> f32 {
    (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
}

/// An edge prepared for scanning: its upper endpoint (canonical order: smaller y, then
/// smaller x) and dx/dy. Two triangles sharing an edge build the identical `Edge`, so they
/// compute bit-identical crossings.
#[derive(Clone, Copy)]
struct Edge {
    x: f32,
    y: f32,
    slope: f32,
}

impl Edge {
    #[inline(always)]
    fn new(a: [f32; 2], b: [f32; 2]) -> Edge {
        let (p, q) = if (a[1], a[0]) <= (b[1], b[0]) {
            (a, b)
        } else {
            (b, a)
        };
        Edge {
            x: p[0],
            y: p[1],
            slope: (q[0] - p[0]) / (q[1] - p[1]),
        }
    }

    /// x where the edge crosses the horizontal line `y`.
    #[inline(always)]
    fn x_at(&self, y: f32) -> f32 {
        self.x + (y - self.y) * self.slope
    }
}

/// Draws destination triangle `dst` (target pixel coordinates, centres at +0.5) with the
/// texture at sample coordinates `src` (see `Source::to_sample`). `winding`: the sign the
/// triangle's orientation has at rest. Returns the number of pixels written.
pub fn draw_triangle(
    t: &mut Target,
    source: &Source,
    dst: [[f32; 2]; 3],
    src: [[f32; 2]; 3],
    winding: f32,
) -> usize {
    let o = orientation(dst[0], dst[1], dst[2]);
    // (Also rejects NaN coordinates.)
    if o * winding <= 1e-6 || o.is_nan() {
        return 0;
    }
    let to64 = |p: [f32; 2]| [p[0] as f64, p[1] as f64];
    let Some(map) = Affine::from_triangles(dst.map(to64), src.map(to64)) else {
        return 0;
    };
    // Sort by y (then x) for the span walk.
    let mut v = dst;
    v.sort_by(|a, b| {
        (a[1], a[0])
            .partial_cmp(&(b[1], b[0]))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let [v0, v1, v2] = v;
    let y_start = ceil_i32(v0[1] - 0.5).max(0);
    let y_end = ceil_i32(v2[1] - 0.5).min(t.height as i32);
    let (mx, my) = source.max_fixed();
    // Sample positions in fixed point, stepped from the pixel centre (xo, y_start) near the
    // triangle: per pixel along a row (du, dv) and per row (du_row, dv_row). Stepping from a
    // nearby origin keeps the rounding error of the steps under (width + height) / 2^17 pixels.
    let fixed = |x: f64| round_i64(x * FRAC_ONE);
    let (du, dv) = (fixed(map.m[0]), fixed(map.m[2]));
    let (du_row, dv_row) = (fixed(map.m[1]), fixed(map.m[3]));
    let xo = v0[0].min(v1[0]).min(v2[0]).max(0.0) as i64;
    let (oxc, oyc) = (xo as f64 + 0.5, y_start as f64 + 0.5);
    let u_o = fixed(map.m[0] * oxc + map.m[1] * oyc + map.t[0]);
    let v_o = fixed(map.m[2] * oxc + map.m[3] * oyc + map.t[1]);
    let stride = t.width * 3;
    let mut written = 0usize;
    let (long, upper, lower) = (Edge::new(v0, v2), Edge::new(v0, v1), Edge::new(v1, v2));
    for y in y_start..y_end {
        let yc = y as f32 + 0.5;
        let xa = long.x_at(yc);
        let xb = if yc < v1[1] {
            upper.x_at(yc)
        } else {
            lower.x_at(yc)
        };
        let (xl, xr) = if xa <= xb { (xa, xb) } else { (xb, xa) };
        let x0 = ceil_i32(xl - 0.5).max(0);
        let x1 = ceil_i32(xr - 0.5).min(t.width as i32);
        if x0 >= x1 {
            continue;
        }
        let (dx, dy) = (x0 as i64 - xo, (y - y_start) as i64);
        let u0 = u_o + dx * du + dy * du_row;
        let v0f = v_o + dx * dv + dy * dv_row;
        let n = (x1 - x0) as i64;
        let (u_last, v_last) = (u0 + du * (n - 1), v0f + dv * (n - 1));
        let row = &mut t.data
            [y as usize * stride + x0 as usize * 3..y as usize * stride + x1 as usize * 3];
        let in_range = |a: i64, b: i64, m: i64| a >= 0 && b >= 0 && a <= m && b <= m;
        if in_range(u0, u_last, mx) && in_range(v0f, v_last, my) {
            // Fast path: every tap is inside the padded source.
            // SAFETY: the first and last positions of the row are within `source.max_fixed()`
            // (checked just above) and the positions in between lie on the segment joining
            // them, which is what `warp_span` requires.
            unsafe {
                warp_span(
                    row,
                    &source.data,
                    source.stride,
                    u0 as u32,
                    v0f as u32,
                    du as u32,
                    dv as u32,
                )
            };
        } else {
            let (mut u, mut vv) = (u0, v0f);
            for px in row.chunks_exact_mut(3) {
                store(px, source.sample_clamped(u, vv));
                u += du;
                vv += dv;
            }
        }
        written += n as usize;
    }
    written
}

/// Warps one row span: pixel k of `row` gets the bilinear sample at (u + k·du, v + k·dv)
/// (fixed point, wrapping arithmetic so negative steps work): `warp_span_avx2` where the CPU
/// has AVX2, else `warp_span_scalar`; both give the same bytes.
///
/// # Safety
/// Every position along the span must satisfy `u <= (stride - 2) << 16` and
/// `v <= (data.len() / stride - 2) << 16`; it suffices that the first and last do, since the
/// positions are linear in k.
unsafe fn warp_span(row: &mut [u8], data: &[u32], stride: usize, u: u32, v: u32, du: u32, dv: u32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked just above); the span requirement is the caller's.
        unsafe { warp_span_avx2(row, data, stride, u, v, du, dv) };
        return;
    }
    // SAFETY: the caller's requirement, passed on.
    unsafe { warp_span_scalar(row, data, stride, u, v, du, dv) };
}

/// `warp_span` one pixel at a time.
///
/// # Safety
/// As `warp_span`.
#[inline(never)]
unsafe fn warp_span_scalar(
    row: &mut [u8],
    data: &[u32],
    stride: usize,
    mut u: u32,
    mut v: u32,
    du: u32,
    dv: u32,
) {
    let base = data.as_ptr();
    for px in row.chunks_exact_mut(3) {
        let i = (v >> FRAC_BITS) as usize * stride + (u >> FRAC_BITS) as usize;
        let fx = (u >> (FRAC_BITS - 8)) & 0xFF;
        let fy = (v >> (FRAC_BITS - 8)) & 0xFF;
        // SAFETY: the caller guarantees (u, v) is in range, so i + stride + 1 < data.len()
        // (see `Source::sample_unchecked`).
        let c = unsafe {
            let d = base.add(i);
            blend4(*d, *d.add(1), *d.add(stride), *d.add(stride + 1), fx, fy)
        };
        store(px, c);
        u = u.wrapping_add(du);
        v = v.wrapping_add(dv);
    }
}

/// `warp_span` eight pixels at a time with AVX2. The four taps of the eight positions come from
/// a 16-pixel window of two photo rows when they all fit one (the photo drawn near its own
/// scale with a small tilt: the common case), else from four 64-bit gathers of tap pairs. They
/// are weighted in 16-bit halves of 32-bit lanes (red and blue together, then green, exactly as
/// `blend4` does), and the packed `0x00BBGGRR` words are shuffled to RGB, 12 bytes per 128-bit
/// half. Each 16-byte store writes 4 bytes past its 12, so a block is stored in place only while
/// two more pixels follow it (the next block rewrites them); the last block of a span (and a
/// span shorter than that) repeats its last position in the unused lanes and is copied out of
/// a scratch buffer.
///
/// # Safety
/// As `warp_span`, and the CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn warp_span_avx2(
    row: &mut [u8],
    data: &[u32],
    stride: usize,
    u: u32,
    v: u32,
    du: u32,
    dv: u32,
) {
    use std::arch::x86_64::*;
    const BLOCK: usize = 8;
    let n = row.len() / 3;
    let base = data.as_ptr() as *const i32;
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let (du_v, dv_v) = (_mm256_set1_epi32(du as i32), _mm256_set1_epi32(dv as i32));
    let stride_v = _mm256_set1_epi32(stride as i32);
    let pair_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    // Window of source pixels per row for the gather-free path (two 8-lane loads).
    const WINDOW: usize = 16;
    let (one, seven) = (_mm256_set1_epi32(1), _mm256_set1_epi32(7));
    let byte = _mm256_set1_epi32(0xFF);
    let m = _mm256_set1_epi32(0x00FF_00FF);
    let c256 = _mm256_set1_epi32(256);
    let round_rb = _mm256_set1_epi32(0x0080_0080);
    let round_g = _mm256_set1_epi32(0x80);
    // Per 128-bit half: four 0x00BBGGRR words → 12 bytes R G B ..., then 4 zero bytes.
    let to_rgb = _mm256_setr_epi8(
        0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, //
        0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
    );
    // Weight w in both 16-bit halves of each lane.
    let dup = |w: __m256i| _mm256_or_si256(w, _mm256_slli_epi32(w, 16));
    // Eight positions (lane offsets `steps` from pixel k) → their RGB bytes as described above.
    let block = |k: usize, steps: __m256i, last: u32| -> __m256i {
        let k = k as u32;
        let (u_first, v_first) = (
            u.wrapping_add(du.wrapping_mul(k)),
            v.wrapping_add(dv.wrapping_mul(k)),
        );
        let uu = _mm256_add_epi32(
            _mm256_set1_epi32(u_first as i32),
            _mm256_mullo_epi32(steps, du_v),
        );
        let vv = _mm256_add_epi32(
            _mm256_set1_epi32(v_first as i32),
            _mm256_mullo_epi32(steps, dv_v),
        );
        let fx = _mm256_and_si256(_mm256_srli_epi32(uu, FRAC_BITS as i32 - 8), byte);
        let fy = _mm256_and_si256(_mm256_srli_epi32(vv, FRAC_BITS as i32 - 8), byte);
        let cols = _mm256_srli_epi32(uu, FRAC_BITS as i32);
        // The lanes' positions are linear, so the first and last lane bound them all.
        let (u_last, v_last) = (
            u_first.wrapping_add(du.wrapping_mul(last)),
            v_first.wrapping_add(dv.wrapping_mul(last)),
        );
        let row = (v_first >> FRAC_BITS) as usize;
        let (c0, c1) = (u_first >> FRAC_BITS, u_last >> FRAC_BITS);
        let left_col = c0.min(c1);
        let start = row * stride + left_col as usize;
        let (p00, p01, p10, p11) = if v_last >> FRAC_BITS == row as u32
            && c0.max(c1) - left_col < WINDOW as u32 - 1
            && start + stride + WINDOW <= data.len()
        {
            // Common case (the photo drawn near its own scale, a small tilt): all taps lie in
            // one window of WINDOW pixels on two rows. Load the window and pick each lane's
            // taps from it, instead of gathering.
            let o = _mm256_sub_epi32(cols, _mm256_set1_epi32(left_col as i32));
            let o1 = _mm256_add_epi32(o, one);
            // SAFETY: start + stride + WINDOW <= data.len() (checked just above).
            let (ta, tb, ba, bb) = unsafe {
                let t = base.add(start) as *const __m256i;
                let b = base.add(start + stride) as *const __m256i;
                (
                    _mm256_loadu_si256(t),
                    _mm256_loadu_si256(t.add(1)),
                    _mm256_loadu_si256(b),
                    _mm256_loadu_si256(b.add(1)),
                )
            };
            let pick = |a: __m256i, b: __m256i, o: __m256i| {
                _mm256_blendv_epi8(
                    _mm256_permutevar8x32_epi32(a, o),
                    _mm256_permutevar8x32_epi32(b, o),
                    _mm256_cmpgt_epi32(o, seven),
                )
            };
            (
                pick(ta, tb, o),
                pick(ta, tb, o1),
                pick(ba, bb, o),
                pick(ba, bb, o1),
            )
        } else {
            let idx = _mm256_add_epi32(
                _mm256_mullo_epi32(_mm256_srli_epi32(vv, FRAC_BITS as i32), stride_v),
                cols,
            );
            // Each tap pair (left, right) is one 8-byte word: four 64-bit gathers of four
            // pairs fetch the 32 taps. Gathering pixels (0 1 4 5) and (2 3 6 7) lets one
            // shuffle per tap put the lanes back in order.
            let idx = _mm256_permutevar8x32_epi32(idx, pair_order);
            let (lo, hi) = (
                _mm256_castsi256_si128(idx),
                _mm256_extracti128_si256::<1>(idx),
            );
            // SAFETY: every lane's position is on the span, so its four taps are inside
            // `data` (the caller's requirement); gathers read only those words.
            let (top_a, top_b, bot_a, bot_b) = unsafe {
                let (top, bot) = (base as *const i64, base.add(stride) as *const i64);
                (
                    _mm256_i32gather_epi64::<4>(top, lo),
                    _mm256_i32gather_epi64::<4>(top, hi),
                    _mm256_i32gather_epi64::<4>(bot, lo),
                    _mm256_i32gather_epi64::<4>(bot, hi),
                )
            };
            let (left, right) = (
                |a: __m256i, b: __m256i| {
                    _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(
                        _mm256_castsi256_ps(a),
                        _mm256_castsi256_ps(b),
                    ))
                },
                |a: __m256i, b: __m256i| {
                    _mm256_castps_si256(_mm256_shuffle_ps::<0xDD>(
                        _mm256_castsi256_ps(a),
                        _mm256_castsi256_ps(b),
                    ))
                },
            );
            (
                left(top_a, top_b),
                right(top_a, top_b),
                left(bot_a, bot_b),
                right(bot_a, bot_b),
            )
        };
        // fx·fy < 2^16: the 16-bit multiply of zero-extended lanes is exact.
        let w11 = _mm256_srli_epi32(_mm256_mullo_epi16(fx, fy), 8);
        let w01 = dup(_mm256_sub_epi32(fx, w11));
        let w10 = dup(_mm256_sub_epi32(fy, w11));
        let w00 = dup(_mm256_sub_epi32(
            _mm256_add_epi32(c256, w11),
            _mm256_add_epi32(fx, fy),
        ));
        let w11 = dup(w11);
        // Each 16-bit half sums four 8-bit values times weights summing to 256: < 2^16.
        let weigh = |a: __m256i, b: __m256i, c: __m256i, d: __m256i| {
            _mm256_add_epi32(
                _mm256_add_epi32(_mm256_mullo_epi16(a, w00), _mm256_mullo_epi16(b, w01)),
                _mm256_add_epi32(_mm256_mullo_epi16(c, w10), _mm256_mullo_epi16(d, w11)),
            )
        };
        let rb = weigh(
            _mm256_and_si256(p00, m),
            _mm256_and_si256(p01, m),
            _mm256_and_si256(p10, m),
            _mm256_and_si256(p11, m),
        );
        let g = weigh(
            _mm256_and_si256(_mm256_srli_epi32(p00, 8), byte),
            _mm256_and_si256(_mm256_srli_epi32(p01, 8), byte),
            _mm256_and_si256(_mm256_srli_epi32(p10, 8), byte),
            _mm256_and_si256(_mm256_srli_epi32(p11, 8), byte),
        );
        let rb = _mm256_and_si256(_mm256_srli_epi32(_mm256_add_epi32(rb, round_rb), 8), m);
        let g = _mm256_srli_epi32(_mm256_add_epi32(g, round_g), 8);
        _mm256_shuffle_epi8(_mm256_or_si256(rb, _mm256_slli_epi32(g, 8)), to_rgb)
    };
    // Both halves' 12 bytes at `p` and `p + 12` (28 bytes written).
    let store2 = |p: *mut u8, rgb: __m256i| {
        // SAFETY: the callers pass 28 writable bytes at `p`.
        unsafe {
            _mm_storeu_si128(p as *mut __m128i, _mm256_castsi256_si128(rgb));
            _mm_storeu_si128(
                p.add(12) as *mut __m128i,
                _mm256_extracti128_si256::<1>(rgb),
            );
        }
    };
    let out = row.as_mut_ptr();
    let mut scratch = [0u8; 32];
    let mut k = 0usize;
    while k < n {
        let r = (n - k).min(BLOCK);
        // In place while two more pixels follow the block (bytes 3k .. 3k + 28 are then inside
        // `row`); otherwise the unused lanes repeat the last position and go to `scratch`.
        let in_place = k + BLOCK + 2 <= n;
        let steps = if in_place {
            lanes
        } else {
            _mm256_min_epi32(lanes, _mm256_set1_epi32(r as i32 - 1))
        };
        let rgb = block(k, steps, r as u32 - 1);
        if in_place {
            store2(out.wrapping_add(3 * k), rgb);
        } else {
            store2(scratch.as_mut_ptr(), rgb);
            row[3 * k..3 * (k + r)].copy_from_slice(&scratch[..3 * r]);
        }
        k += r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::RgbImage;

    /// A photo of pseudo-random pixels (a fixed LCG: the test is deterministic).
    fn noise_source(w: u32, h: u32) -> Source {
        let mut photo = RgbImage::new(w, h);
        let mut x = 0x2545_f491u32;
        for b in photo.data.iter_mut() {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            *b = (x >> 24) as u8;
        }
        Source::from_photo(&photo, 1)
    }

    #[cfg(target_arch = "x86_64")]
    type SpanFn = unsafe fn(&mut [u8], &[u32], usize, u32, u32, u32, u32);

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_span_gives_the_same_bytes_as_the_scalar_one() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let s = noise_source(64, 48);
        let (mx, my) = s.max_fixed();
        let mut seed = 7u64;
        let mut next = |m: i64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((seed >> 33) as i64).rem_euclid(m)
        };
        for len in 1..=41usize {
            for _ in 0..40 {
                // A span whose first and last positions are in range, stepping either way.
                // Half the spans at any slope, half near the photo's own scale with a small
                // tilt (the case the AVX2 path reads from a window instead of gathering).
                let steps = (len as i64 - 1).max(1);
                let (u0, v0, du, dv) = if next(2) == 0 {
                    let (u0, v0, u1, v1) = (next(mx + 1), next(my + 1), next(mx + 1), next(my + 1));
                    (u0, v0, (u1 - u0) / steps, (v1 - v0) / steps)
                } else {
                    let (du, dv) = (next(1 << 17) - (1 << 16), next(1 << 13) - (1 << 12));
                    let (u0, v0) = (next(mx + 1), next(my + 1));
                    let clamp = |p: i64, d: i64, m: i64| {
                        p.clamp((-d * steps).max(0), m - (d * steps).max(0))
                    };
                    (clamp(u0, du, mx), clamp(v0, dv, my), du, dv)
                };
                // Bytes around the span must stay untouched: pad it with a guard on each side.
                let mut a = vec![0xA5u8; 3 * (len + 4)];
                let mut b = a.clone();
                let span = 6..6 + 3 * len;
                for (out, span_fn) in [
                    (&mut a, warp_span_scalar as SpanFn),
                    (&mut b, warp_span_avx2),
                ] {
                    // SAFETY: the span's first and last positions are in range by construction,
                    // so all between are; the CPU has AVX2 (checked above).
                    unsafe {
                        span_fn(
                            &mut out[span.clone()],
                            &s.data,
                            s.stride,
                            u0 as u32,
                            v0 as u32,
                            du as u32,
                            dv as u32,
                        )
                    };
                }
                assert_eq!(a, b, "span of {len} from ({u0}, {v0}) by ({du}, {dv})");
            }
        }
    }

    fn flat_source(c: [u8; 3]) -> Source {
        let mut photo = RgbImage::new(8, 8);
        for px in photo.data.chunks_exact_mut(3) {
            px.copy_from_slice(&c);
        }
        Source::from_photo(&photo, 1)
    }

    #[test]
    fn two_triangles_sharing_an_edge_cover_each_pixel_once() {
        let s = flat_source([10, 20, 30]);
        let mut buf = vec![0u8; 16 * 16 * 3];
        let mut t = Target {
            data: &mut buf,
            width: 16,
            height: 16,
        };
        let (a, b, c, d) = ([0.3f32, 0.7], [15.2, 1.1], [14.6, 15.9], [0.9, 14.3]);
        let sp = [[3.0f32, 3.0], [4.0, 3.0], [4.0, 4.0]];
        let n1 = draw_triangle(&mut t, &s, [a, b, c], sp, orientation(a, b, c));
        let n2 = draw_triangle(&mut t, &s, [a, c, d], sp, orientation(a, c, d));
        // Area of the quad ≈ pixel count (centres inside), and no overlap: count painted pixels.
        let painted = buf.chunks_exact(3).filter(|p| p == &[10, 20, 30]).count();
        assert_eq!(painted, n1 + n2, "a pixel was drawn twice");
        let area = 0.5 * (orientation(a, b, c).abs() + orientation(a, c, d).abs());
        assert!((painted as f32 - area).abs() < 16.0, "{painted} vs {area}");
    }

    #[test]
    fn folded_triangles_draw_nothing() {
        let s = flat_source([1, 2, 3]);
        let mut buf = vec![0u8; 8 * 8 * 3];
        let mut t = Target {
            data: &mut buf,
            width: 8,
            height: 8,
        };
        let tri = [[0.0f32, 0.0], [8.0, 0.0], [0.0, 8.0]];
        let sp = [[3.0f32, 3.0], [4.0, 3.0], [3.0, 4.0]];
        assert_eq!(
            draw_triangle(&mut t, &s, tri, sp, -orientation(tri[0], tri[1], tri[2])),
            0
        );
        assert!(draw_triangle(&mut t, &s, tri, sp, orientation(tri[0], tri[1], tri[2])) > 0);
    }
}
