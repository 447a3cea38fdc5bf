//! Fills the mouth and eye openings after the warp: whatever shows between the deformed lips
//! (mouth cavity, teeth, tongue) and between the deformed eyelids (the eyeball, which does not
//! move with the lids).
//!
//! An opening is the region between an upper and a lower contour (render pixels, left to
//! right, shared corners). Coverage is computed analytically per pixel from `SUBCOLUMNS`
//! vertical sub-columns: in each, the opening is the interval between the two contours, and
//! the pixel's share of it is its overlap with the pixel's row. The interior colour is then
//! blended over what the warp drew (the lips and lids themselves), so edges are anti-aliased
//! and a gap thinner than a pixel shows as a faint line, not a jagged one.
//!
//! The synthesised mouth interior: a dark red-brown cavity, darker towards the centre and back;
//! an upper-teeth band hanging from the upper lip (unless the photo's own teeth are shown);
//! lower teeth and the tongue rising from the lower lip as the mouth opens wide. Colours come
//! from the rig (matched to the photo's lips and lighting). When the photo itself shows the
//! mouth open (teeth in a smile), that photographed interior is kept, moving with the upper lip,
//! and the synthesised one only fills what opens beyond it.
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
    /// Per pixel column (at its centre): upper contour, lower contour, upper-contour shift.
    ctop: Vec<f32>,
    cbot: Vec<f32>,
    cshift: Vec<f32>,
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
/// colour function). `rest`: the same contours at rest (posed like the frame); when given, the
/// rest gap at each column is taken off the opening — for a synthesised interior, so an opening
/// that has not grown past the photographed one draws nothing (no pop when motion starts).
/// Returns the rectangle touched.
pub fn composite(
    t: &mut Target,
    cols: &mut Columns,
    upper: &[[f32; 2]],
    lower: &[[f32; 2]],
    upper_shift: &[f32],
    rest: Option<RestContours>,
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
    if let Some((ru, rl)) = rest {
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
    r.y0 = r.y0.max(ymin.floor() as i32);
    r.y1 = r.y1.min(ymax.ceil() as i32);
    let stride = t.width * 3;
    let inv = 1.0 / SUBCOLUMNS as f32;
    for y in r.y0..r.y1 {
        let (yt, yb) = (y as f32, y as f32 + 1.0);
        for i in 0..wpx {
            let mut cov = 0.0f32;
            for j in i * SUBCOLUMNS..(i + 1) * SUBCOLUMNS {
                let (a, b) = (cols.top[j].max(yt), cols.bot[j].min(yb));
                if b > a {
                    cov += b - a;
                }
            }
            cov *= inv;
            if cov <= 1.0 / 512.0 {
                continue;
            }
            // Column geometry at the pixel centre; at the very corners fall back to the
            // sub-column extremes so the colour function sees a sane interval.
            let (mut top, mut bot) = (cols.ctop[i], cols.cbot[i]);
            if top >= bot || top.is_nan() || bot.is_nan() {
                top = yt;
                bot = yb;
            }
            let x = r.x0 + i as i32;
            let c = shade(Pixel {
                x: x as f32 + 0.5,
                y: y as f32 + 0.5,
                top,
                bot,
                shift: cols.cshift[i],
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
    /// Draw an upper-teeth band (false when the photo's own teeth are shown).
    pub upper_teeth: bool,
}

/// Upper incisors: their edge sits this far below the upper lip's rest position (fraction of
/// the mouth width), so a slight parting shows mostly shadow and lifting the lip reveals more;
/// at most `UPPER_TEETH_FRAC` of the mouth width is ever visible.
const TEETH_EDGE_FRAC: f32 = 0.03;
const UPPER_TEETH_FRAC: f32 = 0.09;
/// Lower teeth at the widest opening, as a fraction of the mouth width.
const LOWER_TEETH_FRAC: f32 = 0.045;
/// Tongue height at the widest opening, as a fraction of the gap.
const TONGUE_FRAC: f32 = 0.28;
/// Boundaries between the upper front teeth, in units of the opening's half width (centre
/// line, incisor/lateral, lateral/canine): faint shading lines that make the band read as teeth.
const TOOTH_LINES: [f32; 5] = [-0.62, -0.34, 0.0, 0.34, 0.62];

#[inline]
fn sstep(e0: f32, e1: f32, x: f32) -> f32 {
    let t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

#[inline]
fn mix3(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
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

/// Colour of the synthesised mouth interior at one pixel.
pub fn mouth_interior(p: &Pixel, look: &MouthLook, c: &MouthColours) -> [f32; 3] {
    let half = ((look.x_right - look.x_left) * 0.5).max(0.5);
    let t = ((p.x - (look.x_left + look.x_right) * 0.5) / half).clamp(-1.0, 1.0);
    let gap = (p.bot - p.top).max(0.25);
    let vy = p.y - p.top;
    let dy = p.bot - p.y;
    let w = look.mouth_width;
    // Cavity: darker toward the middle and the back, lit a little at the lips.
    let depth_v = ((vy / gap) - 0.4) / 0.6;
    let rr = t * t + depth_v * depth_v;
    let mut col = mix3(c.cavity_deep, c.cavity_edge, sstep(0.3, 1.2, rr));
    // Small openings: little light gets in.
    let light = 0.25 + 0.75 * sstep(0.0, 0.14 * w, gap);
    // Tongue: a low dome from the lower lip, darker at its back edge.
    let tongue_h = TONGUE_FRAC * gap * sstep(0.25, 0.85, look.open) * (1.0 - t * t).max(0.0).sqrt();
    if tongue_h > 0.05 && dy < tongue_h + 0.5 {
        let a = (tongue_h - dy + 0.5).clamp(0.0, 1.0) * 0.9;
        let shade = 0.5 + 0.5 * sstep(0.0, tongue_h, tongue_h - dy);
        col = mix3(col, scale3(c.tongue, shade * (1.0 - 0.4 * t * t)), a);
    }
    // Lower teeth: a dim band just above the lower lip when wide open, mostly in the middle,
    // half in the lower lip's shadow.
    let lower_h = LOWER_TEETH_FRAC * w * sstep(0.55, 1.0, look.open) * (1.0 - 2.0 * t * t).max(0.0);
    if lower_h > 0.05 && dy < lower_h + 0.5 {
        let a = (lower_h - dy + 0.5).clamp(0.0, 1.0) * 0.75;
        let tone = mix3(scale3(c.teeth, 0.62), scale3(c.tongue, 0.6), 0.3);
        col = mix3(
            col,
            scale3(tone, 0.75 + 0.25 * sstep(0.0, lower_h, lower_h - dy)),
            a,
        );
    }
    // Upper teeth hanging from the upper lip, shadowed right under it and toward the corners.
    if look.upper_teeth {
        // The teeth hang from the skull: their edge stays put while the lip lifts (shift < 0).
        let upper_h = (TEETH_EDGE_FRAC * w - p.shift).clamp(0.0, UPPER_TEETH_FRAC * w)
            * (1.0 - t * t).max(0.0).sqrt();
        if upper_h > 0.05 && vy < upper_h + 0.5 {
            let a = (upper_h - vy + 0.5).clamp(0.0, 1.0) * sstep(0.97, 0.75, t.abs());
            let mut shade =
                (1.0 - 0.45 * t * t) * (0.7 + 0.3 * sstep(0.0, 0.5 * upper_h.max(1.0), vy));
            for line in TOOTH_LINES {
                let d = (t - line).abs() * half;
                shade *= 1.0 - 0.16 * (1.0 - sstep(0.0, 0.9, d));
            }
            col = mix3(col, scale3(c.teeth, shade), a);
        }
    }
    scale3(col, light)
}
