//! From image file bytes to the tower's input, as transformers' `Qwen2VLImageProcessor` (PIL
//! backend) does it:
//!
//! ```text
//! RGB pixels            decoded by the `image` crate (PNG, JPEG, WebP, GIF's first frame), alpha dropped
//! (h, w) → (h', w')     smart_resize: multiples of patch × merge, h'·w' within [min_pixels, max_pixels]
//! bicubic resize        PIL's own algorithm in 8 bits (fixed-point taps, two passes), bit for bit
//! x = v · rescale       in f64, then f32; then (x − mean) / std per channel in f32
//! patches               [grid_h·grid_w, C·T·p·p] in merge-block order (the 2×2 patches of one
//!                       merged token adjacent), each frame of a still image the same (T = 2)
//! ```

use crate::vision::PreprocessorConfig;
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// Decoded pixels, row-major RGB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgb8 {
    pub width: usize,
    pub height: usize,
    /// [height, width, 3]
    pub data: Vec<u8>,
}

/// What the tower takes for one image.
#[derive(Clone, Debug)]
pub struct ImagePatches {
    /// Patches along time (1 for a still image), height and width.
    pub grid: [usize; 3],
    /// [grid_t·grid_h·grid_w, patch_len], merge-block order.
    pub values: Vec<f32>,
    /// SHA-256 of the decoded pixels and their size: the image's identity for the prefix cache.
    pub hash: [u8; 32],
}

impl ImagePatches {
    /// Merged tokens the image takes in the prompt: t · (h / merge) · (w / merge).
    pub fn tokens(&self, merge: usize) -> usize {
        self.grid[0] * (self.grid[1] / merge) * (self.grid[2] / merge)
    }
}

/// Limits on what `decode` accepts.
#[derive(Clone, Copy, Debug)]
pub struct DecodeLimits {
    /// Most pixels (width × height) of the stored image.
    pub max_pixels: u64,
}

/// Decodes a PNG, JPEG, WebP or GIF (its first frame) into RGB; any alpha is dropped, as PIL's
/// `convert("RGB")` does. Errors are one line saying what is wrong with the bytes.
pub fn decode(bytes: &[u8], limits: DecodeLimits) -> Result<Rgb8> {
    let reader =
        image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().context("cannot read the image")?;
    let Some(format) = reader.format() else {
        bail!("not a PNG, JPEG, WebP or GIF image");
    };
    if !matches!(
        format,
        image::ImageFormat::Png | image::ImageFormat::Jpeg | image::ImageFormat::WebP | image::ImageFormat::Gif
    ) {
        bail!("{format:?} images are not accepted (PNG, JPEG, WebP or GIF)");
    }
    let (w, h) = reader.into_dimensions().map_err(|e| anyhow::anyhow!("not a valid {format:?} image ({e})"))?;
    if w as u64 * h as u64 > limits.max_pixels {
        bail!("the image is {w}×{h}, over the limit of {} pixels", limits.max_pixels);
    }
    let reader = image::ImageReader::with_format(std::io::Cursor::new(bytes), format);
    let img = reader.decode().map_err(|e| anyhow::anyhow!("not a valid {format:?} image ({e})"))?;
    let rgb = img.to_rgb8();
    Ok(Rgb8 { width: rgb.width() as usize, height: rgb.height() as usize, data: rgb.into_raw() })
}

/// transformers' `smart_resize`: the size nearest (h, w) whose sides are multiples of `factor`,
/// scaled to keep h·w within [min_pixels, max_pixels].
pub fn smart_resize(
    height: usize,
    width: usize,
    factor: usize,
    min_pixels: usize,
    max_pixels: usize,
) -> Result<(usize, usize)> {
    if height == 0 || width == 0 {
        bail!("the image is empty ({width}×{height})");
    }
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    if h.max(w) / h.min(w) > 200.0 {
        bail!("the image is {width}×{height}: its aspect ratio is over 200");
    }
    // Python's round() rounds half to even.
    let mut h_bar = (h / f).round_ties_even() * f;
    let mut w_bar = (w / f).round_ties_even() * f;
    if h_bar * w_bar > max_pixels as f64 {
        let beta = (h * w / max_pixels as f64).sqrt();
        h_bar = f.max((h / beta / f).floor() * f);
        w_bar = f.max((w / beta / f).floor() * f);
    } else if h_bar * w_bar < min_pixels as f64 {
        let beta = (min_pixels as f64 / (h * w)).sqrt();
        h_bar = (h * beta / f).ceil() * f;
        w_bar = (w * beta / f).ceil() * f;
    }
    Ok((h_bar as usize, w_bar as usize))
}

/// Resizes as PIL's `Image.resize(size, BICUBIC)` does for an RGB image, bit for bit
/// (Pillow's `Resample.c`: taps from the bicubic kernel with a = −0.5, widened by the scale when
/// shrinking, normalised and rounded to 22-bit fixed point; a horizontal pass to 8 bits, then a
/// vertical one).
pub fn resize_bicubic(img: &Rgb8, width: usize, height: usize) -> Rgb8 {
    let mut out = img.clone();
    if width != img.width {
        let (bounds, taps, k) = resample_taps(img.width, width);
        let mut data = vec![0u8; width * img.height * 3];
        for y in 0..img.height {
            let row = &img.data[y * img.width * 3..][..img.width * 3];
            for x in 0..width {
                let (min, len) = bounds[x];
                for c in 0..3 {
                    let mut acc: i32 = 1 << (PRECISION_BITS - 1);
                    for i in 0..len {
                        acc = acc.wrapping_add(row[(min + i) * 3 + c] as i32 * taps[x * k + i]);
                    }
                    data[(y * width + x) * 3 + c] = clip8(acc);
                }
            }
        }
        out = Rgb8 { width, height: img.height, data };
    }
    if height != img.height {
        let (bounds, taps, k) = resample_taps(img.height, height);
        let src = out;
        let mut data = vec![0u8; src.width * height * 3];
        for y in 0..height {
            let (min, len) = bounds[y];
            for x in 0..src.width * 3 {
                let mut acc: i32 = 1 << (PRECISION_BITS - 1);
                for i in 0..len {
                    acc = acc.wrapping_add(src.data[(min + i) * src.width * 3 + x] as i32 * taps[y * k + i]);
                }
                data[y * src.width * 3 + x] = clip8(acc);
            }
        }
        out = Rgb8 { width: src.width, height, data };
    }
    out
}

/// Pillow's fixed-point precision for 8-bit images: 32 − 8 − 2.
const PRECISION_BITS: u32 = 22;

fn clip8(acc: i32) -> u8 {
    if acc >= (1 << PRECISION_BITS << 8) {
        255
    } else if acc <= 0 {
        0
    } else {
        (acc >> PRECISION_BITS) as u8
    }
}

/// Pillow's bicubic kernel (a = −0.5), support 2.
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Pillow's `precompute_coeffs` then `normalize_coeffs_8bpc`: per output pixel, the first input
/// pixel and the tap count, and the taps in fixed point ([out, k], k taps a row).
fn resample_taps(in_size: usize, out_size: usize) -> (Vec<(usize, usize)>, Vec<i32>, usize) {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    let k = support.ceil() as usize * 2 + 1;
    let mut bounds = Vec::with_capacity(out_size);
    let mut taps = vec![0i32; out_size * k];
    let mut w = vec![0.0f64; k];
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C's (int) cast truncates toward zero.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize - xmin;
        let mut ww = 0.0;
        for (x, wx) in w.iter_mut().enumerate().take(xmax) {
            *wx = bicubic((x as f64 + xmin as f64 - center + 0.5) * ss);
            ww += *wx;
        }
        for (x, wx) in w.iter().enumerate().take(xmax) {
            let v = if ww != 0.0 { wx / ww } else { *wx };
            let fixed = v * (1u32 << PRECISION_BITS) as f64;
            taps[xx * k + x] = if v < 0.0 { (fixed - 0.5) as i32 } else { (fixed + 0.5) as i32 };
        }
        bounds.push((xmin, xmax));
    }
    (bounds, taps, k)
}

/// The whole processor: resize, rescale, normalise, patchify. Fails (one line) for an image
/// that has no valid size.
pub fn preprocess(img: &Rgb8, cfg: &PreprocessorConfig) -> Result<ImagePatches> {
    let (p, m, t) = (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size);
    let (h, w) = if cfg.do_resize {
        smart_resize(img.height, img.width, cfg.factor(), cfg.min_pixels, cfg.max_pixels)?
    } else {
        (img.height, img.width)
    };
    if h % cfg.factor() != 0 || w % cfg.factor() != 0 || h == 0 || w == 0 {
        bail!("the image is {}×{}, not a multiple of {} on each side", img.width, img.height, cfg.factor());
    }
    let resized = if (h, w) == (img.height, img.width) { img.clone() } else { resize_bicubic(img, w, h) };
    // [C, H, W] floats.
    let mut planes = vec![0.0f32; 3 * h * w];
    for (i, px) in resized.data.chunks(3).enumerate() {
        for c in 0..3 {
            let mut x = px[c] as f32;
            if cfg.do_rescale {
                x = (px[c] as f64 * cfg.rescale_factor) as f32;
            }
            if cfg.do_normalize {
                x = (x - cfg.image_mean[c]) / cfg.image_std[c];
            }
            planes[c * h * w + i] = x;
        }
    }
    let (gh, gw) = (h / p, w / p);
    let patch_len = 3 * t * p * p;
    let mut values = Vec::with_capacity(gh * gw * patch_len);
    for bh in 0..gh / m {
        for bw in 0..gw / m {
            for ih in 0..m {
                for iw in 0..m {
                    let (y0, x0) = ((bh * m + ih) * p, (bw * m + iw) * p);
                    for c in 0..3 {
                        for _frame in 0..t {
                            for py in 0..p {
                                let row = &planes[c * h * w + (y0 + py) * w + x0..][..p];
                                values.extend_from_slice(row);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(ImagePatches { grid: [1, gh, gw], values, hash: pixel_hash(img) })
}

/// SHA-256 of the size and the RGB bytes.
pub fn pixel_hash(img: &Rgb8) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((img.width as u64).to_le_bytes());
    h.update((img.height as u64).to_le_bytes());
    h.update(&img.data);
    h.finalize().into()
}
