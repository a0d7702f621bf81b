//! The detectors. Each works on the normalised text and reports byte ranges of it; shapes come
//! from regular expressions, and a match is kept only when its checksum or validity rule holds
//! and, for shapes that ordinary numbers also take, when a context word stands nearby.
//! Overlaps go to the more specific type (a card number is not also a phone number).
//!
//! ```text
//! secrets.rs    keys and tokens, assigned passwords, credentials in URLs, e-mail addresses
//! numbers.rs    IBANs, cards, SSNs, national ids
//! phones.rs     phone numbers
//! network.rs    IP and MAC addresses
//! dates.rs      dates of birth
//! addresses.rs  street addresses
//! persons.rs    names, with the name lists
//! ```

mod addresses;
mod dates;
mod network;
mod numbers;
mod persons;
mod phones;
mod secrets;

pub use persons::{names, Fnv, Names, WordSet, COMMON, FIRST, LAST};

use crate::keywords::{KeywordTable, Kw};
use crate::normalize::{char_slice, Normalized};
use crate::scan::*;
use crate::{EntityType, Span};
use addresses::STREET_SUFFIXES;
use dates::{date_words_pattern, DOB_CONTEXT};
use persons::capitalised_words;
use regex::Regex;
use secrets::KEY_PREFIXES;

/// A finding in the normalised text (byte offsets).
#[derive(Clone, Copy, Debug)]
pub struct Hit {
    pub start: usize,
    pub end: usize,
    pub kind: EntityType,
}

/// Higher wins an overlap.
fn priority(kind: EntityType) -> u8 {
    use EntityType::*;
    match kind {
        Secret => 13,
        UrlCredentials => 12,
        Card => 11,
        Iban => 10,
        Ssn => 9,
        NationalId => 8,
        Email => 7,
        MacAddress => 6,
        IpAddress => 5,
        DateOfBirth => 4,
        Phone => 3,
        Address => 2,
        Person => 1,
    }
}

/// The compiled patterns.
pub struct Detector {
    pem: Regex,
    token: Regex,
    url_creds: Regex,
    email: Regex,
    ids: Regex,
    /// Every keyword of every detector and the keys' literal prefixes, in one pass.
    keywords: KeywordTable,
    said_tail: Regex,
    street_de_tail: Regex,
    dob_ctx: Regex,
    ipv4: Regex,
    ipv6: Regex,
    mac: Regex,
    date_numeric: Regex,
    date_words: Regex,
    street_en: Regex,
    street_eu: Regex,
    number_before: Regex,
    postal_tail: Regex,
    cued_address: Regex,
}

impl Default for Detector {
    fn default() -> Self {
        Self::new()
    }
}

fn re(s: &str) -> Regex {
    // A roomy lazy-DFA cache: the Unicode-class patterns would otherwise rebuild states.
    regex::RegexBuilder::new(s).dfa_size_limit(32 << 20).build().unwrap_or_else(|e| panic!("bad pattern {s}: {e}"))
}

impl Detector {
    pub fn new() -> Detector {
        let _ = names();
        Detector {
            pem: re(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
            token: re(concat!(
                r"(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}",
                r"|gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255}|glpat-[A-Za-z0-9_-]{20,}",
                r"|sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d\d-)?[A-Za-z0-9_-]{20,}",
                r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}",
                r"|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
                r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,}",
                r"|AIza[0-9A-Za-z_-]{35}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
                r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            )),
            url_creds: re(r"://([^\s:/?#@]+):([^\s/?#@]+)@[A-Za-z0-9\[]"),
            email: re(
                r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}",
            ),
            keywords: KeywordTable::new(KEY_PREFIXES),
            ids: re(
                r"[12] ?[0-9]{2} ?[0-9]{2} ?2[AB] ?[0-9]{3} ?[0-9]{3} ?[0-9]{2}|[A-Z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]|[A-Z]{6}[0-9LMNPQRSTUV]{2}[A-EHLMPR-T][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]|[XYZ]?[0-9]{7,8}-?[A-Z]",
            ),
            said_tail: re(r"^\s+(?:is|was|ist|est|es|è|:)\s+"),
            street_de_tail: re(r"^[ \t]+[0-9]{1,5}[a-zA-Z]?(?:[-/][0-9]{1,5})?"),
            dob_ctx: word_list(DOB_CONTEXT),
            ipv4: re(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?:/[0-9]{1,2})?"),
            mac: re(r"[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}"),
            ipv6: re(r"[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:]*:[0-9A-Fa-f.:]*"),
            date_numeric: re(
                r"[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}|[0-9]{1,2}[-/.][0-9]{1,2}[-/.](?:[0-9]{4}|[0-9]{2})",
            ),
            date_words: re(&date_words_pattern()),
            street_en: re(&format!(
                r"^(?:(?:Flat|Studio|Apartment|Unit) [0-9]+[A-Z]?[\s,|]+|[0-9]{{1,6}}[A-Za-z]?,?\s+)(?:[NSEW]\.?\s+)?(?:\p{{Lu}}[\p{{L}}'’-]*\.?\s+){{1,4}}(?:{STREET_SUFFIXES})(?-u:\b)\.?"
            )),
            street_eu: re(concat!(
                r"^(?:(?i:de la|de l'|du|des|de|del|della|dei|di|da|d')\s*)?\p{Lu}[\p{L}'’-]*(?:\s+(?:\p{Lu}[\p{L}'’-]*|(?i:de|del|la|di|y)))*",
                r"(?:,?\s+(?:n\.?\s*|nº\s*|no\.?\s*)?[0-9]{1,5}[a-zA-Z]?)?",
            )),
            number_before: re(r"[0-9]{1,5}[a-z]?,?\s+$"),
            cued_address: re(concat!(
                r"^[ \t]*(?::|is|es|est|ist|lautet|at|au|à|en|a|in|nach)?[ \t]*(?:(?:Flat|Apt\.?|Apartment|Unit|Piso|Wohnung) [0-9]+[A-Z]?,?\s+)?",
                r"(?:[0-9]{1,5}[a-zA-Z]?,?\s+(?:[\p{L}'’-]+\s+){0,3}[\p{L}'’-]+",
                r"|\p{Lu}[\p{L}'’-]*(?:\s+(?:\p{Lu}[\p{L}'’-]*|de|del|do|da|der|dem|du|des|la|las|los)){0,3}\s+[0-9]{1,5}[a-zA-Z]?)",
                r"(?:,\s*[0-9]{1,2}º?\s*[A-Z]?)?,[ \t]*(?:[0-9]{4,5}[ \t]+)?\p{Lu}[\p{L}'’-]+",
                r"(?:[ \t]+[A-Z]{1,2}[0-9][0-9A-Z]?(?:[ \t]+[0-9][A-Z]{2}|[ \t]+[0-9]{3,5})?)?",
            )),
            postal_tail: re(concat!(
                r"^[\s,|]*(?:(?:\p{Lu}[\p{L}'’.-]*(?:[ -]\p{Lu}[\p{L}'’.-]*){0,3}[\s,|]+)?(?:[A-Z]{2,3}[ ,]+)?",
                r"(?:[0-9]{5}(?:-[0-9]{4})?|[0-9]{4}\s?[A-Z]{2}|[0-9]{4}|[A-Z]{1,2}[0-9][A-Z0-9]? ?[0-9][A-Z]{2}|[A-Z][0-9][A-Z] ?[0-9][A-Z][0-9])",
                r"(?:[\s,|]+\p{Lu}[\p{L}'’-]+(?:[ -]\p{Lu}[\p{L}'’-]+){0,2})?(?:\s?\([A-Z]{2}\))?",
                r"|\p{Lu}[\p{L}'’-]+(?:[ -]\p{Lu}[\p{L}'’-]+){0,2}-[0-9]{6})",
            )),
        }
    }

    /// Every span in `text`, in order, without overlaps.
    pub fn detect(&self, text: &str) -> Vec<Span> {
        let norm = Normalized::new(text);
        let hits = self.hits(&norm.text);
        to_spans(text, &norm, &hits)
    }

    /// Findings in a normalised text, overlaps resolved, sorted by start.
    pub fn hits(&self, text: &str) -> Vec<Hit> {
        self.hits_timed(text, &mut |_| {})
    }

    /// `hits`, calling `lap(stage)` after each stage (for `profile`; a no-op otherwise).
    fn hits_timed(&self, text: &str, lap: &mut impl FnMut(usize)) -> Vec<Hit> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> = Default::default();
        }
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => {
                let hits = self.hits_in(text, &mut scratch, lap);
                // A rare long text does not keep its buffers' memory on the thread.
                if scratch.lower.capacity() > 1 << 20 {
                    *scratch = Scratch::default();
                }
                hits
            }
            Err(_) => self.hits_in(text, &mut Scratch::default(), lap),
        })
    }

    fn hits_in(&self, text: &str, scratch: &mut Scratch, lap: &mut impl FnMut(usize)) -> Vec<Hit> {
        let Scratch { lower, keywords: kw, hits, work } = scratch;
        lower.clear();
        lower.push_str(text);
        lower.make_ascii_lowercase();
        let lower = lower.as_str();
        self.keyword_hits(text, lower, kw);
        let kw = &*kw;
        lap(0);
        hits.clear();
        let mut push = |start: usize, end: usize, kind: EntityType| hits.push(Hit { start, end, kind });
        // What the text holds decides which detectors can find anything in it.
        let n = kw.bytes;
        let digits = n.digits;
        self.secrets(text, lower, kw, &mut push);
        lap(1);
        if n.at > 0 {
            self.emails(text, &mut push);
        }
        lap(2);
        if digits >= 9 {
            self.ibans(text, kw, &mut push);
            lap(3);
            self.numbers(text, lower, kw, work, &mut push);
            lap(4);
        }
        if digits >= 6 {
            self.ids(text, lower, kw, work, &mut push);
        }
        lap(5);
        if n.dots + n.colons + n.dashes > 0 {
            self.network(text, lower, kw, work, &mut push);
        }
        lap(6);
        if digits >= 7 {
            self.phones(text, lower, kw, work, &mut push);
        }
        lap(7);
        if digits >= 4 {
            self.dates(text, lower, kw, &mut push);
        }
        lap(8);
        if digits >= 1 {
            self.addresses(text, lower, kw, &mut push);
        }
        lap(9);
        self.persons(text, lower, kw, &mut push);
        lap(10);
        let out = resolve_from(hits);
        lap(11);
        out
    }

    /// The names of `profile`'s stages.
    #[doc(hidden)]
    pub const STAGES: [&'static str; 14] = [
        "keywords",
        "secrets",
        "emails",
        "ibans",
        "numbers",
        "ids",
        "network",
        "phones",
        "dates",
        "addresses",
        "persons",
        "resolve",
        "normalize",
        "to_spans",
    ];

    /// `detect`, calling `lap(stage)` after each stage (`STAGES`), for tuning.
    #[doc(hidden)]
    pub fn profile(&self, text: &str, lap: &mut impl FnMut(usize)) -> Vec<Span> {
        let norm = Normalized::new(text);
        lap(12);
        let hits = self.hits_timed(&norm.text, lap);
        let spans = to_spans(text, &norm, &hits);
        lap(13);
        spans
    }

    /// Where the keywords stand (one scan of the lower-case text for all detectors).
    fn keyword_hits(&self, text: &str, lower: &str, k: &mut Keywords) {
        k.clear();
        k.bytes = ByteCounts::of(text.as_bytes());
        number_stretches(text, &mut k.digits);
        capitalised_words(text, &mut k.caps);
        k.key_start = self.keywords.find_all(text, lower, |start, end, kinds| {
            let m = Pos(start, end);
            let word_start = !before(lower, start).is_some_and(|c| c.is_alphanumeric());
            for kind in kinds {
                match kind {
                    Kw::Assign => k.assign.push(m),
                    Kw::Said if word_start => {
                        if let Some(t) = self.said_tail.find(&lower[end..]) {
                            k.said.push(Pos(start, end + t.end()));
                        }
                    }
                    Kw::Dob => k.dob.push(m),
                    Kw::StreetEu if word_start => {
                        let spaces = lower[end..].bytes().take_while(|b| *b == b' ' || *b == b'\t').count();
                        if spaces > 0 {
                            k.street_eu.push(Pos(start, end + spaces));
                        }
                    }
                    Kw::StreetDe => {
                        if let Some(t) = self.street_de_tail.find(&text[end..]) {
                            k.street_de.push(Pos(start, end + t.end()));
                        }
                    }
                    Kw::NameCue => k.name_cue.push(m),
                    Kw::KeyName => k.key_name.push(m),
                    Kw::Bearer if word_start => k.bearer.push(m),
                    Kw::IdLabel if word_start => k.id_label.push(m),
                    Kw::AddressCue if word_start => k.address_cue.push(m),
                    Kw::PhoneCtx | Kw::NotPhone => {
                        let alnum = lower[start..].starts_with(|c: char| c.is_alphanumeric());
                        if word_start || !alnum {
                            let list = if *kind == Kw::PhoneCtx { &mut k.phone_ctx } else { &mut k.not_phone };
                            list.push(m);
                        }
                    }
                    _ => {}
                }
            }
        });
    }
}

/// A keyword's place: (start, end) in bytes.
#[derive(Clone, Copy, Debug)]
struct Pos(usize, usize);

impl Pos {
    fn start(&self) -> usize {
        self.0
    }
    fn end(&self) -> usize {
        self.1
    }
}

/// What one `hits` call works in, kept from call to call on each thread: gating a text then
/// allocates little.
#[derive(Default)]
struct Scratch {
    lower: String,
    keywords: Keywords,
    hits: Vec<Hit>,
    work: Work,
}

/// Buffers the detectors fill and read.
#[derive(Default)]
struct Work {
    /// Stretches of digits worth a pattern (`regions`), windows around places (`pad`), and
    /// what was found in them.
    regions: Vec<(usize, usize)>,
    near: Vec<(usize, usize)>,
    found: Vec<(usize, usize)>,
    /// A digit run's groups, the separators between them, the windows of groups tried, and
    /// the windows taken.
    groups: Vec<(usize, usize)>,
    seps: Vec<(usize, usize)>,
    windows: Vec<(usize, usize)>,
    taken: Vec<(usize, usize)>,
}

#[derive(Default)]
struct Keywords {
    assign: Vec<Pos>,
    said: Vec<Pos>,
    dob: Vec<Pos>,
    street_eu: Vec<Pos>,
    street_de: Vec<Pos>,
    name_cue: Vec<Pos>,
    phone_ctx: Vec<Pos>,
    not_phone: Vec<Pos>,
    key_name: Vec<Pos>,
    bearer: Vec<Pos>,
    id_label: Vec<Pos>,
    address_cue: Vec<Pos>,
    /// Stretches of digits and number punctuation.
    digits: Vec<(usize, usize)>,
    /// Capitalised words.
    caps: Vec<(usize, usize)>,
    bytes: ByteCounts,
    /// Where a key's literal prefix first stands ("AKIA", "ghp_", "eyJ"…: `KEY_PREFIXES`).
    key_start: Option<usize>,
}

/// How many of a few bytes a text holds.
#[derive(Default, Clone, Copy)]
struct ByteCounts {
    digits: usize,
    at: usize,
    colons: usize,
    dashes: usize,
    dots: usize,
}

impl ByteCounts {
    /// One pass, without branches, in blocks small enough for byte counters: the compiler
    /// makes it vector code.
    fn of(b: &[u8]) -> ByteCounts {
        let mut n = ByteCounts::default();
        for block in b.chunks(255) {
            let (mut digits, mut at, mut colons, mut dashes, mut dots) = (0u8, 0u8, 0u8, 0u8, 0u8);
            for &c in block {
                digits += (c.wrapping_sub(b'0') < 10) as u8;
                at += (c == b'@') as u8;
                colons += (c == b':') as u8;
                dashes += (c == b'-') as u8;
                dots += (c == b'.') as u8;
            }
            n.digits += digits as usize;
            n.at += at as usize;
            n.colons += colons as usize;
            n.dashes += dashes as usize;
            n.dots += dots as usize;
        }
        n
    }
}

impl Keywords {
    fn clear(&mut self) {
        for list in [
            &mut self.assign,
            &mut self.said,
            &mut self.dob,
            &mut self.street_eu,
            &mut self.street_de,
            &mut self.name_cue,
            &mut self.phone_ctx,
            &mut self.not_phone,
            &mut self.key_name,
            &mut self.bearer,
            &mut self.id_label,
            &mut self.address_cue,
        ] {
            list.clear();
        }
        self.digits.clear();
        self.caps.clear();
    }
}

/// One regex for a list of context words: each must start a word (suffixes may follow).
fn word_list(words: &[&str]) -> Regex {
    let alts: Vec<String> = words
        .iter()
        .map(|w| {
            let e = regex::escape(w);
            if w.chars().next().is_some_and(|c| c.is_alphanumeric()) {
                format!("(?-u:\\b){e}")
            } else {
                e
            }
        })
        .collect();
    re(&alts.join("|"))
}

/// A match inside a region.
struct Found {
    start: usize,
    end: usize,
}

/// Overlaps: the higher priority wins, then the longer.
pub fn resolve(mut hits: Vec<Hit>) -> Vec<Hit> {
    resolve_from(&mut hits)
}

/// `resolve`, leaving `hits` (sorted by priority) for the caller to reuse.
fn resolve_from(hits: &mut Vec<Hit>) -> Vec<Hit> {
    hits.retain(|h| h.end > h.start);
    if hits.len() <= 1 {
        return hits.clone();
    }
    hits.sort_by_key(|h| (std::cmp::Reverse(priority(h.kind)), std::cmp::Reverse(h.end - h.start), h.start));
    // Kept hits by start; they do not overlap, so only the neighbours of a new one can. A
    // sorted vector for the usual few, a tree for many (insertion in a vector moves the rest).
    let fits = |left: Option<&Hit>, right: Option<&Hit>, h: &Hit| {
        left.is_none_or(|k| k.end <= h.start) && right.is_none_or(|k| k.start >= h.end)
    };
    if hits.len() <= 64 {
        let mut kept: Vec<Hit> = Vec::with_capacity(hits.len());
        for h in hits.iter() {
            let at = kept.partition_point(|k| k.start < h.start);
            if fits(at.checked_sub(1).map(|i| &kept[i]), kept.get(at), h) {
                kept.insert(at, *h);
            }
        }
        return kept;
    }
    let mut kept: std::collections::BTreeMap<usize, Hit> = std::collections::BTreeMap::new();
    for h in hits.iter() {
        if fits(kept.range(..h.start).next_back().map(|(_, k)| k), kept.range(h.start..).next().map(|(_, k)| k), h) {
            kept.insert(h.start, *h);
        }
    }
    kept.into_values().collect()
}

/// Hits in the normalised text → spans in the input's characters.
pub fn to_spans(text: &str, norm: &Normalized, hits: &[Hit]) -> Vec<Span> {
    let ascii = norm.input_is_ascii();
    // Byte offset of every character (once, not per span).
    let offsets: Option<Vec<usize>> = (!ascii && hits.len() > 1)
        .then(|| text.char_indices().map(|(b, _)| b).chain(std::iter::once(text.len())).collect());
    hits.iter()
        .map(|h| {
            let (start, end) = norm.chars_of(h.start, h.end);
            let value = match &offsets {
                Some(o) => &text[o[start.min(o.len() - 1)]..o[end.min(o.len() - 1)]],
                None if ascii => &text[start.min(text.len())..end.min(text.len())],
                None => char_slice(text, start, end),
            };
            Span { start, end, kind: h.kind, text: value.to_string() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, &'static str)> {
        Detector::new().detect(text).into_iter().map(|s| (s.text, s.kind.name())).collect()
    }

    fn one(text: &str, value: &str, kind: &str) {
        let found = kinds(text);
        assert!(
            found.iter().any(|(t, k)| t == value && *k == kind),
            "{text:?}: wanted {value:?} {kind}, got {found:?}"
        );
    }

    fn none(text: &str) {
        let found = kinds(text);
        assert!(found.is_empty(), "{text:?}: wanted nothing, got {found:?}");
    }

    #[test]
    fn structured() {
        one("mail me at jane.doe+x@example.co.uk today", "jane.doe+x@example.co.uk", "EMAIL");
        one("card: 4111 1111 1111 1111.", "4111 1111 1111 1111", "CARD");
        one("pay with 378282246310005", "378282246310005", "CARD");
        one("IBAN DE89 3704 0044 0532 0130 00 please", "DE89 3704 0044 0532 0130 00", "IBAN");
        one("GB82WEST12345698765432", "GB82WEST12345698765432", "IBAN");
        one("SSN 123-45-6789", "123-45-6789", "SSN");
        one("my NI number is AB 12 34 56 C", "AB 12 34 56 C", "NATIONAL_ID");
        one("CF RSSMRA85T10A562S", "RSSMRA85T10A562S", "NATIONAL_ID");
        one("DNI 12345678Z", "12345678Z", "NATIONAL_ID");
        one("server at 192.168.1.20, ok", "192.168.1.20", "IP_ADDRESS");
        one("v6 2001:db8::8a2e:370:7334 up", "2001:db8::8a2e:370:7334", "IP_ADDRESS");
        one("mac 00:1A:2B:3C:4D:5E", "00:1A:2B:3C:4D:5E", "MAC_ADDRESS");
        one("call me on +44 20 7946 0958", "+44 20 7946 0958", "PHONE");
        one("(555) 123-4567", "(555) 123-4567", "PHONE");
        one("Phone: 555.123.4567x123", "555.123.4567x123", "PHONE");
        one("born on 17 March 1985", "17 March 1985", "DATE_OF_BIRTH");
        one("DOB: 1985-03-17", "1985-03-17", "DATE_OF_BIRTH");
    }

    #[test]
    fn secrets() {
        one("key AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", "SECRET");
        one("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "SECRET");
        one("OPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12", "SECRET");
        one("password = \"hunter22\"", "hunter22", "SECRET");
        one("DB_PASSWORD=s3cr3t!x", "s3cr3t!x", "SECRET");
        one("postgres://admin:pa55w0rd@db.internal:5432/app", "admin:pa55w0rd", "URL_CREDENTIALS");
        one(
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            "SECRET",
        );
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----";
        one(&format!("key:\n{pem}\nend"), pem, "SECRET");
    }

    #[test]
    fn benign() {
        none("version 1.2.3.4 released on 2024-01-15 at 10:30:00");
        none("Order #4111111111111112 shipped; invoice 123456789");
        none("password = os.environ[\"DB_PASSWORD\"]");
        none("password: str = None");
        none("let max_tokens = 100; std::vector<int> v;");
        none("task-management-system-overview is done");
        none("The meeting is on 2024-03-15 in room 12.");
        none("Call the function with 3 arguments.");
    }

    #[test]
    fn names_and_addresses() {
        one("Please forward this to Jennifer Martinez.", "Jennifer Martinez", "PERSON");
        one("Dear Dr. Hopkins, thanks", "Hopkins", "PERSON");
        one("Noah O'Connor's test came back", "Noah O'Connor", "PERSON");
        one("Der Gentest von Dieter Hoffmann zeigt ein Risiko.", "Dieter Hoffmann", "PERSON");
        one(
            "I live at 1600 Pennsylvania Avenue, Washington, DC 20500",
            "1600 Pennsylvania Avenue, Washington, DC 20500",
            "ADDRESS",
        );
        one("Adresse: Hauptstraße 5, 10115 Berlin", "Hauptstraße 5, 10115 Berlin", "ADDRESS");
    }

    #[test]
    fn identifiers_known_by_their_context() {
        one("curl -H \"Authorization: Bearer abcDEF1234567890xyzQ\" https://x", "abcDEF1234567890xyzQ", "SECRET");
        one("DEPLOY_KEY=ab12cd34ef56gh78ij90", "ab12cd34ef56gh78ij90", "SECRET");
        one("export ACCESS_KEY_ID=Zq81mVb2Lp04Xc77", "Zq81mVb2Lp04Xc77", "SECRET");
        none("sort_key = name");
        none("let auth = token_from(header);");
        // Checksums fail (12345678 takes Z), the label says what they are.
        one("Mi DNI es 12345678-B.", "12345678-B", "NATIONAL_ID");
        one("Steuer-ID: 12 345 678 901", "12 345 678 901", "NATIONAL_ID");
        one("passport number X12345678 for the form", "X12345678", "NATIONAL_ID");
        none("Temporary NI numbers such as ZZ 12 34 56 A are not valid.");
        one("text me at +34 612 345 678 when you land", "+34 612 345 678", "PHONE");
        one("Pregunte por la Sra. Ibáñez en recepción.", "Ibáñez", "PERSON");
        one("Je m'appelle Maëlle Bérard.", "Maëlle Bérard", "PERSON");
        one("Renée McAllister will join.", "Renée McAllister", "PERSON");
        none("J'ai voté pour La France insoumise.");
        none("My flight to Lisbon is delayed.");
        one("I live at 12 Kingsmead, Cambridge.", "12 Kingsmead, Cambridge", "ADDRESS");
        one("Lieferadresse: Am Lindenhof 12, 50667 Köln", "Am Lindenhof 12, 50667 Köln", "ADDRESS");
        none("I live at home with my parents, okay.");
    }

    #[test]
    fn resolve_keeps_the_stronger_of_overlapping_hits() {
        let kinds = EntityType::ALL;
        let mut rng = crate::test_rng::TestRng(0x9E37_79B9_7F4A_7C15);
        let mut next = move |n: u64| rng.below(n as usize);
        for n in [0, 1, 2, 5, 30, 64, 65, 200] {
            for _ in 0..50 {
                let hits: Vec<Hit> = (0..n)
                    .map(|_| {
                        let start = next(1000);
                        Hit { start, end: start + next(40), kind: kinds[next(kinds.len() as u64)] }
                    })
                    .collect();
                // Each hit in order of strength, kept when it overlaps none kept before.
                let mut order: Vec<Hit> = hits.iter().copied().filter(|h| h.end > h.start).collect();
                order.sort_by_key(|h| {
                    (std::cmp::Reverse(priority(h.kind)), std::cmp::Reverse(h.end - h.start), h.start)
                });
                let mut want: Vec<Hit> = Vec::new();
                for h in order {
                    if want.iter().all(|k| k.end <= h.start || h.end <= k.start) {
                        want.push(h);
                    }
                }
                want.sort_by_key(|h| h.start);
                let got = resolve(hits);
                assert_eq!(
                    got.iter().map(|h| (h.start, h.end, h.kind)).collect::<Vec<_>>(),
                    want.iter().map(|h| (h.start, h.end, h.kind)).collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn unicode_offsets() {
        let text = "Ünïcödé: ４１１１ １１１１ １１１１ １１１１ ok";
        let spans = Detector::new().detect(text);
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!(spans[0].kind, EntityType::Card);
        assert_eq!(spans[0].text, "４１１１ １１１１ １１１１ １１１１");
        assert_eq!(spans[0].start, 9);
        let zw = "mail: jo\u{200B}hn@example.com";
        let spans = Detector::new().detect(zw);
        assert_eq!(spans[0].text, "jo\u{200B}hn@example.com");
    }
}
