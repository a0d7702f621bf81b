//! Unicode normalisation with a way back: detectors run on an NFKC form of the text (fullwidth
//! digits become ASCII, non-breaking spaces become spaces, Unicode dashes become `-`, zero-width
//! characters disappear), and every byte of that form remembers the character of the input it
//! came from, so spans are reported in the input's own character offsets.

use std::borrow::Cow;
use unicode_normalization::UnicodeNormalization;

pub struct Normalized<'a> {
    pub text: Cow<'a, str>,
    /// For each byte of `text`, the index of the input character it came from; `None` when the
    /// input is ASCII (byte offsets are character offsets).
    map: Option<Vec<u32>>,
    /// Characters in the input.
    pub chars: usize,
}

/// Characters that carry no visible content and can be used to split a value.
fn invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}')
}

fn dash(c: char) -> bool {
    matches!(c, '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}')
}

impl<'a> Normalized<'a> {
    pub fn new(input: &'a str) -> Self {
        if input.is_ascii() {
            return Normalized { text: Cow::Borrowed(input), map: None, chars: input.len() };
        }
        let mut text = String::with_capacity(input.len() + 8);
        let mut map = Vec::with_capacity(input.len() + 8);
        let mut chars = 0;
        let mut i = 0; // characters so far
        let mut rest = input;
        while !rest.is_empty() {
            // A run of ASCII: copied whole, one character per byte.
            let n = rest.bytes().position(|b| !b.is_ascii()).unwrap_or(rest.len());
            if n > 0 {
                text.push_str(&rest[..n]);
                map.extend(i as u32..(i + n) as u32);
                i += n;
                rest = &rest[n..];
                continue;
            }
            let c = rest.chars().next().unwrap_or_default();
            rest = &rest[c.len_utf8()..];
            i += 1;
            chars = i;
            let i = i - 1;
            let before = text.len();
            if invisible(c) {
                continue;
            } else if dash(c) {
                text.push('-');
            } else if c == '\u{2028}' || c == '\u{2029}' {
                text.push('\n');
            } else {
                for n in std::iter::once(c).nfkc() {
                    text.push(if n.is_whitespace() && n != '\n' { ' ' } else { n });
                }
            }
            map.extend(std::iter::repeat_n(i as u32, text.len() - before));
        }
        let _ = chars;
        Normalized { text: Cow::Owned(text), map: Some(map), chars: i }
    }

    /// Was the input ASCII (so that its byte offsets are its character offsets)?
    pub fn input_is_ascii(&self) -> bool {
        self.map.is_none()
    }

    /// The input character range of the normalised byte range `start..end` (end exclusive).
    pub fn chars_of(&self, start: usize, end: usize) -> (usize, usize) {
        match &self.map {
            None => (start, end),
            Some(map) => {
                let s = map.get(start).map_or(self.chars, |&i| i as usize);
                let e = if end == 0 { 0 } else { map.get(end - 1).map_or(self.chars, |&i| i as usize + 1) };
                (s, e.max(s))
            }
        }
    }
}

/// `text`'s characters `start..end` as a string.
pub fn char_slice(text: &str, start: usize, end: usize) -> &str {
    if text.is_ascii() {
        return &text[start.min(text.len())..end.min(text.len())];
    }
    let mut idx = text.char_indices().map(|(b, _)| b).chain(std::iter::once(text.len()));
    let s = idx.nth(start).unwrap_or(text.len());
    let e = if end > start { idx.nth(end - start - 1).unwrap_or(text.len()) } else { s };
    &text[s..e]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_back_to_input_characters() {
        let input = "é ４１１１\u{200B}-x\u{2013}y\u{00A0}z";
        let n = Normalized::new(input);
        assert_eq!(n.text, "é 4111-x-y z");
        let b = n.text.find("4111").unwrap();
        assert_eq!(n.chars_of(b, b + 4), (2, 6));
        assert_eq!(char_slice(input, 2, 6), "４１１１");
        let y = n.text.find('y').unwrap();
        assert_eq!(n.chars_of(y, y + 1), (10, 11));
        assert_eq!(char_slice(input, 10, 11), "y");
    }
}
