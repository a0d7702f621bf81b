//! Small scans the detectors share: the characters around a place, context words before it,
//! substring search without set-up cost, the places where one of a set of literal prefixes
//! stands, and the stretches of digits the number detectors look in.

/// The first place of `needle` in `hay`: `str::find` for the short texts and words here,
/// without its set-up cost.
pub fn find(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let (&first, rest) = n.split_first()?;
    if h.len() < n.len() {
        return None;
    }
    (0..=h.len() - n.len()).find(|&i| h[i] == first && &h[i + 1..i + n.len()] == rest)
}

/// A set of literal prefixes (three bytes or more). A bit per `code3` of three bytes rules out
/// almost every place before any comparison.
pub struct Prefixes {
    words: Vec<&'static [u8]>,
    maybe: Box<[u64; 512]>,
}

/// The low five bits of a byte: a letter's, whatever its case.
#[inline]
pub fn code(b: u8) -> usize {
    (b & 31) as usize
}

/// The codes of three bytes, as one number below 2^15.
pub fn code3(b: &[u8]) -> usize {
    code(b[0]) << 10 | code(b[1]) << 5 | code(b[2])
}

impl Prefixes {
    pub fn new(words: &[&'static str]) -> Prefixes {
        let mut maybe = Box::new([0u64; 512]);
        for w in words {
            assert!(w.len() >= 3, "prefix {w:?} is shorter than three bytes");
            let c = code3(w.as_bytes());
            maybe[c / 64] |= 1 << (c % 64);
        }
        Prefixes { words: words.iter().map(|w| w.as_bytes()).collect(), maybe }
    }

    /// The first place where one of the prefixes starts.
    pub fn first(&self, b: &[u8]) -> Option<usize> {
        if b.len() < 3 {
            return None;
        }
        // The code of the three bytes at each place, rolled along.
        let maybe = &*self.maybe;
        let mut c = code(b[0]) << 5 | code(b[1]);
        for (i, &x) in b[2..].iter().enumerate() {
            c = (c << 5 | code(x)) & 0x7fff;
            if maybe[c / 64] & 1 << (c % 64) != 0 && self.starts(&b[i..]) {
                return Some(i);
            }
        }
        None
    }

    /// Does one of the prefixes start `here`? The code of three bytes first.
    pub fn at(&self, here: &[u8]) -> bool {
        here.len() >= 3
            && {
                let c = code3(here);
                self.maybe[c / 64] & 1 << (c % 64) != 0
            }
            && self.starts(here)
    }

    /// Does one of the prefixes start `here`? (Out of line: the scans stay small.)
    #[inline(never)]
    fn starts(&self, here: &[u8]) -> bool {
        self.words.iter().any(|w| here.starts_with(w))
    }
}

/// The character before byte `i` (or `None` at the start).
pub(crate) fn before(s: &str, i: usize) -> Option<char> {
    s[..i].chars().next_back()
}

pub(crate) fn after(s: &str, i: usize) -> Option<char> {
    s[i..].chars().next()
}

pub(crate) fn word_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// A char boundary at or before `i`.
pub(crate) fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub(crate) fn ceil(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The `window` bytes before `start`, lower case (ASCII), cut at a line start.
pub(crate) fn ctx_before(lower: &str, start: usize, window: usize) -> &str {
    let from = floor(lower, start.saturating_sub(window));
    &lower[from..start]
}

pub(crate) fn ctx_after(lower: &str, end: usize, window: usize) -> &str {
    let to = ceil(lower, end + window);
    &lower[end..to]
}

pub(crate) fn has_any(hay: &str, words: &[&str]) -> bool {
    words.iter().any(|w| contains_word(hay, w))
}

/// `w` in `hay`, not inside a longer word on its left (suffixes may follow: "phones").
pub(crate) fn contains_word(hay: &str, w: &str) -> bool {
    let mut from = 0;
    while let Some(i) = find(&hay[from..], w) {
        let at = from + i;
        let first = w.chars().next().is_some_and(|c| c.is_alphanumeric());
        if !first || !before(hay, at).is_some_and(|c| c.is_alphanumeric()) {
            return true;
        }
        from = at + w.len();
    }
    false
}

/// A byte table: digits and the bytes of `extra`.
pub(crate) const fn digits_and(extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut d = b'0';
    while d <= b'9' {
        t[d as usize] = true;
        d += 1;
    }
    let mut k = 0;
    while k < extra.len() {
        t[extra[k] as usize] = true;
        k += 1;
    }
    t
}

/// Byte ranges of `text` made of digits and the separators `allowed` (from `digits_and`) with at
/// least `min` digits: the only places worth running a number pattern on.
pub(crate) fn regions(
    text: &str,
    within: &[(usize, usize)],
    min: usize,
    allowed: &[bool; 256],
    out: &mut Vec<(usize, usize)>,
) {
    let b = text.as_bytes();
    out.clear();
    for &(from, to) in within {
        let mut i = from;
        while i < to {
            if !(b[i].is_ascii_digit() || b[i] == b'+' || b[i] == b'(') {
                i += 1;
                continue;
            }
            let start = i;
            let mut digits = 0;
            while i < to && allowed[b[i] as usize] {
                digits += b[i].is_ascii_digit() as usize;
                i += 1;
            }
            if digits >= min {
                out.push((start, i));
            }
            i = i.max(start + 1);
        }
    }
}

/// Every stretch of digits and number punctuation (`+()./- x` and spaces), in one pass: the
/// only places the number detectors look.
pub(crate) fn number_stretches(text: &str, out: &mut Vec<(usize, usize)>) {
    static TABLE: [bool; 256] = digits_and(b" .-/()+x");
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        i = next_byte_in(b, i, b'0', b'9', false);
        if i == b.len() {
            break;
        }
        // Back over a leading "+" or "(" (and spaces between them).
        let mut start = i;
        while start > 0 && matches!(b[start - 1], b'+' | b'(' | b' ') && start + 3 > i {
            start -= 1;
        }
        while start < i && b[start] == b' ' {
            start += 1;
        }
        while i < b.len() && TABLE[b[i] as usize] {
            i += 1;
        }
        out.push((start, i));
    }
}

/// Ranges widened by `before`/`after` bytes (at character boundaries) and merged.
pub(crate) fn pad(
    text: &str,
    ranges: impl Iterator<Item = (usize, usize)>,
    before: usize,
    after: usize,
    out: &mut Vec<(usize, usize)>,
) {
    out.clear();
    for (a, z) in ranges {
        let (a, z) = (floor(text, a.saturating_sub(before)), ceil(text, z + after));
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(z),
            _ => out.push((a, z)),
        }
    }
}

/// Matches of `re` inside `regions` (offsets in `text`).
pub(crate) fn find_in(re: &regex::Regex, text: &str, regions: &[(usize, usize)], out: &mut Vec<(usize, usize)>) {
    out.clear();
    for &(a, z) in regions {
        for m in re.find_iter(&text[a..z]) {
            out.push((a + m.start(), a + m.end()));
        }
    }
}

/// The digits of `s` into `buf` (at most its length).
pub(crate) fn digits_into<'b>(s: &str, buf: &'b mut [u8]) -> &'b [u8] {
    let mut n = 0;
    for b in s.bytes().filter(u8::is_ascii_digit) {
        if n == buf.len() {
            break;
        }
        buf[n] = b - b'0';
        n += 1;
    }
    &buf[..n]
}

/// The first place at or after `from` where `b` has a byte in `lo..=hi` (ASCII), or with
/// `non_ascii` also any byte of a non-ASCII character; `b.len()` if none. Eight bytes at a time.
pub fn next_byte_in(b: &[u8], from: usize, lo: u8, hi: u8, non_ascii: bool) -> usize {
    debug_assert!(lo <= hi && hi < 0x80);
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let each = |x: u8| u64::from_ne_bytes([x; 8]);
    // A byte's high bit, after adding 0x80 - n to its low seven bits, says whether they are ≥ n
    // (no carry reaches the next byte).
    let (at_least_lo, above_hi) = (each(0x80 - lo), each(0x80 - hi - 1));
    let mut i = from;
    while i + 8 <= b.len() {
        let x = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let low = x & LOW7;
        let mut hits = (low + at_least_lo) & !(low + above_hi) & !x & HIGH;
        if non_ascii {
            hits |= x & HIGH;
        }
        if hits != 0 {
            return i + hits.trailing_zeros() as usize / 8;
        }
        i += 8;
    }
    while i < b.len() && !((lo..=hi).contains(&b[i]) || non_ascii && b[i] >= 0x80) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds() {
        assert_eq!(find("abcabd", "abd"), Some(3));
        assert_eq!(find("ab", "abc"), None);
        assert_eq!(find("abc", ""), None);
        let p = Prefixes::new(&["sk-", "eyJ"]);
        assert_eq!(p.first(b"ask-me eyJhb"), Some(1));
        assert_eq!(p.first(b"sk_ eyj"), None);
        assert_eq!(p.first(b"x eyJ"), Some(2));
        assert_eq!(p.first(b"eyJ"), Some(0));
        assert_eq!(p.first(b"ey"), None);
    }

    #[test]
    fn stretches_are_the_phone_regions() {
        let alphabet = b"0123456789 .-/()+xa";
        let mut rng = crate::test_rng::TestRng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..rng.0 % 30 {
                text.push(alphabet[rng.below(alphabet.len())] as char);
            }
            let mut stretches = Vec::new();
            number_stretches(&text, &mut stretches);
            let mut want = Vec::new();
            regions(&text, &stretches, 7, &digits_and(b" .-/()+x"), &mut want);
            let seven: Vec<_> = stretches
                .iter()
                .copied()
                .filter(|&(a, z)| text.as_bytes()[a..z].iter().filter(|c| c.is_ascii_digit()).count() >= 7)
                .collect();
            assert_eq!(seven, want, "{text:?}");
        }
    }

    #[test]
    fn next_byte_in_finds_as_a_byte_loop_would() {
        let text = "a long line of words, 42 of them\u{e9}; Then MORE: x9 \u{2014} z".as_bytes();
        for (lo, hi) in [(b'0', b'9'), (b'A', b'Z'), (b'a', b'a'), (0, 0x7f)] {
            for non_ascii in [false, true] {
                for from in 0..=text.len() {
                    let want = (from..text.len())
                        .find(|&i| (lo..=hi).contains(&text[i]) || non_ascii && text[i] >= 0x80)
                        .unwrap_or(text.len());
                    assert_eq!(next_byte_in(text, from, lo, hi, non_ascii), want, "{lo} {hi} {non_ascii} {from}");
                }
            }
        }
    }
}
