//! Render time, not run by default (`cargo test -p face-render --release -- --ignored --nocapture`):
//! median ms/frame over 250 frames of speech-like states at 512x512 on one thread. Prints only;
//! timing depends on the machine, so nothing is asserted. `examples/bench.rs` reports more.

mod common;

use std::sync::Arc;
use std::time::Instant;

use face_render::{FaceRig, Renderer, RgbImage};

#[test]
#[ignore = "timing; run in release with --ignored --nocapture"]
fn render_time_per_frame_512() {
    for name in ["default", "face1"] {
        let face = common::face(name).expect("fixture");
        let rig = Arc::new(FaceRig::new(face.photo, &face.landmarks).unwrap());
        for factor in [1.0, 2.0] {
            let mut r = Renderer::new(rig.clone(), 512, 512, factor).unwrap();
            let mut out = RgbImage::new(512, 512);
            for i in 0..25 {
                r.render(&common::speech_state(i), &mut out);
            }
            let mut ms: Vec<f64> = (0..250)
                .map(|i| {
                    let s = common::speech_state(i);
                    let t = Instant::now();
                    r.render(&s, &mut out);
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            ms.sort_by(f64::total_cmp);
            println!("{name} 512x512 upsample {factor}: median {:.3} ms/frame, p90 {:.3} (250 frames, 1 thread)", ms[125], ms[225]);
        }
    }
}
