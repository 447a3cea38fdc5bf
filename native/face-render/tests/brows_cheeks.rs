//! Brows and cheeks on the standard faces (512x512 photos rendered at 512x512, so photo and
//! output pixels coincide): a raise moves the brows up by a few per cent of the face width and
//! leaves the eyes as they are, a knit moves the inner brows in and down, a cheek raise lifts
//! the cheeks and leaves the mouth alone.

mod common;

use std::sync::Arc;

use common::luma;
use face_render::{FaceRig, FaceState, Renderer, RgbImage};

const BROW_A: [usize; 10] = [70, 63, 105, 66, 107, 46, 53, 52, 65, 55];
const BROW_B: [usize; 10] = [300, 293, 334, 296, 336, 276, 283, 282, 295, 285];
const EYE_A: [usize; 16] = [33, 246, 161, 160, 159, 158, 157, 173, 133, 7, 163, 144, 145, 153, 154, 155];
const EYE_B: [usize; 16] = [263, 466, 388, 387, 386, 385, 384, 398, 362, 249, 390, 373, 374, 380, 381, 382];
const LIPS: [usize; 20] = [61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 185, 40, 39, 37, 0, 267, 269, 270, 409];
const FACE_OVAL_SIDES: [usize; 2] = [234, 454];

struct Scene {
    lms: Vec<[f32; 3]>,
    r: Renderer,
}

fn scene(name: &str) -> Scene {
    let f = common::face(name).unwrap_or_else(|| panic!("fixture {name} missing"));
    assert_eq!((f.photo.width, f.photo.height), (512, 512), "{name}: the test assumes a 512x512 photo");
    let rig = Arc::new(FaceRig::new(f.photo, &f.landmarks).expect("rig"));
    Scene { lms: f.landmarks, r: Renderer::new(rig, 512, 512, 1.0).unwrap() }
}

fn render(r: &mut Renderer, brow: f32, cheek: f32) -> RgbImage {
    let mut out = RgbImage::new(512, 512);
    r.render(&FaceState { brow, cheek, ..FaceState::default() }, &mut out);
    out
}

/// (x0, y0, x1, y1) around some landmarks, grown by `grow` px.
fn bbox(lms: &[[f32; 3]], ids: &[usize], grow: f32) -> (i32, i32, i32, i32) {
    let xs = ids.iter().map(|&i| lms[i][0]);
    let ys = ids.iter().map(|&i| lms[i][1]);
    let (x0, x1) = (xs.clone().fold(f32::MAX, f32::min), xs.fold(f32::MIN, f32::max));
    let (y0, y1) = (ys.clone().fold(f32::MAX, f32::min), ys.fold(f32::MIN, f32::max));
    ((x0 - grow) as i32, (y0 - grow) as i32, (x1 + grow) as i32, (y1 + grow) as i32)
}

fn face_width(lms: &[[f32; 3]]) -> f32 {
    let [a, b] = FACE_OVAL_SIDES.map(|i| lms[i]);
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

/// The shift (dx, dy) in whole pixels that best maps `before` onto `after` inside `b`:
/// after(x, y) ≈ before(x - dx, y - dy), by least mean absolute luma difference.
fn shift(before: &RgbImage, after: &RgbImage, b: (i32, i32, i32, i32), range: i32) -> (i32, i32) {
    let l = |img: &RgbImage, x: i32, y: i32| luma(img.pixel(x as u32, y as u32));
    let mut best = (f32::MAX, (0, 0));
    for dy in -range..=range {
        for dx in -range..=range {
            let mut sum = 0.0;
            for y in b.1..b.3 {
                for x in b.0..b.2 {
                    sum += (l(after, x, y) - l(before, x - dx, y - dy)).abs();
                }
            }
            if sum < best.0 {
                best = (sum, (dx, dy));
            }
        }
    }
    best.1
}

fn changed(a: &RgbImage, b: &RgbImage, r: (i32, i32, i32, i32)) -> usize {
    let mut n = 0;
    for y in r.1..r.3 {
        for x in r.0..r.2 {
            n += usize::from(a.pixel(x as u32, y as u32) != b.pixel(x as u32, y as u32));
        }
    }
    n
}

/// Pixels that differ between two frames inside an eye opening (lid contour `ids`: upper lid
/// corner to corner, then the lower lid without its corners), at least `margin` px inside.
fn changed_in_eye(a: &RgbImage, b: &RgbImage, lms: &[[f32; 3]], ids: &[usize], margin: f32) -> usize {
    let poly: Vec<[f32; 2]> = ids[..9].iter().chain(ids[9..].iter().rev()).map(|&i| [lms[i][0], lms[i][1]]).collect();
    let inside = |p: [f32; 2]| {
        let mut c = false;
        for k in 0..poly.len() {
            let (u, v) = (poly[k], poly[(k + 1) % poly.len()]);
            if (u[1] > p[1]) != (v[1] > p[1]) && p[0] < u[0] + (p[1] - u[1]) * (v[0] - u[0]) / (v[1] - u[1]) {
                c = !c;
            }
        }
        c
    };
    let deep = |p: [f32; 2]| [[0.0, 0.0], [margin, 0.0], [-margin, 0.0], [0.0, margin], [0.0, -margin]].iter().all(|d| inside([p[0] + d[0], p[1] + d[1]]));
    let bx = bbox(lms, ids, 0.0);
    let mut n = 0;
    let mut total = 0;
    for y in bx.1..bx.3 {
        for x in bx.0..bx.2 {
            if deep([x as f32 + 0.5, y as f32 + 0.5]) {
                total += 1;
                n += usize::from(a.pixel(x as u32, y as u32) != b.pixel(x as u32, y as u32));
            }
        }
    }
    assert!(total > 30, "eye opening not found ({total} px)");
    n
}

#[test]
fn a_raise_lifts_the_brows_by_a_few_percent_and_leaves_the_eyes() {
    for name in ["default", "face1"] {
        let mut s = scene(name);
        let rest = render(&mut s.r, 0.0, 0.0);
        let up = render(&mut s.r, 1.0, 0.0);
        let want = 0.035 * face_width(&s.lms);
        for ids in [&BROW_A[..], &BROW_B[..]] {
            let (dx, dy) = shift(&rest, &up, bbox(&s.lms, ids, 2.0), 14);
            assert!(dx.abs() <= 1, "{name}: brow moved sideways by {dx}");
            assert!(-dy as f32 >= 0.6 * want && -dy as f32 <= 1.4 * want, "{name}: brow moved {dy} px, want -{want:.1}");
        }
        for ids in [&EYE_A[..], &EYE_B[..]] {
            assert_eq!(changed_in_eye(&rest, &up, &s.lms, ids, 1.5), 0, "{name}: the eye changed under a brow raise");
        }
        // Nothing below the eyes moves.
        assert_eq!(changed(&rest, &up, bbox(&s.lms, &LIPS, 20.0)), 0, "{name}: the mouth moved");
    }
}

#[test]
fn a_knit_moves_the_inner_brows_in_and_down() {
    for name in ["default", "face1"] {
        let mut s = scene(name);
        let rest = render(&mut s.r, 0.0, 0.0);
        let knit = render(&mut s.r, -1.0, 0.0);
        let mid = (s.lms[107][0] + s.lms[336][0]) * 0.5;
        for inner in [[107, 55, 65, 66], [336, 285, 295, 296]] {
            let (dx, dy) = shift(&rest, &knit, bbox(&s.lms, &inner, 3.0), 10);
            let toward_mid = if s.lms[inner[0]][0] < mid { dx } else { -dx };
            println!("{name}: inner brow {} moved ({dx}, {dy})", inner[0]);
            // 2 % of the face width in and 1.8 % down at the inner end, less around it.
            let want = (0.01 * face_width(&s.lms)).max(1.0);
            assert!(toward_mid as f32 >= want, "{name}: inner brow {} moved {dx} across", inner[0]);
            assert!(dy as f32 >= want, "{name}: inner brow {} moved {dy} down", inner[0]);
        }
    }
}

#[test]
fn a_cheek_raise_lifts_the_cheeks_narrows_the_eyes_a_little_and_leaves_the_mouth() {
    for name in ["default", "face1"] {
        let mut s = scene(name);
        let rest = render(&mut s.r, 0.0, 0.0);
        let up = render(&mut s.r, 0.0, 1.0);
        let fw = face_width(&s.lms);
        for (eye, lower_lid_mid) in [(&EYE_A[..], 145), (&EYE_B[..], 374)] {
            let e = bbox(&s.lms, eye, 0.0);
            // The cheek: below the eye, about an eye's height under the lower lid.
            let y = s.lms[lower_lid_mid][1] as i32 + (0.06 * fw) as i32;
            let b = (e.0 + 4, y, e.2 - 4, y + (0.08 * fw) as i32);
            let (dx, dy) = shift(&rest, &up, b, 12);
            assert!(dx.abs() <= 1 && -dy as f32 >= 0.01 * fw, "{name}: cheek moved ({dx}, {dy})");
            // The eye stays open: fewer dark pixels at most by a third.
            let dark = |img: &RgbImage| {
                let b = bbox(&s.lms, eye, 0.0);
                let mut n = 0;
                for y in b.1..b.3 {
                    for x in b.0..b.2 {
                        n += usize::from(luma(img.pixel(x as u32, y as u32)) < 60.0);
                    }
                }
                n
            };
            let (d0, d1) = (dark(&rest), dark(&up));
            assert!(d1 <= d0 && d1 * 3 >= d0 * 2, "{name}: eye dark pixels {d0} -> {d1}");
        }
        assert_eq!(changed(&rest, &up, bbox(&s.lms, &LIPS, 4.0)), 0, "{name}: the lips moved");
    }
}

#[test]
fn zero_brow_and_cheek_are_the_rest_and_small_values_make_small_changes() {
    let mut s = scene("default");
    let rest = render(&mut s.r, 0.0, 0.0);
    assert_eq!(render(&mut s.r, -0.0, -0.0), rest);
    // Continuity: 1 % of a raise changes few pixels, and by little.
    let tiny = render(&mut s.r, 0.01, 0.01);
    assert!(common::mean_abs_diff(&rest, &tiny) < 0.05, "{}", common::mean_abs_diff(&rest, &tiny));
    let full = render(&mut s.r, 1.0, 1.0);
    assert!(common::mean_abs_diff(&rest, &full) > 10.0 * common::mean_abs_diff(&rest, &tiny));
}
