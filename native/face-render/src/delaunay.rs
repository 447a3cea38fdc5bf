//! Constrained Delaunay triangulation of a small point set (a few hundred mesh vertices), run
//! once when a `FaceRig` is built.
//!
//! Bowyer–Watson insertion builds the Delaunay triangulation; each constraint segment (the
//! inner-lip and eyelid loops, so no triangle straddles the mouth slit or a lid line) is then
//! recovered by flipping the edges that cross it (Sloan's method).
//!
//! Invariants: every returned triangle is counter-clockwise in a y-down frame's maths sense
//! (positive `orient`), uses only input indices, and together the triangles tile the convex hull
//! of the input exactly once. Callers must pass points in strictly convex position on the hull
//! (the rig bulges its border points slightly outward) and no two points closer than about
//! 1e-3 px; collinear hull runs and duplicates are not handled.
//!
//! Not done here: Delaunay restoration after constraint insertion (the flipped edges stay as
//! they are; quality is good enough for a warp mesh), exact arithmetic (f64 with pixel-sized
//! coordinates is ample), and anything per frame — this allocates freely.

use std::collections::HashMap;

/// Why a triangulation could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TriError {
    /// Fewer than three points, or all collinear.
    TooFewPoints,
    /// A constraint segment could not be recovered (it crosses another constraint or runs
    /// through a vertex).
    Constraint(usize, usize),
}

/// Twice the signed area of (a, b, c); positive when c is to the left of a→b.
#[inline]
pub(crate) fn orient(a: [f64; 2], b: [f64; 2], c: [f64; 2]) -> f64 {
    (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
}

#[derive(Clone, Copy)]
struct Tri {
    v: [usize; 3],
    // Circumcircle centre and squared radius.
    cx: f64,
    cy: f64,
    r2: f64,
    alive: bool,
}

fn make_tri(p: &[[f64; 2]], a: usize, b: usize, c: usize) -> Tri {
    let (pa, pb, pc) = (p[a], p[b], p[c]);
    let d = 2.0 * (pa[0] * (pb[1] - pc[1]) + pb[0] * (pc[1] - pa[1]) + pc[0] * (pa[1] - pb[1]));
    let (a2, b2, c2) = (
        pa[0] * pa[0] + pa[1] * pa[1],
        pb[0] * pb[0] + pb[1] * pb[1],
        pc[0] * pc[0] + pc[1] * pc[1],
    );
    let (cx, cy, r2) = if d.abs() < 1e-12 {
        // Degenerate (collinear): an "infinite" circle so the triangle is always replaced.
        (0.0, 0.0, f64::INFINITY)
    } else {
        let cx = (a2 * (pb[1] - pc[1]) + b2 * (pc[1] - pa[1]) + c2 * (pa[1] - pb[1])) / d;
        let cy = (a2 * (pc[0] - pb[0]) + b2 * (pa[0] - pc[0]) + c2 * (pb[0] - pa[0])) / d;
        (cx, cy, (pa[0] - cx).powi(2) + (pa[1] - cy).powi(2))
    };
    let v = if orient(pa, pb, pc) >= 0.0 {
        [a, b, c]
    } else {
        [a, c, b]
    };
    Tri {
        v,
        cx,
        cy,
        r2,
        alive: true,
    }
}

/// Triangulates `points` so that every segment in `constraints` is an edge. Returns
/// counter-clockwise index triples covering the convex hull.
pub(crate) fn triangulate(
    points: &[[f64; 2]],
    constraints: &[(usize, usize)],
) -> Result<Vec<[usize; 3]>, TriError> {
    let n = points.len();
    if n < 3 {
        return Err(TriError::TooFewPoints);
    }
    let (mut lo, mut hi) = ([f64::MAX; 2], [f64::MIN; 2]);
    for p in points {
        for k in 0..2 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
        }
    }
    let span = (hi[0] - lo[0]).max(hi[1] - lo[1]).max(1.0);
    let (mx, my) = ((lo[0] + hi[0]) * 0.5, (lo[1] + hi[1]) * 0.5);
    // Super-triangle far outside (1000 spans) so its circumcircles do not bend the hull.
    let big = span * 1000.0;
    let mut p: Vec<[f64; 2]> = points.to_vec();
    p.push([mx - big, my - big]);
    p.push([mx + big, my - big]);
    p.push([mx, my + big]);
    let mut tris: Vec<Tri> = vec![make_tri(&p, n, n + 1, n + 2)];
    let mut edges: Vec<(usize, usize)> = Vec::new();
    let mut bad: Vec<usize> = Vec::new();
    for i in 0..n {
        let q = p[i];
        bad.clear();
        for (t, tri) in tris.iter().enumerate() {
            if tri.alive && (q[0] - tri.cx).powi(2) + (q[1] - tri.cy).powi(2) < tri.r2 {
                bad.push(t);
            }
        }
        edges.clear();
        for &t in &bad {
            let v = tris[t].v;
            for k in 0..3 {
                edges.push((v[k], v[(k + 1) % 3]));
            }
            tris[t].alive = false;
        }
        // Boundary of the cavity: edges that appear once (an interior edge appears as (a,b) and (b,a)).
        for e in 0..edges.len() {
            let (a, b) = edges[e];
            let shared = edges.iter().any(|&(c, d)| c == b && d == a);
            if !shared {
                tris.push(make_tri(&p, a, b, i));
            }
        }
        // Compact now and then so the linear scan stays short.
        if tris.len() > 4 * n + 64 {
            tris.retain(|t| t.alive);
        }
    }
    let mut out: Vec<[usize; 3]> = tris
        .iter()
        .filter(|t| t.alive && t.v.iter().all(|&v| v < n))
        .map(|t| t.v)
        .collect();
    if out.is_empty() {
        return Err(TriError::TooFewPoints);
    }
    for &(a, b) in constraints {
        insert_constraint(points, &mut out, a, b)?;
    }
    Ok(out)
}

fn edge_key(a: usize, b: usize) -> (usize, usize) {
    if a < b {
        (a, b)
    } else {
        (b, a)
    }
}

fn edge_map(tris: &[[usize; 3]]) -> HashMap<(usize, usize), Vec<usize>> {
    let mut m: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    for (t, v) in tris.iter().enumerate() {
        for k in 0..3 {
            m.entry(edge_key(v[k], v[(k + 1) % 3])).or_default().push(t);
        }
    }
    m
}

/// True when the open segments ab and cd cross at a single interior point.
fn crosses(p: &[[f64; 2]], a: usize, b: usize, c: usize, d: usize) -> bool {
    if a == c || a == d || b == c || b == d {
        return false;
    }
    let (o1, o2) = (orient(p[a], p[b], p[c]), orient(p[a], p[b], p[d]));
    let (o3, o4) = (orient(p[c], p[d], p[a]), orient(p[c], p[d], p[b]));
    o1 * o2 < 0.0 && o3 * o4 < 0.0
}

fn insert_constraint(
    p: &[[f64; 2]],
    tris: &mut [[usize; 3]],
    a: usize,
    b: usize,
) -> Result<(), TriError> {
    let mut map = edge_map(tris);
    if map.contains_key(&edge_key(a, b)) {
        return Ok(());
    }
    let mut queue: std::collections::VecDeque<(usize, usize)> = map
        .keys()
        .copied()
        .filter(|&(c, d)| crosses(p, a, b, c, d))
        .collect();
    if queue.is_empty() {
        // Not an edge and nothing crosses it: the segment runs through another vertex.
        return Err(TriError::Constraint(a, b));
    }
    let mut stalls = 0usize;
    while let Some((c, d)) = queue.pop_front() {
        let ts = match map.get(&(c, d)) {
            Some(ts) if ts.len() == 2 => [ts[0], ts[1]],
            _ => return Err(TriError::Constraint(a, b)),
        };
        let other = |t: usize| {
            tris[t]
                .iter()
                .copied()
                .find(|&v| v != c && v != d)
                .unwrap_or(c)
        };
        let (e, f) = (other(ts[0]), other(ts[1]));
        // Orient so that (c, d, e) is counter-clockwise.
        let (c, d) = if orient(p[c], p[d], p[e]) > 0.0 {
            (c, d)
        } else {
            (d, c)
        };
        let convex = orient(p[c], p[f], p[d]) > 0.0
            && orient(p[f], p[d], p[e]) > 0.0
            && orient(p[d], p[e], p[c]) > 0.0
            && orient(p[e], p[c], p[f]) > 0.0;
        if !convex {
            queue.push_back(edge_key(c, d));
            stalls += 1;
            if stalls > 4 * queue.len() + 16 {
                return Err(TriError::Constraint(a, b));
            }
            continue;
        }
        stalls = 0;
        tris[ts[0]] = [e, c, f];
        tris[ts[1]] = [f, d, e];
        map = edge_map(tris);
        if crosses(p, a, b, e, f) {
            queue.push_back(edge_key(e, f));
        }
    }
    if map.contains_key(&edge_key(a, b)) {
        Ok(())
    } else {
        Err(TriError::Constraint(a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn area(p: &[[f64; 2]], t: &[usize; 3]) -> f64 {
        orient(p[t[0]], p[t[1]], p[t[2]]) * 0.5
    }

    #[test]
    fn triangulates_a_square_with_interior_points() {
        let p = vec![
            [0.0, 0.0],
            [10.0, 0.1],
            [10.1, 10.0],
            [0.1, 10.1],
            [5.0, 5.0],
            [2.0, 7.0],
        ];
        let t = triangulate(&p, &[]).unwrap();
        assert!(t.iter().all(|t| area(&p, t) > 0.0));
        let total: f64 = t.iter().map(|t| area(&p, t)).sum();
        let hull = 0.5 * (orient(p[0], p[1], p[2]) + orient(p[0], p[2], p[3]));
        assert!((total - hull).abs() < 1e-9, "{total} vs {hull}");
    }

    #[test]
    fn recovers_a_constraint_edge() {
        // A thin diamond: Delaunay joins the two close middle points; the constraint forces the
        // long diagonal.
        let p = vec![
            [0.0, 0.0],
            [10.0, 0.0],
            [10.0, 10.0],
            [0.0, 10.0],
            [1.0, 5.0],
            [9.0, 5.0],
            [5.0, 4.6],
            [5.0, 5.4],
        ];
        let t = triangulate(&p, &[(4, 5)]).unwrap();
        let has = t
            .iter()
            .any(|t| (0..3).any(|k| edge_key(t[k], t[(k + 1) % 3]) == (4, 5)));
        assert!(has);
        assert!(t.iter().all(|t| area(&p, t) > 0.0));
        let total: f64 = t.iter().map(|t| area(&p, t)).sum();
        assert!((total - 100.0).abs() < 1e-9);
    }
}
