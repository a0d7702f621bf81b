//! The learned topic classifier beside the lexicon: a linear model (logistic regression, one head
//! for "is this a person's own sensitive matter" and one a category, one-vs-rest) over hashed
//! features of the text: the words (lower case, accents folded, digit runs as `0`), pairs of
//! neighbouring words, and the 4-byte pieces of each word with its edges (`<blu`, `rte>`),
//! so that it carries across inflections, compounds and the four languages; plus the shape of the
//! text's lines (records, rows of values, `Name: message` threads).
//!
//! Trained by `scripts/gate/train_topic_model.py` (numpy and scipy, on data that the script
//! generates; nothing at run time), shipped as `data/topic_model.bin`: a header, a scale and a
//! bias a head, and the weights quantised to `i8`, one row of heads a hash bucket, then an FNV
//! checksum. The features are made here only (the training script reads them from the
//! `topic_features` example), so training and serving cannot disagree. A text longer than
//! `WINDOW` words is scored in overlapping windows, the strongest counting; a window's score is
//! `bias + scale × Σ w / √n` over its `n` distinct buckets. Deterministic, no allocation a word
//! beyond the word list, no network.

use crate::topics::{fold_chars, push_char, Category, Evidence, Topic};
use std::sync::OnceLock;

/// The shipped weights.
pub const MODEL: &[u8] = include_bytes!("../data/topic_model.bin");

/// The second opinion's weights (`TopicModel::veto`): the same features, trained with many more
/// everyday first-person requests as negatives (`train_topic_model.py --everyday 1600
/// --everyday-r4 3200 --threshold-combined 0.35`).
pub const VETO: &[u8] = include_bytes!("../data/topic_model_veto.bin");

const MAGIC: &[u8; 8] = b"SOLOTM01";

/// Heads: 0 is "private" (a person's own sensitive matter), then one a category in
/// `Category::ALL`'s order.
pub const HEADS: usize = 1 + Category::ALL.len();

/// A category head beside the strongest is reported from this probability.
pub const SECOND: f32 = 0.8;

/// Words a window holds, and how far the next one starts.
pub const WINDOW: usize = 96;
const STRIDE: usize = 48;

/// The feature kinds, hashed apart.
const UNIGRAM: u8 = b'u';
const BIGRAM: u8 = b'b';
const PIECE: u8 = b'c';
const SHAPE: u8 = b's';

/// The length in bytes of a word's pieces (edges included: `<my>`, `<blu`, `blut`).
const PIECE_LEN: usize = 4;

/// What the model reuses from one text to the next.
#[derive(Default)]
pub struct ModelScratch {
    features: Vec<(u32, u32)>,
    touched: Vec<u32>,
    seen: Vec<u64>,
}

/// A loaded model.
#[derive(Clone)]
pub struct TopicModel {
    bits: u32,
    scale: [f32; HEADS],
    bias: [f32; HEADS],
    /// The private head's probability from which a text is flagged by the model alone, and
    /// beside the lexicon (higher: the lexicon already catches the plain cases).
    pub threshold: f32,
    pub threshold_combined: f32,
    /// `1 << bits` rows of `HEADS` weights.
    weights: Vec<i8>,
}

impl std::fmt::Debug for TopicModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicModel")
            .field("buckets", &(1usize << self.bits))
            .field("threshold", &self.threshold)
            .finish()
    }
}

/// FNV-1a, 64 bits, over `tag` then `bytes`.
fn fnv(tag: u8, parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut eat = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    };
    eat(tag);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            eat(b' ');
        }
        p.iter().for_each(|&b| eat(b));
    }
    h
}

/// The bucket of a hash.
fn bucket(h: u64, bits: u32) -> u32 {
    let h = h ^ (h >> 29);
    let h = h.wrapping_mul(0xbf58476d1ce4e5b9);
    ((h ^ (h >> 32)) & ((1u64 << bits) - 1)) as u32
}

/// A text's words as the model reads them.
#[derive(Default)]
pub struct Tokens {
    /// The folded words (UTF-8), one after another (`ends` cuts them).
    text: Vec<u8>,
    ends: Vec<u32>,
    /// Each word's characters in the input.
    chars: Vec<(u32, u32)>,
    /// The line-shape features' names.
    shape: Vec<&'static str>,
}

impl Tokens {
    fn word(&self, i: usize) -> &[u8] {
        let a = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[a..self.ends[i] as usize]
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Cuts `text` into words: runs of letters and digits, folded, digit runs written `0`; and
    /// counts its lines: with letters or digits, `Label: value` (a colon in the first 40 bytes, not
    /// last), with a digit, and with a digit in 7 words or fewer. One pass.
    pub fn read(&mut self, text: &str) {
        self.text.clear();
        self.ends.clear();
        self.chars.clear();
        self.shape.clear();
        let (mut lines, mut labelled, mut valued, mut numbered) = (0, 0, 0, 0);
        // The current line: its start, whether it has a word, a digit, a colon (and a byte after
        // it), and its whitespace-separated words.
        let (mut line_start, mut has_word, mut has_digit, mut colon, mut after_colon, mut spaced) =
            (0usize, false, false, false, false, 0usize);
        let mut in_spaced = false;
        let mut end_line = |has_word: bool, has_digit: bool, labelled_line: bool, spaced: usize| {
            if has_word {
                lines += 1;
                labelled += labelled_line as usize;
                if has_digit {
                    numbered += 1;
                    valued += (spaced <= 7) as usize;
                }
            }
        };
        let mut c = 0u32;
        let mut word: Option<u32> = None; // the current word's first character
        let mut digit = false;
        let bytes = text.as_bytes();
        self.text.reserve(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            // ASCII without decoding (most text), anything else as its character.
            let byte = bytes[i];
            if byte.is_ascii_alphanumeric() {
                // A run of ASCII letters and digits: what the character-by-character path below
                // does for each, at once.
                if word.is_none() {
                    word = Some(c);
                    digit = false;
                }
                has_word = true;
                if !in_spaced {
                    spaced += 1;
                    in_spaced = true;
                }
                after_colon |= colon;
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                    let x = bytes[i];
                    if x.is_ascii_digit() {
                        has_digit = true;
                        if !digit {
                            self.text.push(b'0');
                        }
                        digit = true;
                    } else {
                        digit = false;
                        self.text.push(x.to_ascii_lowercase());
                    }
                    i += 1;
                }
                c += (i - start) as u32;
                continue;
            }
            let (ch, len) = match byte {
                0..0x80 => (byte as char, 1),
                _ => {
                    let ch = text[i..].chars().next().expect("a character");
                    (ch, ch.len_utf8())
                }
            };
            let alphanumeric = if len == 1 { byte.is_ascii_alphanumeric() } else { ch.is_alphanumeric() };
            if alphanumeric {
                if word.is_none() {
                    word = Some(c);
                    digit = false;
                }
                has_word = true;
                if ch.is_ascii_digit() {
                    has_digit = true;
                    if !digit {
                        self.text.push(b'0');
                    }
                    digit = true;
                } else if ch.is_ascii() {
                    digit = false;
                    self.text.push(byte.to_ascii_lowercase());
                } else {
                    digit = false;
                    let mut buf = [0u8; 4];
                    fold_chars(ch.encode_utf8(&mut buf), |c| push_char(&mut self.text, c));
                }
            } else if let Some(w) = word.take() {
                self.ends.push(self.text.len() as u32);
                self.chars.push((w, c));
            }
            if ch == '\n' {
                end_line(has_word, has_digit, colon && after_colon, spaced);
                (line_start, has_word, has_digit, colon, after_colon, spaced, in_spaced) =
                    (i + 1, false, false, false, false, 0, false);
            } else if byte == b' ' || (len > 1 || byte < b' ') && ch.is_whitespace() {
                in_spaced = false;
            } else {
                if !in_spaced {
                    spaced += 1;
                    in_spaced = true;
                }
                if colon {
                    after_colon = true;
                } else if ch == ':' && i > line_start && i - line_start < 40 && has_word {
                    colon = true;
                }
            }
            c += 1;
            i += len;
        }
        if let Some(w) = word {
            self.ends.push(self.text.len() as u32);
            self.chars.push((w, c));
        }
        end_line(has_word, has_digit, colon && after_colon, spaced);
        let level = |n: usize| match n {
            0 => 0,
            1..=2 => 1,
            3..=5 => 2,
            _ => 3,
        };
        const LINES: [&str; 4] = ["lines0", "lines1", "lines3", "lines6"];
        const LABELLED: [&str; 4] = ["label0", "label1", "label3", "label6"];
        const VALUED: [&str; 4] = ["value0", "value1", "value3", "value6"];
        const NUMBERED: [&str; 4] = ["num0", "num1", "num3", "num6"];
        self.shape.extend([
            LINES[level(lines)],
            LABELLED[level(labelled)],
            VALUED[level(valued)],
            NUMBERED[level(numbered)],
        ]);
    }
}

/// The features of words `a..b` of `t`, into `out` as (bucket, word) pairs (`word` is
/// `usize::MAX as u32` for the line-shape features). A word's hash is FNV-1a over its bytes; a pair's
/// combines its words' hashes; a piece is its 4 bytes read as one number, with its kind in the top byte; every hash is mixed (`bucket`) before it is cut to `bits`.
fn features(t: &Tokens, a: usize, b: usize, bits: u32, out: &mut Vec<(u32, u32)>) {
    out.clear();
    each_feature(t, a, b, bits, |k, i| out.push((k, i)));
}

/// `features`, each given to `f` as it is made.
#[inline(always)]
fn each_feature(t: &Tokens, a: usize, b: usize, bits: u32, mut f: impl FnMut(u32, u32)) {
    let mut prev = 0u64;
    for i in a..b {
        let w = t.word(i);
        let h = fnv(UNIGRAM, &[w]);
        f(bucket(h, bits), i as u32);
        if i > a {
            f(bucket(prev.rotate_left(17) ^ h ^ (BIGRAM as u64) << 56, bits), i as u32);
        }
        prev = h;
        // The pieces of `<`, the word's first 62 bytes and `>`: the last four bytes rolled
        // along in `v`, the oldest lowest (a piece is its four bytes read little-endian).
        const _: () = assert!(PIECE_LEN == 4);
        let n = w.len().min(62);
        let mut v = (b'<' as u32) << 24;
        let mut piece = |v: u32| f(bucket(v as u64 | (PIECE as u64) << 56, bits), i as u32);
        for (k, &x) in w[..n].iter().enumerate() {
            v = v >> 8 | (x as u32) << 24;
            if k >= PIECE_LEN - 2 {
                piece(v);
            }
        }
        if n >= PIECE_LEN - 2 {
            piece(v >> 8 | (b'>' as u32) << 24);
        }
    }
    for s in &t.shape {
        f(bucket(fnv(SHAPE, &[s.as_bytes()]), bits), u32::MAX);
    }
}

/// The windows (first and end word) a text of `n` words is scored in.
fn windows(n: usize) -> impl Iterator<Item = (usize, usize)> {
    let last = n.saturating_sub(WINDOW).div_ceil(STRIDE);
    (0..=last).map(move |k| (k * STRIDE, (k * STRIDE + WINDOW).min(n)))
}

/// The distinct buckets of each window of a text, as the training script reads them
/// (`examples/topic_features.rs`).
pub fn text_buckets(text: &str, bits: u32) -> Vec<Vec<u32>> {
    let mut t = Tokens::default();
    t.read(text);
    let mut f = Vec::new();
    windows(t.len())
        .map(|(a, b)| {
            features(&t, a, b, bits, &mut f);
            let mut out: Vec<u32> = f.iter().map(|&(b, _)| b).collect();
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect()
}

/// What the model says of a text: each head's probability, in the strongest window.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub private: f32,
    /// The category heads' scores (logits; `category` gives the probability).
    z: [f32; Category::ALL.len()],
    /// The window's words.
    window: (usize, usize),
}

impl Prediction {
    /// The probability of `Category::ALL[i]`.
    pub fn category(&self, i: usize) -> f32 {
        sigmoid(self.z[i])
    }
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

impl TopicModel {
    /// The shipped model, loaded once.
    pub fn shipped() -> &'static TopicModel {
        static M: OnceLock<TopicModel> = OnceLock::new();
        M.get_or_init(|| TopicModel::parse(MODEL).unwrap_or_else(|e| panic!("data/topic_model.bin: {e}")))
    }

    /// The second opinion, loaded once: beside the lexicon (`Mode::Combined`), a category of the
    /// shipped model's stands only where this one's private head reaches its `threshold_combined`
    /// too. Trained on more everyday first-person requests ("my dad and I are building a
    /// treehouse"), which the shipped model reads as private matters; alone it misses more.
    pub fn veto() -> &'static TopicModel {
        static M: OnceLock<TopicModel> = OnceLock::new();
        M.get_or_init(|| TopicModel::parse(VETO).unwrap_or_else(|e| panic!("data/topic_model_veto.bin: {e}")))
    }

    /// Reads a model file (`data/topic_model.bin`'s form); the error says what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<TopicModel, String> {
        let header = 8 + 4 * 4 + 8 * HEADS;
        if bytes.len() < header + 4 || &bytes[..8] != MAGIC {
            return Err("not a topic model (no SOLOTM01 header)".into());
        }
        let (body, sum) = bytes.split_at(bytes.len() - 4);
        let want = u32::from_le_bytes(sum.try_into().expect("4 bytes"));
        let got = fnv(0, &[body]) as u32;
        if got != want {
            return Err(format!("checksum {got:08x} is not the file's {want:08x}: the file is corrupt"));
        }
        let u = |i: usize| u32::from_le_bytes(body[i..i + 4].try_into().expect("4 bytes"));
        let f = |i: usize| f32::from_le_bytes(body[i..i + 4].try_into().expect("4 bytes"));
        let (bits, heads) = (u(8), u(12) as usize);
        if heads != HEADS || !(8..=24).contains(&bits) {
            return Err(format!("{heads} heads of {bits} bits: this build reads {HEADS} heads of 8 to 24 bits"));
        }
        let n = (1usize << bits) * HEADS;
        if body.len() != header + n {
            return Err(format!("{} bytes of weights, not {n}", body.len() - header.min(body.len())));
        }
        let mut m = TopicModel {
            bits,
            scale: [0.0; HEADS],
            bias: [0.0; HEADS],
            threshold: f(16),
            threshold_combined: f(20),
            weights: body[header..].iter().map(|&b| b as i8).collect(),
        };
        for h in 0..HEADS {
            m.scale[h] = f(24 + 4 * h);
            m.bias[h] = f(24 + 4 * HEADS + 4 * h);
        }
        if !(0.0..=1.0).contains(&m.threshold) || !(0.0..=1.0).contains(&m.threshold_combined) {
            return Err("thresholds out of 0..1".into());
        }
        Ok(m)
    }

    /// The model's file (what the training script writes, for the tests).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for x in [self.bits, HEADS as u32] {
            out.extend(x.to_le_bytes());
        }
        for x in [self.threshold, self.threshold_combined] {
            out.extend(x.to_le_bytes());
        }
        for x in self.scale.iter().chain(&self.bias) {
            out.extend(x.to_le_bytes());
        }
        out.extend(self.weights.iter().map(|&w| w as u8));
        let sum = fnv(0, &[&out]) as u32;
        out.extend(sum.to_le_bytes());
        out
    }

    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Each head's score over words `a..b` of `t` (distinct buckets counted once); `seen` is
    /// left clear.
    fn score(&self, t: &Tokens, (a, b): (usize, usize), seen: &mut [u64], touched: &mut Vec<u32>) -> [f32; HEADS] {
        touched.clear();
        each_feature(t, a, b, self.bits, |k, _| {
            let (word, bit) = (k as usize / 64, 1u64 << (k % 64));
            if seen[word] & bit == 0 {
                seen[word] |= bit;
                touched.push(k);
            }
        });
        // The rows of the distinct buckets, summed in a loop of its own (in vector registers), in
        // 16 bits for 256 rows at a time (256 × -128 is still an i16).
        let mut sum = [0i32; HEADS];
        for rows in touched.chunks(256) {
            let mut part = [0i16; HEADS];
            for &k in rows {
                seen[k as usize / 64] = 0;
                let row: &[i8; HEADS] =
                    self.weights[k as usize * HEADS..(k as usize + 1) * HEADS].try_into().expect("a row");
                for j in 0..HEADS {
                    part[j] += row[j] as i16;
                }
            }
            for j in 0..HEADS {
                sum[j] += part[j] as i32;
            }
        }
        let norm = 1.0 / (touched.len().max(1) as f32).sqrt();
        let mut z = [0f32; HEADS];
        for h in 0..HEADS {
            z[h] = self.bias[h] + self.scale[h] * sum[h] as f32 * norm;
        }
        z
    }

    /// The heads' probabilities for a text (its words in `t`), in the window where the private
    /// head is strongest.
    pub fn predict_in(&self, t: &Tokens, s: &mut ModelScratch) -> Prediction {
        s.seen.resize((1usize << self.bits) / 64, 0);
        let mut best: Option<([f32; HEADS], (usize, usize))> = None;
        for w in windows(t.len()) {
            let z = self.score(t, w, &mut s.seen, &mut s.touched);
            if best.as_ref().is_none_or(|(x, _)| z[0] > x[0]) {
                best = Some((z, w));
            }
        }
        let (z, window) = best.expect("one window at least");
        Prediction { private: sigmoid(z[0]), z: z[1..].try_into().expect("ten heads"), window }
    }

    pub fn predict(&self, text: &str) -> Prediction {
        let mut t = Tokens::default();
        t.read(text);
        self.predict_in(&t, &mut ModelScratch::default())
    }

    /// The categories the model finds from `threshold` on the private head: the strongest
    /// category head, and any other from `SECOND`. Evidence: the words that add most to the category's head.
    /// The private head's probability comes back beside them (the judge's band, `topics::Assessment`).
    pub fn classify_in(&self, t: &Tokens, s: &mut ModelScratch, threshold: f32) -> (f32, Vec<Topic>) {
        let p = self.predict_in(t, s);
        if p.private < threshold {
            return (p.private, Vec::new());
        }
        features(t, p.window.0, p.window.1, self.bits, &mut s.features);
        let top = (0..p.z.len()).max_by(|&a, &b| p.z[a].total_cmp(&p.z[b])).expect("ten");
        let mut out = Vec::new();
        for (i, &c) in Category::ALL.iter().enumerate() {
            if p.category(i) < SECOND && i != top {
                continue;
            }
            let score = (p.private.min(p.category(i).max(0.55)) * 100.0).round() / 100.0;
            out.push(Topic {
                kind: c,
                score: score.max(crate::topics::THRESHOLD),
                evidence: self.evidence(t, &s.features, p.window.0, 1 + i),
            });
        }
        (p.private, out)
    }

    /// The (at most three) words of a window that add most to head `h`, each at least half the
    /// strongest's share.
    fn evidence(&self, t: &Tokens, f: &[(u32, u32)], a: usize, h: usize) -> Vec<Evidence> {
        let mut per_word =
            vec![0i32; f.iter().filter(|x| x.1 != u32::MAX).map(|x| x.1 as usize + 1 - a).max().unwrap_or(0)];
        for &(k, i) in f {
            if i != u32::MAX {
                per_word[i as usize - a] += self.weights[k as usize * HEADS + h] as i32;
            }
        }
        let mut order: Vec<usize> = (0..per_word.len()).filter(|&i| per_word[i] > 0).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(per_word[i]), i));
        let best = order.first().map_or(0, |&i| per_word[i]);
        let mut ev: Vec<Evidence> = order
            .into_iter()
            .take(3)
            .filter(|&i| per_word[i] * 2 >= best)
            .map(|i| Evidence { start: t.chars[a + i].0 as usize, end: t.chars[a + i].1 as usize })
            .collect();
        ev.sort_by_key(|e| e.start);
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_folded_and_numbers_merged() {
        let mut t = Tokens::default();
        t.read("Mein Blutzucker: 5,9 mmol — Ärger A1c");
        let w: Vec<&str> = (0..t.len()).map(|i| std::str::from_utf8(t.word(i)).unwrap()).collect();
        assert_eq!(w, ["mein", "blutzucker", "0", "0", "mmol", "arger", "a0c"]);
        assert_eq!(t.chars[1], (5, 15));
    }

    #[test]
    fn pieces_are_the_four_bytes_of_the_padded_word() {
        // The pieces as first written: `<`, the word's first 62 bytes and `>` in a buffer, each
        // four bytes of it read as one number.
        let reference = |w: &[u8]| -> Vec<u32> {
            let n = w.len().min(62);
            let padded: Vec<u8> = std::iter::once(b'<').chain(w[..n].iter().copied()).chain([b'>']).collect();
            padded.windows(4).map(|p| u32::from_le_bytes(p.try_into().unwrap())).collect()
        };
        let mut rng = crate::test_rng::TestRng(0x1234_5678_9ABC_DEF1);
        for len in (0..70).chain([100]) {
            let text: String = (0..len).map(|_| (b'a' + rng.below(26) as u8) as char).collect();
            let mut t = Tokens::default();
            t.read(&text);
            let mut got = Vec::new();
            each_feature(&t, 0, t.len(), 20, |k, i| got.push((k, i)));
            let mut want = Vec::new();
            if len > 0 {
                want.push((bucket(fnv(UNIGRAM, &[text.as_bytes()]), 20), 0));
                for v in reference(text.as_bytes()) {
                    want.push((bucket(v as u64 | (PIECE as u64) << 56, 20), 0));
                }
            }
            assert_eq!(got[..got.len() - t.shape.len()], want[..], "{text:?}");
        }
    }

    #[test]
    fn windows_cover_the_text() {
        assert_eq!(windows(0).collect::<Vec<_>>(), [(0, 0)]);
        assert_eq!(windows(96).collect::<Vec<_>>(), [(0, 96)]);
        assert_eq!(windows(100).collect::<Vec<_>>(), [(0, 96), (48, 100)]);
        assert_eq!(windows(200).last(), Some((144, 200)));
    }
}
