//! Errors from building a face rig or a renderer. Everything that can go wrong is decided at
//! construction; rendering a frame cannot fail (out-of-range states are clamped).

/// Why a `FaceRig` or a `Renderer` could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RigError {
    /// The landmark slice is not MediaPipe FaceMesh shaped (478 points, or 468 without irises).
    #[error("expected 478 (or 468) face landmarks, got {got}")]
    LandmarkCount { got: usize },
    /// A landmark coordinate is NaN or infinite.
    #[error("landmark {index} is not finite")]
    NonFiniteLandmark { index: usize },
    /// A landmark lies outside the photo.
    #[error("landmark {index} at ({x}, {y}) is outside the {width}x{height} photo")]
    LandmarkOutOfBounds {
        index: usize,
        x: f32,
        y: f32,
        width: u32,
        height: u32,
    },
    /// The photo is empty, too small, or its pixel buffer does not match its size.
    #[error("invalid photo: {0}")]
    InvalidPhoto(&'static str),
    /// The landmarks do not describe a usable face (too small, folded contours, ...).
    #[error("degenerate face: {0}")]
    DegenerateFace(&'static str),
    /// Output size not even or outside 16..=4096.
    #[error("invalid output size {width}x{height} (both even, 16..=4096)")]
    InvalidOutputSize { width: u32, height: u32 },
    /// Upsample factor not a finite number in 1..=4.
    #[error("invalid upsample factor {0} (1..=4)")]
    InvalidUpsampleFactor(f32),
}
