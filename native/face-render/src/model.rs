//! The face's motions as displacement fields over the photo, evaluated once per mesh vertex
//! when the rig is built. Each field ("basis") is the displacement at full strength (open = 1,
//! wide = ±1, press = 1, one eye shut); a frame mixes them linearly, so per-frame work is a
//! handful of multiply-adds per vertex.
//!
//! Geometry works in local frames: the mouth frame has its origin between the inner-lip
//! mid-points, `across` from mouth corner to mouth corner and `down` perpendicular to it; each
//! eye has its own frame along its corners. Falloffs are compact (smoothstep based), so far
//! away vertices get exactly zero and stay out of the per-frame work.
//!
//! Invariants: every field is continuous over the face except across the inner-lip slit (upper
//! and lower lip part there) and between the eyelids, which is exactly where the mesh has its
//! holes; at the mouth and eye corners both sides agree. Upper lid and upper lip points are told
//! apart from lower ones by their landmark label when they have one, else by which side of the
//! mouth line / eye mid-line they lie on.
//!
//! Not here: head pose (a rotation applied after these, in the renderer), rasterising, and
//! anything about colour.

use crate::geom::{lerp, smoothstep, Frame, Polyline};
use crate::landmarks as lm;

/// Added inner-lip gap at the centre at `open = 1`, as a fraction of the mouth width. The
/// FaceState contract says "about a third of the mouth width"; 0.30 plus the rounding of the
/// lips lands there.
pub const OPEN_GAP_FRAC: f64 = 0.30;
/// Share of the added gap taken by the lower lip (the jaw); the rest lifts the upper lip.
pub const OPEN_LOWER_SHARE: f64 = 0.82;
/// The rigid jaw's drop (image pixels, along the mouth frame's `down`) at `open = 1` for a mouth
/// `width` wide: what the lower lip's middle and the chin move by (the lower teeth move with it).
pub fn jaw_drop(width: f64) -> f64 {
    OPEN_GAP_FRAC * OPEN_LOWER_SHARE * width
}
/// Mouth corners move down by this fraction of the added gap at `open = 1`...
pub const OPEN_CORNER_DOWN: f64 = 0.12;
/// ...and inward by this fraction of the mouth width each (the mouth narrows as it opens).
pub const OPEN_CORNER_IN_FRAC: f64 = 0.05;
/// Open vowels roll the lower lip out: its inner edge drops this much further than the jaw
/// (share of the jaw's drop, fading to nothing at the lip's outer edge), so the vermilion turns
/// out and shows more of itself, and more of the lower teeth show above it.
pub const LOWER_LIP_ROLL: f64 = 0.15;
/// Distance below the mouth line over which the lip's opening profile hands over to the rigid
/// jaw (chin), as a fraction of the mouth width.
pub const JAW_BLEND_FRAC: f64 = 0.55;
/// Below the chin the jaw motion fades out over this distance (fraction of the mouth width):
/// the neck stretches instead of following the chin.
pub const NECK_FADE_FRAC: f64 = 0.7;
/// `wide = +1`: each mouth corner moves out by this fraction of the mouth width.
pub const SPREAD_FRAC: f64 = 0.11;
/// `wide = +1`: lips thin by this fraction of their thickness; corners rise by `SMILE_LIFT_FRAC`
/// of the mouth width.
pub const SPREAD_THIN: f64 = 0.22;
pub const SMILE_LIFT_FRAC: f64 = 0.03;
/// `wide = -1`: each corner moves in by this fraction of the mouth width ("oo")...
pub const PUCKER_FRAC: f64 = 0.15;
/// ...and the lips look fuller (pushed forward) by this fraction of their thickness.
pub const PUCKER_THICKEN: f64 = 0.25;
/// Open and rounded together: how far the opening moves from a lens toward an "O" (1 = the
/// full rounded profile), and the O's width as a share of the (puckered) inner mouth width.
pub const ROUND_OPEN_FULLNESS: f64 = 1.0;
pub const ROUND_OPEN_WIDTH: f64 = 0.6;
/// `press = 1`: lips thin by this fraction of their thickness once closed.
pub const PRESS_THIN: f64 = 0.18;
/// Shut eye: the lid line sits this fraction of the opening above the lower lid (0.5 would be
/// the middle; lower reads as a relaxed closed lid).
pub const LID_LINE_FRAC: f64 = 0.36;
/// Shut eye: the upper lid goes past the lid line by this fraction of the opening, so the
/// eye-opening triangles fold (and are skipped) and no eyeball pixel survives a full blink.
pub const LID_OVERSHOOT_FRAC: f64 = 0.10;
/// Shut eye, near the corners: skin within a few pixels above the lid moves this share of
/// its distance toward the lid line (lashes and liner fold down instead of staying put).
pub const CORNER_SQUEEZE: f64 = 0.5;
/// Skin above the upper lid follows it, fading to still over this many eye widths (the brow).
pub const LID_SKIN_UP_FRAC: f64 = 0.45;
/// Skin below the lower lid follows it over this many eye widths.
pub const LID_SKIN_DOWN_FRAC: f64 = 0.35;

/// Adds `bases` (one displacement per basis, photo pixels) mixed by `coef` to `q`; zero weights
/// add nothing, not even a rounding (a state that leaves a basis at 0 renders as if it did not exist).
#[inline]
pub(crate) fn displace(q: &mut [f64; 2], bases: &[[f32; 2]], coef: &[f32]) {
    for (&c, b) in coef.iter().zip(bases) {
        if c != 0.0 {
            q[0] += (c * b[0]) as f64;
            q[1] += (c * b[1]) as f64;
        }
    }
}

/// Number of expression bases and their order (`B_ROUND_OPEN` is weighted by open × rounding).
pub const NUM_BASES: usize = 7;
pub const B_OPEN: usize = 0;
pub const B_WIDE: usize = 1;
pub const B_ROUND: usize = 2;
pub const B_PRESS: usize = 3;
pub const B_EYE0: usize = 4;
pub const B_EYE1: usize = 5;
pub const B_ROUND_OPEN: usize = 6;

/// Which side of the mouth slit / eye opening a vertex belongs to, when its landmark says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Upper,
    Lower,
    /// Decide from the position.
    Unknown,
}

/// Mouth geometry in the mouth frame (pixels).
pub struct MouthModel {
    pub frame: Frame,
    /// Mouth width (outer corner to outer corner).
    pub width: f64,
    face_width: f64,
    inner_up: Polyline,
    inner_lo: Polyline,
    outer_up: Polyline,
    outer_lo: Polyline,
    outer_left: [f64; 2],
    outer_right: [f64; 2],
    v_chin: f64,
    v_nose: f64,
}

impl MouthModel {
    /// `pts`: sanitised landmark positions (image pixels).
    pub fn new(pts: &[[f64; 2]], face_width: f64) -> MouthModel {
        let mid = |a: [f64; 2], b: [f64; 2]| [(a[0] + b[0]) * 0.5, (a[1] + b[1]) * 0.5];
        let origin = mid(pts[lm::INNER_UPPER_MID], pts[lm::INNER_LOWER_MID]);
        let (a, b) = (pts[lm::MOUTH_LEFT], pts[lm::MOUTH_RIGHT]);
        let frame = if a[0] <= b[0] {
            Frame::new(origin, a, b)
        } else {
            Frame::new(origin, b, a)
        };
        let poly =
            |ids: &[usize]| Polyline::new(ids.iter().map(|&i| frame.local(pts[i])).collect());
        let (ol, or) = {
            let (p, q) = (frame.local(a), frame.local(b));
            if p[0] <= q[0] {
                (p, q)
            } else {
                (q, p)
            }
        };
        MouthModel {
            frame,
            width: or[0] - ol[0],
            face_width,
            inner_up: poly(&lm::INNER_UPPER),
            inner_lo: poly(&lm::INNER_LOWER),
            outer_up: poly(&lm::OUTER_UPPER),
            outer_lo: poly(&lm::OUTER_LOWER),
            outer_left: ol,
            outer_right: or,
            v_chin: frame.local(pts[lm::CHIN])[1],
            v_nose: frame.local(pts[lm::NOSE_BASE])[1],
        }
    }

    /// Position across the inner mouth, -1 at the left inner corner, +1 at the right one.
    fn t_inner(&self, u: f64) -> f64 {
        let (a, b) = (self.inner_up.u_min(), self.inner_up.u_max());
        (2.0 * u - a - b) / (b - a)
    }

    /// Opening profile across the mouth: 1 in the middle, 0 at and beyond the inner corners.
    /// `rounded`: a narrower ellipse (the lips stay together toward the corners, an "O"
    /// rather than a lens).
    fn profile(&self, u: f64, rounded: bool) -> f64 {
        let t = self.t_inner(u);
        if t.abs() >= 1.0 {
            0.0
        } else if rounded {
            let r = t / ROUND_OPEN_WIDTH;
            (1.0 - r * r).max(0.0).sqrt()
        } else {
            (1.0 - t * t).powf(0.55)
        }
    }

    /// The mouth line (where the lips meet) at `u`: the middle of the inner contours between
    /// the inner corners, then straight out to the outer corners, then level.
    pub fn mouth_line(&self, u: f64) -> f64 {
        let (ia, ib) = (
            self.inner_up.pts[0],
            self.inner_up.pts[self.inner_up.pts.len() - 1],
        );
        if u < ia[0] {
            let o = self.outer_left;
            if u <= o[0] || ia[0] - o[0] < 1e-9 {
                return o[1];
            }
            return lerp(o[1], ia[1], (u - o[0]) / (ia[0] - o[0]));
        }
        if u > ib[0] {
            let o = self.outer_right;
            if u >= o[0] || o[0] - ib[0] < 1e-9 {
                return o[1];
            }
            return lerp(ib[1], o[1], (u - ib[0]) / (o[0] - ib[0]));
        }
        (self.inner_up.at(u) + self.inner_lo.at(u)) * 0.5
    }

    /// Rest gap between the inner lips at `u` (0 outside the inner corners).
    fn rest_gap(&self, u: f64) -> f64 {
        if u <= self.inner_up.u_min() || u >= self.inner_up.u_max() {
            return 0.0;
        }
        (self.inner_lo.at(u) - self.inner_up.at(u)).max(0.0)
    }

    /// Lip thickness (inner to outer contour) of the upper and lower lip at `u`.
    fn thickness(&self, u: f64) -> (f64, f64) {
        let up = (self.inner_up.at(u) - self.outer_up.at(u)).max(0.5);
        let lo = (self.outer_lo.at(u) - self.inner_lo.at(u)).max(0.5);
        (up, lo)
    }

    /// Fades lip-local effects out beyond the outer corners.
    fn lateral_window(&self, u: f64, reach: f64) -> f64 {
        let half = self.width * 0.5;
        1.0 - smoothstep(half, half + reach, u.abs())
    }

    fn side(&self, q: [f64; 2], label: Side) -> Side {
        match label {
            Side::Unknown => {
                if q[1] < self.mouth_line(q[0]) {
                    Side::Upper
                } else {
                    Side::Lower
                }
            }
            s => s,
        }
    }

    /// Rigid jaw share across the face: 1 under the mouth, fading toward the ears.
    fn jaw_lateral(&self, u: f64) -> f64 {
        let f = self.face_width;
        let a = u.abs();
        (1.0 - 0.7 * smoothstep(0.12 * f, 0.55 * f, a)) * (1.0 - smoothstep(0.5 * f, 0.85 * f, a))
    }

    /// Compact bump around the outer mouth corners (1 at a corner, 0 beyond `r`).
    fn corner_bump(&self, q: [f64; 2], r: f64) -> (f64, f64) {
        let d = |c: [f64; 2]| ((q[0] - c[0]).powi(2) + (q[1] - c[1]).powi(2)).sqrt();
        let b = |d: f64| 1.0 - smoothstep(0.0, r, d);
        (b(d(self.outer_left)), b(d(self.outer_right)))
    }

    /// Displacement (image pixels) at `open = 1`.
    pub fn open(&self, p: [f64; 2], label: Side) -> [f64; 2] {
        let d = self.open_with(p, label, false);
        // Corners: down and inward, both lips alike.
        let q = self.frame.local(p);
        let w = self.width;
        let (bl, br) = self.corner_bump(q, 0.45 * w);
        let du = OPEN_CORNER_IN_FRAC * w * (bl - br);
        let dv = OPEN_CORNER_DOWN * OPEN_GAP_FRAC * w * (bl + br);
        let c = self.frame.vector([du, dv]);
        [d[0] + c[0], d[1] + c[1]]
    }

    /// Extra displacement when open and rounded together (weight `open · rounding`): the
    /// opening fills out toward its corners, an "O" instead of a lens.
    pub fn open_round(&self, p: [f64; 2], label: Side) -> [f64; 2] {
        let (a, b) = (
            self.open_with(p, label, true),
            self.open_with(p, label, false),
        );
        [
            ROUND_OPEN_FULLNESS * (a[0] - b[0]),
            ROUND_OPEN_FULLNESS * (a[1] - b[1]),
        ]
    }

    /// Jaw drop and lip parting with the given opening profile (no corner motion).
    fn open_with(&self, p: [f64; 2], label: Side, rounded: bool) -> [f64; 2] {
        let q = self.frame.local(p);
        let (u, v) = (q[0], q[1]);
        let w = self.width;
        let gap = OPEN_GAP_FRAC * w;
        let m = self.mouth_line(u);
        let dv = match self.side(q, label) {
            Side::Lower => {
                let blend = smoothstep(0.0, JAW_BLEND_FRAC * w, v - m);
                let share = lerp(self.profile(u, rounded), self.jaw_lateral(u), blend);
                let neck = 1.0 - smoothstep(self.v_chin, self.v_chin + NECK_FADE_FRAC * w, v);
                // The roll: 1 at the lip's inner edge, 0 from its outer edge down.
                let (inner, outer) = (self.inner_lo.at(u), self.outer_lo.at(u));
                let roll = 1.0 - smoothstep(inner, outer.max(inner + 0.5), v);
                jaw_drop(w) * (share + LOWER_LIP_ROLL * roll * self.profile(u, rounded)) * neck
            }
            _ => {
                // The upper lip lifts as a block, the skin up to the nose stretches.
                let to_nose = (m - self.v_nose).max(1.0);
                let fall = 1.0 - smoothstep(0.35 * to_nose, to_nose, m - v);
                -gap * (1.0 - OPEN_LOWER_SHARE) * self.profile(u, rounded) * fall
            }
        };
        self.frame.vector([0.0, dv])
    }

    /// Horizontal stretch (`sign` = +1 spreads, -1 pulls in) around the mouth.
    fn stretch(&self, q: [f64; 2], amount: f64) -> f64 {
        let (u, v) = (q[0], q[1]);
        let w = self.width;
        let half = w * 0.5;
        let ramp = if u.abs() <= half {
            u / half
        } else {
            u.signum() * (1.0 - smoothstep(0.0, 0.6 * w, u.abs() - half))
        };
        let dv = v - self.mouth_line(u);
        let band = 1.0 - smoothstep(0.0, if dv < 0.0 { 0.45 * w } else { 0.6 * w }, dv.abs());
        amount * w * ramp * band
    }

    /// Vertical scaling of the lips about the mouth line by `k` (negative thins), fading out
    /// past the lips.
    fn lip_scale(&self, q: [f64; 2], k: f64) -> f64 {
        let (u, v) = (q[0], q[1]);
        let d = v - self.mouth_line(u);
        let (tu, tl) = self.thickness(u);
        let thick = if d < 0.0 { tu } else { tl };
        let g = self.rest_gap(u) * 0.5;
        // Inside the lip the offset grows with the distance from the mouth line; past the lip it
        // holds, then fades over one mouth-width fifth.
        let inside = (d.abs() - g).clamp(0.0, thick);
        let fade = 1.0 - smoothstep(g + thick, g + thick + 0.3 * self.width, d.abs());
        d.signum() * k * inside * fade * self.lateral_window(u, 0.25 * self.width)
    }

    /// Displacement at `wide = +1` (spread, "ee").
    pub fn wide(&self, p: [f64; 2]) -> [f64; 2] {
        let q = self.frame.local(p);
        let du = self.stretch(q, SPREAD_FRAC);
        let (bl, br) = self.corner_bump(q, 0.45 * self.width);
        let dv = self.lip_scale(q, -SPREAD_THIN) - SMILE_LIFT_FRAC * self.width * (bl + br);
        self.frame.vector([du, dv])
    }

    /// Displacement at `wide = -1` (rounded, "oo").
    pub fn round(&self, p: [f64; 2]) -> [f64; 2] {
        let q = self.frame.local(p);
        let du = self.stretch(q, -PUCKER_FRAC);
        let dv = self.lip_scale(q, PUCKER_THICKEN);
        self.frame.vector([du, dv])
    }

    /// Displacement at `press = 1`: the inner lips meet on the mouth line and the lips thin.
    pub fn press(&self, p: [f64; 2], label: Side) -> [f64; 2] {
        let q = self.frame.local(p);
        let (u, v) = (q[0], q[1]);
        let d = v - self.mouth_line(u);
        let g = self.rest_gap(u) * 0.5;
        let (tu, tl) = self.thickness(u);
        let upper = self.side(q, label) == Side::Upper;
        let thick = if upper { tu } else { tl };
        let a = d.abs();
        // Closing: the whole lip moves by half the rest gap; thinning: PRESS_THIN of the part
        // of the lip between the slit and this point.
        let inside = (a - g).clamp(0.0, thick);
        let shift = g + PRESS_THIN * inside;
        let fade = 1.0 - smoothstep(g + thick, g + thick + 0.35 * self.width, a);
        let mag = shift * fade * self.lateral_window(u, 0.25 * self.width);
        let dv = if upper { mag } else { -mag };
        self.frame.vector([0.0, dv])
    }
}

/// One eye in its own frame.
pub struct EyeModel {
    pub frame: Frame,
    /// Corner-to-corner width.
    pub width: f64,
    upper: Polyline,
    lower: Polyline,
}

impl EyeModel {
    /// `upper`/`lower`: lid contour indices from one corner to the other (shared corners).
    pub fn new(pts: &[[f64; 2]], upper: &[usize], lower: &[usize]) -> EyeModel {
        let (a, b) = (pts[upper[0]], pts[upper[upper.len() - 1]]);
        // Orient the frame left to right in the image.
        let (l, r) = if a[0] <= b[0] { (a, b) } else { (b, a) };
        let origin = [(a[0] + b[0]) * 0.5, (a[1] + b[1]) * 0.5];
        let frame = Frame::new(origin, l, r);
        let poly =
            |ids: &[usize]| Polyline::new(ids.iter().map(|&i| frame.local(pts[i])).collect());
        let (up, lo) = (poly(upper), poly(lower));
        EyeModel {
            frame,
            width: up.u_max() - up.u_min(),
            upper: up,
            lower: lo,
        }
    }

    /// Displacement (image pixels) when the eye is fully shut.
    pub fn close(&self, p: [f64; 2], label: Side) -> [f64; 2] {
        let q = self.frame.local(p);
        let (u, v) = (q[0], q[1]);
        let (ua, ub) = (self.upper.u_min(), self.upper.u_max());
        let t = (2.0 * u - ua - ub) / (ub - ua);
        let (vu, vl) = (self.upper.at(u), self.lower.at(u));
        let inside = u > ua && u < ub;
        let gap = if inside { (vl - vu).max(0.0) } else { 0.0 };
        let line = vl - LID_LINE_FRAC * gap;
        let side = match label {
            Side::Unknown => {
                if v < (vu + vl) * 0.5 {
                    Side::Upper
                } else {
                    Side::Lower
                }
            }
            s => s,
        };
        let e = self.width;
        let dv = match side {
            Side::Upper => {
                // Distance above the upper lid (beyond the corners: above the corner's level,
                // which is where the clamped contour ends, so this is continuous).
                let d = (vu - v).max(0.0);
                let fall = 1.0 - smoothstep(0.0, LID_SKIN_UP_FRAC * e, d);
                let lid = if inside {
                    (line - vu + LID_OVERSHOOT_FRAC * gap) * fall
                } else {
                    0.0
                };
                // Near the corners the lid barely moves, but lashes and liner above it should
                // fold down with it: squeeze the skin just above toward the lid line there.
                let near_corner =
                    smoothstep(0.45, 0.75, t.abs()) * (1.0 - smoothstep(1.15, 1.45, t.abs()));
                let squeeze =
                    CORNER_SQUEEZE * d * near_corner * (1.0 - smoothstep(0.12 * e, 0.4 * e, d));
                lid + squeeze
            }
            _ => {
                if !inside {
                    return [0.0, 0.0];
                }
                let fall = 1.0 - smoothstep(0.0, LID_SKIN_DOWN_FRAC * e, v - vl);
                (line - vl) * fall
            }
        };
        self.frame.vector([0.0, dv])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic closed mouth 100 px wide at (200, 200): lips 10 px thick, inner lips meeting
    /// on a flat line, chin 80 px below, nose 40 px above.
    fn mouth() -> MouthModel {
        let mut pts = vec![[0.0f64; 2]; lm::LANDMARKS_WITH_IRIS];
        let n = lm::INNER_UPPER.len();
        for k in 0..n {
            let t = k as f64 / (n - 1) as f64 * 2.0 - 1.0;
            let (x, inner_w, bulge) = (200.0 + 50.0 * t, 200.0 + 40.0 * t, 1.0 - t * t);
            pts[lm::OUTER_UPPER[k]] = [x, 200.0 - 10.0 * bulge];
            pts[lm::OUTER_LOWER[k]] = [x, 200.0 + 10.0 * bulge];
            pts[lm::INNER_UPPER[k]] = [inner_w, 200.0];
            pts[lm::INNER_LOWER[k]] = [inner_w, 200.0];
        }
        pts[lm::CHIN] = [200.0, 280.0];
        pts[lm::NOSE_BASE] = [200.0, 160.0];
        MouthModel::new(&pts, 300.0)
    }

    #[test]
    fn open_vowels_roll_the_lower_lip_out() {
        let m = mouth();
        let inner = m.open([200.0, 200.0], Side::Lower)[1];
        let outer = m.open([200.0, 210.0], Side::Lower)[1];
        let chin = m.open([200.0, 235.0], Side::Lower)[1];
        assert!((outer - jaw_drop(m.width)).abs() < 1e-6, "outer edge {outer} moves with the jaw");
        assert!(
            (inner - jaw_drop(m.width) * (1.0 + LOWER_LIP_ROLL)).abs() < 1e-6,
            "inner edge {inner} drops further than the jaw"
        );
        assert!((chin - outer).abs() < 1e-6, "below the lip everything moves with the jaw");
        // Continuous through the lip (no step between neighbouring points).
        let mut prev = inner;
        for k in 1..=100 {
            let d = m.open([200.0, 200.0 + 0.1 * k as f64], Side::Lower)[1];
            assert!((d - prev).abs() < 0.5, "step {} at {k}", d - prev);
            prev = d;
        }
        // Toward the inner corners the roll fades with the opening profile.
        let side = m.open([235.0, 200.0], Side::Lower)[1];
        assert!(side < inner, "{side} vs {inner}");
    }
}
