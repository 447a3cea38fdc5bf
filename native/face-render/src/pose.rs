//! The head pose of one frame as a point transform, and the clamping of incoming states.
//!
//! The pose is an approximate 3-D rotation of the head about a pivot behind the face (pitch
//! about x, then yaw about y, then roll in the image plane; x right, y down, z toward the
//! camera), scaled and translated, then projected orthographically. Each point carries a depth
//! and a head weight: weight 1 turns fully with the head, 0 stays put (background), values in
//! between blend, which is how hair, neck and background bend smoothly.
//!
//! Invariants: `PoseXf::new` returns None for the rest pose, so a still head costs nothing and
//! reproduces the photo exactly; `sanitize` maps any input (NaN, infinities, out of range) to
//! a state inside the ranges below.
//!
//! Not here: which points get which depth and weight (`rig`).

use crate::face_state::{FaceState, MouthShape, Pose};

/// Pose limits: beyond these a 2-D warp of one photo folds. Angles in degrees, translation in
/// face widths, scale as a factor.
const MAX_ANGLE_DEG: f32 = 20.0;
const MAX_SHIFT_FACE_WIDTHS: f32 = 0.5;
const SCALE_RANGE: (f32, f32) = (0.5, 2.0);

/// Head pose for one frame: `apply` moves a point with its depth and head weight.
pub(crate) struct PoseXf {
    /// Scaled rotation (rows), pivot and translation, photo pixels.
    r: [[f64; 3]; 3],
    pivot: [f64; 2],
    t: [f64; 2],
}

impl PoseXf {
    pub(crate) fn new(p: &Pose, pivot: [f64; 2], face_width: f64) -> Option<PoseXf> {
        if *p == Pose::REST {
            return None;
        }
        let (pitch, yaw, roll) = (
            p.pitch_deg.to_radians() as f64,
            p.yaw_deg.to_radians() as f64,
            p.roll_deg.to_radians() as f64,
        );
        // x right, y down, z toward the camera. Pitch (about x): +pitch moves the nose down.
        let rx = [
            [1.0, 0.0, 0.0],
            [0.0, pitch.cos(), pitch.sin()],
            [0.0, -pitch.sin(), pitch.cos()],
        ];
        // Yaw (about y): +yaw moves the nose toward the image's left.
        let ry = [
            [yaw.cos(), 0.0, -yaw.sin()],
            [0.0, 1.0, 0.0],
            [yaw.sin(), 0.0, yaw.cos()],
        ];
        // Roll (about z): +roll turns clockwise on screen (y is down).
        let rz = [
            [roll.cos(), -roll.sin(), 0.0],
            [roll.sin(), roll.cos(), 0.0],
            [0.0, 0.0, 1.0],
        ];
        let mul = |a: [[f64; 3]; 3], b: [[f64; 3]; 3]| {
            let mut m = [[0.0; 3]; 3];
            for i in 0..3 {
                for j in 0..3 {
                    m[i][j] = (0..3).map(|k| a[i][k] * b[k][j]).sum();
                }
            }
            m
        };
        let s = p.scale as f64;
        let mut r = mul(rz, mul(ry, rx));
        for row in r.iter_mut() {
            for v in row.iter_mut() {
                *v *= s;
            }
        }
        Some(PoseXf {
            r,
            pivot,
            t: [p.tx as f64 * face_width, p.ty as f64 * face_width],
        })
    }

    #[inline]
    pub(crate) fn apply(&self, q: [f64; 2], depth: f64, weight: f64) -> [f64; 2] {
        if weight == 0.0 {
            return q;
        }
        let (x, y) = (q[0] - self.pivot[0], q[1] - self.pivot[1]);
        let hx =
            self.pivot[0] + self.r[0][0] * x + self.r[0][1] * y + self.r[0][2] * depth + self.t[0];
        let hy =
            self.pivot[1] + self.r[1][0] * x + self.r[1][1] * y + self.r[1][2] * depth + self.t[1];
        [q[0] + weight * (hx - q[0]), q[1] + weight * (hy - q[1])]
    }
}

fn clean(v: f32, lo: f32, hi: f32, default: f32) -> f32 {
    if v.is_nan() {
        default
    } else {
        v.clamp(lo, hi)
    }
}

pub(crate) fn sanitize(s: &FaceState) -> FaceState {
    let a = MAX_ANGLE_DEG;
    let m = MAX_SHIFT_FACE_WIDTHS;
    FaceState {
        pose: Pose {
            pitch_deg: clean(s.pose.pitch_deg, -a, a, 0.0),
            yaw_deg: clean(s.pose.yaw_deg, -a, a, 0.0),
            roll_deg: clean(s.pose.roll_deg, -a, a, 0.0),
            tx: clean(s.pose.tx, -m, m, 0.0),
            ty: clean(s.pose.ty, -m, m, 0.0),
            scale: clean(s.pose.scale, SCALE_RANGE.0, SCALE_RANGE.1, 1.0),
        },
        mouth: MouthShape {
            open: clean(s.mouth.open, 0.0, 1.0, 0.0),
            wide: clean(s.mouth.wide, -1.0, 1.0, 0.0),
            press: clean(s.mouth.press, 0.0, 1.0, 0.0),
            tongue: clean(s.mouth.tongue, 0.0, 1.0, 0.0),
        },
        eye_open: [
            clean(s.eye_open[0], 0.0, 1.0, 1.0),
            clean(s.eye_open[1], 0.0, 1.0, 1.0),
        ],
        brow: clean(s.brow, -1.0, 1.0, 0.0),
        cheek: clean(s.cheek, 0.0, 1.0, 0.0),
    }
}
