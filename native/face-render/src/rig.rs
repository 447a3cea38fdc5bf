//! `FaceRig`: everything about one face photo that does not change from frame to frame — the
//! warp mesh, each vertex's motion bases, head-pose weights and depth, the mouth and eye
//! openings, colours for the synthesised mouth interior, and the photo in the padded layout the
//! sampler reads.
//!
//! Building a rig validates the landmarks, straightens out contours that would fold (closed
//! mouths put upper and lower inner-lip points within a pixel of each other), picks mesh
//! vertices (face landmarks without the iris points and the crowded intermediate lip rings,
//! three rings of anchors around the face, and points along the photo border), and
//! triangulates them with the inner-lip and eyelid loops as constraints so no triangle crosses
//! the mouth slit or a lid line. The triangles inside those loops (the mouth and eye "holes")
//! are warped like the rest — they give the renderer's anti-aliased fill of the mouth interior
//! and the eyeball something to blend over.
//!
//! Invariants: a rig is immutable after `new`, `Send + Sync`, and shared by renderers through
//! `Arc`. Every vertex's bases are zero where its motion should not reach (compact falloffs),
//! and the border vertices never move. Rest positions may differ from the landmarks by the
//! sub-pixel nudges of the sanitising step; the photo itself is kept unchanged.
//!
//! Not here: anything per frame or per output size (see `renderer`).

use crate::appearance::{mouth_colours, photo_mouth_mask};
pub(crate) use crate::appearance::{MouthColours, PhotoMouth};
use crate::contours::{dist, frame_lr, mean, sanitize_loop, sanitize_outer_lips};
use crate::delaunay::{self, orient, TriError};
use crate::error::RigError;
use crate::expression_bases::{ExprBases, ExpressionModel};
use crate::geom::{point_in_polygon, Frame};
use crate::image::RgbImage;
use crate::landmarks as lm;
use crate::model::{self, EyeModel, MouthModel, Side, NUM_BASES};
use crate::sampler::Source;

/// Smallest photo side accepted, in pixels. Below this there is no face to animate.
const MIN_PHOTO_SIDE_PX: u32 = 16;
/// Smallest face (face-oval width) accepted, in photo pixels: the eyes are then ~5 px wide,
/// about the least that still reads as a blink.
const MIN_FACE_WIDTH_PX: f64 = 24.0;
/// Landmarks closer than this to an already chosen vertex are dropped (pixels): they add
/// slivers and no detail.
const MIN_VERTEX_GAP_PX: f64 = 0.6;
/// Anchor rings around the face: scale of the face oval about its centre, how many oval points
/// to skip between anchors, head-pose weight, and the share of the oval's depth they keep.
/// Ring 1 sits in the hair and turns fully with the head; ring 3 is background and stays put.
const RINGS: [(f64, usize, f32, f64); 3] =
    [(1.3, 1, 1.0, 0.55), (1.7, 2, 0.45, 0.2), (2.3, 3, 0.0, 0.0)];
/// How much less the anchors under the chin (neck, shoulders) follow the head, 0..1.
const NECK_LAG: f64 = 0.45;
/// Anchors are dropped when closer than this fraction of the face width to another vertex.
const MIN_ANCHOR_GAP_FRAC: f64 = 0.05;
/// Photo border points: this many segments per side, and how far (pixels) the middle of each
/// side bulges outward so the hull is strictly convex (the triangulation does not handle
/// collinear hull points).
const BORDER_SEGMENTS: usize = 8;
const BORDER_BULGE_PX: f64 = 0.5;
/// The head's rotation centre sits this fraction of the face width behind the face-oval
/// sides (roughly the neck axis).
const PIVOT_BEHIND_FRAC: f64 = 0.15;
/// Steepest depth slope (depth pixels per image pixel) allowed between neighbouring vertices.
/// A triangle folds under a turn by θ once its depth slope exceeds cot θ (2.7 at the 20° pose
/// limit); MediaPipe's depth drops much faster than that at the sides of the face, so depths
/// are lowered to this Lipschitz bound, with margin for thin triangles.
const DEPTH_SLOPE_MAX: f64 = 1.0;
/// Expression displacements below this (photo pixels) are zeroed, so that vertices the motion
/// barely reaches do not count as moving.
const MIN_DISPLACEMENT_PX: f64 = 0.02;

/// A lip or eyelid loop: mesh vertex ids of the upper and lower contour, corner to corner,
/// ordered left to right in the image.
#[derive(Clone, Debug)]
pub(crate) struct Opening {
    pub upper: Vec<u32>,
    pub lower: Vec<u32>,
    /// Depth (toward the camera, pixels) used to turn the interior with the head.
    pub depth: f32,
    /// A point inside, photo pixels (pose linearisation centre).
    pub centre: [f64; 2],
}

/// The mouth: its opening plus what is needed to measure and fill it.
#[derive(Clone, Debug)]
pub(crate) struct MouthRig {
    pub opening: Opening,
    /// Mouth width at rest (photo pixels).
    pub width: f64,
    /// Rest gap between the inner-lip mid-points (photo pixels).
    pub rest_gap: f64,
    /// Mouth frame "down" axis.
    pub down: [f64; 2],
    /// Rest positions and bases of landmarks 13, 14, 61, 291 (for the opening measurement).
    pub probe_rest: [[f64; 2]; 4],
    pub probe_bases: [[[f32; 2]; NUM_BASES]; 4],
    pub photo: Option<PhotoMouth>,
    pub colours: MouthColours,
}

/// Head-pose constants.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadRig {
    pub pivot: [f64; 2],
    /// Face width (photo pixels): the unit of `Pose::tx/ty`.
    pub face_width: f64,
    /// Centre of the face (photo pixels): the point the output is centred on.
    pub face_centre: [f64; 2],
}

/// A face photo prepared for animation. Immutable; share it with `Arc`.
pub struct FaceRig {
    photo: RgbImage,
    pub(crate) source: Source,
    pub(crate) rest: Vec<[f32; 2]>,
    pub(crate) bases: Vec<[[f32; 2]; NUM_BASES]>,
    /// Brow and cheek bases per vertex (`expression_bases`).
    pub(crate) expression: Vec<ExprBases>,
    pub(crate) head_weight: Vec<f32>,
    pub(crate) depth: Vec<f32>,
    pub(crate) tris: Vec<[u32; 3]>,
    pub(crate) mouth: MouthRig,
    /// Image-left eye first.
    pub(crate) eyes: [Opening; 2],
    pub(crate) head: HeadRig,
}

impl std::fmt::Debug for FaceRig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaceRig")
            .field("photo", &(self.photo.width, self.photo.height))
            .field("vertices", &self.rest.len())
            .field("triangles", &self.tris.len())
            .finish()
    }
}

struct VertexInfo {
    pos: [f64; 2],
    landmark: Option<usize>,
    head_weight: f32,
    depth: f64,
}

impl FaceRig {
    /// Builds the rig for `photo` and its landmarks (`[x, y, z]` in photo pixels, MediaPipe
    /// FaceMesh order, 478 points or 468 without irises; z smaller = nearer the camera).
    pub fn new(photo: RgbImage, landmarks: &[[f32; 3]]) -> Result<FaceRig, RigError> {
        if photo.width < MIN_PHOTO_SIDE_PX || photo.height < MIN_PHOTO_SIDE_PX {
            return Err(RigError::InvalidPhoto("smaller than 16x16"));
        }
        if photo.data.len() != photo.width as usize * photo.height as usize * 3 {
            return Err(RigError::InvalidPhoto(
                "pixel buffer length does not match width x height x 3",
            ));
        }
        if landmarks.len() != lm::LANDMARKS_WITH_IRIS && landmarks.len() != lm::LANDMARKS_MESH {
            return Err(RigError::LandmarkCount {
                got: landmarks.len(),
            });
        }
        let (pw, ph) = (photo.width as f64, photo.height as f64);
        for (index, p) in landmarks.iter().enumerate() {
            if !p.iter().all(|c| c.is_finite()) {
                return Err(RigError::NonFiniteLandmark { index });
            }
            let (x, y) = (p[0] as f64, p[1] as f64);
            if x < 0.0 || y < 0.0 || x > pw || y > ph {
                return Err(RigError::LandmarkOutOfBounds {
                    index,
                    x: p[0],
                    y: p[1],
                    width: photo.width,
                    height: photo.height,
                });
            }
        }
        let mut pts: Vec<[f64; 2]> = landmarks[..lm::LANDMARKS_MESH]
            .iter()
            .map(|p| [p[0] as f64, p[1] as f64])
            .collect();
        let zs: Vec<f64> = landmarks[..lm::LANDMARKS_MESH]
            .iter()
            .map(|p| p[2] as f64)
            .collect();

        // Face measurements.
        let oval: Vec<[f64; 2]> = lm::FACE_OVAL.iter().map(|&i| pts[i]).collect();
        let centre = {
            let n = oval.len() as f64;
            [
                oval.iter().map(|p| p[0]).sum::<f64>() / n,
                oval.iter().map(|p| p[1]).sum::<f64>() / n,
            ]
        };
        let eye_a = mean(&pts, &lm::EYE_A_UPPER);
        let eye_b = mean(&pts, &lm::EYE_B_UPPER);
        let face_frame = frame_lr(centre, eye_a, eye_b);
        let face_width = {
            let us: Vec<f64> = oval.iter().map(|&p| face_frame.local(p)[0]).collect();
            us.iter().cloned().fold(f64::MIN, f64::max)
                - us.iter().cloned().fold(f64::MAX, f64::min)
        };
        if face_width.is_nan() || face_width < MIN_FACE_WIDTH_PX {
            return Err(RigError::DegenerateFace("face narrower than 24 px"));
        }
        let mouth_v = face_frame.local(pts[lm::INNER_UPPER_MID])[1];
        let eyes_v =
            face_frame.local([(eye_a[0] + eye_b[0]) * 0.5, (eye_a[1] + eye_b[1]) * 0.5])[1];
        if mouth_v - eyes_v < 0.15 * face_width {
            return Err(RigError::DegenerateFace("mouth not below the eyes"));
        }

        // Straighten contours so the loops are simple polygons.
        let mouth_frame = frame_lr(
            pts[lm::INNER_UPPER_MID],
            pts[lm::MOUTH_LEFT],
            pts[lm::MOUTH_RIGHT],
        );
        sanitize_loop(
            &mut pts,
            &mouth_frame,
            &lm::INNER_UPPER,
            &lm::INNER_LOWER,
            0.1 * face_width,
        )?;
        sanitize_outer_lips(&mut pts, &mouth_frame);
        let eye_specs = [
            (lm::EYE_A_UPPER, lm::EYE_A_LOWER),
            (lm::EYE_B_UPPER, lm::EYE_B_LOWER),
        ];
        for (up, lo) in &eye_specs {
            let f = frame_lr(pts[up[0]], pts[up[0]], pts[up[up.len() - 1]]);
            sanitize_loop(&mut pts, &f, up, lo, 0.02 * face_width)?;
        }

        let mouth = MouthModel::new(&pts, face_width);
        if mouth.width < 0.15 * face_width {
            return Err(RigError::DegenerateFace("mouth too narrow"));
        }
        let eye_models = [
            EyeModel::new(&pts, &lm::EYE_A_UPPER, &lm::EYE_A_LOWER),
            EyeModel::new(&pts, &lm::EYE_B_UPPER, &lm::EYE_B_LOWER),
        ];
        // Image-left eye first (smaller coordinate along the face's across axis).
        let a_left = face_frame.local(eye_models[0].frame.origin)[0]
            <= face_frame.local(eye_models[1].frame.origin)[0];
        let eye_order: [usize; 2] = if a_left { [0, 1] } else { [1, 0] };

        // Depth: toward the camera, relative to the pivot plane.
        let z_sides = lm::FACE_OVAL
            .iter()
            .map(|&i| zs[i])
            .fold(f64::MIN, f64::max);
        let z_pivot = z_sides + PIVOT_BEHIND_FRAC * face_width;
        let depth_of = |i: usize| z_pivot - zs[i];

        // Vertex selection: contours first (always kept), then the other landmarks.
        let mut verts: Vec<VertexInfo> = Vec::new();
        let mut vid_of: Vec<Option<usize>> = vec![None; lm::LANDMARKS_MESH];
        let mandatory: Vec<usize> = lm::INNER_UPPER
            .iter()
            .chain(lm::INNER_LOWER.iter())
            .chain(lm::EYE_A_UPPER.iter())
            .chain(lm::EYE_A_LOWER.iter())
            .chain(lm::EYE_B_UPPER.iter())
            .chain(lm::EYE_B_LOWER.iter())
            .copied()
            .collect();
        for &i in &mandatory {
            if vid_of[i].is_none() {
                vid_of[i] = Some(verts.len());
                verts.push(VertexInfo {
                    pos: pts[i],
                    landmark: Some(i),
                    head_weight: 1.0,
                    depth: depth_of(i),
                });
            }
        }
        let optional = lm::OUTER_UPPER
            .iter()
            .chain(lm::OUTER_LOWER.iter())
            .chain(lm::FACE_OVAL.iter())
            .copied()
            .chain(0..lm::LANDMARKS_MESH);
        for i in optional {
            if vid_of[i].is_some() || lm::is_lip_semi_ring(i) {
                continue;
            }
            if verts
                .iter()
                .any(|v| dist(v.pos, pts[i]) < MIN_VERTEX_GAP_PX)
            {
                continue;
            }
            vid_of[i] = Some(verts.len());
            verts.push(VertexInfo {
                pos: pts[i],
                landmark: Some(i),
                head_weight: 1.0,
                depth: depth_of(i),
            });
        }
        // Anchor rings.
        let min_anchor_gap = MIN_ANCHOR_GAP_FRAC * face_width;
        for &(scale, step, weight, depth_share) in &RINGS {
            for (k, &oi) in lm::FACE_OVAL.iter().enumerate() {
                if k % step != 0 {
                    continue;
                }
                let o = pts[oi];
                let p = [
                    centre[0] + scale * (o[0] - centre[0]),
                    centre[1] + scale * (o[1] - centre[1]),
                ];
                if p[0] < 2.0 || p[1] < 2.0 || p[0] > pw - 2.0 || p[1] > ph - 2.0 {
                    continue;
                }
                if verts.iter().any(|v| dist(v.pos, p) < min_anchor_gap) {
                    continue;
                }
                let dir = face_frame.local(o);
                let len = (dir[0] * dir[0] + dir[1] * dir[1]).sqrt().max(1e-9);
                let down = (dir[1] / len).max(0.0);
                let w = weight * (1.0 - NECK_LAG * down * down) as f32;
                verts.push(VertexInfo {
                    pos: p,
                    landmark: None,
                    head_weight: w,
                    depth: depth_of(oi) * depth_share,
                });
            }
        }
        // Border, bulged outward a little.
        let n_fixed_start = verts.len();
        for side in 0..4 {
            for s in 0..BORDER_SEGMENTS {
                let t = s as f64 / BORDER_SEGMENTS as f64;
                let bulge = BORDER_BULGE_PX * 4.0 * t * (1.0 - t);
                let p = match side {
                    0 => [t * pw, -bulge],
                    1 => [pw + bulge, t * ph],
                    2 => [pw - t * pw, ph + bulge],
                    _ => [-bulge, ph - t * ph],
                };
                verts.push(VertexInfo {
                    pos: p,
                    landmark: None,
                    head_weight: 0.0,
                    depth: 0.0,
                });
            }
        }

        // Triangulate with the inner-lip and eyelid loops as constraints.
        let points: Vec<[f64; 2]> = verts.iter().map(|v| v.pos).collect();
        let mut constraints: Vec<(usize, usize)> = Vec::new();
        let vid = |i: usize| vid_of[i].expect("mandatory landmark has a vertex");
        for contour in [
            &lm::INNER_UPPER[..],
            &lm::INNER_LOWER[..],
            &lm::EYE_A_UPPER[..],
            &lm::EYE_A_LOWER[..],
            &lm::EYE_B_UPPER[..],
            &lm::EYE_B_LOWER[..],
        ] {
            for w in contour.windows(2) {
                constraints.push((vid(w[0]), vid(w[1])));
            }
        }
        let tris = delaunay::triangulate(&points, &constraints).map_err(|e| match e {
            TriError::TooFewPoints => RigError::DegenerateFace("landmarks are collinear"),
            TriError::Constraint(..) => {
                RigError::DegenerateFace("lip or eyelid contour crosses itself")
            }
        })?;
        let loop_poly = |up: &[usize], lo: &[usize]| -> Vec<[f64; 2]> {
            up.iter()
                .map(|&i| pts[i])
                .chain(lo.iter().rev().skip(1).take(lo.len() - 2).map(|&i| pts[i]))
                .collect()
        };
        let mouth_poly = loop_poly(&lm::INNER_UPPER, &lm::INNER_LOWER);
        let eye_polys = [
            loop_poly(&lm::EYE_A_UPPER, &lm::EYE_A_LOWER),
            loop_poly(&lm::EYE_B_UPPER, &lm::EYE_B_LOWER),
        ];
        let mut tris32 = Vec::with_capacity(tris.len());
        for t in &tris {
            let (a, b, c) = (points[t[0]], points[t[1]], points[t[2]]);
            if orient(a, b, c) <= 0.0 {
                return Err(RigError::DegenerateFace(
                    "triangulation produced a folded triangle",
                ));
            }
            // A triangle inside a lip or eyelid loop must be made of that loop's points only
            // (the holes the interiors are drawn into); anything else would tear the slit.
            let g = [(a[0] + b[0] + c[0]) / 3.0, (a[1] + b[1] + c[1]) / 3.0];
            let loops = [
                (&lm::INNER_UPPER[..], &lm::INNER_LOWER[..], &mouth_poly),
                (&lm::EYE_A_UPPER[..], &lm::EYE_A_LOWER[..], &eye_polys[0]),
                (&lm::EYE_B_UPPER[..], &lm::EYE_B_LOWER[..], &eye_polys[1]),
            ];
            for (up, lo, poly) in loops {
                let on_loop = t.iter().all(|&v| {
                    verts[v]
                        .landmark
                        .is_some_and(|l| up.contains(&l) || lo.contains(&l))
                });
                if !on_loop && point_in_polygon(g, poly) {
                    return Err(RigError::DegenerateFace(
                        "a triangle crosses the mouth or an eye",
                    ));
                }
            }
            tris32.push([t[0] as u32, t[1] as u32, t[2] as u32]);
        }
        let total: f64 = tris
            .iter()
            .map(|t| orient(points[t[0]], points[t[1]], points[t[2]]) * 0.5)
            .sum();
        if total < pw * ph * 0.999 {
            return Err(RigError::DegenerateFace("mesh does not cover the photo"));
        }

        // Limit the depth slope along mesh edges (lower Lipschitz envelope, Bellman-Ford style).
        let mut depth: Vec<f64> = verts.iter().map(|v| v.depth).collect();
        for _ in 0..verts.len() {
            let mut changed = false;
            for t in &tris {
                for k in 0..3 {
                    let (a, b) = (t[k], t[(k + 1) % 3]);
                    let d = DEPTH_SLOPE_MAX * dist(points[a], points[b]);
                    if depth[a] > depth[b] + d + 1e-9 {
                        depth[a] = depth[b] + d;
                        changed = true;
                    } else if depth[b] > depth[a] + d + 1e-9 {
                        depth[b] = depth[a] + d;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }

        // Bases per vertex.
        let label_of = |l: Option<usize>, up: &[usize], lo: &[usize]| match l {
            Some(i) if up.contains(&i) && !lo.contains(&i) => Side::Upper,
            Some(i) if lo.contains(&i) && !up.contains(&i) => Side::Lower,
            _ => Side::Unknown,
        };
        let lip_up: Vec<usize> = lm::INNER_UPPER
            .iter()
            .chain(lm::OUTER_UPPER.iter())
            .copied()
            .collect();
        let lip_lo: Vec<usize> = lm::INNER_LOWER
            .iter()
            .chain(lm::OUTER_LOWER.iter())
            .copied()
            .collect();
        let eye_ids = [
            (&lm::EYE_A_UPPER, &lm::EYE_A_LOWER),
            (&lm::EYE_B_UPPER, &lm::EYE_B_LOWER),
        ];
        let bases_at = |p: [f64; 2], l: Option<usize>, fixed: bool| -> [[f32; 2]; NUM_BASES] {
            let mut b = [[0.0f32; 2]; NUM_BASES];
            if fixed {
                return b;
            }
            let ls = label_of(l, &lip_up, &lip_lo);
            let mut put = |k: usize, d: [f64; 2]| {
                if (d[0] * d[0] + d[1] * d[1]).sqrt() >= MIN_DISPLACEMENT_PX {
                    b[k] = [d[0] as f32, d[1] as f32];
                }
            };
            put(model::B_OPEN, mouth.open(p, ls));
            put(model::B_WIDE, mouth.wide(p));
            put(model::B_ROUND, mouth.round(p));
            put(model::B_PRESS, mouth.press(p, ls));
            put(model::B_ROUND_OPEN, mouth.open_round(p, ls));
            for (slot, &e) in eye_order.iter().enumerate() {
                let (up, lo) = eye_ids[e];
                put(
                    [model::B_EYE0, model::B_EYE1][slot],
                    eye_models[e].close(p, label_of(l, up, lo)),
                );
            }
            b
        };
        let bases: Vec<[[f32; 2]; NUM_BASES]> = verts
            .iter()
            .enumerate()
            .map(|(k, v)| bases_at(v.pos, v.landmark, k >= n_fixed_start))
            .collect();
        let brows_cheeks = ExpressionModel::new(&pts, face_frame, face_width);
        let expression: Vec<ExprBases> = verts
            .iter()
            .enumerate()
            .map(|(k, v)| {
                if k >= n_fixed_start {
                    ExprBases::default()
                } else {
                    brows_cheeks.bases(v.pos, v.landmark, MIN_DISPLACEMENT_PX)
                }
            })
            .collect();

        // Openings.
        let opening = |up: &[usize], lo: &[usize], frame: &Frame| -> Opening {
            let mut upper: Vec<u32> = up.iter().map(|&i| vid(i) as u32).collect();
            let mut lower: Vec<u32> = lo.iter().map(|&i| vid(i) as u32).collect();
            // Left to right along the feature.
            if frame.local(pts[up[0]])[0] > frame.local(pts[up[up.len() - 1]])[0] {
                upper.reverse();
                lower.reverse();
            }
            let ids: Vec<usize> = up.iter().chain(lo.iter()).copied().collect();
            let n = ids.len() as f64;
            let depth = ids.iter().map(|&i| depth_of(i)).sum::<f64>() / n;
            Opening {
                upper,
                lower,
                depth: depth as f32,
                centre: mean(&pts, &ids),
            }
        };
        let mouth_opening = opening(&lm::INNER_UPPER, &lm::INNER_LOWER, &mouth.frame);
        let eye_ops = [
            (lm::EYE_A_UPPER, lm::EYE_A_LOWER),
            (lm::EYE_B_UPPER, lm::EYE_B_LOWER),
        ];
        let eyes = [
            opening(
                &eye_ops[eye_order[0]].0,
                &eye_ops[eye_order[0]].1,
                &eye_models[eye_order[0]].frame,
            ),
            opening(
                &eye_ops[eye_order[1]].0,
                &eye_ops[eye_order[1]].1,
                &eye_models[eye_order[1]].frame,
            ),
        ];
        for op in std::iter::once(&mouth_opening).chain(eyes.iter()) {
            let x = |v: u32| points[v as usize][0];
            if x(op.upper[0]) > x(*op.upper.last().unwrap_or(&0)) {
                return Err(RigError::DegenerateFace("mouth or eye turned upside down"));
            }
        }

        let probe_ids = [
            lm::INNER_UPPER_MID,
            lm::INNER_LOWER_MID,
            lm::MOUTH_LEFT,
            lm::MOUTH_RIGHT,
        ];
        let probe_rest = probe_ids.map(|i| pts[i]);
        let probe_bases = probe_ids.map(|i| bases_at(pts[i], Some(i), false));
        let rest_gap = {
            let d = [
                probe_rest[1][0] - probe_rest[0][0],
                probe_rest[1][1] - probe_rest[0][1],
            ];
            d[0] * mouth.frame.down[0] + d[1] * mouth.frame.down[1]
        };

        let mut photo_mouth = photo_mouth_mask(&mouth_poly, rest_gap, photo.width, photo.height);
        let (colours, teeth_seen) =
            mouth_colours(&photo, &pts, photo_mouth.is_some().then_some(&mouth_poly));
        if let Some(pm) = photo_mouth.as_mut() {
            pm.teeth = teeth_seen;
        }
        let source = Source::from_photo(&photo, 1);

        Ok(FaceRig {
            source,
            rest: verts
                .iter()
                .map(|v| [v.pos[0] as f32, v.pos[1] as f32])
                .collect(),
            bases,
            expression,
            head_weight: verts.iter().map(|v| v.head_weight).collect(),
            depth: depth.iter().map(|&d| d as f32).collect(),
            tris: tris32,
            mouth: MouthRig {
                opening: mouth_opening,
                width: mouth.width,
                rest_gap,
                down: mouth.frame.down,
                probe_rest,
                probe_bases,
                photo: photo_mouth,
                colours,
            },
            eyes,
            head: HeadRig {
                pivot: centre,
                face_width,
                face_centre: centre,
            },
            photo,
        })
    }

    /// The photo the rig was built from, unchanged.
    pub fn photo(&self) -> &RgbImage {
        &self.photo
    }

    /// Number of mesh vertices and triangles (for diagnostics).
    pub fn mesh_size(&self) -> (usize, usize) {
        (self.rest.len(), self.tris.len())
    }
}

/// `FaceRig` is shared across session threads.
const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<FaceRig>()
};
