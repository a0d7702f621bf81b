//! How the next token is picked, and where: the one rule the four pickers share.
//!
//! - the host sampler (`sampler::Sampler`) picks from a row of logits on the CPU;
//! - the GPU sampler (`solo_cuda::ops::sample`) picks on the device, so the logits never leave it;
//! - the lm_head's top-k rescore (`solo_cuda::ops::lm_head`) hands the GPU sampler, instead of the
//!   full logits, a row holding the exact top-`top_k` logits and −∞ elsewhere (or, greedy, the
//!   argmax);
//! - the server (`solo_server`) decides per request whether the backend may pick
//!   (`Backend::decode_and_pick`) or the host must.
//!
//! The rule:
//! 1. A request is *plain* when only temperature, top-k and top-p shape the draw: no min-p, no
//!    presence or frequency penalty, no logit bias, no logprobs and no forced tokens
//!    ([`is_plain`]). Anything else needs the full logits on the host.
//! 2. A plain request is picked on the device when it is greedy (temperature ≤ 0) or its top-k is
//!    in 1..=[`DEVICE_MAX_TOP_K`] ([`device_can_pick`]); top-k 0 ("no cut") or above the limit is
//!    picked on the host.
//! 3. Both sides pick the same token from the same logits: greedy is the argmax, ties to the lower
//!    id; otherwise the `top_k` largest logits in order (ties to the lower id), softmax at the
//!    temperature, the smallest prefix whose mass reaches `top_p` (at least one token), and one
//!    uniform draw number n of the seed's SplitMix64 stream (`SplitMix(seed)`'s (n+1)-th
//!    `next_f32`) walks that prefix. So a seeded reply is the same whichever side drew each token.

use crate::sampler::SamplerConfig;

/// The most candidates the device keeps: a device pick needs `top_k` in 1..=DEVICE_MAX_TOP_K.
pub const DEVICE_MAX_TOP_K: usize = 64;

/// What a request asks for beyond temperature, top-k and top-p (rule 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct Extras {
    pub min_p: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub logit_bias: bool,
    pub logprobs: bool,
    pub forced_tokens: bool,
}

/// Rule 1: only temperature, top-k and top-p shape the draw.
pub fn is_plain(x: &Extras) -> bool {
    x.min_p <= 0.0
        && x.presence_penalty == 0.0
        && x.frequency_penalty == 0.0
        && !x.logit_bias
        && !x.logprobs
        && !x.forced_tokens
}

/// Rule 2: whether the device can pick with `cfg`, or why not.
pub fn device_can_pick(cfg: &SamplerConfig) -> Result<(), String> {
    if cfg.temperature.is_nan() {
        return Err("sampling temperature is NaN".into());
    }
    if cfg.temperature <= 0.0 {
        return Ok(()); // greedy: top_k and top_p are ignored, as on the host
    }
    if cfg.top_k == 0 {
        return Err(format!(
            "GPU sampling needs top_k in 1..={DEVICE_MAX_TOP_K}: top_k 0 (no cut) is only supported by the CPU sampler"
        ));
    }
    if cfg.top_k > DEVICE_MAX_TOP_K {
        return Err(format!("GPU sampling supports top_k up to {DEVICE_MAX_TOP_K}, got {}", cfg.top_k));
    }
    if cfg.top_p.is_nan() {
        return Err("sampling top_p is NaN".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(temperature: f32, top_k: usize, top_p: f32) -> SamplerConfig {
        SamplerConfig { temperature, top_k, top_p, seed: 1 }
    }

    #[test]
    fn device_picks_greedy_and_top_k_up_to_the_limit() {
        assert!(device_can_pick(&cfg(0.0, 0, 1.0)).is_ok(), "greedy ignores top_k");
        assert!(device_can_pick(&cfg(-1.0, 1000, f32::NAN)).is_ok(), "greedy ignores top_k and top_p");
        assert!(device_can_pick(&cfg(1.0, 1, 0.95)).is_ok());
        assert!(device_can_pick(&cfg(1.0, DEVICE_MAX_TOP_K, 0.95)).is_ok());
        assert!(device_can_pick(&cfg(1.0, 0, 0.95)).unwrap_err().contains("top_k 0"));
        assert!(device_can_pick(&cfg(1.0, DEVICE_MAX_TOP_K + 1, 0.95)).unwrap_err().contains("up to 64"));
        assert!(device_can_pick(&cfg(f32::NAN, 20, 0.95)).is_err());
        assert!(device_can_pick(&cfg(1.0, 20, f32::NAN)).is_err());
    }

    #[test]
    fn any_extra_makes_a_request_not_plain() {
        assert!(is_plain(&Extras::default()));
        let extras = [
            Extras { min_p: 0.1, ..Default::default() },
            Extras { presence_penalty: 0.5, ..Default::default() },
            Extras { frequency_penalty: -0.5, ..Default::default() },
            Extras { logit_bias: true, ..Default::default() },
            Extras { logprobs: true, ..Default::default() },
            Extras { forced_tokens: true, ..Default::default() },
        ];
        for x in extras {
            assert!(!is_plain(&x), "{x:?}");
        }
    }
}
