//! What the photo says about the mouth's appearance, measured once per rig: where the
//! photographed mouth interior is (a coverage mask of the inner-lip loop, when the photo shows
//! the lips parted) and the colours for a synthesised interior (teeth, cavity, tongue), matched
//! to the photo's lips, skin and lighting.
//!
//! Invariants: the mask covers the inner-lip loop dilated by `PHOTO_MOUTH_DILATE_PX` (its edge
//! feathered over `PHOTO_MOUTH_FEATHER_PX`), so at rest the photographed interior meets the lips
//! without a fringe; colours are 0..255 linear RGB.
//!
//! Not here: drawing (`interior`).

use crate::contours::dist;
use crate::geom::point_in_polygon;
use crate::image::RgbImage;
use crate::landmarks as lm;

/// The photographed mouth interior is used (teeth, if the photo shows them) when the photo's
/// inner-lip gap reaches this many pixels; otherwise teeth are synthesised.
const PHOTO_MOUTH_MIN_GAP_PX: f64 = 2.0;
/// The photographed mouth interior is sampled this far (pixels) beyond the inner-lip contour,
/// so that at rest it matches the lips around it without a dark fringe.
const PHOTO_MOUTH_DILATE_PX: f64 = 1.0;

/// The mask's edge ramps over this many pixels (centred on the dilated contour), so the seam
/// between the photographed interior and the synthesised one below it is soft.
const PHOTO_MOUTH_FEATHER_PX: f64 = 1.5;

/// The photographed mouth interior: coverage of the (dilated) inner-lip loop in photo pixels.
#[derive(Clone, Debug)]
pub(crate) struct PhotoMouth {
    pub x0: i32,
    pub y0: i32,
    pub w: i32,
    pub h: i32,
    pub mask: Vec<u8>,
    /// Whether the photographed interior shows teeth (else it is a dark gap between parted
    /// lips, and the interior draws its own upper teeth below it).
    pub teeth: bool,
}

/// Colours for the synthesised mouth interior, linear 0..255 RGB.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MouthColours {
    pub teeth: [f32; 3],
    pub cavity_edge: [f32; 3],
    pub cavity_deep: [f32; 3],
    pub tongue: [f32; 3],
    /// Where lips meet: the lip colour in the shadow of the other lip.
    pub seam: [f32; 3],
}

/// Signed distance from `p` to the polygon boundary, positive inside.
fn signed_distance(p: [f64; 2], poly: &[[f64; 2]]) -> f64 {
    let mut best = f64::MAX;
    let n = poly.len();
    for i in 0..n {
        let (a, b) = (poly[i], poly[(i + 1) % n]);
        let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
        let len2 = (dx * dx + dy * dy).max(1e-12);
        let t = (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / len2).clamp(0.0, 1.0);
        best = best.min(dist(p, [a[0] + t * dx, a[1] + t * dy]));
    }
    if point_in_polygon(p, poly) {
        best
    } else {
        -best
    }
}

pub(crate) fn photo_mouth_mask(
    poly: &[[f64; 2]],
    rest_gap: f64,
    pw: u32,
    ph: u32,
) -> Option<PhotoMouth> {
    if rest_gap < PHOTO_MOUTH_MIN_GAP_PX {
        return None;
    }
    let pad = PHOTO_MOUTH_DILATE_PX + 2.0;
    let x0 = (poly.iter().map(|p| p[0]).fold(f64::MAX, f64::min) - pad)
        .floor()
        .max(0.0) as i32;
    let y0 = (poly.iter().map(|p| p[1]).fold(f64::MAX, f64::min) - pad)
        .floor()
        .max(0.0) as i32;
    let x1 = (poly.iter().map(|p| p[0]).fold(f64::MIN, f64::max) + pad)
        .ceil()
        .min(pw as f64) as i32;
    let y1 = (poly.iter().map(|p| p[1]).fold(f64::MIN, f64::max) + pad)
        .ceil()
        .min(ph as f64) as i32;
    let (w, h) = (x1 - x0, y1 - y0);
    if w <= 0 || h <= 0 {
        return None;
    }
    let mut mask = vec![0u8; (w * h) as usize];
    for y in 0..h {
        for x in 0..w {
            let p = [(x0 + x) as f64 + 0.5, (y0 + y) as f64 + 0.5];
            let d = signed_distance(p, poly) + PHOTO_MOUTH_DILATE_PX;
            let a = (d / PHOTO_MOUTH_FEATHER_PX + 0.5).clamp(0.0, 1.0);
            mask[(y * w + x) as usize] = (a * 255.0).round() as u8;
        }
    }
    Some(PhotoMouth { x0, y0, w, h, mask, teeth: false })
}

fn luma(c: [f32; 3]) -> f32 {
    0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]
}

/// A photographed mouth shows teeth when at least this share of its inner-lip loop is bright.
const PHOTO_TEETH_MIN_SHARE: f64 = 0.25;

/// Colours for the synthesised mouth interior, matched to the photo's lips and lighting; and
/// whether the photo's mouth (`photo_mouth`: its inner-lip loop, when it counts as open) shows
/// teeth (their colour is then the teeth colour).
pub(crate) fn mouth_colours(
    photo: &RgbImage,
    pts: &[[f64; 2]],
    photo_mouth: Option<&Vec<[f64; 2]>>,
) -> (MouthColours, bool) {
    let sample = |p: [f64; 2]| -> [f32; 3] {
        let x = (p[0].floor().max(0.0) as u32).min(photo.width - 1);
        let y = (p[1].floor().max(0.0) as u32).min(photo.height - 1);
        let c = photo.pixel(x, y);
        [c[0] as f32, c[1] as f32, c[2] as f32]
    };
    let avg = |cs: &[[f32; 3]]| -> [f32; 3] {
        let n = cs.len().max(1) as f32;
        [0, 1, 2].map(|k| cs.iter().map(|c| c[k]).sum::<f32>() / n)
    };
    // Lip colour: half-way between the inner and outer contours.
    let mut lip = Vec::new();
    for (inner, outer) in [
        (&lm::INNER_UPPER, &lm::OUTER_UPPER),
        (&lm::INNER_LOWER, &lm::OUTER_LOWER),
    ] {
        for k in 2..9 {
            let (a, b) = (pts[inner[k]], pts[outer[k]]);
            lip.push(sample([(a[0] + b[0]) * 0.5, (a[1] + b[1]) * 0.5]));
        }
    }
    let lip = avg(&lip);
    // Skin: cheeks and forehead (MediaPipe 50/280 cheeks, 151 forehead, 6 nose bridge).
    let skin = avg(&[50, 280, 151, 6, 205, 425, 101, 330].map(|i| sample(pts[i])));
    let skin_l = luma(skin).max(1.0);
    let illum = (skin_l / 175.0).clamp(0.45, 1.15);
    // Synthesised teeth: a little brighter than the skin, mostly neutral with some of the
    // photo's colour cast (pure white looks cold against a warm photo).
    let mut teeth = [0, 1, 2].map(|k| (skin_l * 1.12 * (0.4 + 0.6 * skin[k] / skin_l)).min(245.0));
    let mut teeth_seen = false;
    if let Some(poly) = photo_mouth {
        // Photographed teeth: the bright pixels inside the mouth.
        let (x0, x1) = (
            poly.iter().map(|p| p[0]).fold(f64::MAX, f64::min),
            poly.iter().map(|p| p[0]).fold(f64::MIN, f64::max),
        );
        let (y0, y1) = (
            poly.iter().map(|p| p[1]).fold(f64::MAX, f64::min),
            poly.iter().map(|p| p[1]).fold(f64::MIN, f64::max),
        );
        let mut bright = Vec::new();
        let mut inside = 0usize;
        let mut y = y0.floor();
        while y <= y1 {
            let mut x = x0.floor();
            while x <= x1 {
                let p = [x + 0.5, y + 0.5];
                if point_in_polygon(p, poly) {
                    inside += 1;
                    let c = sample(p);
                    if luma(c) > luma(skin) * 0.85 {
                        bright.push(c);
                    }
                }
                x += 1.0;
            }
            y += 1.0;
        }
        teeth_seen = bright.len() >= 4 && bright.len() as f64 >= PHOTO_TEETH_MIN_SHARE * inside as f64;
        if teeth_seen {
            teeth = avg(&bright);
        }
    }
    let s = illum.sqrt();
    let colours = MouthColours {
        teeth,
        cavity_edge: [lip[0] * 0.42, lip[1] * 0.30, lip[2] * 0.30],
        cavity_deep: [30.0 * s, 10.0 * s, 12.0 * s],
        // The tongue: redder than the lips (wet, blood under a thin surface), and in the mouth's
        // shadow (the interior's light and the lips' shadow darken it further where it is
        // drawn): seen by its colour against the cavity, about as dark.
        tongue: [lip[0] * 0.95, lip[1] * 0.38, lip[2] * 0.4],
        seam: [lip[0] * 0.6, lip[1] * 0.45, lip[2] * 0.45],
    };
    (colours, teeth_seen)
}
