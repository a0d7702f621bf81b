//! Names of people.

use super::{Detector, Keywords};
use crate::EntityType;
use crate::scan::{ctx_before, has_any};
use std::collections::HashSet;
use std::sync::OnceLock;

impl Detector {
    #[inline(never)]
    pub(super) fn persons(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let names = names();
        let words = &kw.caps;
        let mut i = 0;
        while i < words.len() {
            // A run of capitalised words (particles like "van der" may join them).
            let mut j = i;
            while j + 1 < words.len() {
                let gap = &text[words[j].1..words[j + 1].0];
                let particles_ok = || gap.split(' ').filter(|w| !w.is_empty()).all(|w| particles().contains(w));
                if (gap == " " || gap.len() <= 10 && gap.starts_with(' ') && gap.ends_with(' ') && particles_ok()) && j - i < 4 {
                    j += 1;
                } else {
                    break;
                }
            }
            let word = |k: usize| text[words[k].0..words[k].1].trim_end_matches('.');
            let (run_i, run_j) = (i, j);
            let (rs, re_) = (words[i].0, words[j].1);
            i = j + 1;
            // Most capitalised words are no names: nothing to do unless the run has a known one.
            if !(run_i..=run_j).any(|k| names.first.contains(word(k)) || names.last.contains(word(k))) {
                continue;
            }
            let run: Vec<&str> = (run_i..=run_j).map(word).collect();
            let run_at_sentence_start = {
                let b = text[..rs].trim_end_matches([' ', '"', '\'', '(', '*']);
                b.is_empty() || b.ends_with(['.', '!', '?', '\n', ':'])
            };
            // Titles, greetings and ordinary words open the run: "Dear Dr. Jane Doe".
            let is_first = |w: &str| names.first.contains(w);
            let is_last = |w: &str| names.last.contains(w) || w.contains('-') && w.split('-').all(|p| names.last.contains(capitalize(p).as_str()));
            let is_common = |w: &str| {
                let mut buf = [0u8; 64];
                if w.is_ascii() && w.len() <= 64 {
                    buf[..w.len()].copy_from_slice(w.as_bytes());
                    buf[..w.len()].make_ascii_lowercase();
                    names.common.contains(std::str::from_utf8(&buf[..w.len()]).unwrap_or(""))
                } else {
                    names.common.contains(w.to_lowercase().as_str())
                }
            };
            let mut k = 0;
            let mut title_in_run = false;
            let mut greeting = false;
            while k < run.len() {
                let w = run[k];
                if titles().contains(w) {
                    title_in_run = true;
                } else if name_cues().contains(w.to_lowercase().as_str()) {
                    greeting = true;
                } else if !(is_common(w) && (!is_first(w) && !is_last(w) || k == 0 && run_at_sentence_start)) {
                    break;
                }
                k += 1;
            }
            let body = &run[k..];
            if body.is_empty() || !body.iter().any(|w| is_first(w) || is_last(w)) {
                continue;
            }
            let titled = title_in_run || {
                let before_run = ctx_before(text, rs, 10).trim_end().trim_end_matches('.');
                let last = before_run.rsplit([' ', '\n', '(']).next().unwrap_or("");
                titles().contains(last)
            };
            let start = if k > 0 { words[rs_index(words, rs) + k].0 } else { rs };
            let mut end = re_;
            if text[..end].ends_with('.') {
                end -= 1;
            }
            let ctx = ctx_before(lower, start, 24);
            let context = greeting || ends_with_context(ctx);
            let first = body[0];
            let lastw = body[body.len() - 1];
            let sentence_start = {
                let b = text[..start].trim_end_matches([' ', '"', '\'', '(', '*']);
                !greeting && (b.is_empty() || b.ends_with(['.', '!', '?', '\n', ':']))
            };
            let accept = if titled {
                body.iter().all(|w| !is_common(w) || is_first(w) || is_last(w))
            } else if body.len() >= 2 {
                let strong = is_first(first) && (is_last(lastw) || !is_common(lastw)) && (!is_common(first) || !is_common(lastw));
                let medium = !is_common(first) && !is_common(lastw) && (is_first(first) || is_last(lastw)) && body.iter().all(|w| !is_common(w));
                strong || medium && (context || !sentence_start)
            } else {
                context && !sentence_start && (is_first(first) || is_last(first)) && !is_common(first)
                    || context && (is_first(first) || is_last(first)) && !is_common(first) && has_any(ctx, &["my name is", "name is", "name:", "i am", "i'm", "dear", "signed", "regards", "sincerely"])
            };
            if accept {
                push(start, end, EntityType::Person);
            }
        }
        // "my name is jane doe": lower case after a strong cue.
        for cue in &kw.name_cue {
            {
                let s = cue.end();
                let mut e = s;
                let mut count = 0;
                for w in lower[s..].split(' ').take(3) {
                    let w2 = w.trim_end_matches([',', '.', '!', '?', ';']);
                    let cap = capitalize(w2);
                    if w2.is_empty() || !(names.first.contains(cap.as_str()) || names.last.contains(cap.as_str())) || names.common.contains(w2) && count > 0 {
                        break;
                    }
                    if count == 0 && names.common.contains(w2) {
                        break;
                    }
                    e = s + lower[s..].find(w).unwrap_or(0) + w2.len();
                    count += 1;
                    if w.len() != w2.len() {
                        break;
                    }
                }
                if count > 0 && text[s..e].chars().next().is_some_and(|c| c.is_lowercase()) {
                    push(s, e, EntityType::Person);
                }
            }
        }
    }
}

/// The name lists (from the `names-dataset` package, see scripts/gate/make_name_lists.py).
pub struct Names {
    pub first: WordSet,
    pub last: WordSet,
    /// Frequent words of several languages, lower case: a capitalised one is weak evidence.
    pub common: WordSet,
}

/// FNV-1a: the sets hold short words, looked up many times per text.
#[derive(Default, Clone, Copy)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf29ce484222325 } else { self.0 };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
        self.0 = h;
    }
}

pub type WordSet = HashSet<&'static str, std::hash::BuildHasherDefault<Fnv>>;

pub fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(|| Names {
        first: include_str!("../../data/first_names.txt").lines().collect(),
        last: include_str!("../../data/last_names.txt").lines().collect(),
        common: include_str!("../../data/common_words.txt").lines().collect(),
    })
}

const NAME_CONTEXT: &[&str] = &[
    "my name is", "name is", "name:", "i am", "i'm", "dear", "hi", "hello", "thanks", "thank you", "regards,",
    "regards", "sincerely", "signed", "cheers", "from:", "to:", "cc:", "patient", "customer", "employee", "client",
    "called", "named", "contact", "mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam", "ich heiße", "ich bin",
    "herr", "frau", "je m'appelle", "je suis", "m.", "mme", "mlle", "monsieur", "madame", "me llamo", "soy", "señor",
    "señora", "sr.", "sra.", "mi chiamo", "sono", "signor", "signora", "mijn naam is", "ik ben", "meneer", "mevrouw",
    "by", "with", "and", "or", "spoke to", "talked to", "met", "ask", "tell", "wife", "husband", "son", "daughter",
    "mother", "father", "brother", "sister", "friend", "colleague", "manager", "boss", "neighbour", "neighbor",
];

const TITLES: &[&str] = &[
    "Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Dame", "Lady", "Lord", "Herr", "Frau", "Mme", "Mlle",
    "Monsieur", "Madame", "Sr", "Sra", "Srta", "Señor", "Señora", "Don", "Doña", "Sig", "Sig.ra", "Signor", "Signora",
    "Dott", "Dott.ssa", "Ing", "Avv", "Dhr", "Mevr", "Shri", "Smt",
];

const NAME_PARTICLES: &[&str] = &["van", "von", "der", "den", "de", "del", "della", "di", "da", "dos", "das", "du", "la", "le", "y", "zu", "ten", "ter", "bin", "al"];

/// The word lists as sets (built once).
fn titles() -> &'static WordSet {
    static SET: OnceLock<WordSet> = OnceLock::new();
    SET.get_or_init(|| TITLES.iter().copied().collect())
}

fn name_cues() -> &'static WordSet {
    static SET: OnceLock<WordSet> = OnceLock::new();
    SET.get_or_init(|| NAME_CONTEXT.iter().copied().collect())
}

fn particles() -> &'static WordSet {
    static SET: OnceLock<WordSet> = OnceLock::new();
    SET.get_or_init(|| NAME_PARTICLES.iter().copied().collect())
}

/// Capitalised words: an upper-case letter at a word start, then lower-case letters
/// (apostrophes and inner hyphens allowed: "O'Neil", "Wulff-Rörricht"), and a trailing dot
/// ("Dr."). Byte ranges.
pub(super) fn capitalised_words(text: &str, out: &mut Vec<(usize, usize)>) {
    let b = text.as_bytes();
    let mut i = 0;
    let mut prev_alnum = false;
    // The character at byte `i` and its length.
    let at = |i: usize| -> (char, usize) {
        if b[i] < 0x80 {
            (b[i] as char, 1)
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            (c, c.len_utf8())
        }
    };
    while i < b.len() {
        // Skip to the next upper-case ASCII letter or non-ASCII character.
        match b[i..].iter().position(|&c| c.is_ascii_uppercase() || c >= 0x80) {
            None => break,
            Some(0) => {}
            Some(p) => {
                i += p;
                prev_alnum = b[i - 1].is_ascii_alphanumeric();
            }
        }
        let (c, len) = at(i);
        if prev_alnum || !c.is_uppercase() {
            prev_alnum = c.is_alphanumeric();
            i += len;
            continue;
        }
        let start = i;
        let mut end = i + len;
        let mut lower = 0;
        let mut j = end;
        while j < b.len() {
            let (d, dl) = at(j);
            if d.is_lowercase() || d == '\'' || d == '’' {
                lower += d.is_lowercase() as usize;
                j += dl;
                end = j;
            } else if d == '-' && j + 1 < b.len() && at(j + 1).0.is_alphabetic() {
                let (e, el) = at(j + 1);
                let _ = e;
                j += 1 + el;
                end = j;
            } else {
                break;
            }
        }
        let next = (j < b.len()).then(|| at(j).0);
        if next.is_some_and(|d| d.is_alphanumeric()) || lower == 0 {
            // Part of a longer token ("McDonald", "NASA", "Abc123"): skip the rest of it.
            while j < b.len() && at(j).0.is_alphanumeric() {
                j += at(j).1;
            }
            i = j;
            prev_alnum = true;
            continue;
        }
        if next == Some('.') {
            end += 1;
        }
        out.push((start, end));
        i = j;
        prev_alnum = true;
    }
}

/// The last one to three words of `ctx` are a name cue ("my name is", "dear", "thanks").
fn ends_with_context(ctx: &str) -> bool {
    static CUES: OnceLock<HashSet<&'static str>> = OnceLock::new();
    let cues = CUES.get_or_init(|| NAME_CONTEXT.iter().map(|c| c.trim_end_matches([',', ':', '.'])).collect());
    let words: Vec<&str> = ctx.split_whitespace().map(|w| w.trim_end_matches([',', ':', '.'])).collect();
    let n = words.len();
    (1..=3.min(n)).any(|k| {
        if k == 1 {
            cues.contains(words[n - 1])
        } else {
            cues.contains(words[n - k..].join(" ").as_str())
        }
    })
}

fn rs_index(words: &[(usize, usize)], start: usize) -> usize {
    words.iter().position(|w| w.0 == start).unwrap_or(0)
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c.flat_map(|x| x.to_lowercase())).collect(),
        None => String::new(),
    }
}
