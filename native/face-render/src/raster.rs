//! Triangle rasteriser for the warp: fills the pixels of a destination triangle by inverse
//! mapping each pixel centre to the source photo (one affine map per triangle, stepped in fixed
//! point along the row) and sampling it bilinearly.
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
    if (i as f32) < x {
        i + 1
    } else {
        i
    }
}

/// Round-to-nearest of an f64 to i64, without a libm call.
#[inline(always)]
pub fn round_i64(x: f64) -> i64 {
    let y = x + 0.5;
    let i = y as i64;
    if (i as f64) > y {
        i - 1
    } else {
        i
    }
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
    let du = (map.m[0] * FRAC_ONE).round() as i64;
    let dv = (map.m[2] * FRAC_ONE).round() as i64;
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
        let (xc, ycd) = (x0 as f64 + 0.5, yc as f64);
        let u0 = round_i64((map.m[0] * xc + map.m[1] * ycd + map.t[0]) * FRAC_ONE);
        let v0f = round_i64((map.m[2] * xc + map.m[3] * ycd + map.t[1]) * FRAC_ONE);
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
/// (fixed point, wrapping arithmetic so negative steps work).
///
/// # Safety
/// Every position along the span must satisfy `u <= (stride - 2) << 16` and
/// `v <= (data.len() / stride - 2) << 16`; it suffices that the first and last do, since the
/// positions are linear in k.
#[inline(never)]
unsafe fn warp_span(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::RgbImage;

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
