//! Images in chat requests: OpenAI's content parts
//! `{"type": "image_url", "image_url": {"url": "data:image/png;base64,…"}}`.
//!
//! Only `data:` URLs are read: solo fetches nothing, so an `http(s)://` URL is a 400 that says
//! so. Each image is checked against the limits (encoded bytes, stored pixels, images per
//! request), decoded (PNG, JPEG, WebP, GIF's first frame) and preprocessed here, on the
//! request's thread; every failure is a 400 naming the part (`messages[1].content[0]`). The
//! vision tower runs on the engine (`generate`).
//!
//! In the prompt an image is `<|vision_start|><|image_pad|><|vision_end|>` (the chat template
//! writes it for a part of type `image`), and its one `<|image_pad|>` becomes as many as the
//! image has merged tokens. For the prefix cache those placeholders carry the image's content
//! hash instead (`cache_keys`): a conversation that repeats an image resumes from the cache, and
//! another image at the same place does not.

use crate::error::ApiError;
use base64::Engine as _;
use serde_json::{json, Value};
use solo_model::image::{self, DecodeLimits, ImagePatches};
use solo_model::vision::PreprocessorConfig;
use std::sync::Arc;

/// What the server accepts.
#[derive(Clone, Copy, Debug)]
pub struct ImageLimits {
    /// Bytes of one image file (after base64).
    pub max_bytes: usize,
    /// Pixels of one stored image (width × height), before resizing.
    pub max_pixels: u64,
    /// Images in one request.
    pub max_images: usize,
}

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits { max_bytes: 20 << 20, max_pixels: 50_000_000, max_images: 8 }
    }
}

/// How this server turns images into prompt tokens; `None` in `App::vision` when the model or
/// the backend takes no images (with the reason).
pub struct Vision {
    pub preprocessor: PreprocessorConfig,
    pub merge: usize,
    pub image_token: u32,
    pub limits: ImageLimits,
}

/// One image of a prompt: where its placeholders start and its patches.
#[derive(Clone, Debug)]
pub struct PromptImagePatches {
    pub start: usize,
    /// Merged tokens along time, height and width.
    pub grid: [usize; 3],
    pub patches: Arc<ImagePatches>,
}

impl PromptImagePatches {
    pub fn tokens(&self) -> usize {
        self.grid.iter().product()
    }
}

/// Whether any message has an image part (for the privacy gate: such a request stays local).
pub fn count_images(messages: Option<&Value>) -> usize {
    let Some(Value::Array(list)) = messages else { return 0 };
    list.iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|p| is_image_part(p))
        .count()
}

fn is_image_part(part: &Value) -> bool {
    matches!(part.get("type").and_then(Value::as_str), Some("image_url" | "image")) || part.get("image_url").is_some()
}

/// Replaces every image part of `messages` by `{"type": "image"}` (what the template renders) and
/// returns the images, decoded and preprocessed, in order. `vision`: the server's image support,
/// or why it has none.
pub fn take_images(messages: &mut [Value], vision: Result<&Vision, &str>) -> Result<Vec<ImagePatches>, ApiError> {
    let mut out = Vec::new();
    for (i, m) in messages.iter_mut().enumerate() {
        let Some(parts) = m.get_mut("content").and_then(Value::as_array_mut) else { continue };
        for (j, part) in parts.iter_mut().enumerate() {
            if !is_image_part(part) {
                continue;
            }
            let name = format!("messages[{i}].content[{j}]");
            let bad = |msg: String| ApiError::invalid_param("messages", format!("{name}: {msg}"));
            let vision = match vision {
                Ok(v) => v,
                Err(why) => return Err(bad(format!("this server does not take images: {why}."))),
            };
            if out.len() == vision.limits.max_images {
                return Err(bad(format!("more than {} images in one request.", vision.limits.max_images)));
            }
            let url = match part.get("image_url") {
                Some(Value::String(s)) => s.as_str(),
                Some(v) => v.get("url").and_then(Value::as_str).unwrap_or(""),
                None => "",
            };
            let bytes = data_url_bytes(url, vision.limits.max_bytes).map_err(bad)?;
            let limits = DecodeLimits { max_pixels: vision.limits.max_pixels };
            let rgb = image::decode(&bytes, limits).map_err(|e| bad(format!("{e:#}.")))?;
            let patches = image::preprocess(&rgb, &vision.preprocessor).map_err(|e| bad(format!("{e:#}.")))?;
            out.push(patches);
            *part = json!({"type": "image"});
        }
    }
    Ok(out)
}

/// The bytes of a `data:[<type>][;base64],<data>` URL; anything else is refused with the reason.
fn data_url_bytes(url: &str, max_bytes: usize) -> Result<Vec<u8>, String> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https:/") {
        return Err("image URLs are not fetched (solo fetches nothing); send the image inline as a data: URL \
                    (data:image/png;base64,…)."
            .into());
    }
    let Some(rest) = url.strip_prefix("data:") else {
        return Err("`image_url.url` must be a data: URL (data:image/png;base64,…).".into());
    };
    let Some((meta, data)) = rest.split_once(',') else {
        return Err("the data: URL has no comma before its data.".into());
    };
    if !meta.ends_with(";base64") {
        return Err("the data: URL is not base64 (data:image/png;base64,…).".into());
    }
    // 4 base64 characters carry 3 bytes.
    if data.len() / 4 * 3 > max_bytes + 3 {
        return Err(format!("the image is over the limit of {max_bytes} bytes."));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("the data: URL is not valid base64 ({e})."))?;
    if bytes.len() > max_bytes {
        return Err(format!("the image is over the limit of {max_bytes} bytes."));
    }
    Ok(bytes)
}

/// Expands each image's one `<|image_pad|>` in `tokens` to its merged token count; returns where
/// each image starts, and moves `points` (token counts of the unexpanded prompt) along.
pub fn expand_placeholders(
    tokens: &mut Vec<u32>,
    points: &mut [usize],
    images: Vec<ImagePatches>,
    vision: &Vision,
) -> Result<Vec<PromptImagePatches>, ApiError> {
    let pads: Vec<usize> =
        tokens.iter().enumerate().filter(|(_, &t)| t == vision.image_token).map(|(i, _)| i).collect();
    if pads.len() != images.len() {
        return Err(ApiError::invalid_param(
            "messages",
            format!(
                "the prompt has {} image placeholders (<|image_pad|>) for {} images: the text may not contain <|image_pad|>.",
                pads.len(),
                images.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(images.len());
    let mut expanded = Vec::with_capacity(tokens.len());
    let mut last = 0;
    for (&pad, patches) in pads.iter().zip(images) {
        let m = vision.merge;
        let grid = [patches.grid[0], patches.grid[1] / m, patches.grid[2] / m];
        let n: usize = grid.iter().product();
        expanded.extend_from_slice(&tokens[last..pad]);
        let start = expanded.len();
        expanded.extend(std::iter::repeat_n(vision.image_token, n));
        for p in points.iter_mut().filter(|p| **p > pad) {
            *p += n - 1;
        }
        out.push(PromptImagePatches { start, grid, patches: Arc::new(patches) });
        last = pad + 1;
    }
    expanded.extend_from_slice(&tokens[last..]);
    *tokens = expanded;
    Ok(out)
}

/// The ids the prefix cache keys a prompt by: the prompt, each image's placeholders replaced by
/// ids above every vocabulary (top bit set) drawn from its content hash (256 bits spread over its
/// tokens), so that equal images give equal keys and others differ.
pub fn cache_keys(tokens: &[u32], images: &[PromptImagePatches]) -> Vec<u32> {
    let mut keys = tokens.to_vec();
    for img in images {
        let h = &img.patches.hash;
        for j in 0..img.tokens() {
            let w = (j % 8) * 4;
            let word = u32::from_le_bytes([h[w], h[w + 1], h[w + 2], h[w + 3]]);
            keys[img.start + j] = 0x8000_0000 | (word ^ (j as u32).wrapping_mul(0x9E37_79B9)) & 0x7FFF_FFFF;
        }
    }
    keys
}

/// The tokens the backend sees for `keys[range]`: image keys back to the placeholder.
pub fn backend_tokens(keys: &[u32], image_token: u32) -> Vec<u32> {
    keys.iter().map(|&k| if k & 0x8000_0000 != 0 { image_token } else { k }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_only() {
        assert!(data_url_bytes("https://example.com/a.png", 100).unwrap_err().contains("fetches nothing"));
        assert!(data_url_bytes("HTTP://example.com/a.png", 100).unwrap_err().contains("fetches nothing"));
        assert!(data_url_bytes("file:///etc/passwd", 100).unwrap_err().contains("must be a data: URL"));
        assert!(data_url_bytes("data:image/png,abc", 100).unwrap_err().contains("not base64"));
        assert!(data_url_bytes("data:image/png;base64,!!!", 100).unwrap_err().contains("not valid base64"));
        assert_eq!(data_url_bytes("data:image/png;base64,aGVsbG8=", 100).unwrap(), b"hello");
        assert!(data_url_bytes("data:image/png;base64,aGVsbG8=", 4).unwrap_err().contains("limit of 4 bytes"));
    }

    #[test]
    fn cache_keys_follow_content() {
        let patches = |byte: u8| Arc::new(ImagePatches { grid: [1, 4, 4], values: Vec::new(), hash: [byte; 32] });
        let img = |byte| PromptImagePatches { start: 1, grid: [1, 2, 2], patches: patches(byte) };
        let tokens = [7, 392, 392, 392, 392, 8];
        let (a, b, c) =
            (cache_keys(&tokens, &[img(1)]), cache_keys(&tokens, &[img(1)]), cache_keys(&tokens, &[img(2)]));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!((a[0], a[5]), (7, 8));
        assert!(a[1..5].iter().all(|k| k & 0x8000_0000 != 0));
        assert_eq!(backend_tokens(&a, 392), tokens);
    }
}
