//! Landmark contours made safe to triangulate: the inner lips and each eye's lids form loops
//! that must be simple polygons (closed mouths and eyes put upper and lower points within a
//! pixel of each other, sometimes crossed), and the outer lip contour must stay outside the
//! inner one. Points are nudged by sub-pixel amounts; a face that needs more is rejected.
//!
//! Invariants after `sanitize_loop`: along the frame's across axis the points of each contour
//! are strictly increasing, and the upper contour is at least `MIN_SLIT_PX` above the lower one
//! everywhere between the corners.
//!
//! Not here: choosing which landmarks form the contours (`landmarks`), triangulating.

use crate::error::RigError;
use crate::geom::{Frame, Polyline};
use crate::landmarks as lm;

/// Inner lips and eyelids are kept at least this far apart at rest (pixels), so their loops are
/// simple polygons the triangulation can honour.
const MIN_SLIT_PX: f64 = 0.3;
/// Consecutive contour points are kept at least this far apart along the contour (pixels).
const MIN_CONTOUR_STEP_PX: f64 = 0.05;

/// A frame along `a`–`b` whose across axis points to the image's right (so `down` points down).
pub(crate) fn frame_lr(origin: [f64; 2], a: [f64; 2], b: [f64; 2]) -> Frame {
    if a[0] <= b[0] {
        Frame::new(origin, a, b)
    } else {
        Frame::new(origin, b, a)
    }
}

pub(crate) fn dist(a: [f64; 2], b: [f64; 2]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

pub(crate) fn mean(pts: &[[f64; 2]], ids: &[usize]) -> [f64; 2] {
    let n = ids.len() as f64;
    [
        ids.iter().map(|&i| pts[i][0]).sum::<f64>() / n,
        ids.iter().map(|&i| pts[i][1]).sum::<f64>() / n,
    ]
}

/// Makes the loop formed by `upper` and `lower` (shared corners) a simple polygon: points
/// strictly ordered along the frame's across axis and the upper contour at least
/// `MIN_SLIT_PX` above the lower one. `max_nudge` bounds how far a point may be moved before
/// the face is declared degenerate.
pub(crate) fn sanitize_loop(
    pts: &mut [[f64; 2]],
    frame: &Frame,
    upper: &[usize],
    lower: &[usize],
    max_nudge: f64,
) -> Result<(), RigError> {
    let n = upper.len();
    // Work left to right along the frame whatever order the indices run in.
    let reversed = frame.local(pts[upper[0]])[0] > frame.local(pts[upper[n - 1]])[0];
    let order = |ids: &[usize]| -> Vec<usize> {
        let mut v = ids.to_vec();
        if reversed {
            v.reverse();
        }
        v
    };
    let (upper, lower) = (order(upper), order(lower));
    let mut up: Vec<[f64; 2]> = upper.iter().map(|&i| frame.local(pts[i])).collect();
    let mut lo: Vec<[f64; 2]> = lower.iter().map(|&i| frame.local(pts[i])).collect();
    let (ua, ub) = (up[0][0], up[n - 1][0]);
    if ub - ua < (n as f64) * MIN_CONTOUR_STEP_PX * 4.0 {
        return Err(RigError::DegenerateFace("lip or eye corners coincide"));
    }
    let orig_up = up.clone();
    let orig_lo = lo.clone();
    for c in [&mut up, &mut lo] {
        for k in 1..n - 1 {
            c[k][0] = c[k][0].clamp(
                ua + MIN_CONTOUR_STEP_PX * k as f64,
                ub - MIN_CONTOUR_STEP_PX * (n - 1 - k) as f64,
            );
            c[k][0] = c[k][0].max(c[k - 1][0] + MIN_CONTOUR_STEP_PX);
        }
    }
    for _ in 0..3 {
        let lo_poly = Polyline::new(lo.clone());
        for p in up.iter_mut().take(n - 1).skip(1) {
            let limit = lo_poly.at(p[0]) - MIN_SLIT_PX;
            if p[1] > limit {
                p[1] = (p[1] + limit) * 0.5 - MIN_SLIT_PX * 0.5;
            }
        }
        let up_poly = Polyline::new(up.clone());
        for p in lo.iter_mut().take(n - 1).skip(1) {
            let limit = up_poly.at(p[0]) + MIN_SLIT_PX;
            if p[1] < limit {
                p[1] = limit;
            }
        }
    }
    let moved = up
        .iter()
        .zip(&orig_up)
        .chain(lo.iter().zip(&orig_lo))
        .map(|(a, b)| dist(*a, *b))
        .fold(0.0, f64::max);
    if moved > max_nudge.max(1.0) {
        return Err(RigError::DegenerateFace(
            "upper and lower lip or eyelid contours cross",
        ));
    }
    for k in 0..n {
        pts[upper[k]] = frame.world(up[k]);
        pts[lower[k]] = frame.world(lo[k]);
    }
    Ok(())
}

/// Keeps the outer lip contour outside the inner one (it is not a triangulation constraint,
/// but the lip thickness used by the motion fields must stay positive).
pub(crate) fn sanitize_outer_lips(pts: &mut [[f64; 2]], frame: &Frame) {
    let iu = Polyline::new(
        lm::INNER_UPPER
            .iter()
            .map(|&i| frame.local(pts[i]))
            .collect(),
    );
    let il = Polyline::new(
        lm::INNER_LOWER
            .iter()
            .map(|&i| frame.local(pts[i]))
            .collect(),
    );
    for &i in &lm::OUTER_UPPER[1..10] {
        let mut q = frame.local(pts[i]);
        q[1] = q[1].min(iu.at(q[0]) - 0.5);
        pts[i] = frame.world(q);
    }
    for &i in &lm::OUTER_LOWER[1..10] {
        let mut q = frame.local(pts[i]);
        q[1] = q[1].max(il.at(q[0]) + 0.5);
        pts[i] = frame.world(q);
    }
}
