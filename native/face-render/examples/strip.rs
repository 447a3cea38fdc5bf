//! Renders one face in a row of states side by side into one PNG. By default the states a viewer
//! judges the face by: silence, open vowel, rounded vowel, closed lips, a stressed question (brows
//! up, cheeks raised, the head tipped back a little on a spread vowel) and the deepest point of a
//! listening nod. Each state is a `parse_state` string (tests/common/mod.rs), so that the same
//! example, copied into an older checkout, renders the same states with that checkout's renderer
//! (`npm run render:strip -- --before REV` does that; keys an older renderer does not know are
//! dropped by the caller).
//!
//!     cargo run -p face-render --release --example strip -- OUT.png [FACE] [ZOOM_OUT.png] [--states STATE...]
//!     cargo run -p face-render --release --example strip -- OUT.png --framed PHOTO.jpg LANDMARKS.json [--states STATE...]
//!     cargo run -p face-render --release --example strip -- --list-states
//!
//! FACE is a standard face name (`default`, the astronaut, or `face1`), rendered whole into
//! 512x512 (the photo as it is). With `--framed`, PHOTO is a face already framed for its output
//! size (as the server frames it: `npm run render:strip` writes them, src/cli/render-strip.ts) and
//! the strip is rendered at that size. With ZOOM_OUT, a second strip of 2x enlarged crops around
//! the face is written too (for looking at the mouth). `--states` replaces the default row.
//!
//! This file uses only what every face-render since framing has (FaceRig, Renderer, the test
//! helpers' `face`, `framed_face`, `parse_state`), never FaceState's fields: keep it that way, or
//! the before/after strips cannot be made.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use face_render::{FaceRig, Renderer, RgbImage};

/// The default row: (label, state).
const STATES: [(&str, &str); 6] = [
    ("silence", "rest"),
    ("open vowel", "open=0.8,wide=0.1,tongue=0.1"),
    ("rounded vowel", "open=0.35,wide=-0.8,tongue=0.2"),
    ("closed lips", "press=1"),
    ("stressed question", "open=0.3,wide=0.7,tongue=0.5,brow=0.8,cheek=0.35,pitch=-2"),
    // Listening's deepest nod with its tilt and lean (animation's `listening`: 3°, 2.5°, 2 % closer).
    ("listening", "pitch=3,roll=2.5,scale=1.02"),
];

fn main() {
    let all: Vec<String> = std::env::args().collect();
    if all.get(1).map(String::as_str) == Some("--list-states") {
        // The default row, one `label<TAB>state` a line, for the caller that renders it elsewhere.
        for (label, state) in STATES {
            println!("{label}\t{state}");
        }
        return;
    }
    let split = all.iter().position(|a| a == "--states").unwrap_or(all.len());
    let (args, given) = (&all[..split], all.get(split + 1..).unwrap_or(&[]));
    let states: Vec<(String, String)> = if given.is_empty() {
        STATES.iter().map(|(l, s)| (l.to_string(), s.to_string())).collect()
    } else {
        given.iter().map(|s| (s.clone(), s.clone())).collect()
    };
    let out = args.get(1).map(String::as_str).unwrap_or("/tmp/strip.png");
    let framed = args.get(2).map(String::as_str) == Some("--framed");
    let face = if framed {
        let (photo, landmarks) = (args.get(3).expect("PHOTO.jpg"), args.get(4).expect("LANDMARKS.json"));
        common::framed_face(photo.as_ref(), landmarks.as_ref())
    } else {
        common::face(args.get(2).map(String::as_str).unwrap_or("default")).expect("fixture not found")
    };
    let (width, height) = if framed { (face.photo.width, face.photo.height) } else { (512, 512) };
    let rig = Arc::new(FaceRig::new(face.photo.clone(), &face.landmarks).expect("rig"));
    let mut r = Renderer::new(rig, width, height, 1.0).expect("renderer");
    let mut frames: Vec<RgbImage> = Vec::new();
    for (label, s) in &states {
        let mut img = RgbImage::new(width, height);
        r.render(&common::parse_state(s), &mut img);
        println!("{label:>18}: mouth opening {:.3}", r.last_mouth_opening());
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
        let crops: Vec<RgbImage> =
            frames.iter().map(|f| common::enlarge(&common::crop(f, cx0, cy0, side, side), k)).collect();
        let refs: Vec<&RgbImage> = crops.iter().collect();
        common::write_png(std::path::Path::new(zoom), &common::hstack(&refs, 4));
        println!("wrote {zoom}");
    }
}
