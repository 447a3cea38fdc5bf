//! `FaceRig::client_face`: the layout a client renderer gets is the renderer's own, at each
//! output size and supersampling.

mod common;

use std::sync::Arc;

use face_render::{FaceRig, RgbImage, BASE_ORDER};

fn rig(photo: RgbImage, landmarks: &[[f32; 3]]) -> Arc<FaceRig> {
    Arc::new(FaceRig::new(photo, landmarks).expect("rig"))
}

#[test]
fn per_vertex_arrays_line_up_and_the_texture_is_the_photo_at_full_scale() {
    let f = common::face("default").expect("standard face fixture");
    let (pw, ph) = (f.photo.width, f.photo.height);
    let r = rig(f.photo.clone(), &f.landmarks);
    let c = r.client_face(pw, ph, 1.0).unwrap();
    let (n, t) = r.mesh_size();
    assert_eq!(
        (
            c.rest.len(),
            c.bases.len(),
            c.depth.len(),
            c.head_weight.len()
        ),
        (n, n, n, n)
    );
    assert_eq!(c.triangles.len(), t);
    assert!(c.triangles.iter().flatten().all(|&v| (v as usize) < n));
    assert_eq!(c.bases[0].len(), BASE_ORDER.len());
    assert_eq!((c.canvas_width, c.canvas_height), (pw, ph));
    assert_eq!(
        (c.texture_width, c.texture_height, c.texture_factor),
        (pw, ph, 1)
    );
    assert_eq!(c.texture, f.photo.data, "the texture is the photo itself");
    for eye in &c.eyes {
        assert_eq!(eye.upper.len(), eye.lower.len());
    }
    assert!(c.mouth.width > 0.0 && c.mouth.jaw_drop > 0.0);
    // Fit of a photo onto an output of its own size: the identity.
    assert_eq!(c.fit, [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn a_small_output_gets_the_reduced_photo_and_a_supersampled_canvas() {
    let f = common::face("default").expect("standard face fixture");
    let r = rig(f.photo.clone(), &f.landmarks);
    // A quarter-size output: the warp reads a box-reduced photo (render scale below 0.75).
    let c = r
        .client_face(f.photo.width / 4, f.photo.height / 4, 1.0)
        .unwrap();
    assert!(c.texture_factor >= 2, "factor {}", c.texture_factor);
    assert_eq!(c.texture_width, f.photo.width.div_ceil(c.texture_factor));
    assert_eq!(
        c.texture.len() as u32,
        c.texture_width * c.texture_height * 3
    );
    let c2 = r.client_face(f.photo.width, f.photo.height, 2.0).unwrap();
    assert_eq!(
        (c2.canvas_width, c2.canvas_height),
        (f.photo.width / 2, f.photo.height / 2)
    );
    assert!((c2.fit[0] - 0.5).abs() < 1e-12);
    assert!(
        r.client_face(15, 16, 1.0).is_err(),
        "sizes are checked like the renderer's"
    );
    assert!(r.client_face(64, 64, 5.0).is_err());
}
