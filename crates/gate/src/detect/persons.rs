//! Names of people.

use super::{Detector, Keywords};
use crate::scan::{ctx_before, has_any, next_byte_in};
use crate::EntityType;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::OnceLock;

impl Detector {
    #[inline(never)]
    pub(super) fn persons(
        &self,
        text: &str,
        lower: &str,
        kw: &Keywords,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
        let names = names();
        let words = &kw.caps;
        let mut i = 0;
        while i < words.len() {
            // A run of capitalised words (particles like "van der" may join them).
            let mut j = i;
            let known_at =
                |k: usize| names.kind(text[words[k].0..words[k].1].trim_end_matches('.')) & (FIRST | LAST) != 0;
            while j + 1 < words.len() {
                let gap = &text[words[j].1..words[j + 1].0];
                let particles_ok = || gap.split(' ').filter(|w| !w.is_empty()).all(|w| particles().contains(w));
                let particle =
                    gap != " " && gap.len() <= 10 && gap.starts_with(' ') && gap.ends_with(' ') && particles_ok();
                if (gap == " " || particle) && j - i < 4 {
                    if particle && !(i..=j).any(known_at) {
                        // "Der Gentest von Dieter Hoffmann": the capitalised words before the
                        // particle hold no name, so the name starts after it.
                        i = j + 1;
                    }
                    j += 1;
                } else {
                    break;
                }
            }
            let word = |k: usize| text[words[k].0..words[k].1].trim_end_matches('.');
            // The word in lower case: from `lower` when it is ASCII (no copy).
            let lowered = |k: usize, f: &dyn Fn(&str) -> bool| {
                let w = word(k);
                if w.is_ascii() {
                    f(&lower[words[k].0..words[k].0 + w.len()])
                } else {
                    f(&w.to_lowercase())
                }
            };
            let (run_i, run_j) = (i, j);
            let (rs, re_) = (words[i].0, words[j].1);
            i = j + 1;
            // Most capitalised words are no names: nothing to do unless the run has a known one,
            // or a title or a cue introduces it ("Sra. Ibáñez", "je m'appelle Maëlle").
            let known = (run_i..=run_j).any(|k| names.kind(word(k)) & (FIRST | LAST) != 0);
            let cue_before = if known { Intro::None } else { introduced(lower, rs) };
            let introduced = !known
                && (cue_before == Intro::Strong
                    || (run_i..=run_j).any(|x| titles().contains(word(x)))
                    || cue_before == Intro::Weak && run_j > run_i
                    || run_j > run_i && text[re_..].starts_with(" <") && text[re_..].contains('@'));
            if !known && !introduced {
                continue;
            }
            // The run's words, and what each is: a first name, a last name, a common word.
            let mut run_words = [""; 5];
            let (mut first, mut last, mut common, mut cue) = ([false; 5], [false; 5], [false; 5], [false; 5]);
            for (k, x) in (run_i..=run_j).enumerate() {
                let w = word(x);
                let kind = names.kind(w);
                run_words[k] = w;
                first[k] = kind & FIRST != 0;
                last[k] = kind & LAST != 0
                    || w.contains('-') && w.split('-').all(|p| capitalized(p, |p| names.kind(p) & LAST != 0))
                    || w.strip_prefix("O'").is_some_and(|p| p.len() > 1 && names.kind(p) & LAST != 0);
                common[k] = lowered(x, &|w| names.kind(w) & COMMON != 0);
                cue[k] = lowered(x, &|w| name_cues().contains(w));
            }
            let n = run_j - run_i + 1;
            let run = &run_words[..n];
            let run_at_sentence_start = {
                let b = text[..rs].trim_end_matches([' ', '"', '\'', '(', '*']);
                b.is_empty() || b.ends_with(['.', '!', '?', '\n', ':'])
            };
            // Titles, greetings and ordinary words open the run: "Dear Dr. Jane Doe".
            let mut k = 0;
            let mut title_in_run = false;
            let mut greeting = false;
            while k < n {
                let w = run[k];
                if k == 0 && ARTICLES.contains(&w) {
                    k = n; // no name
                    break;
                }
                if titles().contains(w) {
                    title_in_run = true;
                } else if cue[k] {
                    greeting = true;
                } else if !(common[k]
                    && (!first[k] && !last[k]
                        || k == 0 && run_at_sentence_start && !(first[k] && k + 1 < n && last[k + 1])))
                {
                    break;
                }
                k += 1;
            }
            // The name itself: words `k..n` of the run.
            let body = k..n;
            if introduced {
                // Unknown words after a title or a cue: a name when none is a common word.
                if !body.is_empty() && n - k <= 3 && !body.clone().any(|x| common[x]) {
                    let mut end = re_;
                    if text[..end].ends_with('.') {
                        end -= 1;
                    }
                    push(words[rs_index(words, rs) + k].0, end, EntityType::Person);
                }
                continue;
            }
            if body.is_empty() || !body.clone().any(|x| first[x] || last[x]) {
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
            let (b0, bl) = (k, n - 1);
            let sentence_start = {
                let b = text[..start].trim_end_matches([' ', '"', '\'', '(', '*']);
                !greeting && (b.is_empty() || b.ends_with(['.', '!', '?', '\n', ':']))
            };
            let accept = if titled {
                body.clone().all(|x| !common[x] || first[x] || last[x])
            } else if n - k >= 2 {
                let strong = first[b0] && (last[bl] || !common[bl]);
                let medium = !common[b0] && !common[bl] && (first[b0] || last[bl]) && body.clone().all(|x| !common[x]);
                strong || medium && (context || !sentence_start)
            } else {
                context && !sentence_start && (first[b0] || last[b0]) && !common[b0]
                    || context
                        && (first[b0] || last[b0])
                        && !common[b0]
                        && has_any(
                            ctx,
                            &[
                                "my name is",
                                "name is",
                                "name:",
                                "i am",
                                "i'm",
                                "dear",
                                "signed",
                                "regards",
                                "sincerely",
                            ],
                        )
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
                    let known = capitalized(w2, |cap| names.kind(cap) & (FIRST | LAST) != 0);
                    let is_common = names.kind(w2) & COMMON != 0;
                    if w2.is_empty() || !known || is_common && count > 0 {
                        break;
                    }
                    if count == 0 && is_common {
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

/// The name lists (from the `names-dataset` package, see scripts/gate/make_name_lists.py) and
/// frequent words of several languages (lower case: a capitalised one is weak evidence), in one
/// table: each word with what it is (`FIRST`, `LAST`, `COMMON`).
pub struct Names {
    kinds: HashMap<&'static str, u8, BuildHasherDefault<Fnv>>,
}

pub const FIRST: u8 = 1;
pub const LAST: u8 = 2;
pub const COMMON: u8 = 4;

impl Names {
    /// What `word` is (written exactly so): `FIRST`, `LAST`, `COMMON` or'ed; 0 for none. A name
    /// with accents that the lists know without them ("Álvaro", "Élodie", "Íñigo" for "Alvaro",
    /// "Elodie", "Inigo") is that name.
    pub fn kind(&self, word: &str) -> u8 {
        match self.kinds.get(word) {
            Some(&k) => k,
            None if !word.is_ascii() => {
                // The first letter plain ("Iñigo"), then every letter ("Alvaro").
                let plain = |all: bool| {
                    let mut out = String::with_capacity(word.len());
                    for (i, c) in word.chars().enumerate() {
                        let mut base = None;
                        if i == 0 || all {
                            unicode_normalization::char::decompose_canonical(c, |d| {
                                base.get_or_insert(d);
                            });
                        }
                        out.push(base.unwrap_or(c));
                    }
                    out
                };
                [plain(false), plain(true)]
                    .iter()
                    .filter(|p| p.as_str() != word)
                    .find_map(|p| self.kinds.get(p.as_str()))
                    .map_or(0, |&k| k & (FIRST | LAST))
            }
            None => 0,
        }
    }
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

pub type WordSet = HashSet<&'static str, BuildHasherDefault<Fnv>>;

pub fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut kinds: HashMap<&'static str, u8, BuildHasherDefault<Fnv>> = HashMap::default();
        for (kind, list) in [
            (FIRST, include_str!("../../data/first_names.txt")),
            (LAST, include_str!("../../data/last_names.txt")),
            (COMMON, include_str!("../../data/common_words.txt")),
        ] {
            for word in list.lines() {
                *kinds.entry(word).or_default() |= kind;
            }
        }
        Names { kinds }
    })
}

const NAME_CONTEXT: &[&str] = &[
    // Greetings of the other languages ("Estimada Sra. Núñez", "Liebe Anja").
    "estimada",
    "estimado",
    "querida",
    "querido",
    "hola",
    "liebe",
    "lieber",
    "hallo",
    "chère",
    "cher",
    "bonjour",
    "my name is",
    "name is",
    "name:",
    "i am",
    "i'm",
    "dear",
    "hi",
    "hello",
    "thanks",
    "thank you",
    "regards,",
    "regards",
    "sincerely",
    "signed",
    "cheers",
    "from:",
    "to:",
    "cc:",
    "patient",
    "customer",
    "employee",
    "client",
    "called",
    "named",
    "contact",
    "mr",
    "mrs",
    "ms",
    "miss",
    "dr",
    "prof",
    "sir",
    "madam",
    "ich heiße",
    "ich bin",
    "herr",
    "frau",
    "je m'appelle",
    "je suis",
    "m.",
    "mme",
    "mlle",
    "monsieur",
    "madame",
    "me llamo",
    "soy",
    "señor",
    "señora",
    "sr.",
    "sra.",
    "mi chiamo",
    "sono",
    "signor",
    "signora",
    "mijn naam is",
    "ik ben",
    "meneer",
    "mevrouw",
    "by",
    "with",
    "and",
    "or",
    "spoke to",
    "talked to",
    "met",
    "ask",
    "tell",
    "wife",
    "husband",
    "son",
    "daughter",
    "mother",
    "father",
    "brother",
    "sister",
    "friend",
    "colleague",
    "manager",
    "boss",
    "neighbour",
    "neighbor",
];

const TITLES: &[&str] = &[
    "Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Dame", "Lady", "Lord", "Herr", "Frau", "Mme", "Mlle",
    "Monsieur", "Madame", "Sr", "Sra", "Srta", "Señor", "Señora", "Don", "Doña", "Sig", "Sig.ra", "Signor", "Signora",
    "Dott", "Dott.ssa", "Ing", "Avv", "Dhr", "Mevr", "Shri", "Smt",
];

const NAME_PARTICLES: &[&str] = &[
    "van", "von", "der", "den", "de", "del", "della", "di", "da", "dos", "das", "du", "la", "le", "y", "zu", "ten",
    "ter", "bin", "al",
];

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
        let next = next_byte_in(b, i, b'A', b'Z', true);
        if next == b.len() {
            break;
        }
        if next > i {
            i = next;
            prev_alnum = b[i - 1].is_ascii_alphanumeric();
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
            // ASCII first: lower-case letters and apostrophes go on, other bytes but `-` stop.
            let c = b[j];
            // "McAllister", "O'Connor": an upper-case letter after "Mc" or "O'".
            if c.is_ascii_uppercase() && j == start + 2 && (&b[start..j] == b"Mc" || b[start + 1] == b'\'') {
                j += 1;
                end = j;
                continue;
            }
            if c.is_ascii_lowercase() || c == b'\'' {
                lower += (c != b'\'') as usize;
                j += 1;
                end = j;
                continue;
            }
            if c < 0x80 && c != b'-' {
                break;
            }
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
            while j < b.len() {
                if b[j].is_ascii_alphanumeric() {
                    j += 1;
                } else if b[j] >= 0x80 && at(j).0.is_alphanumeric() {
                    j += at(j).1;
                } else {
                    break;
                }
            }
            i = j;
            prev_alnum = true;
            continue;
        }
        if next == Some('.') {
            end += 1;
        }
        // A possessive ("Smith's", "Smith’s", "Jones'") is not part of the name.
        for ending in ["'s", "’s", "'"] {
            if end - start > ending.len() + 1 && text[start..end].ends_with(ending) {
                end -= ending.len();
                break;
            }
        }
        out.push((start, end));
        i = j;
        prev_alnum = true;
    }
}

/// Cues after which two or three capitalised words are a name even when no list knows them.
const WEAK_INTRODUCERS: &[&str] = &[
    "patient:",
    "patient",
    "customer",
    "client",
    "attendees:",
    "hi, i'm",
    "i'm",
    "i am",
    "hello,",
    "hi,",
    "lunch with",
    "forward this to",
    "paciente:",
    "cliente",
    "patiente",
    "kunde",
    "kundin",
    "soy",
    "je suis",
    "ich bin",
];

/// Whether a cue introduces the words after it: `Strong` (a title, "my name is": one word will
/// do), `Weak` (two words or more), or not.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Intro {
    None,
    Weak,
    Strong,
}

/// Titles and cues after which capitalised words are a name even when no list knows them.
const INTRODUCERS: &[&str] = &[
    "my name is",
    "me llamo",
    "mi nombre es",
    "je m'appelle",
    "mon nom est",
    "ich heiße",
    "ich heisse",
    "mein name ist",
    "dr.",
    "dr",
    "mr.",
    "mr",
    "mrs.",
    "mrs",
    "ms.",
    "ms",
    "prof.",
    "sr.",
    "sra.",
    "srta.",
    "herr",
    "frau",
    "mme",
    "mme.",
    "mlle",
    "m.",
    "señor",
    "señora",
    "monsieur",
    "madame",
    "dear",
    "estimada",
    "estimado",
    "chère",
    "cher",
    "geehrter herr",
    "geehrte frau",
    "liebe",
    "lieber",
    "regards,",
    "atentamente,",
    "cordialement,",
    "grüßen",
    "grüße",
    "saludos,",
    "signed,",
    "firmado,",
    "sincerely,",
    "signé,",
];

/// Does a cue of `INTRODUCERS` or `WEAK_INTRODUCERS` end just before byte `start` of the
/// lower-case text?
fn introduced(lower: &str, start: usize) -> Intro {
    let ctx = ctx_before(lower, start, 24);
    let ctx = ctx.trim_end_matches([' ', '\n', '\t']);
    let last = ctx.as_bytes().last().copied();
    let ends = |cue: &&str| {
        // The last byte first: most cues end otherwise, and are ruled out without a compare.
        cue.as_bytes().last().copied() == last && ctx.ends_with(cue) && {
            let before = &ctx[..ctx.len() - cue.len()];
            !before.chars().next_back().is_some_and(|c| c.is_alphanumeric())
        }
    };
    if INTRODUCERS.iter().any(ends) {
        Intro::Strong
    } else if WEAK_INTRODUCERS.iter().any(ends) {
        Intro::Weak
    } else {
        Intro::None
    }
}

/// Articles that start a capitalised run that is a place or a party, not a name ("La France").
const ARTICLES: &[&str] = &["La", "Le", "Les", "El", "Los", "Las", "Die", "Der", "Das", "The", "Il", "Lo", "Gli"];

/// The last one to three words of `ctx` are a name cue ("my name is", "dear", "thanks").
fn ends_with_context(ctx: &str) -> bool {
    static CUES: OnceLock<WordSet> = OnceLock::new();
    // "to:" is a cue, "to" is not: the cues keep their punctuation; a word of the text is tried
    // as written and without it ("Mr." for "mr").
    let cues = CUES.get_or_init(|| NAME_CONTEXT.iter().copied().collect());
    // The last words joined by single spaces, one more each time: "is", "name is", "my name is".
    let mut buf = [0u8; 64];
    let mut at = buf.len();
    for (k, raw) in ctx.split_whitespace().rev().take(3).enumerate() {
        if k == 0 && raw.len() != raw.trim_end_matches([',', ':', '.']).len() && cues.contains(raw) {
            return true;
        }
        let w = raw.trim_end_matches([',', ':', '.']).as_bytes();
        let need = w.len() + (k > 0) as usize;
        if need > at {
            return false; // longer than any cue
        }
        if k > 0 {
            at -= 1;
            buf[at] = b' ';
        }
        at -= w.len();
        buf[at..at + w.len()].copy_from_slice(w);
        if std::str::from_utf8(&buf[at..]).is_ok_and(|words| cues.contains(words)) {
            return true;
        }
    }
    false
}

fn rs_index(words: &[(usize, usize)], start: usize) -> usize {
    words.iter().position(|w| w.0 == start).unwrap_or(0)
}

/// `f` of `w` with its first letter upper case and the rest lower case.
fn capitalized<T>(w: &str, f: impl FnOnce(&str) -> T) -> T {
    let mut buf = [0u8; 64];
    if w.is_ascii() && w.len() <= buf.len() {
        let b = &mut buf[..w.len()];
        b.copy_from_slice(w.as_bytes());
        b.make_ascii_lowercase();
        if let Some(first) = b.first_mut() {
            first.make_ascii_uppercase();
        }
        return f(std::str::from_utf8(b).unwrap_or_default());
    }
    let mut c = w.chars();
    let word: String = match c.next() {
        Some(first) => first.to_uppercase().chain(c.flat_map(|x| x.to_lowercase())).collect(),
        None => String::new(),
    };
    f(&word)
}
