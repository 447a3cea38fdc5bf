//! What the renderer is asked to draw for one frame: head pose, mouth shape and eyelids. The lip
//! models (`lips`) produce the mouth, driving motions (`motion`) the pose and eyes; the renderer
//! (`render`) turns a `FaceState` into pixels. All values are relative to the photo at rest.

/// Head pose relative to the photo. Angles in degrees (LivePortrait convention: positive pitch is
/// head down, positive yaw turns toward the image's left, positive roll tilts clockwise);
/// translation as a fraction of the face width; scale 1 = as photographed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    pub pitch_deg: f32,
    pub yaw_deg: f32,
    pub roll_deg: f32,
    pub tx: f32,
    pub ty: f32,
    pub scale: f32,
}

impl Pose {
    pub const REST: Pose = Pose { pitch_deg: 0.0, yaw_deg: 0.0, roll_deg: 0.0, tx: 0.0, ty: 0.0, scale: 1.0 };
}

impl Default for Pose {
    fn default() -> Self {
        Pose::REST
    }
}

/// Mouth articulation. `open`: jaw/lip opening, 0 closed .. 1 widest (about a third of the
/// mouth width). `wide`: lip spreading, -1 fully rounded (oo, w) .. 0 neutral .. +1 spread (ee).
/// `press`: lips pressed together (p, b, m), 0 .. 1; when pressed the mouth is closed whatever
/// `open` says. `tongue`: where the tongue is seen in an open mouth, 0 low and back (a) .. 1 its
/// tip raised to the upper teeth (th, t, d, n, l); it changes only the mouth's inside.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct MouthShape {
    pub open: f32,
    pub wide: f32,
    pub press: f32,
    pub tongue: f32,
}

impl MouthShape {
    pub const CLOSED: MouthShape = MouthShape { open: 0.0, wide: 0.0, press: 0.0, tongue: 0.0 };

    /// Linear blend, `t` in 0..1.
    pub fn lerp(&self, other: &MouthShape, t: f32) -> MouthShape {
        MouthShape {
            open: self.open + (other.open - self.open) * t,
            wide: self.wide + (other.wide - self.wide) * t,
            press: self.press + (other.press - self.press) * t,
            tongue: self.tongue + (other.tongue - self.tongue) * t,
        }
    }
}

/// Everything one frame shows. `eye_open`: left and right (image left/right), 0 shut .. 1 as in
/// the photo. `brow`: -1 knit (inner brows in and down) .. 0 as photographed .. +1 raised.
/// `cheek`: 0 as photographed .. 1 raised (a wide vowel, a smile). Zero brow and cheek draw the
/// photo's own, so a state that leaves them at 0 renders exactly as before they existed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaceState {
    pub pose: Pose,
    pub mouth: MouthShape,
    pub eye_open: [f32; 2],
    pub brow: f32,
    pub cheek: f32,
}

impl Default for FaceState {
    fn default() -> Self {
        FaceState { pose: Pose::REST, mouth: MouthShape::CLOSED, eye_open: [1.0, 1.0], brow: 0.0, cheek: 0.0 }
    }
}
