//! Behaviour of `FaceRig` and `Renderer` on the standard faces (fixtures in
//! `test/fixtures/faces/`, photos in `models/assets/faces/`).

mod common;

use std::sync::Arc;

use common::{luma, Face};
use face_render::{FaceRig, FaceState, MouthShape, Pose, Renderer, RgbImage, RigError};

fn face(name: &str) -> Face {
    common::face(name)
        .unwrap_or_else(|| panic!("fixture test/fixtures/faces/{name}.landmarks.json missing"))
}

fn rig(name: &str) -> Arc<FaceRig> {
    let f = face(name);
    Arc::new(FaceRig::new(f.photo, &f.landmarks).expect("rig builds"))
}

fn render(r: &mut Renderer, s: &FaceState) -> RgbImage {
    let (w, h) = r.size();
    let mut out = RgbImage::new(w, h);
    r.render(s, &mut out);
    out
}

fn mouth(open: f32, wide: f32, press: f32) -> FaceState {
    FaceState {
        mouth: MouthShape { open, wide, press, tongue: 0.3 },
        ..FaceState::default()
    }
}

/// Bounding box (x0, y0, x1, y1) of some landmarks, grown by `grow` px and `down` px below.
fn bbox(lms: &[[f32; 3]], ids: &[usize], grow: f32, down: f32) -> (u32, u32, u32, u32) {
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
    for &i in ids {
        x0 = x0.min(lms[i][0]);
        y0 = y0.min(lms[i][1]);
        x1 = x1.max(lms[i][0]);
        y1 = y1.max(lms[i][1]);
    }
    (
        (x0 - grow).max(0.0) as u32,
        (y0 - grow).max(0.0) as u32,
        (x1 + grow) as u32,
        (y1 + grow + down) as u32,
    )
}

fn count(img: &RgbImage, b: (u32, u32, u32, u32), pred: impl Fn([u8; 3]) -> bool) -> usize {
    let mut n = 0;
    for y in b.1..b.3.min(img.height) {
        for x in b.0..b.2.min(img.width) {
            if pred(img.pixel(x, y)) {
                n += 1;
            }
        }
    }
    n
}

const EYE_A: [usize; 16] = [
    33, 246, 161, 160, 159, 158, 157, 173, 133, 7, 163, 144, 145, 153, 154, 155,
];
const EYE_B: [usize; 16] = [
    263, 466, 388, 387, 386, 385, 384, 398, 362, 249, 390, 373, 374, 380, 381, 382,
];

/// Pixels that differ between two frames inside a box.
fn changed(a: &RgbImage, b: &RgbImage, r: (u32, u32, u32, u32)) -> usize {
    let mut n = 0;
    for y in r.1..r.3.min(a.height) {
        for x in r.0..r.2.min(a.width) {
            if a.pixel(x, y) != b.pixel(x, y) {
                n += 1;
            }
        }
    }
    n
}

const LIPS: [usize; 20] = [
    61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 185, 40, 39, 37, 0, 267, 269, 270, 409,
];

#[test]
fn face_rig_new_rejects_a_wrong_landmark_count() {
    let f = face("default");
    let err = FaceRig::new(f.photo.clone(), &f.landmarks[..100]).unwrap_err();
    assert_eq!(err, RigError::LandmarkCount { got: 100 });
    // 468 points (no irises) are accepted.
    assert!(FaceRig::new(f.photo, &f.landmarks[..468]).is_ok());
}

#[test]
fn face_rig_new_rejects_non_finite_landmarks() {
    let f = face("default");
    let mut lms = f.landmarks.clone();
    lms[13][1] = f32::NAN;
    assert_eq!(
        FaceRig::new(f.photo.clone(), &lms).unwrap_err(),
        RigError::NonFiniteLandmark { index: 13 }
    );
    lms[13][1] = f.landmarks[13][1];
    lms[200][2] = f32::INFINITY;
    assert_eq!(
        FaceRig::new(f.photo, &lms).unwrap_err(),
        RigError::NonFiniteLandmark { index: 200 }
    );
}

#[test]
fn face_rig_new_rejects_landmarks_outside_the_photo() {
    let f = face("default");
    let mut lms = f.landmarks.clone();
    lms[10][0] = 600.0;
    assert!(matches!(
        FaceRig::new(f.photo.clone(), &lms).unwrap_err(),
        RigError::LandmarkOutOfBounds { index: 10, .. }
    ));
    lms[10][0] = -1.0;
    assert!(matches!(
        FaceRig::new(f.photo, &lms).unwrap_err(),
        RigError::LandmarkOutOfBounds { index: 10, .. }
    ));
}

#[test]
fn face_rig_new_rejects_degenerate_faces_and_bad_photos() {
    let f = face("default");
    // All points in one spot.
    let lms = vec![[100.0f32, 100.0, 0.0]; 478];
    assert!(matches!(
        FaceRig::new(f.photo.clone(), &lms).unwrap_err(),
        RigError::DegenerateFace(_)
    ));
    // Face shrunk to a few pixels.
    let tiny: Vec<[f32; 3]> = f
        .landmarks
        .iter()
        .map(|p| {
            [
                200.0 + (p[0] - 200.0) * 0.1,
                100.0 + (p[1] - 100.0) * 0.1,
                p[2],
            ]
        })
        .collect();
    assert!(matches!(
        FaceRig::new(f.photo.clone(), &tiny).unwrap_err(),
        RigError::DegenerateFace(_)
    ));
    // Upside down.
    let flipped: Vec<[f32; 3]> = f
        .landmarks
        .iter()
        .map(|p| [p[0], 511.0 - p[1], p[2]])
        .collect();
    assert!(FaceRig::new(f.photo.clone(), &flipped).is_err());
    // Pixel buffer of the wrong length.
    let bad = RgbImage {
        width: 512,
        height: 512,
        data: vec![0; 10],
    };
    assert!(matches!(
        FaceRig::new(bad, &f.landmarks).unwrap_err(),
        RigError::InvalidPhoto(_)
    ));
}

#[test]
fn face_rig_is_send_sync_and_keeps_the_photo() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<FaceRig>();
    let f = face("default");
    let r = FaceRig::new(f.photo.clone(), &f.landmarks).unwrap();
    assert_eq!(r.photo(), &f.photo);
}

#[test]
fn renderer_new_rejects_bad_sizes_and_factors() {
    let r = rig("default");
    for (w, h) in [(15, 512), (512, 17), (511, 512), (8192, 512), (0, 0)] {
        assert!(
            matches!(
                Renderer::new(r.clone(), w, h, 1.0).unwrap_err(),
                RigError::InvalidOutputSize { .. }
            ),
            "{w}x{h}"
        );
    }
    for f in [0.5, 4.5, f32::NAN, f32::INFINITY] {
        assert!(
            matches!(
                Renderer::new(r.clone(), 512, 512, f).unwrap_err(),
                RigError::InvalidUpsampleFactor(_)
            ),
            "{f}"
        );
    }
    assert!(Renderer::new(r, 16, 4096, 4.0).is_ok());
}

#[test]
fn rest_state_reproduces_the_photo() {
    for name in ["default", "face1"] {
        let f = face(name);
        let mut r = Renderer::new(rig(name), 512, 512, 1.0).unwrap();
        let out = render(&mut r, &FaceState::default());
        assert_eq!(out, f.photo, "{name}: rest frame differs from the photo");
    }
}

/// Independent reference for the fit: cover-scale, centre on the face, clamp, bilinear.
fn fitted_reference(photo: &RgbImage, lms: &[[f32; 3]], w: u32, h: u32) -> RgbImage {
    let oval = [
        10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377,
        152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
    ];
    let cx = oval.iter().map(|&i| lms[i][0] as f64).sum::<f64>() / oval.len() as f64;
    let cy = oval.iter().map(|&i| lms[i][1] as f64).sum::<f64>() / oval.len() as f64;
    let (pw, ph) = (photo.width as f64, photo.height as f64);
    let s = (w as f64 / pw).max(h as f64 / ph);
    let tx = (w as f64 * 0.5 - s * cx).clamp(w as f64 - s * pw, 0.0);
    let ty = (h as f64 * 0.5 - s * cy).clamp(h as f64 - s * ph, 0.0);
    let mut out = RgbImage::new(w, h);
    for y in 0..h {
        for x in 0..w {
            let px = ((x as f64 + 0.5 - tx) / s - 0.5).clamp(0.0, pw - 1.0);
            let py = ((y as f64 + 0.5 - ty) / s - 0.5).clamp(0.0, ph - 1.0);
            let (x0, y0) = (px.floor() as u32, py.floor() as u32);
            let (x1, y1) = (
                (x0 + 1).min(photo.width - 1),
                (y0 + 1).min(photo.height - 1),
            );
            let (fx, fy) = (px - x0 as f64, py - y0 as f64);
            for k in 0..3 {
                let g = |xx, yy| photo.pixel(xx, yy)[k] as f64;
                let v = (g(x0, y0) * (1.0 - fx) + g(x1, y0) * fx) * (1.0 - fy)
                    + (g(x0, y1) * (1.0 - fx) + g(x1, y1) * fx) * fy;
                out.data[((y * w + x) * 3 + k as u32) as usize] = v.round() as u8;
            }
        }
    }
    out
}

#[test]
fn rest_state_matches_the_fitted_photo_at_other_sizes() {
    let f = face("face1");
    let r = rig("face1");
    for (w, h) in [(640, 480), (384, 512), (600, 600)] {
        let mut rd = Renderer::new(r.clone(), w, h, 1.0).unwrap();
        let out = render(&mut rd, &FaceState::default());
        let reference = fitted_reference(&f.photo, &f.landmarks, w, h);
        let mad = common::mean_abs_diff(&out, &reference);
        assert!(mad < 1.0, "{w}x{h}: mean abs diff {mad}");
    }
}

#[test]
fn mouth_opening_grows_with_open_and_shows_a_dark_cavity() {
    for name in ["default", "face1"] {
        let f = face(name);
        let mut r = Renderer::new(rig(name), 512, 512, 1.0).unwrap();
        let region = bbox(&f.landmarks, &LIPS, 3.0, 30.0);
        let dark = |img: &RgbImage| count(img, region, |c| luma(c) < 60.0);
        let rest = render(&mut r, &FaceState::default());
        let dark_rest = dark(&rest);
        assert!(r.last_mouth_opening().abs() < 1e-6);
        let (mut prev_open, mut prev_dark) = (0.0f32, dark_rest);
        for k in 1..=10 {
            let open = k as f32 / 10.0;
            let img = render(&mut r, &mouth(open, 0.0, 0.0));
            let (o, d) = (r.last_mouth_opening(), dark(&img));
            assert!(
                o > prev_open,
                "{name}: opening {o} at open={open} not above {prev_open}"
            );
            // (The mouth corners move in a little as the jaw opens, so a photo's dark corners
            // can shrink by a few pixels before the cavity shows.)
            assert!(
                d + 10 >= prev_dark,
                "{name}: dark area shrank from {prev_dark} to {d} at open={open}"
            );
            prev_open = o;
            prev_dark = d;
        }
        assert!(
            (0.25..0.40).contains(&prev_open),
            "{name}: opening at open=1 is {prev_open}, want about a third"
        );
        let w = f.landmarks[291][0] - f.landmarks[61][0];
        assert!(
            prev_dark as f32 > dark_rest as f32 + 0.05 * w * w,
            "{name}: cavity too small ({dark_rest} -> {prev_dark} dark px)"
        );
        // Pressed lips close the mouth whatever `open` says.
        let pressed = render(&mut r, &mouth(1.0, 0.0, 1.0));
        assert!(r.last_mouth_opening() < 1e-6);
        assert!(
            dark(&pressed) <= dark_rest + 10,
            "{name}: pressed mouth shows {} dark px (rest {dark_rest})",
            dark(&pressed)
        );
        render(&mut r, &mouth(0.0, 0.5, 0.0));
        assert!(
            r.last_mouth_opening() < 1e-6,
            "open = 0 must not open the mouth"
        );
    }
}

#[test]
fn small_openings_are_drawn_and_measured() {
    let f = face("face1");
    let mut r = Renderer::new(rig("face1"), 512, 512, 1.0).unwrap();
    let rest = render(&mut r, &FaceState::default());
    let small = render(&mut r, &mouth(0.1, 0.0, 0.0));
    let o = r.last_mouth_opening();
    assert!(o > 0.02 && o < 0.06, "opening at open=0.1: {o}");
    // The lips part visibly: pixels around the mouth change.
    let changed = changed(&small, &rest, bbox(&f.landmarks, &LIPS, 2.0, 8.0));
    assert!(
        changed > 100,
        "only {changed} pixels changed for a small opening"
    );
}

#[test]
fn eyelids_close_over_the_eyes() {
    for name in ["default", "face1"] {
        let f = face(name);
        let mut r = Renderer::new(rig(name), 512, 512, 1.0).unwrap();
        let open = render(&mut r, &FaceState::default());
        let half = render(
            &mut r,
            &FaceState {
                eye_open: [0.5, 0.5],
                ..FaceState::default()
            },
        );
        let shut = render(
            &mut r,
            &FaceState {
                eye_open: [0.0, 0.0],
                ..FaceState::default()
            },
        );
        for ids in [&EYE_A, &EYE_B] {
            let b = bbox(&f.landmarks, ids, 0.0, 0.0);
            // Skin level: median luma of the band just below the eye.
            let mut skin: Vec<f32> = Vec::new();
            for y in b.3 + 3..b.3 + 8 {
                for x in b.0..b.2 {
                    skin.push(luma(open.pixel(x, y)));
                }
            }
            skin.sort_by(f32::total_cmp);
            let skin_l = skin[skin.len() / 2];
            // The middle of the eye (the corners keep their lashes when shut).
            let m = (b.2 - b.0) / 6;
            let mid = (b.0 + m, b.1, b.2 - m, b.3);
            let dark = |img: &RgbImage| count(img, mid, |c| luma(c) < skin_l * 0.4);
            let (d_open, d_half, d_shut) = (dark(&open), dark(&half), dark(&shut));
            assert!(d_open > 10, "{name}: eye not found ({d_open} dark px)");
            assert!(
                d_half < d_open,
                "{name}: half-shut eye not darker-free ({d_half} vs {d_open})"
            );
            assert!(
                d_shut * 2 < d_open,
                "{name}: shut eye still dark ({d_shut} vs {d_open} open)"
            );
        }
        // One eye at a time: eye_open[0] is the image-left eye.
        let left = render(
            &mut r,
            &FaceState {
                eye_open: [0.0, 1.0],
                ..FaceState::default()
            },
        );
        let ba = bbox(&f.landmarks, &EYE_A, 2.0, 0.0);
        let bb = bbox(&f.landmarks, &EYE_B, 2.0, 0.0);
        let (img_left, img_right) = if ba.0 < bb.0 { (ba, bb) } else { (bb, ba) };
        assert!(
            changed(&open, &left, img_left) > 20,
            "{name}: image-left eye did not close"
        );
        assert_eq!(
            changed(&open, &left, img_right),
            0,
            "{name}: image-right eye changed"
        );
    }
}

/// Centroid of the pure-green marker pixels.
fn marker(img: &RgbImage) -> (f32, f32) {
    let (mut sx, mut sy, mut n) = (0.0, 0.0, 0.0);
    for y in 0..img.height {
        for x in 0..img.width {
            let c = img.pixel(x, y);
            if c[1] > 200 && c[0] < 60 && c[2] < 60 {
                sx += x as f32;
                sy += y as f32;
                n += 1.0;
            }
        }
    }
    assert!(n > 0.0, "marker not visible");
    (sx / n, sy / n)
}

#[test]
fn head_pose_moves_the_nose_tip_the_expected_way() {
    let f = face("default");
    let mut photo = f.photo.clone();
    let (nx, ny) = (f.landmarks[1][0] as i32, f.landmarks[1][1] as i32);
    for y in ny - 2..=ny + 2 {
        for x in nx - 2..=nx + 2 {
            let i = ((y as u32 * photo.width + x as u32) * 3) as usize;
            photo.data[i..i + 3].copy_from_slice(&[0, 255, 0]);
        }
    }
    let rig = Arc::new(FaceRig::new(photo, &f.landmarks).unwrap());
    let mut r = Renderer::new(rig, 512, 512, 1.0).unwrap();
    let pose = |p: Pose| FaceState {
        pose: p,
        ..FaceState::default()
    };
    let rest = marker(&render(&mut r, &FaceState::default()));
    let yaw = marker(&render(
        &mut r,
        &pose(Pose {
            yaw_deg: 10.0,
            ..Pose::REST
        }),
    ));
    let pitch = marker(&render(
        &mut r,
        &pose(Pose {
            pitch_deg: 10.0,
            ..Pose::REST
        }),
    ));
    let roll = marker(&render(
        &mut r,
        &pose(Pose {
            roll_deg: 10.0,
            ..Pose::REST
        }),
    ));
    let shift = marker(&render(
        &mut r,
        &pose(Pose {
            tx: 0.1,
            ty: -0.1,
            ..Pose::REST
        }),
    ));
    assert!(
        yaw.0 < rest.0 - 3.0 && (yaw.1 - rest.1).abs() < 2.0,
        "+yaw moves the nose to the image's left: {rest:?} -> {yaw:?}"
    );
    assert!(
        pitch.1 > rest.1 + 3.0 && (pitch.0 - rest.0).abs() < 2.0,
        "+pitch moves the nose down: {rest:?} -> {pitch:?}"
    );
    // Clockwise roll about a pivot above the nose swings the nose to the left.
    assert!(
        roll.0 < rest.0 - 1.0,
        "+roll turns clockwise: {rest:?} -> {roll:?}"
    );
    assert!(
        shift.0 > rest.0 + 5.0 && shift.1 < rest.1 - 5.0,
        "translation: {rest:?} -> {shift:?}"
    );
    // The image border stays put (its mesh vertices are fixed; pixels next to them may shift
    // by a fraction of a pixel).
    let img = render(
        &mut r,
        &pose(Pose {
            yaw_deg: 10.0,
            pitch_deg: -8.0,
            roll_deg: 6.0,
            tx: 0.05,
            ty: 0.05,
            scale: 1.05,
        }),
    );
    let still = render(&mut r, &FaceState::default());
    let mut total = 0.0;
    for x in 0..512 {
        for y in [0, 511] {
            let (a, b) = (img.pixel(x, y), still.pixel(x, y));
            for k in 0..3 {
                let d = (a[k] as f32 - b[k] as f32).abs();
                assert!(d <= 12.0, "border pixel ({x}, {y}) moved: {a:?} vs {b:?}");
                total += d;
            }
        }
    }
    assert!(
        total / (512.0 * 2.0 * 3.0) < 1.0,
        "border moved on average by {}",
        total / 3072.0
    );
}

fn varied_states() -> Vec<FaceState> {
    let mut v = vec![
        FaceState::default(),
        mouth(0.8, 0.0, 0.0),
        mouth(0.4, -0.8, 0.0),
        mouth(0.0, 0.0, 1.0),
        mouth(0.3, 0.9, 0.0),
        FaceState {
            eye_open: [0.0, 0.0],
            ..FaceState::default()
        },
        FaceState {
            pose: Pose {
                pitch_deg: -10.0,
                yaw_deg: 10.0,
                roll_deg: -10.0,
                tx: 0.1,
                ty: -0.05,
                scale: 1.1,
            },
            mouth: MouthShape {
                open: 1.0,
                wide: 1.0,
                press: 0.0,
                tongue: 1.0,
            },
            eye_open: [0.3, 0.7],
            brow: 1.0,
            cheek: 1.0,
        },
        FaceState {
            pose: Pose {
                pitch_deg: 10.0,
                yaw_deg: -10.0,
                roll_deg: 10.0,
                tx: -0.1,
                ty: 0.1,
                scale: 0.9,
            },
            mouth: MouthShape {
                open: 1.0,
                wide: -1.0,
                press: 0.3,
                tongue: 0.0,
            },
            eye_open: [1.0, 0.0],
            brow: -1.0,
            cheek: 0.0,
        },
    ];
    // Out of range and NaN values are clamped, not trusted.
    v.push(FaceState {
        pose: Pose {
            pitch_deg: f32::NAN,
            yaw_deg: 90.0,
            roll_deg: -400.0,
            tx: 5.0,
            ty: f32::INFINITY,
            scale: 0.0,
        },
        mouth: MouthShape {
            open: 3.0,
            wide: f32::NAN,
            press: -1.0,
            tongue: f32::NAN,
        },
        eye_open: [f32::NAN, 7.0],
        brow: f32::INFINITY,
        cheek: -3.0,
    });
    v
}

#[test]
fn render_writes_every_pixel() {
    for (name, (w, h), factor) in [
        ("default", (512, 512), 1.0),
        ("face1", (512, 512), 2.0),
        ("face1", (320, 240), 1.5),
        ("default", (16, 16), 1.0),
    ] {
        let mut r = Renderer::new(rig(name), w, h, factor).unwrap();
        for s in varied_states() {
            // A pixel the renderer skipped would keep the sentinel; two different sentinels
            // cannot both survive in a written pixel.
            let mut a = RgbImage::new(w, h);
            let mut b = RgbImage::new(w, h);
            a.data.fill(7);
            b.data.fill(251);
            r.render(&s, &mut a);
            r.render(&s, &mut b);
            assert_eq!(a, b, "{name} {w}x{h} x{factor}: unwritten pixels for {s:?}");
        }
    }
}

#[test]
fn rendering_is_deterministic() {
    let r1 = rig("default");
    let r2 = rig("default");
    let mut a = Renderer::new(r1, 512, 512, 1.0).unwrap();
    let mut b = Renderer::new(r2, 512, 512, 1.0).unwrap();
    let states = varied_states();
    let first: Vec<RgbImage> = states.iter().map(|s| render(&mut a, s)).collect();
    // A second renderer, and the first one again in another order.
    for (s, img) in states.iter().zip(&first) {
        assert_eq!(&render(&mut b, s), img);
    }
    for (s, img) in states.iter().zip(&first).rev() {
        assert_eq!(&render(&mut a, s), img);
    }
}

#[test]
fn upsampled_render_has_the_output_size_and_stays_close() {
    for name in ["default", "face1"] {
        let rg = rig(name);
        let mut full = Renderer::new(rg.clone(), 512, 512, 1.0).unwrap();
        let mut half = Renderer::new(rg, 512, 512, 2.0).unwrap();
        assert_eq!(half.size(), (512, 512));
        for s in varied_states().iter().take(8) {
            let a = render(&mut full, s);
            let b = render(&mut half, s);
            assert_eq!((b.width, b.height), (512, 512));
            let p = common::psnr(&a, &b);
            assert!(p > 25.0, "{name}: PSNR {p:.1} dB for {s:?}");
            assert!((full.last_mouth_opening() - half.last_mouth_opening()).abs() < 1e-6);
        }
    }
}

#[test]
fn set_rig_swaps_the_face_mid_session() {
    let mut r = Renderer::new(rig("default"), 512, 512, 1.0).unwrap();
    render(&mut r, &mouth(0.8, 0.0, 0.0));
    r.set_rig(rig("face1"));
    assert_eq!(render(&mut r, &FaceState::default()), face("face1").photo);
    let mut r2 = Renderer::new(rig("face1"), 512, 512, 2.0).unwrap();
    render(&mut r2, &mouth(0.8, 0.0, 0.0));
    r2.set_rig(rig("default"));
    let mut fresh = Renderer::new(rig("default"), 512, 512, 2.0).unwrap();
    let s = mouth(0.5, 0.2, 0.0);
    assert_eq!(render(&mut r2, &s), render(&mut fresh, &s));
}

#[test]
fn render_resizes_a_wrongly_sized_output() {
    let mut r = Renderer::new(rig("default"), 256, 256, 1.0).unwrap();
    let mut out = RgbImage::new(10, 10);
    r.render(&FaceState::default(), &mut out);
    assert_eq!(
        (out.width, out.height, out.data.len()),
        (256, 256, 256 * 256 * 3)
    );
}

#[test]
fn a_mirrored_photo_works_the_same() {
    let f = face("face1");
    let w = f.photo.width;
    let mut photo = f.photo.clone();
    for y in 0..f.photo.height {
        for x in 0..w {
            let i = ((y * w + x) * 3) as usize;
            photo.data[i..i + 3].copy_from_slice(&f.photo.pixel(w - 1 - x, y));
        }
    }
    let lms: Vec<[f32; 3]> = f
        .landmarks
        .iter()
        .map(|p| [w as f32 - p[0], p[1], p[2]])
        .collect();
    let rig = Arc::new(FaceRig::new(photo.clone(), &lms).expect("mirrored rig"));
    let mut r = Renderer::new(rig, 512, 512, 1.0).unwrap();
    assert_eq!(render(&mut r, &FaceState::default()), photo);
    render(&mut r, &mouth(1.0, 0.0, 0.0));
    assert!((0.25..0.40).contains(&r.last_mouth_opening()));
    // eye_open[0] is still the image-left eye.
    let open = render(&mut r, &FaceState::default());
    let shut = render(
        &mut r,
        &FaceState {
            eye_open: [0.0, 1.0],
            ..FaceState::default()
        },
    );
    let (a, b) = (bbox(&lms, &EYE_A, 2.0, 0.0), bbox(&lms, &EYE_B, 2.0, 0.0));
    let (img_left, img_right) = if a.0 < b.0 { (a, b) } else { (b, a) };
    assert!(
        changed(&open, &shut, img_left) > 20,
        "image-left eye did not close in the mirrored photo"
    );
    assert_eq!(changed(&open, &shut, img_right), 0);
}

#[test]
fn tiny_changes_make_tiny_differences() {
    // No pops: leaving the rest state, or nudging any control, changes the frame a little.
    for name in ["default", "face1"] {
        let mut r = Renderer::new(rig(name), 512, 512, 1.0).unwrap();
        let bases = [
            FaceState::default(),
            mouth(0.5, 0.0, 0.0),
            FaceState {
                pose: Pose {
                    yaw_deg: 5.0,
                    ..Pose::REST
                },
                ..FaceState::default()
            },
        ];
        for base in bases {
            let nudges: [fn(&mut FaceState); 6] = [
                |s| s.mouth.open += 0.005,
                |s| s.mouth.wide += 0.005,
                |s| s.mouth.press += 0.005,
                |s| s.eye_open[0] -= 0.005,
                |s| s.pose.yaw_deg += 0.02,
                |s| s.pose.pitch_deg += 0.02,
            ];
            let a = render(&mut r, &base);
            for (k, nudge) in nudges.iter().enumerate() {
                let mut s = base;
                nudge(&mut s);
                let b = render(&mut r, &s);
                // A sub-pixel shift moves high-contrast edges by a few levels; a pop (something
                // switching on or off) changes a run of pixels by much more.
                let mad = common::mean_abs_diff(&a, &b);
                let big = a
                    .data
                    .iter()
                    .zip(&b.data)
                    .filter(|&(&x, &y)| (x as i32 - y as i32).abs() > 16)
                    .count();
                assert!(
                    mad < 0.1 && big < 6,
                    "{name}: nudge {k} from {base:?}: mean {mad:.4}, {big} values changed by > 16"
                );
            }
        }
    }
}

#[test]
fn a_tight_face_crop_still_renders() {
    // Face filling the photo: no room for anchor rings, border right at the face.
    let f = face("face1");
    let (x0, y0, w, h) = (150u32, 80u32, 240u32, 230u32);
    let photo = common::crop(&f.photo, x0, y0, w, h);
    let lms: Vec<[f32; 3]> = f
        .landmarks
        .iter()
        .map(|p| {
            [
                (p[0] - x0 as f32).clamp(0.0, w as f32),
                (p[1] - y0 as f32).clamp(0.0, h as f32),
                p[2],
            ]
        })
        .collect();
    let rig = Arc::new(FaceRig::new(photo.clone(), &lms).expect("tight rig"));
    let mut r = Renderer::new(rig, 256, 256, 1.0).unwrap();
    for s in varied_states() {
        let mut a = RgbImage::new(256, 256);
        let mut b = RgbImage::new(256, 256);
        a.data.fill(3);
        b.data.fill(250);
        r.render(&s, &mut a);
        r.render(&s, &mut b);
        assert_eq!(a, b);
    }
}
