//! Speculative decoding with the MTP head: draft k tokens, verify them in one step of the main
//! model, keep the longest run the target agrees with, plus one token of its own.
//!
//! One round, with `next` the token just picked (not yet in the state):
//!
//! ```text
//! d_1..d_k        = draft(state, next)               the MTP head, chained
//! rows_0..rows_k  = verify(state, [next, d_1..d_k])  row i: the target's logits after token i
//! greedy:   accept d_i while d_i = argmax(rows_{i-1}); the bonus is argmax(rows_a)
//! sampling: accept d_i with probability min(1, p_i(d_i) / q_i(d_i)), where p_i is the target's
//!           distribution after rows_{i-1} and q_i the head's, both with the sampler's
//!           temperature / top-k / top-p; at the first rejection draw the bonus from
//!           norm(max(0, p_i − q_i)); when all k are accepted, draw it from p_{k+1}
//! keep_verified(state, a + 1)                        next, d_1..d_a stay; the bonus is the new `next`
//! ```
//!
//! The sampled rule emits each token with exactly the target's distribution (Leviathan et al.,
//! 2023), so a reply is distributed as plain sampling's; greedy emits the plain greedy tokens.
//! Speculation needs only temperature, top-k and top-p to shape the draw: penalties, logit bias,
//! min-p and forced tokens change the target row per emitted token, so such requests decode
//! plainly (`crate::sampling::is_plain`, logprobs aside: they are read off the target's rows).

use crate::backend::{Backend, Draft};
use crate::sampler::Sampler;
use anyhow::{ensure, Result};

/// Most drafts per round a caller may ask for (a verify step takes drafts + 1 tokens).
pub const MAX_DRAFTS: usize = 15;

/// What one round emits.
#[derive(Clone, Debug)]
pub struct Round {
    /// The accepted drafts, then the bonus token (which is not yet in the state).
    pub tokens: Vec<u32>,
    /// [tokens, vocab]: the target's logits each token was drawn from (for logprobs).
    pub logits: Vec<f32>,
    /// Drafts proposed and accepted.
    pub drafted: usize,
    pub accepted: usize,
}

/// Counts over many rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Acceptance {
    pub rounds: usize,
    pub drafted: usize,
    pub accepted: usize,
}

impl Acceptance {
    pub fn add(&mut self, round: &Round) {
        self.rounds += 1;
        self.drafted += round.drafted;
        self.accepted += round.accepted;
    }

    /// Tokens emitted per verify step: accepted drafts plus the bonus, averaged.
    pub fn mean_accepted_length(&self) -> f64 {
        if self.rounds == 0 {
            return 0.0;
        }
        (self.accepted + self.rounds) as f64 / self.rounds as f64
    }

    /// Share of drafts accepted.
    pub fn rate(&self) -> f64 {
        if self.drafted == 0 {
            return 0.0;
        }
        self.accepted as f64 / self.drafted as f64
    }
}

/// One round after `next` with `k` drafts (k ≥ 1).
pub fn round<B: Backend>(
    backend: &B,
    state: &mut B::State,
    next: u32,
    k: usize,
    sampler: &mut Sampler,
) -> Result<Round> {
    ensure!(k >= 1, "a speculative round needs at least one draft");
    let vocab = backend.config().vocab_size;
    let draft = backend.draft(state, next, k, sampler)?;
    ensure!(draft.tokens.len() == k, "the draft head proposed {} tokens, {k} were asked for", draft.tokens.len());
    let mut tokens = Vec::with_capacity(k + 1);
    tokens.push(next);
    tokens.extend(&draft.tokens);
    let rows = backend.verify(state, &tokens)?;
    ensure!(rows.len() == (k + 1) * vocab, "verify returned {} logits for {} tokens", rows.len(), k + 1);
    let (accepted, bonus) = accept(&rows, &draft, vocab, sampler);
    backend.keep_verified(state, accepted + 1)?;
    let mut emitted = draft.tokens[..accepted].to_vec();
    emitted.push(bonus);
    Ok(Round { tokens: emitted, logits: rows[..(accepted + 1) * vocab].to_vec(), drafted: k, accepted })
}

/// The acceptance rule above: how many drafts are accepted, and the bonus token.
/// `rows` [k+1, vocab] are the target's logits, `draft.logits` [k, vocab] the head's (only read
/// when sampling).
pub fn accept(rows: &[f32], draft: &Draft, vocab: usize, sampler: &mut Sampler) -> (usize, u32) {
    let row = |i: usize| &rows[i * vocab..(i + 1) * vocab];
    let greedy = sampler.config().temperature <= 0.0;
    for (i, &d) in draft.tokens.iter().enumerate() {
        if greedy {
            let best = crate::sampler::argmax(row(i));
            if best != d {
                return (i, best);
            }
            continue;
        }
        let p = dense(&sampler.distribution(row(i)), vocab);
        let q = dense(&sampler.distribution(&draft.logits[i * vocab..(i + 1) * vocab]), vocab);
        let (pd, qd) = (p[d as usize], q[d as usize]);
        // q(d) > 0: d was drawn from q. Accept with probability min(1, p(d) / q(d)).
        if sampler.uniform() * qd < pd {
            continue;
        }
        let residual: Vec<f32> = p.iter().zip(&q).map(|(p, q)| (p - q).max(0.0)).collect();
        return (i, draw(&residual, sampler));
    }
    let k = draft.tokens.len();
    let bonus = if greedy { crate::sampler::argmax(row(k)) } else { sampler.sample(row(k)) };
    (k, bonus)
}

/// A sparse distribution as a dense row of `vocab` probabilities.
fn dense(dist: &[(u32, f32)], vocab: usize) -> Vec<f32> {
    let mut out = vec![0.0; vocab];
    for &(token, p) in dist {
        out[token as usize] = p;
    }
    out
}

/// One draw from unnormalised weights (never all zero: a rejection means p ≠ q somewhere).
fn draw(weights: &[f32], sampler: &mut Sampler) -> u32 {
    let total: f32 = weights.iter().sum();
    let r = sampler.uniform() * total;
    let mut acc = 0.0;
    let mut last = 0;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            acc += w;
            last = i;
            if r < acc {
                return i as u32;
            }
        }
    }
    last as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::SamplerConfig;

    fn sampler(temperature: f32, top_k: usize, seed: u64) -> Sampler {
        Sampler::new(SamplerConfig { temperature, top_k, top_p: 1.0, seed })
    }

    /// Pearson's χ² of observed counts against probabilities.
    fn chi_square(counts: &[usize], probs: &[f32]) -> f64 {
        let n: usize = counts.iter().sum();
        counts
            .iter()
            .zip(probs)
            .filter(|(_, &p)| p > 0.0)
            .map(|(&c, &p)| {
                let e = n as f64 * p as f64;
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    /// The first emitted token of a round is distributed as the target's p, whatever the head's q
    /// (here a different, overlapping distribution); the bound is χ²'s 99.9 % point for 5 degrees
    /// of freedom. Emitting the draft as is (no rejection) would give q and fail by far.
    #[test]
    fn rejection_sampling_emits_the_targets_distribution() {
        let vocab = 6;
        let target = [2.0f32, 1.0, 0.5, 0.0, -1.0, 0.3]; // p
        let head = [0.0f32, 2.5, 0.5, 1.0, 0.0, -2.0]; // q
        let mut rows = target.to_vec();
        rows.extend(target); // row 1 (the bonus row after an accepted draft) unused by the first token
        let mut s = sampler(1.0, 0, 7);
        let p: Vec<f32> = dense(&s.distribution(&target), vocab);
        let q: Vec<f32> = dense(&s.distribution(&head), vocab);
        let mut counts = vec![0usize; vocab];
        let mut accepted = 0;
        let n = 40_000;
        for _ in 0..n {
            let d = s.sample(&head);
            let draft = Draft { tokens: vec![d], logits: head.to_vec() };
            let (a, bonus) = accept(&rows, &draft, vocab, &mut s);
            accepted += a;
            let first = if a == 1 { d } else { bonus };
            counts[first as usize] += 1;
        }
        let chi = chi_square(&counts, &p);
        assert!(chi < 20.5, "χ² {chi:.1} against p (counts {counts:?})");
        assert!(chi_square(&counts, &q) > 1000.0, "the test cannot tell p from q");
        // The acceptance rate of this rule is Σ min(p, q).
        let expected: f32 = p.iter().zip(&q).map(|(a, b)| a.min(*b)).sum();
        let rate = accepted as f32 / n as f32;
        assert!((rate - expected).abs() < 0.01, "acceptance {rate:.3}, expected {expected:.3}");
    }

    /// With top-k the target's distribution is the cut one: tokens outside the top-k never come out.
    #[test]
    fn rejection_sampling_respects_the_cut() {
        let vocab = 5;
        let target = [1.0f32, 0.9, -3.0, 0.8, -2.0];
        let head = [-1.0f32, 0.0, 3.0, 0.0, 2.0];
        let mut rows = target.to_vec();
        rows.extend(target);
        let mut s = sampler(1.0, 3, 3);
        let p = dense(&s.distribution(&target), vocab);
        let mut counts = vec![0usize; vocab];
        for _ in 0..20_000 {
            let d = s.sample(&head);
            let (a, bonus) = accept(&rows, &Draft { tokens: vec![d], logits: head.to_vec() }, vocab, &mut s);
            counts[if a == 1 { d } else { bonus } as usize] += 1;
        }
        assert_eq!(counts[2] + counts[4], 0, "tokens outside the target's top-3 were emitted: {counts:?}");
        let chi = chi_square(&counts, &p);
        assert!(chi < 13.8, "χ² {chi:.1} against p (2 degrees of freedom; counts {counts:?})");
    }

    /// Greedy: accept while the draft is the target's argmax; the bonus is the argmax of the row
    /// after the last accepted draft.
    #[test]
    fn greedy_acceptance_stops_at_the_first_disagreement() {
        let vocab = 4;
        // argmax per row: 2, 1, 3, 0
        let rows = [0.0, 0.0, 1.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 9.0, 0.0, 0.0, 0.0];
        let mut s = sampler(0.0, 0, 1);
        let case = |tokens: Vec<u32>, s: &mut Sampler| accept(&rows, &Draft { tokens, logits: vec![] }, vocab, s);
        assert_eq!(case(vec![2, 1, 3], &mut s), (3, 0));
        assert_eq!(case(vec![2, 1, 0], &mut s), (2, 3));
        assert_eq!(case(vec![2, 0, 3], &mut s), (1, 1));
        assert_eq!(case(vec![1, 1, 3], &mut s), (0, 2));
        assert_eq!(s.draws(), 0, "greedy acceptance drew from the stream");
    }

    #[test]
    fn mean_accepted_length_counts_the_bonus() {
        let mut a = Acceptance::default();
        for accepted in [3, 0, 2] {
            a.add(&Round { tokens: vec![0; accepted + 1], logits: vec![], drafted: 3, accepted });
        }
        assert_eq!(a.mean_accepted_length(), 8.0 / 3.0);
        assert!((a.rate() - 5.0 / 9.0).abs() < 1e-12);
    }
}
