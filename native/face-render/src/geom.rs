//! Small 2-D helpers shared by the rig and the renderer: local frames (a face feature's
//! "across" and "down" axes), polylines evaluated as functions of the across coordinate,
//! smoothstep falloffs, and 2-D affine maps.
//!
//! Invariants: frames are orthonormal (rotation only, no scale); a `Polyline` is sorted by its
//! first coordinate. Nothing here allocates after construction or touches pixels.

/// Hermite smoothstep: 0 at `e0`, 1 at `e1`, C1-continuous in between. `e0 > e1` gives the
/// mirrored ramp; `e0 == e1` is a step.
#[inline]
pub fn smoothstep(e0: f64, e1: f64, x: f64) -> f64 {
    if e0 == e1 {
        return if x < e0 { 0.0 } else { 1.0 };
    }
    let t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

#[inline]
pub fn lerp(a: f64, b: f64, t: f64) -> f64 {
    a + (b - a) * t
}

/// An orthonormal frame: `origin`, unit `across` axis (image left to right for an upright face)
/// and `down` axis (across turned 90° clockwise in the y-down image).
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub origin: [f64; 2],
    pub across: [f64; 2],
    pub down: [f64; 2],
}

impl Frame {
    /// Frame with the across axis along `from → to`.
    pub fn new(origin: [f64; 2], from: [f64; 2], to: [f64; 2]) -> Frame {
        let (dx, dy) = (to[0] - from[0], to[1] - from[1]);
        let len = (dx * dx + dy * dy).sqrt().max(1e-9);
        let across = [dx / len, dy / len];
        Frame {
            origin,
            across,
            down: [-across[1], across[0]],
        }
    }

    /// Image point → (across, down) coordinates.
    #[inline]
    pub fn local(&self, p: [f64; 2]) -> [f64; 2] {
        let (dx, dy) = (p[0] - self.origin[0], p[1] - self.origin[1]);
        [
            dx * self.across[0] + dy * self.across[1],
            dx * self.down[0] + dy * self.down[1],
        ]
    }

    /// (across, down) coordinates → image point.
    #[inline]
    pub fn world(&self, q: [f64; 2]) -> [f64; 2] {
        [
            self.origin[0] + q[0] * self.across[0] + q[1] * self.down[0],
            self.origin[1] + q[0] * self.across[1] + q[1] * self.down[1],
        ]
    }

    /// A displacement given in local axes, as an image-space vector.
    #[inline]
    pub fn vector(&self, d: [f64; 2]) -> [f64; 2] {
        [
            d[0] * self.across[0] + d[1] * self.down[0],
            d[0] * self.across[1] + d[1] * self.down[1],
        ]
    }
}

/// A curve `v(u)` given by points (kept sorted by `u`).
#[derive(Clone, Debug)]
pub struct Polyline {
    pub pts: Vec<[f64; 2]>,
}

impl Polyline {
    /// Sorts the points by `u`.
    pub fn new(mut pts: Vec<[f64; 2]>) -> Polyline {
        pts.sort_by(|a, b| a[0].total_cmp(&b[0]));
        Polyline { pts }
    }

    pub fn u_min(&self) -> f64 {
        self.pts[0][0]
    }

    pub fn u_max(&self) -> f64 {
        self.pts[self.pts.len() - 1][0]
    }

    /// `v` at `u`, clamped to the end values outside the range.
    pub fn at(&self, u: f64) -> f64 {
        let p = &self.pts;
        if u <= p[0][0] {
            return p[0][1];
        }
        for w in p.windows(2) {
            if u <= w[1][0] {
                let span = w[1][0] - w[0][0];
                let t = if span > 1e-12 {
                    (u - w[0][0]) / span
                } else {
                    0.5
                };
                return lerp(w[0][1], w[1][1], t);
            }
        }
        p[p.len() - 1][1]
    }
}

/// 2-D affine map `p ↦ (a·p + c)`: `m = [a00, a01, a10, a11]`, `t = [c0, c1]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Affine {
    pub m: [f64; 4],
    pub t: [f64; 2],
}

impl Affine {
    pub const IDENTITY: Affine = Affine {
        m: [1.0, 0.0, 0.0, 1.0],
        t: [0.0, 0.0],
    };

    #[inline]
    pub fn apply(&self, p: [f64; 2]) -> [f64; 2] {
        [
            self.m[0] * p[0] + self.m[1] * p[1] + self.t[0],
            self.m[2] * p[0] + self.m[3] * p[1] + self.t[1],
        ]
    }

    /// The affine map through three point pairs (`src[i] ↦ dst[i]`); None when `src` is
    /// degenerate.
    pub fn from_triangles(src: [[f64; 2]; 3], dst: [[f64; 2]; 3]) -> Option<Affine> {
        let (e1, e2) = (
            [src[1][0] - src[0][0], src[1][1] - src[0][1]],
            [src[2][0] - src[0][0], src[2][1] - src[0][1]],
        );
        let det = e1[0] * e2[1] - e1[1] * e2[0];
        if det.abs() < 1e-12 {
            return None;
        }
        let (f1, f2) = (
            [dst[1][0] - dst[0][0], dst[1][1] - dst[0][1]],
            [dst[2][0] - dst[0][0], dst[2][1] - dst[0][1]],
        );
        // M · [e1 e2] = [f1 f2]  →  M = [f1 f2] · [e1 e2]^-1
        let inv = [e2[1] / det, -e2[0] / det, -e1[1] / det, e1[0] / det];
        let m = [
            f1[0] * inv[0] + f2[0] * inv[2],
            f1[0] * inv[1] + f2[0] * inv[3],
            f1[1] * inv[0] + f2[1] * inv[2],
            f1[1] * inv[1] + f2[1] * inv[3],
        ];
        let t = [
            dst[0][0] - (m[0] * src[0][0] + m[1] * src[0][1]),
            dst[0][1] - (m[2] * src[0][0] + m[3] * src[0][1]),
        ];
        Some(Affine { m, t })
    }

    pub fn inverse(&self) -> Option<Affine> {
        let det = self.m[0] * self.m[3] - self.m[1] * self.m[2];
        if det.abs() < 1e-12 {
            return None;
        }
        let m = [
            self.m[3] / det,
            -self.m[1] / det,
            -self.m[2] / det,
            self.m[0] / det,
        ];
        let t = [
            -(m[0] * self.t[0] + m[1] * self.t[1]),
            -(m[2] * self.t[0] + m[3] * self.t[1]),
        ];
        Some(Affine { m, t })
    }
}

/// Even-odd point-in-polygon test.
pub fn point_in_polygon(p: [f64; 2], poly: &[[f64; 2]]) -> bool {
    let mut inside = false;
    let n = poly.len();
    let mut j = n - 1;
    for i in 0..n {
        let (a, b) = (poly[i], poly[j]);
        if (a[1] > p[1]) != (b[1] > p[1]) {
            let x = a[0] + (p[1] - a[1]) * (b[0] - a[0]) / (b[1] - a[1]);
            if p[0] < x {
                inside = !inside;
            }
        }
        j = i;
    }
    inside
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trips() {
        let f = Frame::new([10.0, 5.0], [0.0, 0.0], [3.0, 4.0]);
        let p = [7.0, -2.0];
        let q = f.world(f.local(p));
        assert!((q[0] - p[0]).abs() < 1e-12 && (q[1] - p[1]).abs() < 1e-12);
        // A level frame has down = +y.
        let g = Frame::new([0.0, 0.0], [0.0, 0.0], [1.0, 0.0]);
        assert_eq!(g.down, [-0.0, 1.0]);
    }

    #[test]
    fn affine_from_triangles_and_inverse() {
        let a = Affine {
            m: [1.5, 0.2, -0.3, 0.9],
            t: [4.0, -2.0],
        };
        let src = [[0.0, 0.0], [10.0, 1.0], [2.0, 7.0]];
        let dst = [a.apply(src[0]), a.apply(src[1]), a.apply(src[2])];
        let b = Affine::from_triangles(src, dst).unwrap();
        for k in 0..4 {
            assert!((a.m[k] - b.m[k]).abs() < 1e-9);
        }
        let i = a.inverse().unwrap();
        let p = i.apply(a.apply([3.0, 5.0]));
        assert!((p[0] - 3.0).abs() < 1e-9 && (p[1] - 5.0).abs() < 1e-9);
    }

    #[test]
    fn polyline_clamps_and_interpolates() {
        let p = Polyline::new(vec![[0.0, 0.0], [2.0, 4.0], [4.0, 0.0]]);
        assert_eq!(p.at(-1.0), 0.0);
        assert_eq!(p.at(1.0), 2.0);
        assert_eq!(p.at(3.0), 2.0);
        assert_eq!(p.at(9.0), 0.0);
    }
}
