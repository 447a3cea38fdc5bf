//! Where two states differ: prints the largest per-pixel differences and writes an amplified
//! difference image. Debug helper.
//!
//!     cargo run -p face-render --release --example diffmap -- FACE STATE_A STATE_B OUT.png

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use face_render::{FaceRig, Renderer, RgbImage};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let face = common::face(&a[0]).expect("fixture");
    let rig = Arc::new(FaceRig::new(face.photo.clone(), &face.landmarks).expect("rig"));
    let mut r = Renderer::new(rig, 512, 512, 1.0).unwrap();
    let (mut x, mut y) = (RgbImage::new(512, 512), RgbImage::new(512, 512));
    r.render(&common::parse_state(&a[1]), &mut x);
    r.render(&common::parse_state(&a[2]), &mut y);
    let mut d = RgbImage::new(512, 512);
    let mut top: Vec<(i32, u32, u32)> = Vec::new();
    for py in 0..512 {
        for px in 0..512 {
            let (p, q) = (x.pixel(px, py), y.pixel(px, py));
            let m = (0..3)
                .map(|k| (p[k] as i32 - q[k] as i32).abs())
                .max()
                .unwrap();
            top.push((m, px, py));
            let i = ((py * 512 + px) * 3) as usize;
            d.data[i..i + 3].fill((m * 8).min(255) as u8);
        }
    }
    top.sort_by_key(|t| std::cmp::Reverse(t.0));
    for t in top.iter().take(12) {
        println!(
            "diff {} at ({}, {}): {:?} -> {:?}",
            t.0,
            t.1,
            t.2,
            x.pixel(t.1, t.2),
            y.pixel(t.1, t.2)
        );
    }
    common::write_png(std::path::Path::new(&a[3]), &d);
}
