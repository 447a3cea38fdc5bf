//! Bilinear upscaling of the warp canvas to the output size (`upsample_factor` > 1).
//!
//! Per output row the two canvas rows it reads are blended once into a packed scratch row,
//! then each output pixel blends two entries of it: one vertical and one horizontal 2-tap
//! blend per pixel, 8-bit weights.
//!
//! Invariants: the same tables and canvas always give the same bytes, so upscaling only the
//! changed rectangle of a frame matches upscaling the whole frame; nothing allocates after
//! `upscale_table`.
//!
//! Not here: deciding what changed (`renderer`).

use crate::raster::Rect;
use crate::sampler::{pack, store};

/// Bilinear upscale tables: for each output coordinate, the canvas index and 8-bit weight.
pub(crate) fn upscale_table(out: usize, canvas: usize) -> Vec<(u32, u32)> {
    (0..out)
        .map(|o| {
            let s = ((o as f64 + 0.5) * canvas as f64 / out as f64 - 0.5)
                .clamp(0.0, (canvas - 1) as f64);
            let i = s.floor() as u32;
            let f = ((s - i as f64) * 256.0).round().min(255.0) as u32;
            (i, f)
        })
        .collect()
}

/// Blends two packed pixels, `f` in 0..=256 toward `b`.
#[inline(always)]
fn lerp2(a: u32, b: u32, f: u32) -> u32 {
    const M: u32 = 0x00FF_00FF;
    let g = 256 - f;
    let rb = ((a & M) * g + (b & M) * f + 0x0080_0080) >> 8 & M;
    let gg = (((a >> 8) & 0xFF) * g + ((b >> 8) & 0xFF) * f + 0x80) >> 8;
    rb | (gg << 8)
}

/// Upscales the canvas into `out` over output rows/columns `r`: per output row, the two canvas
/// rows are blended once into `row_buf` (packed), then each output pixel blends two of those.
#[allow(clippy::too_many_arguments)]
pub(crate) fn upscale(
    canvas: &[u8],
    cw: usize,
    ch: usize,
    up_x: &[(u32, u32)],
    up_y: &[(u32, u32)],
    row_buf: &mut [u32],
    out: &mut [u8],
    ow: usize,
    r: Rect,
) {
    if r.is_empty() {
        return;
    }
    let (x0, x1) = (r.x0 as usize, r.x1 as usize);
    // Canvas columns the output range reads.
    let c0 = up_x[x0].0 as usize;
    let c1 = ((up_x[x1 - 1].0 as usize) + 1).min(cw - 1);
    for y in r.y0 as usize..r.y1 as usize {
        let (j0, fy) = up_y[y];
        let j0 = j0 as usize;
        let j1 = (j0 + 1).min(ch - 1);
        let (ra, rb) = (
            &canvas[j0 * cw * 3..(j0 + 1) * cw * 3],
            &canvas[j1 * cw * 3..(j1 + 1) * cw * 3],
        );
        for c in c0..=c1 {
            let a = pack([ra[c * 3], ra[c * 3 + 1], ra[c * 3 + 2]]);
            let b = pack([rb[c * 3], rb[c * 3 + 1], rb[c * 3 + 2]]);
            row_buf[c] = lerp2(a, b, fy);
        }
        let row = &mut out[y * ow * 3 + x0 * 3..y * ow * 3 + x1 * 3];
        for (px, &(i0, fx)) in row.chunks_exact_mut(3).zip(&up_x[x0..x1]) {
            let i0 = i0 as usize;
            let i1 = (i0 + 1).min(cw - 1);
            store(px, lerp2(row_buf[i0], row_buf[i1], fx));
        }
    }
}
