//! One conversation's memory: every value found so far, so that a later mention is caught even
//! when the detectors would miss it (reformatted with other spaces or dashes, a name alone), and
//! the placeholder each value got (`[EMAIL_1]`, the same every time), so the cloud's answer can be
//! given back with the real values.

use crate::detect::{resolve, to_spans, Detector, Hit};
use crate::normalize::Normalized;
use crate::{EntityType, Span};
use std::collections::{BTreeMap, HashMap};

/// A value seen in this conversation.
#[derive(Clone, Debug)]
struct Known {
    kind: EntityType,
    /// Letters and digits only, lower case: what a reformatted repeat still has.
    key: String,
    /// The text as first seen (what restoration puts back).
    original: String,
    placeholder: String,
}

#[derive(Clone, Debug, Default)]
pub struct Conversation {
    known: Vec<Known>,
    /// key → index into `known`.
    by_key: HashMap<String, usize>,
    /// Name parts ("Smith" of "John Smith"), caught alone later: key → kind.
    parts: HashMap<String, usize>,
    counters: BTreeMap<EntityType, usize>,
}

/// Letters and digits of `s`, lower case.
pub fn skeleton(s: &str) -> String {
    let norm = Normalized::new(s);
    norm.text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

impl Conversation {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// Detects spans in `text`, adds repeats of values this conversation has seen, and
    /// remembers the new values.
    pub fn scan(&mut self, detector: &Detector, text: &str) -> Vec<Span> {
        let norm = Normalized::new(text);
        let mut hits = detector.hits(&norm.text);
        if !self.known.is_empty() {
            // A known value, written again, is that value, whatever shape it now resembles.
            let (mut full, parts) = self.repeats(&norm.text);
            // A finding that holds a known value and more (an e-mail made of a known name) is
            // that finding, not the value.
            full.retain(|f| {
                !hits.iter().any(|h| h.start <= f.start && h.end >= f.end && h.end - h.start > f.end - f.start)
            });
            hits.retain(|h| full.iter().all(|f| h.end <= f.start || h.start >= f.end));
            hits.extend(full);
            hits.extend(parts);
            hits = resolve(hits);
        }
        let spans = to_spans(text, &norm, &hits);
        for s in &spans {
            self.remember(s.kind, &s.text);
        }
        spans
    }

    /// Adds a value (and gives it a placeholder); returns its placeholder.
    pub fn remember(&mut self, kind: EntityType, text: &str) -> String {
        let key = skeleton(text);
        if let Some(&i) = self.by_key.get(&key) {
            return self.known[i].placeholder.clone();
        }
        let n = self.counters.entry(kind).or_insert(0);
        *n += 1;
        let placeholder = format!("[{}_{}]", kind.name(), n);
        let i = self.known.len();
        self.known.push(Known { kind, key: key.clone(), original: text.to_string(), placeholder: placeholder.clone() });
        if key.chars().count() >= 3 {
            self.by_key.insert(key, i);
        }
        if kind == EntityType::Person {
            for part in text
                .split([' ', '-'])
                .filter(|p| p.chars().count() >= 3 && p.chars().next().is_some_and(char::is_uppercase))
            {
                let pk = skeleton(part);
                if pk.chars().count() >= 3 {
                    self.parts.entry(pk).or_insert(i);
                }
            }
        }
        placeholder
    }

    /// Repeats of known values: the letters and digits of the text are searched for each
    /// value's, and a match counts when it starts and ends at a word boundary.
    fn repeats(&self, text: &str) -> (Vec<Hit>, Vec<Hit>) {
        // The skeleton of the text and, for each of its characters, the byte range in `text`.
        let mut skel = String::with_capacity(text.len());
        let mut pos: Vec<(usize, usize)> = Vec::with_capacity(text.len());
        for (b, c) in text.char_indices() {
            if c.is_alphanumeric() {
                for l in c.to_lowercase() {
                    let before = skel.len();
                    skel.push(l);
                    for _ in before..skel.len() {
                        pos.push((b, b + c.len_utf8()));
                    }
                }
            }
        }
        let mut hits = Vec::new();
        let boundary = |start: usize, end: usize| {
            let left = text[..start].chars().next_back();
            let right = text[end..].chars().next();
            !left.is_some_and(char::is_alphanumeric) && !right.is_some_and(char::is_alphanumeric)
        };
        let find = |hits: &mut Vec<Hit>, key: &str, kind: EntityType, capital: bool| {
            if key.is_empty() {
                return;
            }
            let mut from = 0;
            while let Some(i) = skel[from..].find(key) {
                let at = from + i;
                let (start, end) = (pos[at].0, pos[at + key.len() - 1].1);
                let cap_ok = !capital || text[start..].chars().next().is_some_and(char::is_uppercase);
                if boundary(start, end) && cap_ok {
                    hits.push(Hit { start, end, kind });
                }
                from = at + key.len();
            }
        };
        for k in &self.known {
            if k.key.chars().count() >= 3 {
                find(&mut hits, &k.key, k.kind, false);
            }
        }
        let mut parts = Vec::new();
        for (part, &i) in &self.parts {
            find(&mut parts, part, self.known[i].kind, true);
        }
        (hits, parts)
    }

    /// The placeholder of a value seen before.
    pub fn placeholder(&self, text: &str) -> Option<&str> {
        self.by_key.get(&skeleton(text)).map(|&i| self.known[i].placeholder.as_str())
    }

    /// `text` with the spans of the given types replaced by their placeholders.
    pub fn mask(&mut self, text: &str, spans: &[Span], masked: impl Fn(EntityType) -> bool) -> String {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.char_indices().map(|(b, _)| b).chain(std::iter::once(text.len()));
        let mut offsets: Vec<usize> = Vec::new();
        offsets.extend(&mut chars);
        let mut last = 0;
        for s in spans.iter().filter(|s| masked(s.kind)) {
            let (a, z) = (offsets[s.start.min(offsets.len() - 1)], offsets[s.end.min(offsets.len() - 1)]);
            if a < last {
                continue;
            }
            out.push_str(&text[last..a]);
            let p = self.placeholder_for(s.kind, &s.text);
            out.push_str(&p);
            last = z;
        }
        out.push_str(&text[last..]);
        out
    }

    /// The placeholder of a value (a part of a known name gets its own number, once).
    fn placeholder_for(&mut self, kind: EntityType, text: &str) -> String {
        if let Some(p) = self.placeholder(text) {
            return p.to_string();
        }
        self.remember(kind, text)
    }

    /// Placeholder → original text, for restoration.
    pub fn restorations(&self) -> HashMap<String, String> {
        self.known.iter().map(|k| (k.placeholder.clone(), k.original.clone())).collect()
    }

    pub fn restorer(&self) -> Restorer {
        Restorer::new(self.restorations())
    }
}

/// Puts real values back into the cloud's answer. Streamed text may cut a placeholder anywhere
/// (`[EM` + `AIL_1]`): text from a `[` that could still become a placeholder is held back until
/// it is decided.
#[derive(Clone, Debug)]
pub struct Restorer {
    map: HashMap<String, String>,
    pending: String,
}

/// Longest placeholder: `[URL_CREDENTIALS_` + digits + `]`.
const MAX_PLACEHOLDER: usize = 32;

fn could_be_placeholder(s: &str) -> bool {
    // `s` starts with '[' and has no ']'.
    s.len() <= MAX_PLACEHOLDER && s[1..].bytes().all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
}

impl Restorer {
    pub fn new(map: HashMap<String, String>) -> Self {
        Restorer { map, pending: String::new() }
    }

    /// Restores a whole text.
    pub fn restore(&self, text: &str) -> String {
        let mut r = Restorer::new(self.map.clone());
        let mut out = r.push(text);
        out += &r.finish();
        out
    }

    /// The next piece of a stream; returns what can be sent now.
    pub fn push(&mut self, chunk: &str) -> String {
        if self.map.is_empty() {
            return chunk.to_string();
        }
        self.pending.push_str(chunk);
        let mut out = String::with_capacity(self.pending.len());
        let text = std::mem::take(&mut self.pending);
        let mut rest = text.as_str();
        while let Some(i) = rest.find('[') {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            match tail.find(']') {
                Some(j) if j < MAX_PLACEHOLDER => {
                    let candidate = &tail[..=j];
                    match self.map.get(candidate) {
                        Some(value) => {
                            out.push_str(value);
                            rest = &tail[j + 1..];
                        }
                        None => {
                            out.push('[');
                            rest = &tail[1..];
                        }
                    }
                }
                _ if could_be_placeholder(tail) => {
                    self.pending = tail.to_string();
                    return out;
                }
                _ => {
                    out.push('[');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The end of the stream: whatever was held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_caught_reformatted() {
        let d = Detector::new();
        let mut c = Conversation::new();
        let first = c.scan(&d, "My card is 4111 1111 1111 1111 and mail jane@example.com, I am Jennifer Martinez");
        assert_eq!(first.len(), 3, "{first:?}");
        let later = c.scan(&d, "again: 4111-1111 11111111, JANE@EXAMPLE.COM; ask Martinez or 41 11 11 11 11 11 11 11");
        let kinds: Vec<_> = later.iter().map(|s| (s.kind.name(), s.text.as_str())).collect();
        assert!(kinds.contains(&("CARD", "4111-1111 11111111")), "{kinds:?}");
        assert!(kinds.contains(&("CARD", "41 11 11 11 11 11 11 11")), "{kinds:?}");
        assert!(kinds.contains(&("EMAIL", "JANE@EXAMPLE.COM")), "{kinds:?}");
        assert!(kinds.contains(&("PERSON", "Martinez")), "{kinds:?}");
    }

    #[test]
    fn an_email_made_of_a_known_name_stays_an_email() {
        let d = Detector::new();
        let mut c = Conversation::new();
        let first = c.scan(&d, "Please forward the report to Jennifer Morales.");
        assert_eq!(first.iter().map(|s| s.kind).collect::<Vec<_>>(), vec![EntityType::Person], "{first:?}");
        let later = c.scan(&d, "Her address is jennifer.morales@northwind-mail.com, write to her.");
        let kinds: Vec<_> = later.iter().map(|s| (s.kind.name(), s.text.as_str())).collect();
        assert_eq!(kinds, vec![("EMAIL", "jennifer.morales@northwind-mail.com")]);
    }

    #[test]
    fn masks_with_stable_placeholders_and_restores_streams() {
        let d = Detector::new();
        let mut c = Conversation::new();
        let text = "Write to jane@example.com or bob@example.org; jane@example.com again.";
        let spans = c.scan(&d, text);
        let masked = c.mask(text, &spans, |_| true);
        assert_eq!(masked, "Write to [EMAIL_1] or [EMAIL_2]; [EMAIL_1] again.");
        let answer = "Sure: [EMAIL_2] and [EMAIL_1], not [EMAIL_9] or [x].";
        let want = "Sure: bob@example.org and jane@example.com, not [EMAIL_9] or [x].";
        assert_eq!(c.restorer().restore(answer), want);
        for cut in 1..answer.len() {
            if !answer.is_char_boundary(cut) {
                continue;
            }
            let mut r = c.restorer();
            let mut out = r.push(&answer[..cut]);
            out += &r.push(&answer[cut..]);
            out += &r.finish();
            assert_eq!(out, want, "cut at {cut}");
        }
        // One character at a time.
        let mut r = c.restorer();
        let mut out = String::new();
        for ch in answer.chars() {
            out += &r.push(&ch.to_string());
        }
        out += &r.finish();
        assert_eq!(out, want);
    }
}
