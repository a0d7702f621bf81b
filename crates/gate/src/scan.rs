//! Small byte scans the detectors share: substring search without set-up cost, and the places
//! where one of a set of literal prefixes stands.

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

/// A set of literal prefixes (three bytes or more). A bit per pair of bytes, for the first and
/// second and for the second and third, rules out almost every place before any comparison.
pub struct Prefixes {
    words: Vec<&'static [u8]>,
    first_pairs: Box<[u64; 1024]>,
    second_pairs: Box<[u64; 1024]>,
}

fn pair(a: u8, b: u8) -> usize {
    (a as usize) << 8 | b as usize
}

fn has(bits: &[u64; 1024], p: usize) -> bool {
    bits[p / 64] & 1 << (p % 64) != 0
}

impl Prefixes {
    pub fn new(words: &[&'static str]) -> Prefixes {
        let mut first_pairs = Box::new([0u64; 1024]);
        let mut second_pairs = Box::new([0u64; 1024]);
        for w in words {
            let b = w.as_bytes();
            assert!(b.len() >= 3, "prefix {w:?} is shorter than three bytes");
            let (p, q) = (pair(b[0], b[1]), pair(b[1], b[2]));
            first_pairs[p / 64] |= 1 << (p % 64);
            second_pairs[q / 64] |= 1 << (q % 64);
        }
        Prefixes { words: words.iter().map(|w| w.as_bytes()).collect(), first_pairs, second_pairs }
    }

    /// Does one of the prefixes start at byte `i` of `b`?
    #[inline]
    pub fn at(&self, b: &[u8], i: usize) -> bool {
        i + 2 < b.len()
            && has(&self.first_pairs, pair(b[i], b[i + 1]))
            && has(&self.second_pairs, pair(b[i + 1], b[i + 2]))
            && self.words.iter().any(|w| b[i..].starts_with(w))
    }

    /// The first place where one of the prefixes starts.
    pub fn first(&self, b: &[u8]) -> Option<usize> {
        (0..b.len()).find(|&i| self.at(b, i))
    }
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
        assert!(p.at(b"x eyJ", 2));
    }
}
