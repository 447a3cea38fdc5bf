//! Renders one face in a row of states — silence, open vowel, rounded vowel, closed lips, wide,
//! blink, head turn, listening nod — side by side into one PNG.
//!
//!     cargo run -p face-render --release --example strip -- OUT.png [FACE] [ZOOM_OUT.png]
//!     cargo run -p face-render --release --example strip -- OUT.png --framed PHOTO.jpg LANDMARKS.json
//!
//! FACE is a standard face name (`default`, the astronaut, or `face1`), rendered whole into
//! 512x512 (the photo as it is). With `--framed`, PHOTO is a face already framed for its output
//! size (as the server frames it: `npm run render:strip` writes them, src/cli/render-strip.ts) and
//! the strip is rendered at that size. With ZOOM_OUT, a second strip of 2x enlarged crops around
//! the face is written too (for looking at the mouth).

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use face_render::{FaceRig, FaceState, MouthShape, Pose, Renderer, RgbImage};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = args.get(1).map(String::as_str).unwrap_or("/tmp/strip.png");
    let framed = args.get(2).map(String::as_str) == Some("--framed");
    let face = if framed {
        let (photo, landmarks) = (
            args.get(3).expect("PHOTO.jpg"),
            args.get(4).expect("LANDMARKS.json"),
        );
        common::framed_face(photo.as_ref(), landmarks.as_ref())
    } else {
        common::face(args.get(2).map(String::as_str).unwrap_or("default"))
            .expect("fixture not found")
    };
    let (width, height) = if framed {
        (face.photo.width, face.photo.height)
    } else {
        (512, 512)
    };
    let rig = Arc::new(FaceRig::new(face.photo.clone(), &face.landmarks).expect("rig"));
    let mut r = Renderer::new(rig, width, height, 1.0).expect("renderer");
    let mouth = |open, wide, press| FaceState {
        mouth: MouthShape { open, wide, press, tongue: 0.3 },
        ..FaceState::default()
    };
    let states = [
        ("silence", FaceState::default()),
        ("open vowel", mouth(0.8, 0.0, 0.0)),
        ("rounded vowel", mouth(0.4, -0.8, 0.0)),
        ("closed lips", mouth(0.0, 0.0, 1.0)),
        ("wide", mouth(0.3, 0.9, 0.0)),
        (
            "blink",
            FaceState {
                eye_open: [0.0, 0.0],
                ..FaceState::default()
            },
        ),
        (
            "head turn",
            FaceState {
                pose: Pose {
                    yaw_deg: 10.0,
                    pitch_deg: 4.0,
                    roll_deg: -3.0,
                    ..Pose::REST
                },
                mouth: MouthShape {
                    open: 0.3,
                    wide: 0.0,
                    press: 0.0,
                    tongue: 0.3,
                },
                ..FaceState::default()
            },
        ),
        (
            // The deepest point of a listening nod, with the listening tilt and lean (animation's
            // `listening`: 3° nod, 2.5° roll, 2 % closer).
            "listening nod",
            FaceState {
                pose: Pose {
                    pitch_deg: 3.0,
                    roll_deg: 2.5,
                    scale: 1.02,
                    ..Pose::REST
                },
                ..FaceState::default()
            },
        ),
    ];
    let mut frames: Vec<RgbImage> = Vec::new();
    for (label, s) in &states {
        let mut img = RgbImage::new(width, height);
        r.render(s, &mut img);
        println!("{label:>14}: mouth opening {:.3}", r.last_mouth_opening());
        frames.push(img);
    }
    let refs: Vec<&RgbImage> = frames.iter().collect();
    common::write_png(std::path::Path::new(out), &common::hstack(&refs, 4));
    println!("wrote {out}");
    if let Some(zoom) = args.get(3).filter(|_| !framed) {
        let lms = &face.landmarks;
        let (mut x0, mut x1, mut y0, mut y1) = (f32::MAX, f32::MIN, f32::MAX, f32::MIN);
        for p in &lms[..468] {
            x0 = x0.min(p[0]);
            x1 = x1.max(p[0]);
            y0 = y0.min(p[1]);
            y1 = y1.max(p[1]);
        }
        let side = ((x1 - x0).max(y1 - y0) * 1.25) as u32;
        let (cx, cy) = ((x0 + x1) * 0.5, (y0 + y1) * 0.5);
        let cx0 = (cx - side as f32 * 0.5).max(0.0) as u32;
        let cy0 = (cy - side as f32 * 0.5).max(0.0) as u32;
        let k = (height / side).clamp(1, 4);
        let crops: Vec<RgbImage> = frames
            .iter()
            .map(|f| common::enlarge(&common::crop(f, cx0, cy0, side, side), k))
            .collect();
        let refs: Vec<&RgbImage> = crops.iter().collect();
        common::write_png(std::path::Path::new(zoom), &common::hstack(&refs, 4));
        println!("wrote {zoom}");
    }
}
