//! CPU face renderer. A `FaceRig` is built once per face photo from the photo and its 478
//! MediaPipe-topology landmarks; a `Renderer` then draws any `FaceState` (pose, mouth, eyelids)
//! by warping the photo, frame after frame, without allocating.
//!
//! How a frame is made (details in each module):
//! - `rig`: the photo's landmarks plus anchor rings around the face and points on the photo
//!   border are triangulated (constrained Delaunay, `delaunay`) with the inner lips and the
//!   eyelids as constraints; the triangles inside those loops are the mouth and eye holes.
//!   Each vertex gets displacement bases for open / wide / round / press / each eye shut
//!   (`model`) and for the brows and cheeks (`expression_bases`), a head-pose weight and a depth.
//! - `renderer`: per frame the vertices move (bases mixed by the state, then an approximate
//!   3-D head rotation), the triangles that moved are re-warped over a cached fitted photo by
//!   inverse mapping with bilinear sampling (`raster`, `sampler`), and the holes are filled
//!   with the mouth interior or the eyeball, anti-aliased (`interior`).
//!
//! Output fitting and `upsample_factor`: the photo is scaled to cover the output and centred on
//! the face. With `upsample_factor` f > 1 the warp runs at output/f and the result is upscaled
//! bilinearly to the output size — cheaper and softer; 1 renders at full resolution.
//!
//! Not here: timing, lip-sync (the `animation` crate decides the states), encoding.

mod appearance;
pub mod client;
mod contours;
mod delaunay;
mod error;
// In-crate tests share tests/common, which names the crate.
#[cfg(test)]
extern crate self as face_render;
mod expression_bases;
pub mod face_state;
mod geom;
pub mod image;
mod interior;
pub mod landmarks;
mod model;
mod pose;
mod raster;
mod renderer;
mod rig;
mod sampler;
mod upscale;

pub use client::{ClientFace, ClientMouth, ClientOpening, ClientPhotoMouth, BASE_ORDER};
pub use error::RigError;
pub use face_state::{FaceState, MouthShape, Pose};
pub use image::{i420_size, rgb_to_i420, RgbImage};
pub use renderer::Renderer;
pub use rig::FaceRig;
