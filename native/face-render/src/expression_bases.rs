//! The brows and cheeks (`FaceState::brow`, `FaceState::cheek`) as displacement bases over the
//! photo, evaluated once per mesh vertex when the rig is built, like the mouth and eyelid bases
//! of `model`; a frame adds `raise · max(brow, 0) + knit · max(-brow, 0) + cheek · cheek`.
//!
//! - Raise (brow = +1): the brows (MediaPipe's brow lines, 70..107 and 300..336) and the forehead
//!   above them move up by `BROW_RAISE_FRAC` of the face width; the motion fades to nothing at
//!   the upper eyelids (the skin between lid and brow stretches, the lids stay) and over the
//!   forehead above (`FOREHEAD_FADE_FRAC`), and sideways past the brows' outer ends.
//! - Knit (brow = -1): the inner halves of the brows move toward the face's mid-line and down,
//!   with the same vertical falloff; the in-motion is zero on the mid-line (the two sides meet).
//! - Cheek (cheek = 1): the cheek below each eye, lateral to the nose, moves up by
//!   `CHEEK_RAISE_FRAC` of the face width, a compact elliptic bump whose upper flank nudges the
//!   lower lid up a little (a squint); nothing above the eye's mid-line moves.
//!
//! Geometry works in the face frame (origin the face-oval centre, `across` from eye to eye,
//! `down` perpendicular). Invariants: every field is continuous and compact (exactly zero far
//! away and on the photo border), the upper-eyelid contours never move with the brows, and a
//! zero brow and cheek add nothing, so those frames are bit-identical with a rig without these
//! bases.
//!
//! Not here: the mouth and eyelid motions (`model`), the head pose (`renderer`).

use crate::contours::mean;
use crate::geom::{smoothstep, Frame, Polyline};
use crate::landmarks as lm;

/// Brow raise at brow = +1, as a fraction of the face width (a few per cent: a clear but
/// natural lift).
pub const BROW_RAISE_FRAC: f64 = 0.035;
/// Brow knit at brow = -1: the inner brows move in and down by these fractions of the face width.
pub const KNIT_IN_FRAC: f64 = 0.02;
pub const KNIT_DOWN_FRAC: f64 = 0.018;
/// Above the brows the raise fades out over this fraction of the face width (or 80 % of the
/// brow-to-hairline distance when the forehead is shorter).
pub const FOREHEAD_FADE_FRAC: f64 = 0.35;
/// Past the brows' outer ends the motion fades out over this fraction of the face width.
pub const BROW_SIDE_FADE_FRAC: f64 = 0.12;
/// Between the brows (the glabella) the raise keeps this share.
pub const GLABELLA_SHARE: f64 = 0.7;
/// Cheek raise at cheek = 1, as a fraction of the face width.
pub const CHEEK_RAISE_FRAC: f64 = 0.02;

/// Number of expression bases and their order.
pub const NUM_EXPR: usize = 3;
pub const E_RAISE: usize = 0;
pub const E_KNIT: usize = 1;
pub const E_CHEEK: usize = 2;

/// One vertex's displacements (photo pixels) at full strength, in `E_*` order.
pub type ExprBases = [[f32; 2]; NUM_EXPR];

/// MediaPipe brow lines, outer end to inner end: upper edge, lower edge, both brows.
const BROW_A_UPPER: [usize; 5] = [70, 63, 105, 66, 107];
const BROW_A_LOWER: [usize; 5] = [46, 53, 52, 65, 55];
const BROW_B_UPPER: [usize; 5] = [300, 293, 334, 296, 336];
const BROW_B_LOWER: [usize; 5] = [276, 283, 282, 295, 285];
/// Top of the forehead on the face oval.
const FOREHEAD_TOP: usize = 10;

/// The weights of the bases for a frame's (sanitised) brow and cheek.
pub fn coefficients(brow: f32, cheek: f32) -> [f32; NUM_EXPR] {
    [brow.max(0.0), (-brow).max(0.0), cheek]
}

/// One cheek: the bump's centre (face frame) and radii.
struct Cheek {
    centre: [f64; 2],
    /// Radii toward the face's mid-line, away from it, up and down.
    r_in: f64,
    r_out: f64,
    r_up: f64,
    r_down: f64,
    /// Above this `v` (the eye's mid-line) nothing moves; fully on below `gate_to`.
    gate_from: f64,
    gate_to: f64,
}

/// Brow and cheek geometry of one face, in the face frame.
pub struct ExpressionModel {
    frame: Frame,
    face_width: f64,
    brow_upper: Polyline,
    brow_lower: Polyline,
    /// Upper eyelids of both eyes as one curve (straight across the nose bridge).
    lids: Polyline,
    /// Mid-line between the inner brow ends, half the gap between them, and the outer ends.
    mid_u: f64,
    inner_half: f64,
    outer: [f64; 2],
    forehead_fade: f64,
    cheeks: [Cheek; 2],
    /// Eyelid contour landmarks (never moved by the brows).
    lid_ids: Vec<usize>,
}

impl ExpressionModel {
    /// `pts`: sanitised landmark positions (photo pixels); `frame`: the face frame.
    pub fn new(pts: &[[f64; 2]], frame: Frame, face_width: f64) -> ExpressionModel {
        let local = |ids: &[usize]| -> Vec<[f64; 2]> { ids.iter().map(|&i| frame.local(pts[i])).collect() };
        let both = |a: &[usize], b: &[usize]| Polyline::new([local(a), local(b)].concat());
        let brow_upper = both(&BROW_A_UPPER, &BROW_B_UPPER);
        let brow_lower = both(&BROW_A_LOWER, &BROW_B_LOWER);
        let lids = both(&lm::EYE_A_UPPER, &lm::EYE_B_UPPER);
        let inner = [frame.local(pts[BROW_A_UPPER[4]])[0], frame.local(pts[BROW_B_UPPER[4]])[0]];
        let (ia, ib) = (inner[0].min(inner[1]), inner[0].max(inner[1]));
        let mid_u = (ia + ib) * 0.5;
        let inner_half = ((ib - ia) * 0.5).max(0.02 * face_width);
        let outer = [brow_upper.u_min(), brow_upper.u_max()];
        let top = frame.local(pts[FOREHEAD_TOP])[1];
        let brow_top = brow_upper.at(mid_u);
        let forehead_fade = (FOREHEAD_FADE_FRAC * face_width).min(0.8 * (brow_top - top)).max(0.1 * face_width);
        let cheek = |upper: &[usize], lower: &[usize]| -> Cheek {
            let ids: Vec<usize> = upper.iter().chain(lower).copied().collect();
            let c = frame.local(mean(pts, &ids));
            let (a, b) = (frame.local(pts[upper[0]]), frame.local(pts[upper[upper.len() - 1]]));
            let e = ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt().max(1.0);
            let out = if c[0] < mid_u { -1.0 } else { 1.0 };
            Cheek {
                centre: [c[0] + out * 0.1 * e, c[1] + 0.75 * e],
                r_in: 0.6 * e,
                r_out: 0.8 * e,
                r_up: 0.9 * e,
                r_down: 0.7 * e,
                gate_from: c[1] - 0.1 * e,
                gate_to: c[1] + 0.1 * e,
            }
        };
        let lid_ids = lm::EYE_A_UPPER.iter().chain(&lm::EYE_A_LOWER).chain(&lm::EYE_B_UPPER).chain(&lm::EYE_B_LOWER).copied().collect();
        ExpressionModel {
            frame,
            face_width,
            brow_upper,
            brow_lower,
            lids,
            mid_u,
            inner_half,
            outer,
            forehead_fade,
            cheeks: [cheek(&lm::EYE_A_UPPER, &lm::EYE_A_LOWER), cheek(&lm::EYE_B_UPPER, &lm::EYE_B_LOWER)],
            lid_ids,
        }
    }

    /// Vertical share of the brow motion at `(u, v)`: 0 at and below the upper lids, rising to
    /// 1 at the brow's lower edge, 1 over the brow, fading out over `reach` above it.
    fn brow_vertical(&self, u: f64, v: f64, reach: f64) -> f64 {
        let lid = self.lids.at(u);
        let top = self.brow_upper.at(u);
        let low = self.brow_lower.at(u).max(top).min(lid - 1.0);
        if v >= lid {
            0.0
        } else if v > low {
            smoothstep(lid, low, v)
        } else if v >= top {
            1.0
        } else {
            1.0 - smoothstep(top, top - reach, v)
        }
    }

    /// Sideways share of the brow raise: 1 along the brows, `GLABELLA_SHARE` on the mid-line,
    /// fading out past the outer ends.
    fn brow_lateral(&self, u: f64) -> f64 {
        let fade = BROW_SIDE_FADE_FRAC * self.face_width;
        let sides = (1.0 - smoothstep(self.outer[1], self.outer[1] + fade, u)) * smoothstep(self.outer[0] - fade, self.outer[0], u);
        let d = (u - self.mid_u).abs();
        sides * (1.0 - (1.0 - GLABELLA_SHARE) * (1.0 - smoothstep(0.0, self.inner_half, d)))
    }

    /// Cheek bump at `(u, v)`, 0..1.
    fn cheek(&self, u: f64, v: f64) -> f64 {
        let mut best = 0.0f64;
        for c in &self.cheeks {
            let du = u - c.centre[0];
            let toward_mid = (du < 0.0) == (c.centre[0] > self.mid_u);
            let ru = if toward_mid { c.r_in } else { c.r_out };
            let dv = v - c.centre[1];
            let rv = if dv < 0.0 { c.r_up } else { c.r_down };
            let d = ((du / ru).powi(2) + (dv / rv).powi(2)).sqrt();
            let bump = (1.0 - smoothstep(0.3, 1.0, d)) * smoothstep(c.gate_from, c.gate_to, v);
            best = best.max(bump);
        }
        best
    }

    /// The bases at photo point `p` (`landmark`: its MediaPipe index, if it is one).
    pub fn bases(&self, p: [f64; 2], landmark: Option<usize>, min_px: f64) -> ExprBases {
        let [u, v] = self.frame.local(p);
        let w = self.face_width;
        let mut out = [[0.0f32; 2]; NUM_EXPR];
        let mut put = |k: usize, d: [f64; 2]| {
            if (d[0] * d[0] + d[1] * d[1]).sqrt() >= min_px {
                let d = self.frame.vector(d);
                out[k] = [d[0] as f32, d[1] as f32];
            }
        };
        let on_lid = landmark.is_some_and(|l| self.lid_ids.contains(&l));
        if !on_lid {
            let raise = self.brow_vertical(u, v, self.forehead_fade) * self.brow_lateral(u);
            put(E_RAISE, [0.0, -BROW_RAISE_FRAC * w * raise]);
            let d = (u - self.mid_u).abs();
            let brow_len = ((self.outer[1] - self.outer[0]) * 0.5 - self.inner_half).max(1.0);
            let inner = 1.0 - smoothstep(self.inner_half, self.inner_half + 0.6 * brow_len, d);
            let toward_mid = -(u - self.mid_u).signum() * smoothstep(0.0, self.inner_half, d);
            let knit = self.brow_vertical(u, v, 0.5 * self.forehead_fade) * inner;
            put(E_KNIT, [KNIT_IN_FRAC * w * toward_mid * knit, KNIT_DOWN_FRAC * w * knit]);
        }
        put(E_CHEEK, [0.0, -CHEEK_RAISE_FRAC * w * self.cheek(u, v)]);
        out
    }
}

/// The tests' fixtures (standard faces), shared with the integration tests.
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod test_common;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::displace;
    use crate::delaunay::orient;
    use crate::rig::FaceRig;
    use std::sync::Arc;
    use super::test_common as common;

    fn rig(name: &str) -> FaceRig {
        let f = common::face(name).expect("fixture");
        FaceRig::new(f.photo, &f.landmarks).expect("rig")
    }

    fn landmark_vertex(rig: &FaceRig, p: [f32; 3]) -> usize {
        let d = |q: &[f32; 2]| (q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2);
        (0..rig.rest.len()).min_by(|&a, &b| d(&rig.rest[a]).total_cmp(&d(&rig.rest[b]))).unwrap()
    }

    #[test]
    fn bases_are_bounded_fold_nothing_and_keep_the_lids() {
        for name in ["default", "face1"] {
            let f = common::face(name).expect("fixture");
            let rig = rig(name);
            let fw = rig.head.face_width;
            let limits = [BROW_RAISE_FRAC, KNIT_IN_FRAC.hypot(KNIT_DOWN_FRAC), CHEEK_RAISE_FRAC];
            for b in &rig.expression {
                for k in 0..NUM_EXPR {
                    let len = (b[k][0] as f64).hypot(b[k][1] as f64);
                    assert!(len <= limits[k] * fw * 1.0001, "{name}: basis {k} moves {len} px");
                }
            }
            // The upper lids never move with the brows; the inner brow ends do.
            for &l in lm::EYE_A_UPPER.iter().chain(&lm::EYE_B_UPPER) {
                let v = landmark_vertex(&rig, f.landmarks[l]);
                assert_eq!(rig.expression[v][E_RAISE], [0.0, 0.0], "{name}: lid landmark {l}");
                assert_eq!(rig.expression[v][E_KNIT], [0.0, 0.0], "{name}: lid landmark {l}");
            }
            for l in [107, 336] {
                let b = rig.expression[landmark_vertex(&rig, f.landmarks[l])];
                println!("{name} {l}: raise {:?} knit {:?} (face width {fw:.0})", b[E_RAISE], b[E_KNIT]);
                assert!(-b[E_RAISE][1] as f64 > 0.6 * BROW_RAISE_FRAC * fw, "{name}: {l} raise {:?}", b[E_RAISE]);
                assert!(b[E_KNIT][1] as f64 > 0.6 * KNIT_DOWN_FRAC * fw, "{name}: {l} knit {:?}", b[E_KNIT]);
            }
            // At full strength, alone and together, no triangle turns over.
            for coef in [[1.0f32, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]] {
                let at = |v: u32| {
                    let mut q = [rig.rest[v as usize][0] as f64, rig.rest[v as usize][1] as f64];
                    displace(&mut q, &rig.expression[v as usize], &coef);
                    q
                };
                for t in &rig.tris {
                    let rest = t.map(|v| [rig.rest[v as usize][0] as f64, rig.rest[v as usize][1] as f64]);
                    if orient(rest[0], rest[1], rest[2]) <= 0.0 {
                        continue; // the closed eye and mouth slits' own slivers
                    }
                    let [a, b, c] = t.map(at);
                    assert!(orient(a, b, c) > 0.0, "{name}: {coef:?} folds {t:?}");
                }
            }
        }
    }

    #[test]
    fn zero_brow_and_cheek_render_exactly_as_a_rig_without_the_bases() {
        use crate::{FaceState, MouthShape, Pose, Renderer, RgbImage};
        let with = Arc::new(rig("face1"));
        let mut without = rig("face1");
        without.expression.iter_mut().for_each(|b| *b = ExprBases::default());
        let without = Arc::new(without);
        let states = [
            FaceState::default(),
            FaceState { mouth: MouthShape { open: 0.7, wide: 0.4, press: 0.0, tongue: 0.2 }, eye_open: [0.2, 0.6], ..FaceState::default() },
            FaceState {
                pose: Pose { pitch_deg: 6.0, yaw_deg: -9.0, roll_deg: 3.0, tx: 0.02, ty: -0.01, scale: 1.03 },
                mouth: MouthShape { open: 0.3, wide: -0.7, press: 0.1, tongue: 0.8 },
                ..FaceState::default()
            },
        ];
        for (w, h, f) in [(512, 512, 1.0), (320, 240, 2.0)] {
            let mut a = Renderer::new(with.clone(), w, h, f).unwrap();
            let mut b = Renderer::new(without.clone(), w, h, f).unwrap();
            let (mut ia, mut ib) = (RgbImage::new(w, h), RgbImage::new(w, h));
            for s in &states {
                a.render(s, &mut ia);
                b.render(s, &mut ib);
                assert!(ia == ib, "{w}x{h}: {s:?} differs");
                // The known-bad case: a brow or cheek does change the frame.
                a.render(&FaceState { brow: 0.3, ..*s }, &mut ia);
                assert!(ia != ib, "{w}x{h}: brow 0.3 drew nothing");
                a.render(&FaceState { cheek: 0.3, ..*s }, &mut ia);
                assert!(ia != ib, "{w}x{h}: cheek 0.3 drew nothing");
            }
        }
    }

    #[test]
    fn zero_weights_add_nothing_and_weights_split_the_brow() {
        let b: ExprBases = [[1.5, -2.0], [0.25, 3.0], [0.0, -1.0]];
        let mut q = [10.125, -0.0];
        displace(&mut q, &b, &coefficients(0.0, 0.0));
        assert_eq!(q[0].to_bits(), 10.125f64.to_bits());
        assert_eq!(q[1].to_bits(), (-0.0f64).to_bits());
        assert_eq!(coefficients(0.5, 0.25), [0.5, 0.0, 0.25]);
        assert_eq!(coefficients(-0.5, 0.0), [0.0, 0.5, 0.0]);
        let mut q = [0.0, 0.0];
        displace(&mut q, &b, &coefficients(1.0, 1.0));
        assert_eq!(q, [1.5, -3.0]);
    }
}
