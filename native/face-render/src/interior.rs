//! Fills the mouth and eye openings after the warp: whatever shows between the deformed lips
//! (mouth cavity, teeth, tongue) and between the deformed eyelids (the eyeball, which does not
//! move with the lids).
//!
//! An opening is the region between an upper and a lower contour (render pixels, left to
//! right, shared corners). Coverage is computed analytically per pixel from `SUBCOLUMNS`
//! vertical sub-columns: in each, the opening is the interval between the two contours, and
//! the pixel's share of it is its overlap with the pixel's row, optionally feathered vertically
//! (a ramp centred on each contour, so the lips meet the mouth's inside softly; the total
//! coverage is kept). The interior colour is then blended over what the warp drew (the lips and
//! lids themselves), so edges are anti-aliased and a gap thinner than a pixel shows as a faint
//! line, not a jagged one.
//!
//! The synthesised mouth interior, back to front: a dark red-brown cavity, darkest deep in the
//! middle; a tongue (a dome behind the lower teeth, higher and narrower as `tongue` rises); the
//! lower incisors, rigid with the jaw (they move by the jaw's drop, not with the lip's curve, and
//! show more as the lower lip rolls down, less for rounded lips); the upper incisors, rigid with
//! the skull, hanging from the upper lip's rest line (unless the photo's own teeth are shown);
//! then the lips' shadow just inside their edges. The lower row never rises above the upper
//! row's edge (behind it, it is hidden). Colours come from the rig (matched to the photo's lips,
//! lighting and, when it shows them, teeth). When the photo itself shows the mouth open (teeth
//! in a smile), that photographed interior is kept, moving with the upper lip, and the
//! synthesised one (cavity, tongue, lower teeth) fills what opens beyond it.
//!
//! Not here: the warp, and any allocation (`Columns` is sized once by the renderer).

use crate::raster::{Rect, Target};
use crate::rig::MouthColours;

/// Vertical sub-columns per pixel for coverage (horizontal anti-aliasing quality).
pub const SUBCOLUMNS: usize = 4;

/// Scratch rows for one opening, sized to the target width.
pub struct Columns {
    top: Vec<f32>,
    bot: Vec<f32>,
    rest_top: Vec<f32>,
    rest_bot: Vec<f32>,
    /// Per pixel column (at its centre): upper contour, lower contour, upper-contour shift, lower
    /// contour at rest.
    ctop: Vec<f32>,
    cbot: Vec<f32>,
    cshift: Vec<f32>,
    crest_bot: Vec<f32>,
    /// Per pixel column: the opening's height before `Edges::seam` widened it.
    cgap: Vec<f32>,
}

impl Columns {
    pub fn new(width: usize) -> Columns {
        let n = (width + 2) * SUBCOLUMNS;
        Columns {
            top: vec![0.0; n],
            bot: vec![0.0; n],
            rest_top: vec![0.0; n],
            rest_bot: vec![0.0; n],
            ctop: vec![0.0; width + 2],
            cbot: vec![0.0; width + 2],
            cshift: vec![0.0; width + 2],
            crest_bot: vec![0.0; width + 2],
            cgap: vec![0.0; width + 2],
        }
    }
}

/// What the interior colour function gets for one pixel.
#[derive(Clone, Copy, Debug)]
pub struct Pixel {
    /// Pixel centre.
    pub x: f32,
    pub y: f32,
    /// Upper and lower contour at this column (pixel centre), and the upper contour's vertical
    /// displacement from its rest (pose-only) position.
    pub top: f32,
    pub bot: f32,
    pub shift: f32,
    /// The lower contour at rest (posed like the frame) at this column; `bot` when no rest
    /// contours were given.
    pub rest_bot: f32,
    /// The opening's own height at this column (0 or less where the contours meet or cross);
    /// `bot - top` unless `Edges::seam` drew it taller.
    pub gap: f32,
}

/// What `composite` draws between the contours, besides the colour function.
#[derive(Clone, Copy, Debug)]
pub struct Edges<'a> {
    /// The same contours at rest (posed like the frame), if known.
    pub rest: Option<RestContours<'a>>,
    /// Take the rest gap at each column off the opening — for a synthesised interior, so an
    /// opening that has not grown past the photographed one draws nothing (no pop when motion
    /// starts).
    pub subtract_rest: bool,
    /// Vertical feathering (pixels): coverage ramps over this width centred on each contour
    /// (narrowed where the gap is thinner), so an edge is soft instead of a one-pixel step. The
    /// opening's total coverage is kept. 0: exact coverage.
    pub feather: f32,
    /// Pixels the lower contour is moved down by (over the lower lip's inner edge: a photo whose
    /// teeth touch the lower lip leaves a sliver of them on the warped lip).
    pub grow_lower: f32,
    /// The opening is drawn at least this tall (pixels) over its mid-line (see `widen`); 0: off.
    /// Where lips that were photographed apart close, their warped inner edges carry the photo's
    /// teeth; the seam draws the shade's closed-gap colour over them (`Pixel::gap` says how
    /// closed).
    pub seam: f32,
}

/// Antiderivative of the ramp clamp(z / f, 0, 1) from 0 (z >= 0).
#[inline]
fn ramp_area(z: f32, f: f32) -> f32 {
    if z <= f {
        z * z / (2.0 * f)
    } else {
        z - 0.5 * f
    }
}

/// A sub-column's share of the row [yt, yb] inside the opening [a, b], each edge feathered over
/// `feather` pixels centred on it.
#[inline]
fn coverage(a: f32, b: f32, yt: f32, yb: f32, feather: f32) -> f32 {
    if b <= a || a.is_nan() || b.is_nan() {
        return 0.0;
    }
    let h = (0.5 * feather).min(0.5 * (b - a));
    if h < 1e-3 {
        let (lo, hi) = (a.max(yt), b.min(yb));
        return (hi - lo).max(0.0);
    }
    // Ramps 0 -> 1 over [a - h, a + h] and 1 -> 0 over [b - h, b + h]; where they do not overlap
    // the weight is their sum minus one.
    let (a, b, f) = (a - h, b + h, 2.0 * h);
    let (lo, hi) = (a.max(yt), b.min(yb));
    if hi <= lo {
        return 0.0;
    }
    ramp_area(hi - a, f) - ramp_area(lo - a, f) + ramp_area(b - lo, f) - ramp_area(b - hi, f) - (hi - lo)
}

/// Makes `top..bot` at least `seam` tall, where both contours reach: a third of it above their
/// middle, two thirds below (a photo's teeth touch its lower lip, whose warped inner edge carries
/// more of them).
#[inline]
fn widen(top: &mut f32, bot: &mut f32, seam: f32) {
    if top.is_finite() && bot.is_finite() && *bot - *top < seam {
        let mid = 0.5 * (*top + *bot);
        *top = mid - seam / 3.0;
        *bot = mid + seam * (2.0 / 3.0);
    }
}

/// Fills `out[i]` (column `x0 + i / per`, sample position `x0 + (i + 0.5) / per`) with the
/// contour's y, or `none` where the contour does not reach.
fn rasterise_contour(
    pts: &[[f32; 2]],
    vals: Option<&[f32]>,
    x0: i32,
    per: usize,
    out: &mut [f32],
    none: f32,
    take_min: bool,
) {
    out.fill(none);
    let step = 1.0 / per as f32;
    for k in 0..pts.len().saturating_sub(1) {
        let (a, b) = (pts[k], pts[k + 1]);
        let (va, vb) = match vals {
            Some(v) => (v[k], v[k + 1]),
            None => (a[1], b[1]),
        };
        let (lo, hi) = if a[0] <= b[0] {
            (a[0], b[0])
        } else {
            (b[0], a[0])
        };
        let span = b[0] - a[0];
        let first = (((lo - x0 as f32) * per as f32) - 0.5).ceil().max(0.0) as usize;
        let last =
            ((((hi - x0 as f32) * per as f32) - 0.5).floor() as i64).min(out.len() as i64 - 1);
        if last < first as i64 {
            continue;
        }
        for (i, o) in out
            .iter_mut()
            .enumerate()
            .take(last as usize + 1)
            .skip(first)
        {
            let xs = x0 as f32 + (i as f32 + 0.5) * step;
            let t = if span.abs() > 1e-6 {
                (xs - a[0]) / span
            } else {
                0.5
            };
            let y = va + (vb - va) * t;
            *o = if *o == none {
                y
            } else if take_min {
                o.min(y)
            } else {
                o.max(y)
            };
        }
    }
}

/// Blends `shade`'s colour over the target inside the opening between `upper` and `lower`.
/// `upper_shift`: per upper-contour point, its vertical displacement (passed through to the
/// colour function). `edges`: rest contours and feathering (see `Edges`). Returns the rectangle
/// touched.
pub fn composite(
    t: &mut Target,
    cols: &mut Columns,
    upper: &[[f32; 2]],
    lower: &[[f32; 2]],
    upper_shift: &[f32],
    edges: Edges,
    mut shade: impl FnMut(Pixel) -> [f32; 3],
) -> Rect {
    let mut r = Rect::around(upper)
        .union(&Rect::around(lower))
        .clip(t.width, t.height);
    if r.is_empty() {
        return Rect::EMPTY;
    }
    let wpx = (r.x1 - r.x0) as usize;
    let ns = wpx * SUBCOLUMNS;
    rasterise_contour(
        upper,
        None,
        r.x0,
        SUBCOLUMNS,
        &mut cols.top[..ns],
        f32::INFINITY,
        true,
    );
    rasterise_contour(
        lower,
        None,
        r.x0,
        SUBCOLUMNS,
        &mut cols.bot[..ns],
        f32::NEG_INFINITY,
        false,
    );
    if let (Some((ru, rl)), true) = (edges.rest, edges.subtract_rest) {
        rasterise_contour(
            ru,
            None,
            r.x0,
            SUBCOLUMNS,
            &mut cols.rest_top[..ns],
            f32::INFINITY,
            true,
        );
        rasterise_contour(
            rl,
            None,
            r.x0,
            SUBCOLUMNS,
            &mut cols.rest_bot[..ns],
            f32::NEG_INFINITY,
            false,
        );
        for j in 0..ns {
            let g = cols.rest_bot[j] - cols.rest_top[j];
            if g > 0.0 && g.is_finite() {
                cols.top[j] += g * 0.5;
                cols.bot[j] -= g * 0.5;
            }
        }
    }
    if edges.grow_lower != 0.0 {
        for b in &mut cols.bot[..ns] {
            *b += edges.grow_lower;
        }
    }
    if edges.seam > 0.0 {
        for j in 0..ns {
            widen(&mut cols.top[j], &mut cols.bot[j], edges.seam);
        }
    }
    rasterise_contour(
        upper,
        None,
        r.x0,
        1,
        &mut cols.ctop[..wpx],
        f32::INFINITY,
        true,
    );
    rasterise_contour(
        lower,
        None,
        r.x0,
        1,
        &mut cols.cbot[..wpx],
        f32::NEG_INFINITY,
        false,
    );
    rasterise_contour(
        upper,
        Some(upper_shift),
        r.x0,
        1,
        &mut cols.cshift[..wpx],
        0.0,
        true,
    );
    if edges.grow_lower != 0.0 {
        for b in &mut cols.cbot[..wpx] {
            *b += edges.grow_lower;
        }
    }
    for i in 0..wpx {
        cols.cgap[i] = cols.cbot[i] - cols.ctop[i];
        if edges.seam > 0.0 {
            widen(&mut cols.ctop[i], &mut cols.cbot[i], edges.seam);
        }
    }
    match edges.rest {
        Some((_, rl)) => rasterise_contour(
            rl,
            None,
            r.x0,
            1,
            &mut cols.crest_bot[..wpx],
            f32::NEG_INFINITY,
            false,
        ),
        None => cols.crest_bot[..wpx].fill(f32::NEG_INFINITY),
    }
    // Rows actually covered.
    let (mut ymin, mut ymax) = (f32::INFINITY, f32::NEG_INFINITY);
    for j in 0..ns {
        if cols.top[j] < cols.bot[j] {
            ymin = ymin.min(cols.top[j]);
            ymax = ymax.max(cols.bot[j]);
        }
    }
    if ymin >= ymax {
        return Rect::EMPTY;
    }
    let fh = 0.5 * edges.feather.max(0.0) + edges.grow_lower.max(0.0);
    r.y0 = ((ymin - fh).floor() as i32).max(0);
    r.y1 = ((ymax + fh).ceil() as i32).min(t.height as i32);
    let stride = t.width * 3;
    let inv = 1.0 / SUBCOLUMNS as f32;
    for y in r.y0..r.y1 {
        let (yt, yb) = (y as f32, y as f32 + 1.0);
        for i in 0..wpx {
            let mut cov = 0.0f32;
            for j in i * SUBCOLUMNS..(i + 1) * SUBCOLUMNS {
                cov += coverage(cols.top[j], cols.bot[j], yt, yb, edges.feather);
            }
            cov *= inv;
            if cov <= 1.0 / 512.0 {
                continue;
            }
            // Column geometry at the pixel centre; at the very corners fall back to the
            // sub-column extremes so the colour function sees a sane interval.
            let (mut top, mut bot) = (cols.ctop[i], cols.cbot[i]);
            let mut gap = cols.cgap[i];
            if top >= bot || top.is_nan() || bot.is_nan() {
                top = yt;
                bot = yb;
                gap = 0.0;
            }
            let x = r.x0 + i as i32;
            let rb = cols.crest_bot[i];
            let c = shade(Pixel {
                x: x as f32 + 0.5,
                y: y as f32 + 0.5,
                top,
                bot,
                shift: cols.cshift[i],
                rest_bot: if rb.is_finite() { rb } else { bot },
                gap,
            });
            let a = (cov.min(1.0) * 256.0).round() as u32;
            let o = y as usize * stride + x as usize * 3;
            let px = &mut t.data[o..o + 3];
            for k in 0..3 {
                let src = c[k].clamp(0.0, 255.0).round() as u32;
                px[k] = ((src * a + px[k] as u32 * (256 - a) + 128) >> 8) as u8;
            }
        }
    }
    r
}

/// An opening's contours at rest (upper, lower), posed like the frame.
pub type RestContours<'a> = (&'a [[f32; 2]], &'a [[f32; 2]]);

/// Below this gap (fraction of the mouth width) a photographed interior (teeth in a smile) seen
/// through a closing slit fades into the synthesised one: a slit a few pixels tall lets little
/// light in, and closed lips show a dark seam, not the teeth their inner edges were warped from.
const PHOTO_SLIT_FRAC: f32 = 0.05;

/// How much of a photographed interior a slit `gap` pixels tall still shows (1 open, 0 closed).
pub fn photo_slit(gap: f32, mouth_width: f32) -> f32 {
    sstep(0.0, PHOTO_SLIT_FRAC * mouth_width.max(1.0), gap)
}

/// Per-frame parameters of the synthesised mouth interior.
#[derive(Clone, Copy, Debug)]
pub struct MouthLook {
    /// Opening's left and right corner x (render pixels).
    pub x_left: f32,
    pub x_right: f32,
    /// Mouth width (render pixels) — the scale for teeth sizes.
    pub mouth_width: f32,
    /// Effective jaw opening 0..1.
    pub open: f32,
    /// Lip spreading, -1 rounded .. +1 spread (rounded lips cover the lower teeth).
    pub wide: f32,
    /// Tongue position, 0 low and back .. 1 tip raised to the upper teeth.
    pub tongue: f32,
    /// The jaw's drop from rest (render pixels, downward): the lower teeth and the tongue move
    /// by exactly this everywhere (rigidly), whatever the lower lip's curve does.
    pub jaw: f32,
    /// Draw an upper-teeth band (false when the photo's own teeth are shown: the upper row then
    /// ends where the photo's lower lip was, moved with the upper lip).
    pub upper_teeth: bool,
}

/// Upper incisors: their edge sits this far below the upper lip's rest position (fraction of
/// the mouth width), so a slight parting shows mostly shadow and lifting the lip reveals more;
/// at most `UPPER_TEETH_FRAC` of the mouth width is ever visible.
const TEETH_EDGE_FRAC: f32 = 0.03;
const UPPER_TEETH_FRAC: f32 = 0.09;
/// Lower incisors: their tips sit this far (fraction of the mouth width) above the lower lip's
/// rest line, moved down with the jaw; a lower lip that rolls down shows more of them. Below
/// `LOWER_CROWN_FRAC` of the mouth width under the tips is gum.
const LOWER_TEETH_SHOW_FRAC: f32 = 0.03;
const LOWER_CROWN_FRAC: f32 = 0.1;
/// The tongue's dome rises this share of the dark room between the rows: low (0) .. raised (1).
const TONGUE_LOW: f32 = 0.25;
const TONGUE_HIGH: f32 = 0.9;
/// Boundaries between the upper front teeth, in units of the opening's half width (centre
/// line, incisor/lateral, lateral/canine): faint shading lines that make the band read as teeth.
const TOOTH_LINES: [f32; 5] = [-0.62, -0.34, 0.0, 0.34, 0.62];
/// The lower incisors are narrower.
const LOWER_TOOTH_LINES: [f32; 7] = [-0.66, -0.44, -0.22, 0.0, 0.22, 0.44, 0.66];

#[inline]
fn sstep(e0: f32, e1: f32, x: f32) -> f32 {
    let t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

#[inline]
pub fn mix3(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
    ]
}

#[inline]
fn scale3(a: [f32; 3], k: f32) -> [f32; 3] {
    [a[0] * k, a[1] * k, a[2] * k]
}

/// Faint dark lines between teeth (`lines` in units of the half width `half`, `t` the position).
#[inline]
fn tooth_gaps(t: f32, half: f32, lines: &[f32], depth: f32, width_px: f32) -> f32 {
    let mut k = 1.0;
    for line in lines {
        let d = (t - line).abs() * half;
        k *= 1.0 - depth * (1.0 - sstep(0.0, width_px, d));
    }
    k
}

/// Where the rows of teeth are in one column: the upper row's edge and the lower row's tips
/// (render y). The lower row never rises above the upper one's edge: behind it, it is hidden.
pub fn teeth_rows(p: &Pixel, look: &MouthLook, t: f32) -> (f32, f32) {
    let w = look.mouth_width;
    let upper_edge = if look.upper_teeth {
        // The teeth hang from the skull: their edge stays put while the lip lifts (shift < 0).
        p.top
            + (TEETH_EDGE_FRAC * w - p.shift).clamp(0.0, UPPER_TEETH_FRAC * w)
                * (1.0 - t * t).max(0.0).sqrt()
    } else {
        p.rest_bot + p.shift
    };
    let tips = (p.rest_bot + look.jaw - LOWER_TEETH_SHOW_FRAC * w).max(upper_edge + 1.0);
    (upper_edge, tips)
}

/// Colour of the synthesised mouth interior at one pixel. Back to front: the cavity (dark,
/// darkest deep in the middle), the tongue (a dome behind the lower teeth), the lower incisors
/// (rigid with the jaw), the upper incisors (rigid with the skull; unless the photo's own are
/// shown), then the shadow the lips cast just inside their edges and the light an opening lets in.
pub fn mouth_interior(p: &Pixel, look: &MouthLook, c: &MouthColours) -> [f32; 3] {
    let half = ((look.x_right - look.x_left) * 0.5).max(0.5);
    let t = ((p.x - (look.x_left + look.x_right) * 0.5) / half).clamp(-1.0, 1.0);
    let gap = (p.bot - p.top).max(0.25);
    let vy = p.y - p.top;
    let dy = p.bot - p.y;
    let w = look.mouth_width;
    let round = (-look.wide).max(0.0);
    let (upper_edge, tips) = teeth_rows(p, look, t);
    // Cavity: darker toward the middle and the back, lit a little at the lips.
    let depth_v = ((vy / gap) - 0.4) / 0.6;
    let rr = t * t + depth_v * depth_v;
    let mut col = mix3(c.cavity_deep, c.cavity_edge, sstep(0.3, 1.2, rr));
    // Small openings: little light gets in.
    let light = 0.25 + 0.75 * sstep(0.0, 0.14 * w, gap);
    // Tongue: a dome rising behind the lower teeth into the room between the rows, narrower and
    // higher as its tip rises; lit along its front, darker toward the sides.
    let room = (tips - upper_edge).max(0.0);
    let reach = (TONGUE_LOW + (TONGUE_HIGH - TONGUE_LOW) * look.tongue) * room * sstep(0.05, 0.3, look.open);
    let hw = 0.8 - 0.35 * look.tongue;
    let dome = (1.0 - (t / hw) * (t / hw)).max(0.0);
    let tongue_top = tips - reach * dome;
    if reach * dome > 0.05 && p.y > tongue_top - 1.0 {
        // A soft silhouette (the surface turns away), darker at its rim.
        let under = p.y - tongue_top;
        let a = sstep(-1.0, 1.0, under) * sstep(0.0, 0.3, dome);
        let shade = (0.66 + 0.27 * look.tongue)
            * (1.0 - 0.3 * t * t)
            * (0.75 + 0.25 * sstep(0.0, 0.4 * reach.max(2.0), under))
            * tooth_gaps(t, half, &[0.0], 0.15, 0.04 * w);
        col = mix3(col, scale3(c.tongue, shade), a);
    }
    // Lower incisors: rigid with the jaw, from `tips` down behind the lower lip; the lip covers
    // them more when rounded and while the jaw barely opens.
    let vis = sstep(0.06, 0.35, look.open) * (1.0 - 0.95 * round);
    if vis > 0.0 && p.y > tips - 0.5 {
        // A sliver under a pixel or two would read as a line along the lip, not as teeth.
        // The lower arch is narrower than the opening: it fades out within the rest mouth width.
        let arch = (p.x - (look.x_left + look.x_right) * 0.5).abs() / (0.5 * w).max(0.5);
        let a = (p.y - tips + 0.5).clamp(0.0, 1.0)
            * vis
            * sstep(0.52, 0.3, arch)
            * sstep(0.5, 2.5, p.bot - tips);
        let below = p.y - tips;
        let shade = (1.0 - 0.35 * t * t) * tooth_gaps(t, half, &LOWER_TOOTH_LINES, 0.06, 0.7);
        let tooth = if below < LOWER_CROWN_FRAC * w {
            scale3(c.teeth, shade)
        } else {
            scale3(c.tongue, 0.9)
        };
        col = mix3(col, tooth, a);
    }
    // Upper incisors, shadowed right under the lip and toward the corners.
    if look.upper_teeth {
        let upper_h = upper_edge - p.top;
        if upper_h > 0.05 && vy < upper_h + 0.5 {
            let a = (upper_h - vy + 0.5).clamp(0.0, 1.0) * sstep(0.97, 0.75, t.abs());
            let shade = (1.0 - 0.45 * t * t)
                * (0.7 + 0.3 * sstep(0.0, 0.5 * upper_h.max(1.0), vy))
                * tooth_gaps(t, half, &TOOTH_LINES, 0.16, 0.9);
            col = mix3(col, scale3(c.teeth, shade), a);
        }
    }
    // The lips' shadow just inside their edges.
    let s = (0.12 * gap).max(1.0);
    let occ = (0.75 + 0.25 * sstep(-0.5, s, vy)) * (0.88 + 0.12 * sstep(-0.5, s, dy));
    scale3(col, light * occ)
}

#[cfg(test)]
#[path = "interior_tests.rs"]
mod tests;
