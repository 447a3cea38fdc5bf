//! `Renderer::render` allocates nothing once the renderer exists (counted with a wrapping
//! global allocator; this file is its own test binary so other tests do not interfere).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use face_render::{FaceRig, FaceState, MouthShape, Pose, Renderer, RgbImage};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn render_does_not_allocate_per_frame() {
    let face = common::face("default").expect("fixture");
    let rig = Arc::new(FaceRig::new(face.photo, &face.landmarks).unwrap());
    for factor in [1.0, 2.0] {
        let mut r = Renderer::new(rig.clone(), 512, 512, factor).unwrap();
        let mut out = RgbImage::new(512, 512);
        let states: Vec<FaceState> = (0..60)
            .map(|i| {
                let t = i as f32 * 0.1;
                FaceState {
                    pose: Pose {
                        pitch_deg: 8.0 * t.sin(),
                        yaw_deg: 9.0 * (t * 0.7).cos(),
                        roll_deg: 5.0 * t.sin(),
                        tx: 0.05,
                        ty: -0.03,
                        scale: 1.02,
                    },
                    mouth: MouthShape {
                        open: (t * 2.0).sin().abs(),
                        wide: t.cos(),
                        press: if i % 7 == 0 { 1.0 } else { 0.0 },
                        tongue: (t * 0.5).sin().abs(),
                    },
                    eye_open: [(t * 3.0).cos().abs(), 1.0],
                    brow: (t * 1.3).sin(),
                    cheek: (t * 0.9).cos().abs(),
                }
            })
            .collect();
        r.render(&states[0], &mut out);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for s in &states {
            r.render(s, &mut out);
        }
        let after = ALLOCATIONS.load(Ordering::Relaxed);
        assert_eq!(
            after - before,
            0,
            "render allocated {} times over {} frames (factor {factor})",
            after - before,
            states.len()
        );
    }
}
