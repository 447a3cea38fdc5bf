//! The open mouth on the standard faces (the default face smiles with its upper teeth showing;
//! face1 is neutral with closed lips): what a column through the middle of the mouth shows.

mod common;

use std::sync::Arc;

use face_render::{FaceRig, FaceState, MouthShape, Renderer, RgbImage};

/// Classes of the pixels down the middle of the mouth (x at the inner lips' middle, ±2 px),
/// from just above the upper inner lip to just above where the lower lip's inner edge has moved
/// (the jaw's drop and the lip's roll, model.rs: 0.3 × 0.82 × 1.15 of the mouth width at open 1):
/// 't' teeth (bright, little colour), 'd' dark cavity, '-' anything else; one letter per run.
fn middle_runs(name: &str, state: &FaceState) -> String {
    middle_runs_of(common::face(name).expect("standard face fixture"), state)
}

/// The face rendered in `state` at its photo's size.
fn render(f: &common::Face, state: &FaceState) -> RgbImage {
    let rig = Arc::new(FaceRig::new(f.photo.clone(), &f.landmarks).expect("rig"));
    let mut r = Renderer::new(rig, f.photo.width, f.photo.height, 1.0).unwrap();
    let mut img = RgbImage::new(f.photo.width, f.photo.height);
    r.render(state, &mut img);
    img
}

/// The face rendered in `state`, the middle column's x, and its rows (see middle_runs).
fn render_middle(f: &common::Face, state: &FaceState) -> (RgbImage, u32, std::ops::Range<u32>) {
    let img = render(f, state);
    let l = &f.landmarks;
    let w = l[291][0] - l[61][0];
    let x = ((l[13][0] + l[14][0]) * 0.5) as u32;
    let drop = state.mouth.open * 0.3 * 0.82 * 1.15 * w;
    (img, x, (l[13][1] - 4.0) as u32..(l[14][1] + drop - 1.0) as u32)
}

/// A pixel's class in middle_runs: 0 teeth (bright, little colour), 1 dark cavity, 2 anything else.
fn class(c: [u8; 3]) -> usize {
    let (hi, lo) = (*c.iter().max().unwrap() as i32, *c.iter().min().unwrap() as i32);
    if common::luma(c) > 120.0 && hi - lo < 70 {
        0
    } else if common::luma(c) < 60.0 {
        1
    } else {
        2
    }
}

fn middle_runs_of(f: common::Face, state: &FaceState) -> String {
    let (img, x, rows) = render_middle(&f, state);
    let mut s = String::new();
    for y in rows {
        let mut votes = [0; 3];
        for dx in 0..5 {
            votes[class(img.pixel(x + dx - 2, y))] += 1;
        }
        let k = (0..3).max_by_key(|&k| votes[k]).unwrap();
        let ch = ['t', 'd', '-'][k];
        if !s.ends_with(ch) {
            s.push(ch);
        }
    }
    s
}

fn mouth(open: f32, wide: f32) -> FaceState {
    FaceState {
        mouth: MouthShape { open, wide, press: 0.0, tongue: 0.3 },
        ..FaceState::default()
    }
}

#[test]
fn an_open_mouth_shows_both_rows_of_teeth_around_the_cavity() {
    for name in ["default", "face1"] {
        let rest = middle_runs(name, &FaceState::default());
        assert!(!rest.contains("td") && !rest.contains("dt"), "{name} at rest: {rest}");
        for open in [0.4, 0.6] {
            let runs = middle_runs(name, &mouth(open, 0.0));
            let (first_dark, last_dark) = (runs.find('d'), runs.rfind('d'));
            let (Some(a), Some(b)) = (first_dark, last_dark) else {
                panic!("{name} open {open}: no cavity in {runs}");
            };
            assert!(runs[..a].contains('t'), "{name} open {open}: no upper teeth in {runs}");
            assert!(runs[b..].contains('t'), "{name} open {open}: no lower teeth in {runs}");
        }
        // Rounded lips cover the lower row.
        let round = middle_runs(name, &mouth(0.4, -0.9));
        let b = round.rfind('d').unwrap_or(0);
        assert!(!round[b..].contains('t'), "{name} rounded: lower teeth in {round}");
    }
}

/// Rows of the middle column (as middle_runs reads it) between the cavity's first dark row and the
/// lower teeth that show a tongue: a clear red against the cavity's near-black (R at least 95 and
/// two and a half times G).
fn tongue_rows(name: &str, state: &FaceState) -> usize {
    let (img, x, rows) = render_middle(&common::face(name).expect("standard face fixture"), state);
    let column: Vec<[u8; 3]> = rows.map(|y| img.pixel(x, y)).collect();
    let dark = column.iter().position(|&c| class(c) == 1).expect("a cavity");
    let lower = dark + column[dark..].iter().position(|&c| class(c) == 0).expect("lower teeth");
    column[dark..lower].iter().filter(|c| c[0] >= 95 && c[0] as f32 >= 2.5 * c[1] as f32).count()
}

#[test]
fn an_open_vowel_shows_the_tongue_above_the_lower_teeth() {
    // The strip's open vowel: the tongue low, its dome behind the lower row. It was drawn as a
    // dull dark lip colour ((79, 38, 35) on the default face) that read as more cavity.
    let vowel = FaceState {
        mouth: MouthShape { open: 0.8, wide: 0.1, press: 0.0, tongue: 0.1 },
        ..FaceState::default()
    };
    for name in ["default", "face1"] {
        let rows = tongue_rows(name, &vowel);
        assert!(rows >= 2, "{name}: {rows} tongue rows between the cavity and the lower teeth");
    }
}

#[test]
fn parted_lips_without_teeth_in_the_photo_get_synthesised_upper_teeth() {
    // face1 at twice its size: its lips part by a few pixels (the photographed interior is kept)
    // but show no teeth; an open mouth must still show an upper row above the cavity.
    let f = common::face("face1").expect("standard face fixture");
    let big = common::Face {
        photo: common::enlarge(&f.photo, 2),
        landmarks: f.landmarks.iter().map(|p| [p[0] * 2.0, p[1] * 2.0, p[2] * 2.0]).collect(),
    };
    let runs = middle_runs_of(big, &mouth(0.5, 0.0));
    let a = runs.find('d').unwrap_or_else(|| panic!("no cavity in {runs}"));
    assert!(runs[..a].contains('t'), "no upper teeth in {runs}");
}

/// Per column through the middle 70 % of the mouth, with the lips pressed shut: the darkest pixel
/// within 3 rows of the inner lips' rest lines, against that window's median (luma).
fn closed_lips_darkest_over_median(name: &str) -> Vec<f32> {
    let f = common::face(name).expect("standard face fixture");
    let shut = MouthShape { open: 0.0, wide: 0.0, press: 1.0, tongue: 0.3 };
    let img = render(&f, &FaceState { mouth: shut, ..FaceState::default() });
    let l = &f.landmarks;
    let w = l[291][0] - l[61][0];
    let (x0, x1) = ((l[61][0] + 0.15 * w) as u32, (l[291][0] - 0.15 * w) as u32);
    let (y0, y1) = ((l[13][1].min(l[14][1]) - 3.0) as u32, (l[13][1].max(l[14][1]) + 3.0) as u32);
    (x0..=x1)
        .map(|x| {
            let mut column: Vec<f32> = (y0..=y1).map(|y| common::luma(img.pixel(x, y))).collect();
            column.sort_by(f32::total_cmp);
            column[0] / column[column.len() / 2]
        })
        .collect()
}

#[test]
fn lips_pressed_shut_over_photographed_teeth_meet_at_a_seam() {
    // The default face smiles with its teeth showing. Pressed shut, the warped inner edges of its
    // lips met as a jagged pale line (those teeth); they now meet at a darker seam all along.
    let ratios = closed_lips_darkest_over_median("default");
    let worst = ratios.iter().copied().fold(0.0f32, f32::max);
    assert!(worst < 0.8, "a column's darkest pixel is {worst:.2} of its median: {ratios:.2?}");
}
