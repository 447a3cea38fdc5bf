//! `ClientFace`: everything a renderer outside this crate (the browser's WebGL2 renderer,
//! `playground/src/face/`) needs to draw the frames `Renderer` draws for one rig at one output
//! size, as plain data: the texture the warp samples, the fit into the canvas, the mesh with
//! each vertex's bases, depth and head weight, the openings, the mouth's colours and photographed
//! interior, and the head-pose constants. A frame is then the `FaceState` alone.
//!
//! Invariants: the values are the ones `Renderer::new(rig, width, height, factor)` uses, so a
//! renderer that follows `renderer.rs` step by step on them draws the same pixels. Bases are
//! merged per vertex in one order, `BASE_ORDER`: the seven mouth/eye bases of `model`, then the
//! three expression bases of `expression_bases`.
//!
//! Not here: how it is carried (media-node turns it into JavaScript values, the server into a
//! realtime event), and per-frame work.

use crate::error::RigError;
use crate::expression_bases::NUM_EXPR;
use crate::geom::Affine;
use crate::model::{self, NUM_BASES};
use crate::renderer::Renderer;
use crate::rig::{FaceRig, Opening};
use crate::sampler::{Source, PAD};

/// Names of the per-vertex displacement bases, in the order of `ClientFace::bases`.
pub const BASE_ORDER: [&str; NUM_BASES + NUM_EXPR] = [
    "open",
    "wide",
    "round",
    "press",
    "eye0",
    "eye1",
    "round_open",
    "brow_raise",
    "brow_knit",
    "cheek",
];

/// A lip or eyelid loop, as `Renderer` fills it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientOpening {
    /// Mesh vertex ids, corner to corner, left to right.
    pub upper: Vec<u32>,
    pub lower: Vec<u32>,
    /// Depth toward the camera (photo pixels) and a point inside (photo pixels).
    pub depth: f32,
    pub centre: [f64; 2],
}

/// The photographed mouth interior: a coverage mask in photo pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientPhotoMouth {
    pub x0: i32,
    pub y0: i32,
    pub w: i32,
    pub h: i32,
    pub mask: Vec<u8>,
    pub teeth: bool,
}

/// The mouth's opening, size and colours (linear 0..255 RGB).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientMouth {
    pub opening: ClientOpening,
    /// Width at rest (photo pixels), the frame's "down" axis, and the jaw's drop at `open = 1`
    /// (photo pixels along `down`).
    pub width: f64,
    pub down: [f64; 2],
    pub jaw_drop: f64,
    pub teeth: [f32; 3],
    pub cavity_edge: [f32; 3],
    pub cavity_deep: [f32; 3],
    pub tongue: [f32; 3],
    pub seam: [f32; 3],
    pub photo: Option<ClientPhotoMouth>,
}

/// One rig drawn at one output size.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientFace {
    /// Output size, and the canvas the warp runs on (output / upsample factor).
    pub width: u32,
    pub height: u32,
    pub canvas_width: u32,
    pub canvas_height: u32,
    /// Photo pixels → canvas pixels: `[m00, m01, m10, m11, tx, ty]`, x' = m00·x + m01·y + tx.
    pub fit: [f64; 6],
    /// The texture the warp samples (RGB8, `texture_width` x `texture_height`, no padding): the
    /// photo, or its box reduction by `texture_factor` photo pixels per texel. Photo pixel p maps
    /// to texel p / factor (pixel centres at +0.5 in both); outside the texture the sampler
    /// clamps to its edge texels.
    pub texture: Vec<u8>,
    pub texture_width: u32,
    pub texture_height: u32,
    pub texture_factor: u32,
    /// Per vertex: rest position (photo pixels), `BASE_ORDER.len()` displacements (photo
    /// pixels at full strength, x then y), depth and head weight.
    pub rest: Vec<[f32; 2]>,
    pub bases: Vec<[[f32; 2]; NUM_BASES + NUM_EXPR]>,
    pub depth: Vec<f32>,
    pub head_weight: Vec<f32>,
    pub triangles: Vec<[u32; 3]>,
    /// Image-left eye first.
    pub eyes: [ClientOpening; 2],
    pub mouth: ClientMouth,
    /// Head-pose constants: rotation pivot and face width (the unit of `Pose::tx/ty`), photo px.
    pub pivot: [f64; 2],
    pub face_width: f64,
}

fn opening(o: &Opening) -> ClientOpening {
    ClientOpening {
        upper: o.upper.clone(),
        lower: o.lower.clone(),
        depth: o.depth,
        centre: o.centre,
    }
}

/// The texture's texels, unpadded, from the sampler's padded packed words.
fn texels(src: &Source) -> (Vec<u8>, u32, u32) {
    let (w, h) = (src.stride - 2 * PAD, src.height - 2 * PAD);
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        let row = (y + PAD) * src.stride + PAD;
        for &c in &src.data[row..row + w] {
            out.extend_from_slice(&[
                (c & 0xFF) as u8,
                ((c >> 8) & 0xFF) as u8,
                ((c >> 16) & 0xFF) as u8,
            ]);
        }
    }
    (out, w as u32, h as u32)
}

impl FaceRig {
    /// What a client needs to draw this face as `Renderer::new(self, width, height,
    /// upsample_factor)` draws it (same validation and errors).
    pub fn client_face(
        self: &std::sync::Arc<Self>,
        width: u32,
        height: u32,
        upsample_factor: f32,
    ) -> Result<ClientFace, RigError> {
        let r = Renderer::new(self.clone(), width, height, upsample_factor)?;
        let (fit, (cw, ch), reduced) = r.layout();
        let Affine { m, t } = fit;
        let (texture, tw, th) = texels(reduced.unwrap_or(&self.source));
        let factor = reduced.map_or(self.source.factor, |s| s.factor) as u32;
        let bases = self
            .bases
            .iter()
            .zip(&self.expression)
            .map(|(b, e)| {
                let mut all = [[0f32; 2]; NUM_BASES + NUM_EXPR];
                all[..NUM_BASES].copy_from_slice(b);
                all[NUM_BASES..].copy_from_slice(e);
                all
            })
            .collect();
        let mouth = &self.mouth;
        let c = mouth.colours;
        Ok(ClientFace {
            width,
            height,
            canvas_width: cw as u32,
            canvas_height: ch as u32,
            fit: [m[0], m[1], m[2], m[3], t[0], t[1]],
            texture,
            texture_width: tw,
            texture_height: th,
            texture_factor: factor,
            rest: self.rest.clone(),
            bases,
            depth: self.depth.clone(),
            head_weight: self.head_weight.clone(),
            triangles: self.tris.clone(),
            eyes: [opening(&self.eyes[0]), opening(&self.eyes[1])],
            mouth: ClientMouth {
                opening: opening(&mouth.opening),
                width: mouth.width,
                down: mouth.down,
                jaw_drop: model::jaw_drop(mouth.width),
                teeth: c.teeth,
                cavity_edge: c.cavity_edge,
                cavity_deep: c.cavity_deep,
                tongue: c.tongue,
                seam: c.seam,
                photo: mouth.photo.as_ref().map(|p| ClientPhotoMouth {
                    x0: p.x0,
                    y0: p.y0,
                    w: p.w,
                    h: p.h,
                    mask: p.mask.clone(),
                    teeth: p.teeth,
                }),
            },
            pivot: self.head.pivot,
            face_width: self.head.face_width,
        })
    }
}
