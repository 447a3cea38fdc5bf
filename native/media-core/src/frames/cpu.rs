//! The CPU frame producer: `animation::Animator` decides the face at each tick's pts,
//! `face_render::Renderer` warps the photo into an RGB frame, `rgb_to_i420` converts it into the
//! loop's buffer.
//!
//! Per tick, in this order (the order the animator needs): interrupt, new visemes, the tick's
//! audio (heard as it is played, one tick at a time, so its analysis costs the same small amount
//! every frame; handing it whole utterances at push time cost ~1 ms per second of speech on a
//! single frame, which made frames late when several sessions queued speech at once), then
//! `face_at(pts)`, render, convert. The RGB frame is rendered even when no one takes the pixels
//! (the mouth statistic comes from the renderer), except when the spec says no one ever will
//! (`FrameSpec::pixels` false: the client draws the face from the motion stream): the frame is
//! then the face's parameters only. Its prepared face is an `Arc<FaceRig>`.

use std::sync::Arc;

use animation::motion::DrivingMotion;
use animation::Animator;
use face_render::{rgb_to_i420, ClientFace, FaceRig, FaceState, MouthShape, Pose, Renderer, RgbImage};

use super::{
    check_frame_len, Control, FaceAsset, FaceParams, FrameInfo, FrameProducer, FrameSpec,
    PreparedFace, ProducerError, ProducerFactory, Tick,
};
use crate::playout::SESSION_RATE_HZ;

/// Makes `CpuProducer`s; faces are `FaceRig`s. Stateless, so one serves every session (the
/// registry's "cpu", `renderers.rs`); a session's supersampling comes in its `FrameSpec`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuFactory;

fn rig_of(face: PreparedFace) -> Result<Arc<FaceRig>, ProducerError> {
    face.downcast::<FaceRig>()
        .map_err(|_| ProducerError::WrongFace)
}

impl ProducerFactory for CpuFactory {
    fn prepare_face(&self, face: FaceAsset) -> Result<PreparedFace, ProducerError> {
        let photo = RgbImage::from_raw(face.width, face.height, face.rgb).ok_or_else(|| {
            ProducerError::InvalidFace(format!(
                "pixel buffer length does not match {}x{}x3",
                face.width, face.height
            ))
        })?;
        let rig = FaceRig::new(photo, &face.landmarks)
            .map_err(|e| ProducerError::InvalidFace(e.to_string()))?;
        Ok(Arc::new(rig))
    }

    fn create(
        &self,
        spec: FrameSpec,
        face: PreparedFace,
        motion: DrivingMotion,
    ) -> Result<Box<dyn FrameProducer>, ProducerError> {
        let rig = rig_of(face)?;
        let renderer = Renderer::new(rig, spec.width, spec.height, spec.upsample_factor)
            .map_err(|e| ProducerError::Failed(e.to_string()))?;
        Ok(Box::new(CpuProducer {
            spec,
            renderer,
            animator: Animator::new(motion, spec.seed),
            rgb: RgbImage::new(spec.width, spec.height),
        }))
    }
}

/// One session's CPU renderer and animator, and the RGB frame between them.
pub struct CpuProducer {
    spec: FrameSpec,
    renderer: Renderer,
    animator: Animator,
    rgb: RgbImage,
}

impl FrameProducer for CpuProducer {
    fn control(&mut self, control: Control) -> Result<(), ProducerError> {
        match control {
            Control::SetFace(face) => self.renderer.set_rig(rig_of(face)?),
            Control::SetMotion(motion) => self.animator.set_motion(motion),
            Control::SetListening(on) => self.animator.set_listening(on),
        }
        Ok(())
    }

    fn produce(&mut self, tick: &Tick, out: Option<&mut [u8]>) -> Result<FrameInfo, ProducerError> {
        if let Some(out) = &out {
            check_frame_len(&self.spec, out)?;
        }
        if let Some(t) = tick.interrupt_at {
            self.animator.interrupt(t);
        }
        if !tick.new_visemes.is_empty() {
            self.animator.push_visemes(tick.new_visemes);
        }
        self.animator
            .push_audio(tick.pts_ns, SESSION_RATE_HZ, tick.audio);
        let face = self.animator.face_at(tick.pts_ns);
        let params = params_of(&face, self.animator.is_listening());
        if !self.spec.pixels && out.is_none() {
            // Drawn by the client: the opening the renderer would measure, from the state.
            let opening = (face.mouth.open * (1.0 - face.mouth.press)).clamp(0.0, 1.0);
            return Ok(FrameInfo { mouth_opening: if opening.is_nan() { 0.0 } else { opening }, face: Some(params) });
        }
        self.renderer.render(&face, &mut self.rgb);
        if let Some(out) = out {
            rgb_to_i420(&self.rgb, out);
        }
        Ok(FrameInfo {
            mouth_opening: self.renderer.last_mouth_opening(),
            face: Some(params),
        })
    }
}

fn params_of(face: &FaceState, listening: bool) -> FaceParams {
    let p = &face.pose;
    let m = &face.mouth;
    FaceParams {
        pitch_deg: p.pitch_deg,
        yaw_deg: p.yaw_deg,
        roll_deg: p.roll_deg,
        tx: p.tx,
        ty: p.ty,
        scale: p.scale,
        mouth_open: m.open,
        mouth_wide: m.wide,
        mouth_press: m.press,
        tongue: m.tongue,
        eye_open: face.eye_open,
        brow: face.brow,
        cheek: face.cheek,
        listening,
    }
}

fn state_of(p: &FaceParams) -> FaceState {
    FaceState {
        pose: Pose {
            pitch_deg: p.pitch_deg,
            yaw_deg: p.yaw_deg,
            roll_deg: p.roll_deg,
            tx: p.tx,
            ty: p.ty,
            scale: p.scale,
        },
        mouth: MouthShape {
            open: p.mouth_open,
            wide: p.mouth_wide,
            press: p.mouth_press,
            tongue: p.tongue,
        },
        eye_open: p.eye_open,
        brow: p.brow,
        cheek: p.cheek,
    }
}

/// A face prepared by this factory as a client draws it at a session's size and supersampling
/// (`video_render: "client"`): the same layout a `CpuProducer` of that spec renders with.
pub fn client_face(
    face: &PreparedFace,
    width: u32,
    height: u32,
    upsample_factor: f32,
) -> Result<ClientFace, ProducerError> {
    let rig = rig_of(face.clone())?;
    rig.client_face(width, height, upsample_factor)
        .map_err(|e| ProducerError::Failed(e.to_string()))
}

/// The RGB frame a `CpuProducer` of this size draws for `params`: the reference that client
/// renderers are compared with.
pub fn render_still(
    face: &PreparedFace,
    width: u32,
    height: u32,
    upsample_factor: f32,
    params: &FaceParams,
) -> Result<RgbImage, ProducerError> {
    let rig = rig_of(face.clone())?;
    let mut renderer = Renderer::new(rig, width, height, upsample_factor)
        .map_err(|e| ProducerError::Failed(e.to_string()))?;
    let mut out = RgbImage::new(width, height);
    renderer.render(&state_of(params), &mut out);
    Ok(out)
}
