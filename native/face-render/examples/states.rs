//! Renders arbitrary states side by side, for looking at the renderer.
//!
//!     cargo run -p face-render --release --example states -- OUT.png FACE [--crop x,y,w,h,k] [--factor f] STATE...
//!
//! A STATE is a comma-separated list of `key=value` (open, wide, press, eye, eyel, eyer, pitch,
//! yaw, roll, tx, ty, scale), or `rest`. `--crop` cuts (and enlarges by k) a region of each frame.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use common::parse_state;
use face_render::{FaceRig, Renderer, RgbImage};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = &args[0];
    let face = common::face(&args[1]).expect("fixture");
    let mut crop: Option<[u32; 5]> = None;
    let mut factor = 1.0f32;
    let mut states = Vec::new();
    let mut i = 2;
    while i < args.len() {
        match args[i].as_str() {
            "--crop" => {
                let v: Vec<u32> = args[i + 1].split(',').map(|x| x.parse().unwrap()).collect();
                crop = Some([v[0], v[1], v[2], v[3], v[4]]);
                i += 1;
            }
            "--factor" => {
                factor = args[i + 1].parse().unwrap();
                i += 1;
            }
            s => states.push(parse_state(s)),
        }
        i += 1;
    }
    let rig = Arc::new(FaceRig::new(face.photo.clone(), &face.landmarks).expect("rig"));
    let mut r = Renderer::new(rig, 512, 512, factor).expect("renderer");
    let frames: Vec<RgbImage> = states
        .iter()
        .map(|s| {
            let mut img = RgbImage::new(512, 512);
            r.render(s, &mut img);
            eprintln!("opening {:.3}", r.last_mouth_opening());
            match crop {
                Some([x, y, w, h, k]) => common::enlarge(&common::crop(&img, x, y, w, h), k),
                None => img,
            }
        })
        .collect();
    let refs: Vec<&RgbImage> = frames.iter().collect();
    common::write_png(std::path::Path::new(out), &common::hstack(&refs, 4));
}
