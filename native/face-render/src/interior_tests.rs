//! Tests of `interior`: a synthesised mouth composited over a lip-coloured target.

use super::*;

const LIP: [u8; 3] = [170, 90, 90];
const W: f32 = 100.0;

fn colours() -> MouthColours {
    MouthColours {
        teeth: [225.0, 215.0, 200.0],
        cavity_edge: [80.0, 30.0, 30.0],
        cavity_deep: [30.0, 10.0, 12.0],
        tongue: [130.0, 60.0, 60.0],
        seam: [102.0, 40.0, 40.0],
    }
}

/// A lens between x 50 and 150 whose middle moves by `up` (upper lip, negative lifts) and
/// `down` (lower lip) from a closed rest line at y 100.
fn contour(k: f32) -> impl Fn(f32) -> Vec<[f32; 2]> {
    move |d: f32| {
        (0..=10)
            .map(|i| {
                let t = i as f32 / 5.0 - 1.0;
                [100.0 + 50.0 * t, 100.0 + k * d * (1.0 - t * t).powf(0.55)]
            })
            .collect()
    }
}

/// Renders a synthesised mouth (a photo with closed lips) over a lip-coloured target and
/// returns the luma down the middle column, rows 90..130.
fn middle_column(up: f32, down: f32, jaw: f32, open: f32, wide: f32, feather: f32) -> Vec<f32> {
    let mut data = vec![0u8; 200 * 200 * 3];
    for px in data.chunks_mut(3) {
        px.copy_from_slice(&LIP);
    }
    let mut t = Target {
        data: &mut data,
        width: 200,
        height: 200,
    };
    let mut cols = Columns::new(200);
    let (upper, lower) = (contour(1.0)(up), contour(1.0)(down));
    let rest = contour(1.0)(0.0);
    let shift: Vec<f32> = upper.iter().map(|p| p[1] - 100.0).collect();
    let look = MouthLook {
        x_left: 50.0,
        x_right: 150.0,
        mouth_width: W,
        open,
        wide,
        tongue: 0.3,
        jaw,
        upper_teeth: true,
    };
    let c = colours();
    composite(
        &mut t,
        &mut cols,
        &upper,
        &lower,
        &shift,
        Edges {
            rest: Some((&rest, &rest)),
            subtract_rest: true,
            feather,
            grow_lower: 0.0,
            seam: 0.0,
        },
        |p| mouth_interior(&p, &look, &c),
    );
    (90..130)
        .map(|y| {
            let o = (y * 200 + 100) * 3;
            0.299 * data[o] as f32 + 0.587 * data[o + 1] as f32 + 0.114 * data[o + 2] as f32
        })
        .collect()
}

/// Runs of a column: 'l' lip, 't' teeth (bright), 'd' dark, '.' anything else (edges, tongue).
fn runs(col: &[f32]) -> String {
    let lip = 0.299 * LIP[0] as f32 + 0.587 * LIP[1] as f32 + 0.114 * LIP[2] as f32;
    let mut s = String::new();
    for &v in col {
        let c = if (v - lip).abs() < 1e-3 {
            'l'
        } else if v > 130.0 {
            't'
        } else if v < 45.0 {
            'd'
        } else {
            '.'
        };
        if !s.ends_with(c) {
            s.push(c);
        }
    }
    s.replace('.', "")
}

/// Open 0.3 on a 100 px mouth: the jaw drops 7.4 px, the upper lip lifts 1.6 px, the lower
/// lip's inner edge drops 15 % more than the jaw (model.rs).
const OPEN: f32 = 0.3;
const JAW: f32 = 7.4;

#[test]
fn an_open_mouth_shows_lip_teeth_cavity_teeth_lip() {
    let col = middle_column(-1.6, JAW * 1.15, JAW, OPEN, 0.0, 2.0);
    assert_eq!(runs(&col), "ltdtl", "{:?}", col);
    // A barely parted mouth shows no lower row yet; rounded lips cover it too.
    let small = middle_column(-0.3, 1.2, 1.0, 0.05, 0.0, 2.0);
    assert!(!runs(&small).contains("dt"), "{}", runs(&small));
    let round = middle_column(-1.6, JAW * 1.15, JAW, OPEN, -1.0, 2.0);
    assert!(!runs(&round).contains("dt"), "{}", runs(&round));
}

/// First and last row (from 90) of the upper teeth, and first of the lower.
fn rows(col: &[f32]) -> (usize, usize, usize) {
    let bright: Vec<usize> = (0..col.len()).filter(|&i| col[i] > 130.0).collect();
    let dark = (0..col.len()).find(|&i| col[i] < 45.0).expect("a dark cavity");
    let upper_last = *bright.iter().filter(|&&i| i < dark).max().expect("upper teeth");
    let lower_first = *bright.iter().find(|&&i| i > dark).expect("lower teeth");
    (bright[0], upper_last, lower_first)
}

#[test]
fn the_lower_row_moves_with_the_jaw_and_the_upper_does_not() {
    let a = rows(&middle_column(-1.6, JAW * 1.15, JAW, OPEN, 0.0, 2.0));
    let b = rows(&middle_column(-1.6, JAW * 1.15 + 5.0, JAW + 5.0, OPEN, 0.0, 2.0));
    assert_eq!((a.0, a.1), (b.0, b.1), "upper row moved: {a:?} -> {b:?}");
    // (Rows are whole pixels: the anti-aliased tip edge crosses the threshold within one.)
    assert!((b.2 as i32 - a.2 as i32 - 5).abs() <= 1, "lower row: {a:?} -> {b:?}");
    // However far the jaw rises, the lower row stays under the upper one.
    for jaw in [0.0, 1.0, 2.0, 3.0, 4.0] {
        let col = middle_column(-1.6, JAW * 1.15, jaw, OPEN, 0.0, 2.0);
        assert!(runs(&col).starts_with("lt"), "{}", runs(&col));
    }
}

#[test]
fn feathered_edges_are_soft_and_keep_the_opening() {
    let step = |col: &[f32]| col.windows(2).map(|w| (w[1] - w[0]).abs()).fold(0.0, f32::max);
    // Lower lip edge (y 114): the largest step between neighbouring rows around it.
    let lower = |col: &[f32]| step(&col[19..30]);
    let hard = middle_column(-1.6, 14.0, 30.0, 0.5, 0.0, 0.0);
    let soft = middle_column(-1.6, 14.0, 30.0, 0.5, 0.0, 2.0);
    assert!(lower(&hard) > 60.0, "the known-hard edge measures hard: {}", lower(&hard));
    assert!(lower(&soft) < 0.7 * lower(&hard), "{} vs {}", lower(&soft), lower(&hard));
    // Feathering spreads the opening's coverage; it does not add or remove any.
    for (a, b) in [(10.2f32, 14.7f32), (10.2, 10.9), (3.0, 30.0)] {
        let total = |f: f32| (-20..60).map(|y| coverage(a, b, y as f32, y as f32 + 1.0, f)).sum::<f32>();
        assert!((total(0.0) - (b - a)).abs() < 1e-4 && (total(3.0) - (b - a)).abs() < 1e-4, "{a}..{b}");
    }
}
