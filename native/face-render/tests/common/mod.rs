//! Shared helpers for the tests and examples: the standard face photos and their landmark
//! fixtures, a minimal PNG writer (stored, uncompressed deflate: no image crate needed), and
//! image measurements. Not part of the library.

#![allow(dead_code)]

use std::path::PathBuf;

use face_render::{FaceState, MouthShape, Pose, RgbImage};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Decodes a JPEG into an `RgbImage`.
pub fn load_jpeg(path: &std::path::Path) -> RgbImage {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut dec = jpeg_decoder::Decoder::new(std::io::BufReader::new(file));
    let pixels = dec.decode().expect("decode jpeg");
    let info = dec.info().expect("jpeg info");
    let data = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => pixels,
        jpeg_decoder::PixelFormat::L8 => pixels.iter().flat_map(|&l| [l, l, l]).collect(),
        f => panic!("unsupported jpeg format {f:?}"),
    };
    RgbImage::from_raw(info.width as u32, info.height as u32, data).expect("jpeg size")
}

/// The `landmarks` array of a fixture file (`[[x, y, z], ...]`), parsed without serde.
pub fn parse_landmarks(json: &str) -> Vec<[f32; 3]> {
    let start = json.find("\"landmarks\"").expect("landmarks key");
    let rest = &json[start..];
    let open = rest.find('[').expect("landmarks array");
    let mut depth = 0;
    let mut end = open;
    for (i, ch) in rest[open..].char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    end = open + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let body = &rest[open + 1..end];
    body.split(']')
        .filter_map(|chunk| {
            let nums: Vec<f32> = chunk
                .trim_start_matches([',', ' ', '\n', '\r', '\t', '['])
                .split(',')
                .filter_map(|s| s.trim().trim_start_matches('[').parse::<f32>().ok())
                .collect();
            (nums.len() == 3).then(|| [nums[0], nums[1], nums[2]])
        })
        .collect()
}

pub struct Face {
    pub photo: RgbImage,
    pub landmarks: Vec<[f32; 3]>,
}

/// A picture framed for its output size as the server frames it: the JPEG and its landmarks
/// file, as `npm run render:strip` writes them (`strips/<face>-<WxH>-framed.{jpg,json}`).
pub fn framed_face(photo: &std::path::Path, landmarks: &std::path::Path) -> Face {
    let json = std::fs::read_to_string(landmarks)
        .unwrap_or_else(|e| panic!("{}: {e}", landmarks.display()));
    Face {
        photo: load_jpeg(photo),
        landmarks: parse_landmarks(&json),
    }
}

/// Photo and landmarks of a standard face (`default` or `face1`), or None when the fixture is
/// not there.
pub fn face(name: &str) -> Option<Face> {
    let root = repo_root();
    let json =
        std::fs::read_to_string(root.join(format!("test/fixtures/faces/{name}.landmarks.json")))
            .ok()?;
    let photo = load_jpeg(&root.join(format!("models/assets/faces/{name}.jpg")));
    Some(Face {
        photo,
        landmarks: parse_landmarks(&json),
    })
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// Encodes RGB8 as a PNG with stored (uncompressed) deflate blocks.
pub fn png_bytes(img: &RgbImage) -> Vec<u8> {
    let (w, h) = (img.width as usize, img.height as usize);
    let mut raw = Vec::with_capacity((w * 3 + 1) * h);
    for y in 0..h {
        raw.push(0);
        raw.extend_from_slice(&img.data[y * w * 3..(y + 1) * w * 3]);
    }
    let mut z = vec![0x78, 0x01];
    let mut chunks = raw.chunks(65535).peekable();
    while let Some(c) = chunks.next() {
        z.push(if chunks.peek().is_none() { 1 } else { 0 });
        let n = c.len() as u16;
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(!n).to_le_bytes());
        z.extend_from_slice(c);
    }
    z.extend_from_slice(&adler32(&raw).to_be_bytes());
    let mut out = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    let mut chunk = |kind: &[u8; 4], body: &[u8]| {
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        let mut c = kind.to_vec();
        c.extend_from_slice(body);
        out.extend_from_slice(&c);
        out.extend_from_slice(&crc32(&c).to_be_bytes());
    };
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&(w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(h as u32).to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(b"IHDR", &ihdr);
    chunk(b"IDAT", &z);
    chunk(b"IEND", &[]);
    out
}

pub fn write_png(path: &std::path::Path, img: &RgbImage) {
    std::fs::write(path, png_bytes(img)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Places images side by side (same height) with a `gap`-pixel dark separator.
pub fn hstack(imgs: &[&RgbImage], gap: u32) -> RgbImage {
    let h = imgs.iter().map(|i| i.height).max().unwrap_or(0);
    let w = imgs.iter().map(|i| i.width).sum::<u32>() + gap * (imgs.len().saturating_sub(1) as u32);
    let mut out = RgbImage::new(w, h);
    let mut x0 = 0;
    for img in imgs {
        for y in 0..img.height {
            let src = &img.data[(y * img.width * 3) as usize..((y + 1) * img.width * 3) as usize];
            let d = ((y * w + x0) * 3) as usize;
            out.data[d..d + src.len()].copy_from_slice(src);
        }
        x0 += img.width + gap;
    }
    out
}

/// Crops a rectangle (clamped to the image).
pub fn crop(img: &RgbImage, x: u32, y: u32, w: u32, h: u32) -> RgbImage {
    let (w, h) = (w.min(img.width - x), h.min(img.height - y));
    let mut out = RgbImage::new(w, h);
    for r in 0..h {
        let s = (((y + r) * img.width + x) * 3) as usize;
        out.data[(r * w * 3) as usize..((r + 1) * w * 3) as usize]
            .copy_from_slice(&img.data[s..s + (w * 3) as usize]);
    }
    out
}

/// Nearest-neighbour enlargement (for looking at small crops).
pub fn enlarge(img: &RgbImage, k: u32) -> RgbImage {
    let mut out = RgbImage::new(img.width * k, img.height * k);
    for y in 0..out.height {
        for x in 0..out.width {
            let c = img.pixel(x / k, y / k);
            let i = ((y * out.width + x) * 3) as usize;
            out.data[i..i + 3].copy_from_slice(&c);
        }
    }
    out
}

pub fn luma(c: [u8; 3]) -> f32 {
    0.299 * c[0] as f32 + 0.587 * c[1] as f32 + 0.114 * c[2] as f32
}

/// Mean absolute difference per channel.
pub fn mean_abs_diff(a: &RgbImage, b: &RgbImage) -> f64 {
    assert_eq!((a.width, a.height), (b.width, b.height));
    a.data
        .iter()
        .zip(&b.data)
        .map(|(&x, &y)| (x as f64 - y as f64).abs())
        .sum::<f64>()
        / a.data.len() as f64
}

pub fn psnr(a: &RgbImage, b: &RgbImage) -> f64 {
    let mse = a
        .data
        .iter()
        .zip(&b.data)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum::<f64>()
        / a.data.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-12)).log10()
}

/// A state from `key=value,...` (open, wide, press, tongue, eye, eyel, eyer, brow, cheek, pitch,
/// yaw, roll, tx, ty, scale) or `rest`.
pub fn parse_state(s: &str) -> FaceState {
    let mut st = FaceState::default();
    if s == "rest" {
        return st;
    }
    for kv in s.split(',') {
        let (k, v) = kv.split_once('=').expect("key=value");
        let v: f32 = v.parse().expect("number");
        match k {
            "open" => st.mouth.open = v,
            "wide" => st.mouth.wide = v,
            "press" => st.mouth.press = v,
            "tongue" => st.mouth.tongue = v,
            "eye" => st.eye_open = [v, v],
            "brow" => st.brow = v,
            "cheek" => st.cheek = v,
            "eyel" => st.eye_open[0] = v,
            "eyer" => st.eye_open[1] = v,
            "pitch" => st.pose.pitch_deg = v,
            "yaw" => st.pose.yaw_deg = v,
            "roll" => st.pose.roll_deg = v,
            "tx" => st.pose.tx = v,
            "ty" => st.pose.ty = v,
            "scale" => st.pose.scale = v,
            _ => panic!("unknown key {k}"),
        }
    }
    st
}

/// The state of frame `i` at 25 fps: syllable-rate mouth, a blink every ~3 s, slow head sway,
/// brows lifting now and then and cheeks rising with spread lips (as animation's `expression`).
pub fn speech_state(i: usize) -> FaceState {
    let t = i as f32 / 25.0;
    let open = (0.5 + 0.5 * (t * 2.0 * std::f32::consts::PI * 2.7).sin()).powf(1.5) * 0.9;
    let wide = 0.6 * (t * 1.3).sin();
    let press = if (i / 9).is_multiple_of(5) { 1.0 } else { 0.0 };
    let blink_phase = i % 75;
    let eye = if blink_phase < 6 {
        (blink_phase as f32 - 3.0).abs() / 3.0
    } else {
        1.0
    };
    FaceState {
        pose: Pose {
            pitch_deg: 4.0 * (t * 0.9).sin(),
            yaw_deg: 6.0 * (t * 0.6).sin(),
            roll_deg: 2.0 * (t * 0.4).cos(),
            tx: 0.02 * (t * 0.5).sin(),
            ty: 0.01 * (t * 0.7).cos(),
            scale: 1.0 + 0.01 * (t * 0.3).sin(),
        },
        mouth: MouthShape { open, wide, press, tongue: 0.3 },
        eye_open: [eye, eye],
        brow: 0.5 * (t * 1.7).sin().max(0.0),
        cheek: 0.5 * wide.max(0.0) * open,
    }
}
