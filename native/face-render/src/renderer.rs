//! `Renderer`: draws `FaceState`s of one `FaceRig` into RGB frames of a fixed size, one frame
//! per call, without allocating.
//!
//! Per frame: (1) every mesh vertex is moved — expression bases mixed by the state's mouth,
//! eye, brow and cheek values, then the head pose (an approximate 3-D rotation about a pivot behind the face,
//! using each vertex's depth, blended by its head weight so the background stays put), then
//! the fit into the output; (2) the cached fitted photo is copied, and only the triangles with
//! a moving vertex are re-warped over it; (3) the mouth and eye openings are filled (see
//! `interior`); (4) with `upsample_factor > 1`, the warped region is upscaled into the output.
//!
//! Fitting: the photo is scaled to cover the output (no borders) and centred on the face as far
//! as the photo allows. `upsample_factor` f in 1..=4: the warp runs on a (W/f)x(H/f) canvas
//! that is then upscaled bilinearly to WxH — 1 renders at full resolution; 2 warps a quarter of
//! the pixels (the upscale of the changed region gives part of that back) and looks softer. When
//! the canvas is much smaller than the photo the renderer warps a box-reduced copy of the photo
//! instead, so the result does not alias.
//!
//! Invariants: `render` writes every output pixel; the same rig, size and state always give
//! the same bytes; the rest state (`FaceState::default()`) reproduces the fitted photo exactly
//! (no triangle moves, so the cache is copied as is). Out-of-range state values are clamped
//! (NaN counts as the rest value).
//!
//! Not here: timing, threading (one renderer per session; rigs are shared), colour conversion.

use std::sync::Arc;

use crate::error::RigError;
use crate::expression_bases;
use crate::face_state::FaceState;
use crate::geom::Affine;
use crate::image::RgbImage;
use crate::interior::{self, Columns, Edges, MouthLook, Pixel};
use crate::model::{self, NUM_BASES};
use crate::pose::{sanitize, PoseXf};
use crate::raster::{self, Rect, Target};
use crate::rig::{FaceRig, Opening};
use crate::sampler::{store, Source, FRAC_ONE};
use crate::upscale::{upscale, upscale_table};

/// Output side limits (pixels).
const MIN_SIDE_PX: u32 = 16;
const MAX_SIDE_PX: u32 = 4096;
/// Render scale (canvas pixels per photo pixel) below which the warp reads a box-reduced photo.
const REDUCE_BELOW_SCALE: f64 = 0.75;
/// A vertex counts as moving once it is this far (canvas pixels) from its rest position.
const MOVE_EPS_PX: f32 = 1e-3;
/// The mouth opening's edge is feathered vertically over this fraction of the mouth width (at
/// least a pixel), so the lips meet the inside softly.
const MOUTH_FEATHER_FRAC: f32 = 0.02;
/// A mouth photographed open is drawn at least this tall (fraction of the mouth width, at least
/// a pixel) where its lips close: the seam where they meet (see `Edges::seam`).
const MOUTH_SEAM_FRAC: f32 = 0.03;
/// A renderer moves to its session's thread.
const _: () = {
    const fn is_send<T: Send>() {}
    is_send::<Renderer>()
};

/// Renders one session's frames from a shared `FaceRig`.
pub struct Renderer {
    rig: Arc<FaceRig>,
    width: usize,
    height: usize,
    factor: f32,
    /// Canvas (warp) size.
    cw: usize,
    ch: usize,
    /// Photo pixels → canvas pixels.
    fit: Affine,
    /// Reduced photo when the canvas is much smaller than the photo.
    reduced: Option<Source>,
    rest_src: Vec<[f32; 2]>,
    rest_dst: Vec<[f32; 2]>,
    pos: Vec<[f32; 2]>,
    moving: Vec<bool>,
    /// Fitted photo at canvas size (RGB8).
    bg: Vec<u8>,
    /// Upscaled `bg` at output size; empty when factor is 1.
    bg_full: Vec<u8>,
    /// Warp canvas when factor > 1; empty otherwise (the warp draws straight into the output).
    canvas: Vec<u8>,
    prev_dirty: Rect,
    cols: Columns,
    up_x: Vec<(u32, u32)>,
    up_y: Vec<(u32, u32)>,
    /// One packed canvas row for `upscale`.
    row_buf: Vec<u32>,
    last_open: f32,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("size", &(self.width, self.height))
            .field("canvas", &(self.cw, self.ch))
            .field("rig", &self.rig)
            .finish()
    }
}

impl Renderer {
    /// A renderer for `width` x `height` frames (both even, 16..=4096). `upsample_factor` in
    /// 1..=4: the warp runs at (width/f) x (height/f) and is upscaled bilinearly — 1 is full
    /// resolution, higher is cheaper and softer.
    pub fn new(
        rig: Arc<FaceRig>,
        width: u32,
        height: u32,
        upsample_factor: f32,
    ) -> Result<Renderer, RigError> {
        let side_ok = |s: u32| (MIN_SIDE_PX..=MAX_SIDE_PX).contains(&s) && s.is_multiple_of(2);
        if !side_ok(width) || !side_ok(height) {
            return Err(RigError::InvalidOutputSize { width, height });
        }
        if !(upsample_factor.is_finite() && (1.0..=4.0).contains(&upsample_factor)) {
            return Err(RigError::InvalidUpsampleFactor(upsample_factor));
        }
        let (w, h) = (width as usize, height as usize);
        let cw = ((w as f32 / upsample_factor).round() as usize).max(8);
        let ch = ((h as f32 / upsample_factor).round() as usize).max(8);
        let mut r = Renderer {
            rig: rig.clone(),
            width: w,
            height: h,
            factor: upsample_factor,
            cw,
            ch,
            fit: Affine::IDENTITY,
            reduced: None,
            rest_src: Vec::new(),
            rest_dst: Vec::new(),
            pos: Vec::new(),
            moving: Vec::new(),
            bg: vec![0; cw * ch * 3],
            bg_full: Vec::new(),
            canvas: Vec::new(),
            prev_dirty: Rect::EMPTY,
            cols: Columns::new(cw),
            up_x: upscale_table(w, cw),
            up_y: upscale_table(h, ch),
            row_buf: vec![0; cw],
            last_open: 0.0,
        };
        r.set_rig(rig);
        Ok(r)
    }

    /// Switches to another face (allocates; call between frames, not per frame).
    pub fn set_rig(&mut self, rig: Arc<FaceRig>) {
        let (pw, ph) = (rig.photo().width as f64, rig.photo().height as f64);
        let (w, h) = (self.width as f64, self.height as f64);
        // Cover the output, centred on the face as far as the photo allows.
        let s = (w / pw).max(h / ph);
        let c = rig.head.face_centre;
        let tx = (w * 0.5 - s * c[0]).clamp(w - s * pw, 0.0);
        let ty = (h * 0.5 - s * c[1]).clamp(h - s * ph, 0.0);
        let (kx, ky) = (self.cw as f64 / w, self.ch as f64 / h);
        self.fit = Affine {
            m: [s * kx, 0.0, 0.0, s * ky],
            t: [tx * kx, ty * ky],
        };
        let render_scale = s * kx.min(ky);
        self.reduced = if render_scale < REDUCE_BELOW_SCALE {
            let k = ((1.0 / render_scale) + 0.2).floor().max(2.0) as usize;
            Some(Source::from_photo(rig.photo(), k))
        } else {
            None
        };
        let src = self.reduced.as_ref().unwrap_or(&rig.source);
        self.rest_src = rig
            .rest
            .iter()
            .map(|p| {
                let q = src.to_sample([p[0] as f64, p[1] as f64]);
                [q[0] as f32, q[1] as f32]
            })
            .collect();
        self.rest_dst = rig
            .rest
            .iter()
            .map(|p| {
                let q = self.fit.apply([p[0] as f64, p[1] as f64]);
                [q[0] as f32, q[1] as f32]
            })
            .collect();
        self.pos = self.rest_dst.clone();
        self.moving = vec![false; rig.rest.len()];
        // Fitted background: every canvas pixel centre mapped back into the photo.
        let inv = self.fit.inverse().unwrap_or(Affine::IDENTITY);
        for y in 0..self.ch {
            for x in 0..self.cw {
                let p = inv.apply([x as f64 + 0.5, y as f64 + 0.5]);
                let q = src.to_sample(p);
                let c = src.sample_clamped(
                    (q[0] * FRAC_ONE).round() as i64,
                    (q[1] * FRAC_ONE).round() as i64,
                );
                store(
                    &mut self.bg[(y * self.cw + x) * 3..(y * self.cw + x) * 3 + 3],
                    c,
                );
            }
        }
        if self.cw != self.width || self.ch != self.height {
            self.canvas = self.bg.clone();
            self.bg_full = vec![0; self.width * self.height * 3];
            let all = Rect {
                x0: 0,
                y0: 0,
                x1: self.width as i32,
                y1: self.height as i32,
            };
            upscale(
                &self.bg,
                self.cw,
                self.ch,
                &self.up_x,
                &self.up_y,
                &mut self.row_buf,
                &mut self.bg_full,
                self.width,
                all,
            );
        } else {
            self.canvas = Vec::new();
            self.bg_full = Vec::new();
        }
        self.prev_dirty = Rect::EMPTY;
        self.rig = rig;
    }

    /// Output size.
    pub fn size(&self) -> (u32, u32) {
        (self.width as u32, self.height as u32)
    }

    /// The upsample factor this renderer was made with.
    pub fn upsample_factor(&self) -> f32 {
        self.factor
    }

    /// The fit (photo → canvas pixels), the canvas size, and the reduced photo the warp reads
    /// when it does not read the rig's own (`client::ClientFace` is made from these).
    pub(crate) fn layout(&self) -> (Affine, (usize, usize), Option<&Source>) {
        (self.fit, (self.cw, self.ch), self.reduced.as_ref())
    }

    /// The rig being drawn.
    pub fn rig(&self) -> &Arc<FaceRig> {
        &self.rig
    }

    /// The mouth opening drawn in the last frame, as a fraction of the mouth width: the
    /// inner-lip gap at the middle of the mouth beyond the photo's own gap (for a photo with
    /// closed lips, simply the inner-lip gap). 0 at `open = 0` and when the lips are pressed.
    pub fn last_mouth_opening(&self) -> f32 {
        self.last_open
    }

    /// Draws `state` into `out` (resized to the renderer's size if it is not already).
    pub fn render(&mut self, state: &FaceState, out: &mut RgbImage) {
        if out.width as usize != self.width
            || out.height as usize != self.height
            || out.data.len() != self.width * self.height * 3
        {
            *out = RgbImage::new(self.width as u32, self.height as u32);
        }
        let st = sanitize(state);
        let m = st.mouth;
        let open = m.open * (1.0 - m.press);
        let round = (-m.wide).max(0.0);
        let mut coef = [0f32; NUM_BASES];
        coef[model::B_OPEN] = open;
        coef[model::B_WIDE] = m.wide.max(0.0);
        coef[model::B_ROUND] = round;
        coef[model::B_PRESS] = m.press;
        coef[model::B_EYE0] = 1.0 - st.eye_open[0];
        coef[model::B_EYE1] = 1.0 - st.eye_open[1];
        coef[model::B_ROUND_OPEN] = open * round;
        let brow_cheek = expression_bases::coefficients(st.brow, st.cheek);
        let rig = self.rig.clone();
        let pose = PoseXf::new(&st.pose, rig.head.pivot, rig.head.face_width);

        // 1. Vertices.
        for i in 0..rig.rest.len() {
            let mut q = [rig.rest[i][0] as f64, rig.rest[i][1] as f64];
            model::displace(&mut q, &rig.bases[i], &coef);
            model::displace(&mut q, &rig.expression[i], &brow_cheek);
            if let Some(p) = &pose {
                q = p.apply(q, rig.depth[i] as f64, rig.head_weight[i] as f64);
            }
            let r = self.fit.apply(q);
            let r = [r[0] as f32, r[1] as f32];
            self.pos[i] = r;
            self.moving[i] = (r[0] - self.rest_dst[i][0]).abs() > MOVE_EPS_PX
                || (r[1] - self.rest_dst[i][1]).abs() > MOVE_EPS_PX;
        }

        // 2. Background, then the moving triangles.
        let scaled = !self.canvas.is_empty();
        let (cw, ch) = (self.cw, self.ch);
        if scaled {
            let r = self.prev_dirty.clip(cw, ch);
            for y in r.y0.max(0) as usize..r.y1.max(0) as usize {
                let (a, b) = ((y * cw + r.x0 as usize) * 3, (y * cw + r.x1 as usize) * 3);
                self.canvas[a..b].copy_from_slice(&self.bg[a..b]);
            }
        } else {
            out.data.copy_from_slice(&self.bg);
        }
        let source = self.reduced.as_ref().unwrap_or(&rig.source);
        let data: &mut [u8] = if scaled {
            &mut self.canvas
        } else {
            &mut out.data
        };
        let mut target = Target {
            data,
            width: cw,
            height: ch,
        };
        let mut dirty = Rect::EMPTY;
        for tri in &rig.tris {
            let [a, b, c] = tri.map(|v| v as usize);
            if !(self.moving[a] || self.moving[b] || self.moving[c]) {
                continue;
            }
            let dst = [self.pos[a], self.pos[b], self.pos[c]];
            let src = [self.rest_src[a], self.rest_src[b], self.rest_src[c]];
            raster::draw_triangle(&mut target, source, dst, src, 1.0);
            dirty = dirty.union(&Rect::around(&dst));
        }

        // 3. Openings.
        let layer_affine = |o: &Opening| -> Affine {
            let c = o.centre;
            let probe = [c, [c[0] + 8.0, c[1]], [c[0], c[1] + 8.0]];
            let moved = probe.map(|p| {
                let q = match &pose {
                    Some(x) => x.apply(p, o.depth as f64, 1.0),
                    None => p,
                };
                self.fit.apply(q)
            });
            Affine::from_triangles(probe, moved).unwrap_or(self.fit)
        };
        for eye in &rig.eyes {
            if !eye
                .upper
                .iter()
                .chain(eye.lower.iter())
                .any(|&v| self.moving[v as usize])
            {
                continue;
            }
            let mut up = [[0f32; 2]; 16];
            let mut lo = [[0f32; 2]; 16];
            let n = eye.upper.len().min(16);
            for k in 0..n {
                up[k] = self.pos[eye.upper[k] as usize];
                lo[k] = self.pos[eye.lower[k] as usize];
            }
            let zero = [0f32; 16];
            let inv = layer_affine(eye).inverse().unwrap_or(Affine::IDENTITY);
            let r = interior::composite(
                &mut target,
                &mut self.cols,
                &up[..n],
                &lo[..n],
                &zero[..n],
                Edges {
                    rest: None,
                    subtract_rest: false,
                    feather: 0.0,
                    grow_lower: 0.0,
                    seam: 0.0,
                },
                |p: Pixel| {
                    let q = source.to_sample(inv.apply([p.x as f64, p.y as f64]));
                    let c = source.sample_clamped(
                        (q[0] * FRAC_ONE).round() as i64,
                        (q[1] * FRAC_ONE).round() as i64,
                    );
                    [
                        (c & 0xFF) as f32,
                        ((c >> 8) & 0xFF) as f32,
                        ((c >> 16) & 0xFF) as f32,
                    ]
                },
            );
            dirty = dirty.union(&r);
        }
        let mo = &rig.mouth.opening;
        if mo
            .upper
            .iter()
            .chain(mo.lower.iter())
            .any(|&v| self.moving[v as usize])
        {
            let a = layer_affine(mo);
            let inv = a.inverse().unwrap_or(Affine::IDENTITY);
            let mut up = [[0f32; 2]; 16];
            let mut lo = [[0f32; 2]; 16];
            let mut shift = [0f32; 16];
            let mut rest_up = [[0f32; 2]; 16];
            let mut rest_lo = [[0f32; 2]; 16];
            let synthesised = rig.mouth.photo.is_none();
            let n = mo.upper.len().min(16);
            for k in 0..n {
                let (vu, vl) = (mo.upper[k] as usize, mo.lower[k] as usize);
                up[k] = self.pos[vu];
                lo[k] = self.pos[vl];
                let (ru, rl) = (rig.rest[vu], rig.rest[vl]);
                let (pu, pl) = (
                    a.apply([ru[0] as f64, ru[1] as f64]),
                    a.apply([rl[0] as f64, rl[1] as f64]),
                );
                shift[k] = up[k][1] - pu[1] as f32;
                rest_up[k] = [pu[0] as f32, pu[1] as f32];
                rest_lo[k] = [pl[0] as f32, pl[1] as f32];
            }
            // The jaw drops rigidly by the open basis' drop at the middle of the mouth, posed.
            let drop = open as f64 * model::jaw_drop(rig.mouth.width);
            let (dx, dy) = (rig.mouth.down[0] * drop, rig.mouth.down[1] * drop);
            let mouth_width = (rig.mouth.width * self.fit.m[0]) as f32;
            let look = MouthLook {
                x_left: up[0][0],
                x_right: up[n - 1][0],
                mouth_width,
                open,
                wide: m.wide,
                tongue: m.tongue,
                jaw: (a.m[2] * dx + a.m[3] * dy) as f32,
                upper_teeth: !rig.mouth.photo.as_ref().is_some_and(|pm| pm.teeth),
            };
            let colours = rig.mouth.colours;
            let photo_mouth = rig.mouth.photo.as_ref();
            let r = interior::composite(
                &mut target,
                &mut self.cols,
                &up[..n],
                &lo[..n],
                &shift[..n],
                Edges {
                    rest: Some((&rest_up[..n], &rest_lo[..n])),
                    subtract_rest: synthesised,
                    feather: (MOUTH_FEATHER_FRAC * mouth_width).max(1.0),
                    // A photo showing its teeth leaves a sliver of them on the lower lip's
                    // inner edge; cover it as the jaw opens (from nothing, so no pop).
                    grow_lower: if synthesised { 0.0 } else { (0.5 * look.jaw).clamp(0.0, 1.0) },
                    seam: if synthesised { 0.0 } else { (MOUTH_SEAM_FRAC * mouth_width).max(1.0) },
                },
                |p: Pixel| {
                    let synth = interior::mouth_interior(&p, &look, &colours);
                    let Some(pm) = photo_mouth else {
                        return synth;
                    };
                    let q = inv.apply([p.x as f64, (p.y - p.shift) as f64]);
                    // Through a closing slit the photographed interior turns to the seam.
                    let open = interior::photo_slit(p.gap, mouth_width);
                    let synth = interior::mix3(colours.seam, synth, open);
                    let alpha = mask_at(pm, q) * open;
                    if alpha <= 0.0 {
                        return synth;
                    }
                    let s = source.to_sample(q);
                    let c = source.sample_clamped(
                        (s[0] * FRAC_ONE).round() as i64,
                        (s[1] * FRAC_ONE).round() as i64,
                    );
                    let photo = [
                        (c & 0xFF) as f32,
                        ((c >> 8) & 0xFF) as f32,
                        ((c >> 16) & 0xFF) as f32,
                    ];
                    [0, 1, 2].map(|k| synth[k] + (photo[k] - synth[k]) * alpha)
                },
            );
            dirty = dirty.union(&r);
        }

        // 4. Upscale.
        let dirty = dirty.clip(cw, ch);
        if scaled {
            out.data.copy_from_slice(&self.bg_full);
            if !dirty.is_empty() {
                let (sx, sy) = (
                    self.width as f64 / cw as f64,
                    self.height as f64 / ch as f64,
                );
                let r = Rect {
                    x0: ((dirty.x0 - 1) as f64 * sx).floor() as i32 - 1,
                    y0: ((dirty.y0 - 1) as f64 * sy).floor() as i32 - 1,
                    x1: ((dirty.x1 + 1) as f64 * sx).ceil() as i32 + 1,
                    y1: ((dirty.y1 + 1) as f64 * sy).ceil() as i32 + 1,
                }
                .clip(self.width, self.height);
                upscale(
                    &self.canvas,
                    cw,
                    ch,
                    &self.up_x,
                    &self.up_y,
                    &mut self.row_buf,
                    &mut out.data,
                    self.width,
                    r,
                );
            }
        }
        self.prev_dirty = dirty;

        // 5. Opening measurement (before pose; pose does not open the mouth).
        let mut q = rig.mouth.probe_rest;
        for (p, bases) in q.iter_mut().zip(&rig.mouth.probe_bases) {
            for (&c, b) in coef.iter().zip(bases) {
                p[0] += (c * b[0]) as f64;
                p[1] += (c * b[1]) as f64;
            }
        }
        let d = rig.mouth.down;
        let gap = (q[1][0] - q[0][0]) * d[0] + (q[1][1] - q[0][1]) * d[1];
        let width = ((q[3][0] - q[2][0]).powi(2) + (q[3][1] - q[2][1]).powi(2))
            .sqrt()
            .max(1e-6);
        self.last_open = ((gap - rig.mouth.rest_gap).max(0.0) / width) as f32;
    }
}

/// Bilinear lookup in the photographed-mouth mask at photo position `p`, 0..1.
fn mask_at(pm: &crate::rig::PhotoMouth, p: [f64; 2]) -> f32 {
    let (x, y) = (p[0] - pm.x0 as f64 - 0.5, p[1] - pm.y0 as f64 - 0.5);
    let (xi, yi) = (x.floor(), y.floor());
    let (fx, fy) = ((x - xi) as f32, (y - yi) as f32);
    let at = |i: i64, j: i64| -> f32 {
        if i < 0 || j < 0 || i >= pm.w as i64 || j >= pm.h as i64 {
            0.0
        } else {
            pm.mask[(j * pm.w as i64 + i) as usize] as f32 / 255.0
        }
    };
    let (i, j) = (xi as i64, yi as i64);
    let top = at(i, j) + (at(i + 1, j) - at(i, j)) * fx;
    let bot = at(i, j + 1) + (at(i + 1, j + 1) - at(i, j + 1)) * fx;
    top + (bot - top) * fy
}
