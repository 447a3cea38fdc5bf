//! MediaPipe FaceMesh landmark indices the rig relies on (478-point topology: 468 mesh points,
//! then two iris blocks of five starting with the iris centre), checked against the
//! @vladmandic/human fixtures in `test/fixtures/faces/` by plotting them.
//!
//! Invariants: every contour runs from one corner to the other in the subject's left-to-right
//! order as MediaPipe defines it, and each upper/lower pair shares its two corner indices, so
//! the pair forms a closed loop. Which eye ends up on the image's left is decided from
//! the coordinates by the rig, not assumed here.
//!
//! Not here: any geometry. This is a table.

/// Landmarks in the full topology, with irises.
pub const LANDMARKS_WITH_IRIS: usize = 478;
/// Landmarks without the iris refinement (also accepted; the irises are not used).
pub const LANDMARKS_MESH: usize = 468;

/// Inner lip contour, upper half, corner 78 to corner 308 (the lower edge of the upper lip).
pub const INNER_UPPER: [usize; 11] = [78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308];
/// Inner lip contour, lower half, same corners (the upper edge of the lower lip).
pub const INNER_LOWER: [usize; 11] = [78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308];
/// Outer lip contour, upper half, corner 61 to corner 291.
pub const OUTER_UPPER: [usize; 11] = [61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291];
/// Outer lip contour, lower half.
pub const OUTER_LOWER: [usize; 11] = [61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291];
/// The two intermediate lip rings on each lip. They hug the inner contour within a pixel on a
/// closed mouth, so the rig leaves them out of the mesh (one triangle strip per lip is enough).
pub const LIP_SEMI_RINGS: [usize; 40] = [
    62, 183, 42, 41, 38, 12, 268, 271, 272, 407, 292, // upper, semi-inner
    76, 184, 74, 73, 72, 11, 302, 303, 304, 408, 306, // upper, semi-outer
    96, 89, 179, 86, 15, 316, 403, 319, 325, // lower, semi-inner (corners 62/292 above)
    77, 90, 180, 85, 16, 315, 404, 320, 307, // lower, semi-outer (corners 76/306 above)
];

/// Mid-points of the inner lips (upper, lower): the gap between them is the mouth opening.
pub const INNER_UPPER_MID: usize = 13;
pub const INNER_LOWER_MID: usize = 14;
/// Outer mouth corners.
pub const MOUTH_LEFT: usize = 61;
pub const MOUTH_RIGHT: usize = 291;
/// Bottom of the chin, nose tip, and the point under the nose (subnasale).
pub const CHIN: usize = 152;
pub const NOSE_TIP: usize = 1;
pub const NOSE_BASE: usize = 2;

/// Eye contours: upper lid and lower lid from corner to corner, both eyes (the first is the
/// subject's right eye, which is on the image's left in a frontal photo).
pub const EYE_A_UPPER: [usize; 9] = [33, 246, 161, 160, 159, 158, 157, 173, 133];
pub const EYE_A_LOWER: [usize; 9] = [33, 7, 163, 144, 145, 153, 154, 155, 133];
pub const EYE_B_UPPER: [usize; 9] = [263, 466, 388, 387, 386, 385, 384, 398, 362];
pub const EYE_B_LOWER: [usize; 9] = [263, 249, 390, 373, 374, 380, 381, 382, 362];

/// Face oval, clockwise in the image from the top of the forehead (10) through the chin (152).
pub const FACE_OVAL: [usize; 36] = [
    10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377, 152,
    148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
];

/// True for the lip points the mesh leaves out.
pub fn is_lip_semi_ring(i: usize) -> bool {
    LIP_SEMI_RINGS.contains(&i)
}
