//! Face photos and driving motions in from JavaScript: `FaceInput` → media-core's `FaceAsset` →
//! a `PreparedFace` (what the renderer shows; for the CPU renderer a mesh rig), `MotionInput` →
//! `DrivingMotion`, plus `prepareFace`, which prepares a face on the libuv thread pool so a face
//! change never stalls the event loop. A face is prepared by a named renderer of the process
//! (media-core's `frames::renderers`, listed by `renderers()`), the one the sessions that show
//! it run (session.rs, `Prepared::launch`).
//!
//! Input bytes are copied out of the JS buffers on the JS thread before any work starts: a
//! buffer JavaScript still owns can be mutated or detached (transferred) while a worker thread
//! reads it.

use media_core::frames::renderers::{self, DEFAULT_RENDERER};
use media_core::frames::{
    cpu, ClientFace, ClientOpening, DrivingMotion, FaceAsset, PreparedFace as CoreFace, ProducerError,
    BASE_ORDER,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::convert::{to_positive_f32, to_u32};
use crate::events::FaceParams;
use crate::error::{guard, invalid_argument, js_error, rejection, ErrorCode, JsResult};

/// MediaPipe face mesh with irises: 468 + 10 points (the renderer also takes the 468 without).
pub const LANDMARK_COUNT: usize = 478;
/// Numbers per driving-motion frame: pitch, yaw, roll (degrees), tx, ty (fraction of face
/// width), scale, eyeL, eyeR (0 closed .. 1 open; below 0 = no eye data for that frame).
pub const MOTION_VALUES_PER_FRAME: usize = 8;

/// A face photo and its landmarks.
#[napi(object, object_to_js = false)]
pub struct FaceInput {
    pub width: f64,
    pub height: f64,
    /// Packed RGB8, row-major, no padding: width * height * 3 bytes.
    pub rgb: Buffer,
    /// 478 landmarks (MediaPipe face mesh + irises; 468 without irises also works) as x, y, z
    /// triples, x and y in pixels of this photo.
    pub landmarks: Float32Array,
}

/// A driving motion: `frames` holds 8 numbers per frame (pitch, yaw, roll in degrees; tx, ty as
/// fractions of the face width; scale; eyeL, eyeR openness 0..1, below 0 when absent).
#[napi(object, object_to_js = false)]
pub struct MotionInput {
    pub fps: f64,
    pub frames: Float32Array,
}

/// The owned, checked copy of a `FaceInput`, ready to prepare on any thread.
pub struct FaceData {
    asset: FaceAsset,
}

impl FaceData {
    pub fn from_input(face: &FaceInput, field: &str) -> Result<FaceData, ErrorCode> {
        let width = to_u32(&format!("{field}.width"), face.width)?;
        let height = to_u32(&format!("{field}.height"), face.height)?;
        if width == 0 || height == 0 {
            return Err(invalid_argument(format!(
                "{field}: width and height must be above 0"
            )));
        }
        let expected = width as usize * height as usize * 3;
        if face.rgb.len() != expected {
            return Err(invalid_argument(format!(
                "{field}.rgb must hold width * height * 3 = {expected} bytes (packed RGB8), got {}",
                face.rgb.len()
            )));
        }
        // Count and values are the renderer's to judge (478, or 468 without irises): RIG_ERROR.
        let values: &[f32] = &face.landmarks;
        if !values.len().is_multiple_of(3) {
            return Err(invalid_argument(format!(
                "{field}.landmarks must hold x, y, z triples ({LANDMARK_COUNT} * 3 numbers), got {} numbers",
                values.len()
            )));
        }
        let landmarks = values.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
        Ok(FaceData {
            asset: FaceAsset {
                width,
                height,
                rgb: face.rgb.to_vec(),
                landmarks,
            },
        })
    }

    /// The heavy part, by the renderer named `renderer`: may run off the JS thread.
    pub fn prepare(self, renderer: &str) -> Result<CoreFace, ErrorCode> {
        let factory = renderers::renderer(renderer).map_err(|e| invalid_argument(e.to_string()))?;
        factory
            .prepare_face(self.asset)
            .map_err(|e| {
                let why = match e {
                    ProducerError::InvalidFace(why) => why,
                    other => other.to_string(),
                };
                js_error(ErrorCode::RIG_ERROR, format!("face rig: {why}"))
            })
    }
}

pub fn motion_from_input(motion: &MotionInput, field: &str) -> Result<DrivingMotion, ErrorCode> {
    let fps = to_positive_f32(&format!("{field}.fps"), motion.fps)?;
    let values: &[f32] = &motion.frames;
    if values.is_empty() || !values.len().is_multiple_of(MOTION_VALUES_PER_FRAME) {
        return Err(invalid_argument(format!(
            "{field}.frames must hold a whole, non-zero number of frames of {MOTION_VALUES_PER_FRAME} numbers, got {} numbers",
            values.len()
        )));
    }
    DrivingMotion::from_flat(fps, values)
        .map_err(|e| js_error(ErrorCode::MOTION_ERROR, format!("{field}: {e}")))
}

/// A face prepared ahead of time by `prepareFace`; pass it to `setFace` to switch faces without
/// blocking the event loop. Opaque; holds no JavaScript memory; may serve several sessions.
#[napi]
pub struct PreparedFace {
    pub(crate) face: CoreFace,
    /// The renderer it was prepared by: only sessions of that renderer can show it.
    pub(crate) renderer: String,
}

#[napi]
impl PreparedFace {
    /// Not constructible from JavaScript: use `prepareFace`.
    #[napi(constructor)]
    pub fn new() -> Result<Self, ErrorCode> {
        Err(js_error(
            ErrorCode::INVALID_ARGUMENT,
            "PreparedFace is created by prepareFace(face)",
        ))
    }

    /// What a client needs to draw this face itself at a session's output size and
    /// `upsampleFactor` (`video_render: "client"`): the texture, fit, mesh, bases and openings
    /// the CPU renderer uses (face-render's `ClientFace`). Throws `INVALID_ARGUMENT` for a bad
    /// size, or for a face of a renderer that draws on the server only.
    #[napi]
    pub fn client_face(
        &self,
        width: u32,
        height: u32,
        upsample_factor: f64,
    ) -> Result<ClientFaceData, ErrorCode> {
        let f = cpu::client_face(&self.face, width, height, upsample_factor as f32)
            .map_err(|e| self.unsupported(e))?;
        Ok(ClientFaceData::from(f))
    }

    /// The RGB frame (width x height x 3) the CPU renderer draws for `params` at this size:
    /// the reference a client renderer is compared with.
    #[napi]
    pub fn render_still(
        &self,
        params: FaceParams,
        width: u32,
        height: u32,
        upsample_factor: f64,
    ) -> Result<Buffer, ErrorCode> {
        let img = cpu::render_still(
            &self.face,
            width,
            height,
            upsample_factor as f32,
            &(&params).into(),
        )
        .map_err(|e| self.unsupported(e))?;
        Ok(img.data.into())
    }
}

impl PreparedFace {
    fn unsupported(&self, e: ProducerError) -> napi::Error<ErrorCode> {
        match e {
            ProducerError::WrongFace => js_error(
                ErrorCode::INVALID_ARGUMENT,
                format!("a face of the \"{}\" renderer is drawn on the server only", self.renderer),
            ),
            e => js_error(ErrorCode::INVALID_ARGUMENT, e.to_string()),
        }
    }
}

/// An opening of `ClientFaceData`: vertex ids corner to corner, depth and a point inside.
#[napi(object, object_from_js = false)]
pub struct ClientOpeningData {
    pub upper: Vec<u32>,
    pub lower: Vec<u32>,
    pub depth: f64,
    pub centre: Vec<f64>,
}

impl From<ClientOpening> for ClientOpeningData {
    fn from(o: ClientOpening) -> Self {
        ClientOpeningData {
            upper: o.upper,
            lower: o.lower,
            depth: o.depth.into(),
            centre: o.centre.to_vec(),
        }
    }
}

/// The photographed mouth interior: a coverage mask (w x h, photo pixels from x0, y0).
#[napi(object, object_from_js = false)]
pub struct ClientPhotoMouthData {
    pub x0: i32,
    pub y0: i32,
    pub w: i32,
    pub h: i32,
    pub mask: Buffer,
    pub teeth: bool,
}

/// The mouth of `ClientFaceData`; colours are linear 0..255 RGB.
#[napi(object, object_from_js = false)]
pub struct ClientMouthData {
    pub opening: ClientOpeningData,
    pub width: f64,
    pub down: Vec<f64>,
    pub jaw_drop: f64,
    pub teeth: Vec<f64>,
    pub cavity_edge: Vec<f64>,
    pub cavity_deep: Vec<f64>,
    pub tongue: Vec<f64>,
    pub seam: Vec<f64>,
    pub photo: Option<ClientPhotoMouthData>,
}

/// face-render's `ClientFace` flattened: per-vertex arrays are packed (`rest` x,y per vertex;
/// `bases` `baseOrder.length` x,y pairs per vertex; `triangles` three ids each).
#[napi(object, object_from_js = false)]
pub struct ClientFaceData {
    pub width: u32,
    pub height: u32,
    pub canvas_width: u32,
    pub canvas_height: u32,
    pub fit: Vec<f64>,
    pub texture: Buffer,
    pub texture_width: u32,
    pub texture_height: u32,
    pub texture_factor: u32,
    pub base_order: Vec<String>,
    pub rest: Float32Array,
    pub bases: Float32Array,
    pub depth: Float32Array,
    pub head_weight: Float32Array,
    pub triangles: Uint32Array,
    pub eyes: Vec<ClientOpeningData>,
    pub mouth: ClientMouthData,
    pub pivot: Vec<f64>,
    pub face_width: f64,
}

fn rgb(c: [f32; 3]) -> Vec<f64> {
    c.iter().map(|&v| v as f64).collect()
}

impl From<ClientFace> for ClientFaceData {
    fn from(f: ClientFace) -> Self {
        let [eye0, eye1] = f.eyes;
        let m = f.mouth;
        ClientFaceData {
            width: f.width,
            height: f.height,
            canvas_width: f.canvas_width,
            canvas_height: f.canvas_height,
            fit: f.fit.to_vec(),
            texture: f.texture.into(),
            texture_width: f.texture_width,
            texture_height: f.texture_height,
            texture_factor: f.texture_factor,
            base_order: BASE_ORDER.iter().map(|s| s.to_string()).collect(),
            rest: Float32Array::new(f.rest.iter().flatten().copied().collect()),
            bases: Float32Array::new(f.bases.iter().flatten().flatten().copied().collect()),
            depth: Float32Array::new(f.depth),
            head_weight: Float32Array::new(f.head_weight),
            triangles: Uint32Array::new(f.triangles.iter().flatten().copied().collect()),
            eyes: vec![eye0.into(), eye1.into()],
            mouth: ClientMouthData {
                opening: m.opening.into(),
                width: m.width,
                down: m.down.to_vec(),
                jaw_drop: m.jaw_drop,
                teeth: rgb(m.teeth),
                cavity_edge: rgb(m.cavity_edge),
                cavity_deep: rgb(m.cavity_deep),
                tongue: rgb(m.tongue),
                seam: rgb(m.seam),
                photo: m.photo.map(|p| ClientPhotoMouthData {
                    x0: p.x0,
                    y0: p.y0,
                    w: p.w,
                    h: p.h,
                    mask: p.mask.into(),
                    teeth: p.teeth,
                }),
            },
            pivot: f.pivot.to_vec(),
            face_width: f.face_width,
        }
    }
}

pub struct PrepareFace {
    /// The checked input, or why it was refused (reported as the promise's rejection, so a
    /// bad argument rejects like every other failure instead of throwing synchronously).
    face: Option<JsResult<FaceData>>,
    renderer: String,
}

/// `compute` reports failures as `Ok(Err(..))` so `resolve`, on the JS thread, can reject with
/// their own code (a task's compute error only carries a napi `Status`).
impl Task for PrepareFace {
    type Output = JsResult<CoreFace>;
    type JsValue = PreparedFace;

    fn compute(&mut self) -> Result<Self::Output> {
        let face = self.face.take();
        let renderer = self.renderer.clone();
        Ok(guard("prepareFace()", move || match face {
            Some(face) => face?.prepare(&renderer),
            None => Err(js_error(
                ErrorCode::NATIVE_PANIC,
                "prepareFace(): task ran twice",
            )),
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        match output {
            Ok(face) => Ok(PreparedFace {
                face,
                renderer: self.renderer.clone(),
            }),
            Err(err) => Err(rejection(&env, err)),
        }
    }
}

/// Prepares a face on the libuv thread pool for the renderer named `renderer` (default "cpu"),
/// for `MediaSession.setFace` of a session of that renderer. Rejects with `INVALID_ARGUMENT`
/// (an unknown renderer too) or `RIG_ERROR` (or an `AbortError` when `signal` fires first).
#[napi(ts_return_type = "Promise<PreparedFace>")]
pub fn prepare_face(
    face: FaceInput,
    renderer: Option<String>,
    signal: Option<AbortSignal>,
) -> AsyncTask<PrepareFace> {
    // Copying the input is the only work done on the JS thread.
    let checked = guard("prepareFace()", || FaceData::from_input(&face, "face"));
    let task = PrepareFace {
        face: Some(checked),
        renderer: renderer.unwrap_or_else(|| DEFAULT_RENDERER.to_string()),
    };
    match signal {
        Some(signal) => AsyncTask::with_signal(task, signal),
        None => AsyncTask::new(task),
    }
}

/// The names of the process's renderers (media-core's `frames::renderers`), sorted: what
/// `MediaSessionConfig.renderer` and `prepareFace(face, renderer)` take.
#[napi]
pub fn renderers() -> Vec<String> {
    renderers::names()
}
