//! The detectors. Each works on the normalised text and reports byte ranges of it; shapes come
//! from regular expressions, and a match is kept only when its checksum or validity rule holds
//! and, for shapes that ordinary numbers also take, when a context word stands nearby.
//! Overlaps go to the more specific type (a card number is not also a phone number).

use crate::checks;
use crate::keywords::{KeywordTable, Kw};
use crate::scan::{find, Prefixes};
use crate::normalize::{char_slice, Normalized};
use crate::{EntityType, Span};
use regex::Regex;
use std::collections::HashSet;
use std::sync::OnceLock;

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
        first: include_str!("../data/first_names.txt").lines().collect(),
        last: include_str!("../data/last_names.txt").lines().collect(),
        common: include_str!("../data/common_words.txt").lines().collect(),
    })
}

const MONTHS: &str = "jan(?:uary|vier|uari|uar|\\.)?|feb(?:ruary|ruar|ruari|\\.)?|f[ée]vrier|mar(?:ch|s|\\.)?|m[äa]rz|maart|apr(?:il|ile|\\.)?|avril|abril|may|mai|mei|mayo|maggio|jun(?:e|i|io|\\.)?|juin|giugno|jul(?:y|i|\\.)?|juillet|julio|luglio|aug(?:ust|ustus|\\.)?|ao[uû]t|agosto|sep(?:t|tember|tembre|\\.)?|septiembre|settembre|oct(?:ober|obre|\\.)?|okt(?:ober)?|octubre|ottobre|nov(?:ember|embre|iembre|\\.)?|dec(?:ember|\\.)?|d[ée]cembre|dez(?:ember)?|diciembre|dicembre|enero|gennaio|febrero|febbraio|marzo|aprile|juni|junio|juli|gen\\.?|giu\\.?|lug\\.?|ago\\.?|set\\.?|ott\\.?|dic\\.?";

fn month_number(word: &str) -> Option<u32> {
    let w = word.trim_end_matches('.').to_lowercase();
    let table: [(u32, &[&str]); 12] = [
        (1, &["jan", "janv", "gen", "ene", "enero", "gennaio"]),
        (2, &["feb", "fév", "fev", "febrero", "febbraio"]),
        (3, &["mar", "mär", "maart", "marzo"]),
        (4, &["apr", "avr", "abr"]),
        (5, &["may", "mai", "mei", "mag", "mayo"]),
        (6, &["jun", "juin", "giu"]),
        (7, &["jul", "juil", "lug"]),
        (8, &["aug", "aoû", "aou", "ago"]),
        (9, &["sep", "set"]),
        (10, &["oct", "okt", "ott"]),
        (11, &["nov"]),
        (12, &["dec", "déc", "dez", "dic"]),
    ];
    // "juillet"/"julio"/"juli" before "juin"/"jun": check longest prefixes first.
    if w.starts_with("juil") || w.starts_with("jul") || w.starts_with("lug") {
        return Some(7);
    }
    if w.starts_with("juin") || w.starts_with("jun") || w.starts_with("giu") {
        return Some(6);
    }
    if w.starts_with("mai") && w != "mai" {
        return None;
    }
    table.iter().find(|(_, ps)| ps.iter().any(|p| w.starts_with(p))).map(|(m, _)| *m)
}

const DOB_CONTEXT: &[&str] = &[
    "born", "birth", "dob", "d.o.b", "b-day", "bday", "birthday", "née", "né le", "née le", "naissance", "geboren", "geb.",
    "geburtsdatum", "geburtstag", "nacimiento", "nacido", "nacida", "nato il", "nata il", "nascita", "geboortedatum",
    "aged", "age:",
];

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

const STREET_SUFFIXES: &str = "Street|St|Avenue|Ave|Av|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|Terrace|Ter|Circle|Cir|Parkway|Pkwy|Highway|Hwy|Square|Sq|Trail|Trl|Crescent|Cres|Close|Grove|Gardens|Gdns|Row|Walk|Mews|Hill|Rise|View|Park|Green|Alley|Bypass|Causeway|Center|Centre|Corner|Cove|Creek|Crossing|Dale|Dam|Divide|Estate|Estates|Expressway|Extension|Falls|Ferry|Field|Fields|Flat|Flats|Ford|Forest|Forge|Forks|Fort|Freeway|Gateway|Glen|Harbor|Harbour|Haven|Heights|Hills|Hollow|Island|Islands|Isle|Junction|Key|Keys|Knoll|Knolls|Lake|Lakes|Landing|Light|Lights|Loaf|Lock|Locks|Lodge|Loop|Mall|Manor|Manors|Meadow|Meadows|Mill|Mills|Mission|Motorway|Mount|Mountain|Mountains|Neck|Orchard|Oval|Overpass|Pass|Path|Pike|Pine|Pines|Plain|Plains|Plaza|Point|Points|Port|Ports|Prairie|Radial|Ramp|Ranch|Rapid|Rapids|Rest|Ridge|Ridges|River|Route|Run|Shoal|Shoals|Shore|Shores|Skyway|Spring|Springs|Spur|Squares|Station|Stravenue|Stream|Streets|Summit|Throughway|Trace|Track|Trafficway|Tunnel|Turnpike|Underpass|Union|Unions|Valley|Valleys|Via|Viaduct|Views|Village|Villages|Ville|Vista|Walks|Wall|Ways|Well|Wells|Branch|Bridge|Brook|Brooks|Burg|Burgs|Camp|Canyon|Cape|Cliff|Cliffs|Club|Common|Commons|Corners|Course|Courts|Coves|Crest|Curve|Drives|Fall|Garden|Gateway|Glens|Greens|Groves|Harbors|Inlet|Junctions|Lane|Marg|Nagar|Road|Chowk|Gali|Bypass|Top|Side|End|Approach|Drove|Gate|Parade|Quay|Wharf|Wynd|Fold|Croft|Lea|Ley|Nook|Passage|Precinct|Promenade|Reach|Retreat|Access|Arcade|Brace|Brae|Break|Brow|Chase|Circuit|Concourse|Copse|Cross|Crossroad|Crossway|Dell|Deviation|Dip|Distributor|Driveway|Edge|Elbow|Entrance|Esplanade|Fairway|Firetrail|Follow|Footway|Foreshore|Formation|Front|Frontage|Gap|Gates|Glade|Grange|Ground|Gully|Highroad|Interchange|Intersection|Laneway|Lees|Line|Link|Lookout|Lower|Meander|Mew|Outlook|Parklands|Pathway|Plateau|Pocket|Quad|Quadrangle|Quadrant|Quays|Ramble|Range|Reserve|Ride|Ridgeway|Ring|Riverway|Riviera|Roads|Roadside|Roadway|Ronde|Rosebowl|Rotary|Round|Siding|Slope|Sound|Stairs|Steps|Strand|Strip|Subway|Tarn|Thoroughfare|Tollway|Tor|Towers|Trailer|Triangle|Trunkway|Turn|Upper|Vale|Villas|Wade|Walkway|Yard|Zila|Ganj|Peth|Extensions|Ports|Rapids|Unions";

/// The compiled patterns.
pub struct Detector {
    pem: Regex,
    token: Regex,
    /// The literal prefixes of `token`'s keys.
    token_prefixes: Prefixes,
    assign: Regex,
    assign_tail: Regex,
    said: Regex,
    url_creds: Regex,
    email: Regex,
    iban: Regex,
    digits: Regex,
    ids: Regex,
    /// Every keyword of every detector, in one pass over the lower-case text.
    keywords: KeywordTable,
    said_tail: Regex,
    street_de_tail: Regex,
    dob_ctx: Regex,
    name_cue: Regex,
    ipv4: Regex,
    ipv6: Regex,
    mac: Regex,
    phone: Regex,
    date_numeric: Regex,
    date_words: Regex,
    dob_context: Regex,
    street_en_start: Regex,
    street_en: Regex,
    street_eu_key: Regex,
    street_eu: Regex,
    number_before: Regex,
    street_de: Regex,
    postal_tail: Regex,
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

/// The character before byte `i` (or `None` at the start).
fn before(s: &str, i: usize) -> Option<char> {
    s[..i].chars().next_back()
}

fn after(s: &str, i: usize) -> Option<char> {
    s[i..].chars().next()
}

fn word_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// A char boundary at or before `i`.
fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The `window` bytes before `start`, lower case (ASCII), cut at a line start.
fn ctx_before(lower: &str, start: usize, window: usize) -> &str {
    let from = floor(lower, start.saturating_sub(window));
    &lower[from..start]
}

fn ctx_after(lower: &str, end: usize, window: usize) -> &str {
    let to = ceil(lower, end + window);
    &lower[end..to]
}

fn has_any(hay: &str, words: &[&str]) -> bool {
    words.iter().any(|w| contains_word(hay, w))
}

/// `w` in `hay`, not inside a longer word on its left (suffixes may follow: "phones").
fn contains_word(hay: &str, w: &str) -> bool {
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
            token_prefixes: Prefixes::new(&[
                "AKIA", "ASIA", "ABIA", "ACCA", "AIDA", "AROA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
                "sk-", "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xapp-", "https://hooks.slack.com/services/",
                "sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_", "AIza", "npm_", "hf_", "SG.", "eyJ",
            ]),
            assign: re(r"(?:password|passwd|passphrase|pwd|secret_?key|client_?secret|secret|auth_?token|access_?token|token|api_?key|apikey|access_?key|private_?key|credentials?)"),
            assign_tail: re(r#"^["']?[ \t]*(?::=|=>|==?|:)[ \t]*"#),
            said: re(r"(?-u:\b)(?:password|passcode|passwort|kennwort|mot de passe|contraseña|pin)\s+(?:is|was|ist|est|es|è|:)\s+"),
            url_creds: re(r"://([^\s:/?#@]+):([^\s/?#@]+)@[A-Za-z0-9\[]"),
            email: re(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}"),
            iban: re(r"(?i)[a-z]{2}[0-9]{2}[ -]?[a-z0-9]{4}"),
            digits: re(r"[0-9]+(?:(?: |-|\. |\.)[0-9]+)*"),
            keywords: KeywordTable::new(),
            said_tail: re(r"^\s+(?:is|was|ist|est|es|è|:)\s+"),
            street_de_tail: re(r"^[ \t]+[0-9]{1,5}[a-zA-Z]?(?:[-/][0-9]{1,5})?"),
            dob_ctx: word_list(DOB_CONTEXT),
            name_cue: re(r"(?:my name is|name is|i'm|i am) "),
            ids: re(r"[12] ?[0-9]{2} ?[0-9]{2} ?2[AB] ?[0-9]{3} ?[0-9]{3} ?[0-9]{2}|[A-Z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]|[A-Z]{6}[0-9LMNPQRSTUV]{2}[A-EHLMPR-T][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]|[XYZ]?[0-9]{7,8}-?[A-Z]"),
            ipv4: re(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?:/[0-9]{1,2})?"),
            ipv6: re(r"[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:]*:[0-9A-Fa-f.:]*"),
            mac: re(r"[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}"),
            phone: re(concat!(
                r"(?:\+|00)?\(?[0-9]+\)?",
                r"(?:(?:[ .\-/]|[ .\-/][ .\-/]| ?\(0?[0-9]*\) ?|\(0\))?[0-9]+)+",
                r"(?:[ ]*(?:x|ext\.?|extension|#)[ ]*[0-9]+)?"
            )),
            date_numeric: re(r"[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}|[0-9]{1,2}[-/.][0-9]{1,2}[-/.](?:[0-9]{4}|[0-9]{2})"),
            date_words: re(&format!(
                r"(?i)(?:([0-9]{{1,2}})(?:st|nd|rd|th|er|º)?\.?\s+(?:of\s+|de\s+)?({MONTHS})\.?,?\s+(?:de\s+)?([0-9]{{4}})|({MONTHS})\.?\s+([0-9]{{1,2}})(?:st|nd|rd|th)?,?\s+([0-9]{{4}}))"
            )),
            dob_context: re(r"born|birth|dob|d\.o\.b|b-day|bday|née|né le|naissance|geboren|geb\.|geburts|nacimiento|nacid[oa]|nat[oa] il|nascita|geboortedatum|aged"),
            street_en_start: re(r"[0-9]{1,6}[A-Za-z]?,?[ \t]+(?:[NSEW]\.?[ \t]+)?[A-Z]|(?:Flat|Studio|Apartment|Unit) [0-9]+[A-Z]?[\s,|]"),
            street_en: re(&format!(
                r"^(?:(?:Flat|Studio|Apartment|Unit) [0-9]+[A-Z]?[\s,|]+|[0-9]{{1,6}}[A-Za-z]?,?\s+)(?:[NSEW]\.?\s+)?(?:\p{{Lu}}[\p{{L}}'’-]*\.?\s+){{1,4}}(?:{STREET_SUFFIXES})(?-u:\b)\.?"
            )),
            street_eu_key: re(concat!(
                r"(?-u:\b)(?:rue|avenue|av\.|boulevard|bd|chemin|allée|impasse|place|quai|route|cours|passage|",
                r"calle|c/|avenida|avda\.|paseo|plaza|camino|carrer|carretera|ronda|glorieta|cuesta|callejón|rambla|travesía|",
                r"via|viale|piazza|piazzale|corso|largo|vicolo|contrada|borgo|strada|rua|travessa|praça|alameda)[ \t]+",
            )),
            street_eu: re(concat!(
                r"^(?:(?i:de la|de l'|du|des|de|del|della|dei|di|da|d')\s*)?\p{Lu}[\p{L}'’-]*(?:\s+(?:\p{Lu}[\p{L}'’-]*|(?i:de|del|la|di|y)))*",
                r"(?:,?\s+(?:n\.?\s*|nº\s*|no\.?\s*)?[0-9]{1,5}[a-zA-Z]?)?",
            )),
            number_before: re(r"[0-9]{1,5}[a-z]?,?\s+$"),
            street_de: re(concat!(
                r"(?:straße|strasse|str\.|weg|gasse|platz|allee|damm|ufer|steig|chaussee|",
                r"straat|laan|plein|gracht|kade|baan|dijk|singel|dreef|steeg)[ \t]+[0-9]{1,5}[a-zA-Z]?(?:[-/][0-9]{1,5})?",
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
            Ok(mut scratch) => self.hits_in(text, &mut scratch, lap),
            Err(_) => self.hits_in(text, &mut Scratch::default(), lap),
        })
    }

    fn hits_in(&self, text: &str, scratch: &mut Scratch, lap: &mut impl FnMut(usize)) -> Vec<Hit> {
        let Scratch { lower, keywords: kw, hits } = scratch;
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
            self.numbers(text, lower, kw, &mut push);
            lap(4);
        }
        if digits >= 6 {
            self.ids(text, lower, kw, &mut push);
        }
        lap(5);
        if n.dots + n.colons + n.dashes > 0 {
            self.network(text, lower, kw, &mut push);
        }
        lap(6);
        if digits >= 7 {
            self.phones(text, lower, kw, &mut push);
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
    pub const STAGES: [&'static str; 14] =
        ["keywords", "secrets", "emails", "ibans", "numbers", "ids", "network", "phones", "dates", "addresses", "persons", "resolve", "normalize", "to_spans"];

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
        self.keywords.find_all(lower, |start, end, kinds| {
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

    /// Time of each pattern's bare search over `texts` (for tuning).
    #[doc(hidden)]
    pub fn regex_costs(&self, texts: &[String]) -> Vec<(&'static str, f64)> {
        let all: Vec<(&'static str, &Regex)> = vec![
            ("pem", &self.pem), ("token", &self.token), ("assign", &self.assign), ("said", &self.said), ("url_creds", &self.url_creds),
            ("email", &self.email), ("iban", &self.iban), ("digits", &self.digits), ("ids", &self.ids), ("ipv4", &self.ipv4),
            ("ipv6", &self.ipv6), ("mac", &self.mac), ("phone", &self.phone), ("date_numeric", &self.date_numeric),
            ("date_words", &self.date_words), ("dob_context", &self.dob_context), ("street_en_start", &self.street_en_start),
            ("street_eu_key", &self.street_eu_key), ("street_de", &self.street_de), ("name_cue", &self.name_cue),
        ];
        let lowers: Vec<String> = texts.iter().map(|t| t.to_ascii_lowercase()).collect();
        all.into_iter()
            .map(|(n, r)| {
                for t in texts {
                    std::hint::black_box(r.find_iter(t).count());
                }
                let t0 = std::time::Instant::now();
                for (t, l) in texts.iter().zip(&lowers) {
                    std::hint::black_box(r.find_iter(t).count() + r.find_iter(l).count());
                }
                (n, t0.elapsed().as_secs_f64() / 2.0)
            })
            .collect()
    }

    #[inline(never)]
    fn secrets(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let pem = if kw.bytes.dashes >= 10 && find(text, "-----BEGIN").is_some() { self.pem.find_iter(text).collect() } else { Vec::new() };
        for m in pem {
            let end = match find(&text[m.end()..], "-----END ") {
                Some(i) => {
                    let close = m.end() + i + 9;
                    find(&text[close..], "-----").map_or(text.len(), |j| close + j + 5)
                }
                None => text.len(),
            };
            push(m.start(), end, EntityType::Secret);
        }
        // The pattern runs from the first place a key's prefix stands, if any.
        let from = self.token_prefixes.first(text.as_bytes()).unwrap_or(text.len());
        for m in self.token.find_iter(&text[from..]) {
            let (start, end) = (from + m.start(), from + m.end());
            let s = m.as_str();
            let boundary = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if boundary(before(text, start)) || (boundary(after(text, end)) && !s.starts_with("https://")) {
                continue;
            }
            // Keys are random: mixed letters and digits (not "sk-my-project-name-here").
            if s.starts_with("sk-") || s.starts_with("xox") {
                let tail = s.rsplit('-').next().unwrap_or("");
                let digits = s.bytes().filter(u8::is_ascii_digit).count();
                if digits < 2 || tail.len() < 6 && !s.starts_with("xox") {
                    continue;
                }
            }
            push(start, end, EntityType::Secret);
        }
        let creds = if kw.bytes.colons > 0 && find(text, "://").is_some() { self.url_creds.captures_iter(text).collect() } else { Vec::new() };
        for m in creds {
            let (user, pass) = (m.get(1).unwrap(), m.get(2).unwrap());
            let scheme = text[..m.get(0).unwrap().start()].bytes().rev().take_while(|b| b.is_ascii_alphanumeric() || b"+.-".contains(b)).count();
            if placeholder(pass.as_str()) || scheme == 0 || scheme > 16 {
                continue;
            }
            push(user.start(), pass.end(), EntityType::UrlCredentials);
        }
        for m in &kw.assign {
            // `==` compares, `max_tokens: 100` counts, `password: str` annotates.
            let Some(tail) = self.assign_tail.find(&text[m.end()..]) else { continue };
            if tail.as_str().contains("==") || after(text, m.end()).is_some_and(|c| c.is_alphanumeric()) {
                continue;
            }
            if let Some((s, e)) = assigned_value(text, m.end() + tail.end(), false) {
                push(s, e, EntityType::Secret);
            }
        }
        for m in &kw.said {
            if let Some((s, e)) = assigned_value(text, m.end(), true) {
                push(s, e, EntityType::Secret);
            }
        }
        let _ = lower;
    }

    #[inline(never)]
    fn emails(&self, text: &str, push: &mut impl FnMut(usize, usize, EntityType)) {
        for m in self.email.find_iter(text) {
            let mut start = m.start();
            while text.as_bytes()[start] == b'.' {
                start += 1;
            }
            let local = &text[start..text[start..].find('@').map_or(start, |i| start + i)];
            if local.is_empty() || local == "git" || after(text, m.end()).is_some_and(|c| c.is_alphanumeric()) {
                continue;
            }
            push(start, m.end(), EntityType::Email);
        }
    }

    #[inline(never)]
    fn ibans(&self, text: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let bytes = text.as_bytes();
        // Two letters, two digits: a digit stretch that starts right after two letters.
        let anchors = kw.digits.iter().map(|&(a, _)| a).filter(|&a| {
            a >= 2 && a + 1 < bytes.len() && bytes[a - 2].is_ascii_alphabetic() && bytes[a - 1].is_ascii_alphabetic() && bytes[a].is_ascii_digit() && bytes[a + 1].is_ascii_digit()
        }).map(|a| a - 2);
        for at in anchors {
            let m = Found { start: at, end: at + 4 };
            if word_char(before(text, m.start)) {
                continue;
            }
            let cc = text[m.start..m.start + 2].to_ascii_uppercase();
            let Some(len) = checks::iban_length(&cc) else { continue };
            // Walk: alphanumerics, single spaces or dashes between them, until `len` are in.
            let mut compact = Vec::with_capacity(len);
            let mut i = m.start;
            let mut end = i;
            while i < bytes.len() && compact.len() < len {
                let b = bytes[i];
                if b.is_ascii_alphanumeric() {
                    compact.push(b.to_ascii_uppercase());
                    i += 1;
                    end = i;
                } else if (b == b' ' || b == b'-') && i + 1 < bytes.len() && bytes[i + 1].is_ascii_alphanumeric() && end == i {
                    i += 1;
                } else {
                    break;
                }
            }
            if compact.len() != len || bytes.get(end).is_some_and(|b| b.is_ascii_alphanumeric()) {
                continue;
            }
            if checks::iban_mod97(&compact) {
                push(m.start, end, EntityType::Iban);
            }
        }
    }

    /// Digit runs: cards, SSNs, and the national numbers that are only digits.
    #[inline(never)]
    fn numbers(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        for (ms, me) in digit_runs(text, &regions(text, &kw.digits, 9, &const { digits_and(b" .-") })) {
            let m = Found { start: ms, end: me };
            if before(text, m.start).is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '_') {
                continue;
            }
            // Groups of the run: (start, end) byte ranges of digits.
            let run = &text[m.start..m.end];
            let mut groups: Vec<(usize, usize)> = Vec::new();
            let mut seps: Vec<&str> = Vec::new();
            let mut i = 0;
            let b = run.as_bytes();
            while i < b.len() {
                let s = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                groups.push((m.start + s, m.start + i));
                let t = i;
                while i < b.len() && !b[i].is_ascii_digit() {
                    i += 1;
                }
                if i > t {
                    seps.push(&run[t..i]);
                }
            }
            let ctx_of = || ctx_before(lower, m.start, 48);
            let mut taken: Vec<(usize, usize)> = Vec::new();
            let free = |taken: &Vec<(usize, usize)>, a: usize, z: usize| taken.iter().all(|&(x, y)| z <= x || a >= y);
            // Windows of consecutive groups, longest first.
            let n = groups.len();
            let len = |i: usize, j: usize| groups[i..=j].iter().map(|g| g.1 - g.0).sum::<usize>();
            let mut windows: Vec<(usize, usize)> = (0..n)
                .flat_map(|i| (i..n.min(i + 8)).map(move |j| (i, j)))
                .filter(|&(i, j)| (9..=19).contains(&len(i, j)))
                .collect();
            windows.sort_by_key(|&(i, j)| std::cmp::Reverse(groups[j].1 - groups[i].0));
            for (i, j) in windows {
                let (start, end) = (groups[i].0, groups[j].1);
                if !free(&taken, start, end) {
                    continue;
                }
                // Separators inside the window: spaces and dashes only (dots make versions/dates).
                let inner = &seps[i..j];
                if inner.iter().any(|s| s.contains('.')) && j > i {
                    continue;
                }
                if j + 1 < n && after(text, end).is_some_and(|c| c.is_ascii_digit()) {
                    continue;
                }
                if i > 0 && seps[i - 1] == "-" || j + 1 < n && seps[j] == "-" {
                    // Part of a longer dashed number.
                    continue;
                }
                if after(text, end).is_some_and(|c| c.is_alphanumeric()) {
                    continue;
                }
                let mut dbuf = [0u8; 24];
                let d = digits_into(&text[start..end], &mut dbuf);
                let mut sbuf = [0usize; 8];
                for (k, g) in groups[i..=j].iter().enumerate() {
                    sbuf[k] = g.1 - g.0;
                }
                let sizes = &sbuf[..=j - i];
                let whole = i == 0 && j + 1 == n;
                let card_ctx = || has_any(ctx_of(), &["card", "karte", "kreditkarte", "carte", "tarjeta", "carta", "pay", "visa", "mastercard", "maestro", "debit", "credit", "kaart"]);
                let kind = if checks::card(d) && card_grouping(sizes) && (d.len() >= 16 || whole) && (d.len() >= 16 || d[0] == 3 || card_ctx()) {
                    Some(EntityType::Card)
                } else if !whole {
                    None
                } else if d.len() == 9 && checks::ssn(d) && (sizes == [3, 2, 4] && inner.iter().all(|s| *s == "-" || *s == " ")
                    || has_any(ctx_of(), &["ssn", "social security", "soc sec", "ss#", "ss #"]))
                {
                    Some(EntityType::Ssn)
                } else if d.len() == 15 && (sizes.len() == 1 || sizes == [1, 2, 2, 2, 3, 3, 2]) && checks::nir(text[start..end].replace(' ', "").as_bytes())
                    || d.len() == 9 && checks::bsn(d) && has_any(ctx_of(), &["bsn", "burgerservicenummer", "sofinummer", "sofi-nummer", "citizen service number"])
                    || d.len() == 9 && checks::sin(d) && (sizes == [3, 3, 3] || sizes.len() == 1) && has_any(ctx_of(), &["sin", "social insurance", "assurance sociale", "nas"])
                    || d.len() == 12 && checks::aadhaar(d) && (sizes == [4, 4, 4] || has_any(ctx_of(), &["aadhaar", "aadhar", "uidai", "uid"]))
                    || d.len() == 11 && sizes.len() == 1 && has_any(ctx_of(), &["steuer-id", "steueridentifikationsnummer", "steuer-identifikationsnummer", "tax id", "idnr"]) && steuer_id(d)
                {
                    Some(EntityType::NationalId)
                } else {
                    None
                };
                if let Some(kind) = kind {
                    taken.push((start, end));
                    push(start, end, kind);
                }
            }
        }
    }

    /// National ids with letters: UK NINO, Italian codice fiscale, Spanish DNI/NIE.
    #[inline(never)]
    fn ids(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let _ = lower;
        let bounded = |s: usize, e: usize| !word_char(before(text, s)) && !word_char(after(text, e));
        // Only near digits: every id shape has some.
        let near = pad(text, kw.digits.iter().copied(), 16, 16);
        for (ms, me) in find_in(&self.ids, text, &near) {
            let m = Found { start: ms, end: me };
            if !bounded(m.start, m.end) {
                continue;
            }
            let compact: Vec<u8> = text[m.start..m.end].bytes().filter(|b| *b != b' ' && *b != b'-').collect();
            if checks::nino(&compact) || checks::codice_fiscale(&compact) || checks::dni_nie(&compact) || checks::nir(&compact) {
                push(m.start, m.end, EntityType::NationalId);
            }
        }
    }

    #[inline(never)]
    fn network(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let n = kw.bytes;
        let ipv4 = if n.dots > 0 { find_in(&self.ipv4, text, &regions(text, &kw.digits, 4, &const { digits_and(b"./") })) } else { Vec::new() };
        for (ms, me) in ipv4 {
            let m = Found { start: ms, end: me };
            let s = &text[m.start..m.end];
            let addr = s.split('/').next().unwrap_or(s);
            if before(text, m.start).is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '-')
                || after(text, m.end).is_some_and(|c| c.is_ascii_digit() || c.is_alphabetic())
                || text[m.end..].starts_with('.') && text[m.end + 1..].starts_with(|c: char| c.is_ascii_digit())
            {
                continue;
            }
            if addr.parse::<std::net::Ipv4Addr>().is_err() {
                continue;
            }
            let ctx = ctx_before(lower, m.start, 24);
            if has_any(ctx, &["version", "ver.", "release", "build", "v.", "firmware", "oid"]) {
                continue;
            }
            push(m.start, m.start + addr.len(), EntityType::IpAddress);
        }
        let macs = if n.colons >= 5 || n.dashes >= 5 || n.dots >= 2 { mac_shapes(text.as_bytes()) } else { Vec::new() };
        for (ms, me) in macs {
            let s = &text[ms..me];
            let consistent = !s.contains(':') || !s.contains('-');
            if consistent && !word_char(before(text, ms)) && !after(text, me).is_some_and(|c| c.is_ascii_alphanumeric() || c == ':' || c == '-') {
                push(ms, me, EntityType::MacAddress);
            }
        }
        if n.colons < 2 {
            return;
        }
        // Only around colons with hex digits or colons on both sides.
        let b = text.as_bytes();
        let hexish = |c: u8| c.is_ascii_hexdigit() || c == b':';
        let colons = (1..b.len().saturating_sub(1)).filter(|&i| b[i] == b':' && hexish(b[i - 1]) && hexish(b[i + 1])).map(|i| (i, i + 1));
        let near = pad(text, colons, 40, 45);
        for (ms, me) in find_in(&self.ipv6, text, &near) {
            let m = Found { start: ms, end: me };
            let s = text[m.start..m.end].trim_end_matches('.');
            let s = if s.ends_with(':') && !s.ends_with("::") { &s[..s.len() - 1] } else { s };
            if s.len() < 6 || s.matches(':').count() < 2 || before(text, m.start).is_some_and(|c| c.is_alphanumeric() || c == ':') {
                continue;
            }
            let end = m.start + s.len();
            if after(text, end).is_some_and(|c| c.is_alphanumeric()) {
                continue;
            }
            let groups = s.split(':').filter(|g| !g.is_empty()).count();
            if groups < 3 && !s.starts_with("::") {
                continue;
            }
            if s.parse::<std::net::Ipv6Addr>().is_ok() {
                push(m.start, end, EntityType::IpAddress);
            } else if let Some((addr, port)) = s.rsplit_once(':') {
                // "…:443": an address with a port.
                if port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()) && addr.parse::<std::net::Ipv6Addr>().is_ok() {
                    push(m.start, m.start + addr.len(), EntityType::IpAddress);
                }
            }
        }
    }

    #[inline(never)]
    fn phones(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        for (ms, me) in phone_candidates(text, &regions(text, &kw.digits, 7, &const { digits_and(b" .-/()+x") })) {
            let mut start = ms;
            let mut end = me;
            let s = &text[ms..me];
            // A leading "(" belongs to the number only when it closes.
            if s.starts_with('(') && !s[1..].contains(')') {
                start += 1;
            }
            let mut s = &text[start..end];
            while s.ends_with([' ', '.', '-', '/', '(']) {
                end -= 1;
                s = &text[start..end];
            }
            if before(text, start).is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '/' || c == ':' || c == '-' || c == '#' || c == '$' || c == '€' || c == '£')
                || after(text, end).is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '%' || c == '€')
            {
                continue;
            }
            let (main, ext) = match s.find(['x', 'e', '#']) {
                Some(i) => (&s[..i], &s[i..]),
                None => (s, ""),
            };
            let _ = ext;
            let mut dbuf = [0u8; 24];
            if main.bytes().filter(u8::is_ascii_digit).count() > 24 {
                continue;
            }
            let d = digits_into(main, &mut dbuf);
            if !(7..=15).contains(&d.len()) {
                continue;
            }
            if looks_like_date(main.trim()) {
                continue;
            }
            let international = main.starts_with('+') || main.starts_with("00") && d.len() >= 10;
            let ctx = ctx_before(lower, start, 40);
            let near = ctx_before(lower, start, 14);
            let _ = (ctx, near);
            let within = |list: &[Pos], n: usize| list.iter().any(|p| p.1 <= start && p.0 + n >= start);
            let context = within(&kw.phone_ctx, 40);
            if within(&kw.not_phone, 9) || !context && within(&kw.not_phone, 14) {
                continue;
            }
            let mut gbuf = [0usize; 24];
            let mut ng = 0;
            for g in main.split(|c: char| !c.is_ascii_digit()).filter(|g| !g.is_empty()) {
                gbuf[ng] = g.len();
                ng += 1;
            }
            let groups = &gbuf[..ng];
            // Card-shaped (4-4-4…) and SSN-shaped numbers are not phones unless dialled internationally.
            let card_like = groups.len() >= 3 && groups[..groups.len() - 1].iter().all(|&g| g == 4) || groups.len() == 1 && d.len() >= 12;
            if !international && (card_like || groups == [3, 2, 4] && !context) {
                continue;
            }
            let dotted = main.contains('.');
            let shaped = phone_shaped(main, groups, d);
            if dotted && !(groups == [3, 3, 4] || international || context) {
                continue;
            }
            if international || context || shaped {
                push(start, end, EntityType::Phone);
            }
        }
    }

    /// Dates of birth: dates near a birth word (only those windows are searched).
    #[inline(never)]
    fn dates(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let mut last_end = 0;
        for m in &kw.dob {
            let from = floor(text, m.start().saturating_sub(40)).max(last_end.min(m.start()));
            let mut to = ceil(text, m.end() + 70);
            if let Some(blank) = find(&text[m.end()..to], "\n\n") {
                to = m.end() + blank;
            }
            last_end = to;
            let mut local = |s: usize, e: usize, k: EntityType| push(from + s, from + e, k);
            self.dates_in(&text[from..to], &lower[from..to], &mut local);
        }
    }

    fn dates_in(&self, text: &str, lower: &str, push: &mut impl FnMut(usize, usize, EntityType)) {
        let dob_ctx = |start: usize, end: usize| {
            self.dob_ctx.is_match(ctx_before(lower, start, 48)) || has_any(ctx_after(lower, end, 24), &["(dob)", "(date of birth)", "(born)", "(birthday)"])
        };
        for m in self.date_numeric.find_iter(text) {
            if before(text, m.start()).is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '-' || c == '/')
                || after(text, m.end()).is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '/')
                || text[m.end()..].starts_with('.') && text[m.end() + 1..].starts_with(|c: char| c.is_ascii_digit())
            {
                continue;
            }
            let parts: Vec<u32> = m.as_str().split(['-', '/', '.']).filter_map(|p| p.parse().ok()).collect();
            if parts.len() != 3 {
                continue;
            }
            let year2 = |y: u32| if y < 100 { if y > 30 { 1900 + y } else { 2000 + y } } else { y };
            let valid = if m.as_str().as_bytes()[4..5].iter().all(|b| !b.is_ascii_digit()) && m.as_str().len() >= 8 && parts[0] > 999 {
                checks::birth_date(parts[0], parts[1], parts[2])
            } else {
                let y = year2(parts[2]);
                checks::birth_date(y, parts[1], parts[0]) || checks::birth_date(y, parts[0], parts[1])
            };
            if valid && dob_ctx(m.start(), m.end()) {
                push(m.start(), m.end(), EntityType::DateOfBirth);
            }
        }
        for c in self.date_words.captures_iter(text) {
            let m = c.get(0).unwrap();
            let (day, month, year) = match (c.get(1), c.get(2), c.get(3)) {
                (Some(d), Some(mo), Some(y)) => (d.as_str(), mo.as_str(), y.as_str()),
                _ => (c.get(5).map_or("", |x| x.as_str()), c.get(4).map_or("", |x| x.as_str()), c.get(6).map_or("", |x| x.as_str())),
            };
            if word_char(before(text, m.start())) || after(text, m.end()).is_some_and(|c| c.is_ascii_digit()) {
                continue;
            }
            let (Ok(d), Some(mo), Ok(y)) = (day.parse::<u32>(), month_number(month), year.parse::<u32>()) else { continue };
            if checks::birth_date(y, mo, d) && dob_ctx(m.start(), m.end()) {
                push(m.start(), m.end(), EntityType::DateOfBirth);
            }
        }
    }

    #[inline(never)]
    fn addresses(&self, text: &str, _lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let window = |from: usize, n: usize| &text[from..ceil(text, from + n)];
        let mut streets: Vec<(usize, usize)> = Vec::new();
        for at in street_starts(text, kw) {
            if word_char(before(text, at)) || streets.last().is_some_and(|l| at < l.1) {
                continue;
            }
            if let Some(x) = self.street_en.find(window(at, 120)) {
                streets.push((at, at + x.end()));
            }
        }
        for m in &kw.street_eu {
            let Some(x) = self.street_eu.find(window(m.end(), 100)) else { continue };
            let mut start = m.start();
            let mut end = m.end() + x.end();
            let has_number = x.as_str().bytes().any(|b| b.is_ascii_digit());
            let lead = self.number_before.find(&text[floor(text, start.saturating_sub(10))..start]);
            if let Some(l) = lead {
                start -= l.as_str().len();
            }
            if !has_number && lead.is_none() {
                // "rue" or "via" in prose is no address: a number must come with it.
                let rest = &text[end..];
                let t = rest.trim_start_matches([',', ' ']);
                let n = t.bytes().take_while(|b| b.is_ascii_digit()).count();
                if n == 0 {
                    continue;
                }
                end += rest.len() - t.len() + n;
            }
            streets.push((start, end));
        }
        for m in &kw.street_de {
            // Back to the start of the word that ends in the suffix ("Aurelia-Rogge-Platz").
            let head = &text[..m.start()];
            let word = head.chars().rev().take_while(|c| c.is_alphabetic() || *c == '-').map(char::len_utf8).sum::<usize>();
            let start = m.start() - word;
            if word < 2 || !text[start..].starts_with(|c: char| c.is_uppercase()) {
                continue;
            }
            streets.push((start, m.end()));
        }
        if streets.is_empty() {
            return;
        }
        streets.sort_by_key(|p| (p.0, std::cmp::Reverse(p.1)));
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for p in streets {
            match merged.last_mut() {
                Some(last) if p.0 <= last.1 => last.1 = last.1.max(p.1),
                _ => merged.push(p),
            }
        }
        for (s, mut e) in merged {
            // A unit after the street: "Apt. 388", "Suite 5", "Flat 2", "Piano 8", "Puerta 2".
            let rest = &text[e..];
            let t = rest.trim_start_matches([',', ' ']);
            for unit in ["Apt.", "Apt", "Suite", "Ste.", "Unit", "Flat", "Floor", "Piano", "Puerta", "Piso", "Bus", "bte", "#"] {
                if let Some(after_unit) = t.strip_prefix(unit) {
                    let n = after_unit.trim_start();
                    let k = n.bytes().take_while(|b| b.is_ascii_alphanumeric()).count();
                    if k > 0 && k <= 6 && (n.as_bytes()[0].is_ascii_digit() || k <= 2) {
                        e += rest.len() - n.len() + k;
                    }
                    break;
                }
            }
            // Then the city and postal code.
            if let Some(x) = self.postal_tail.find(window(e, 90)) {
                let tail = x.as_str();
                if tail.bytes().any(|b| b.is_ascii_digit()) && !tail.contains("\n\n") {
                    e += x.end();
                }
            }
            push(s, e, EntityType::Address);
        }
    }

    #[inline(never)]
    fn persons(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
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

/// `2024-01-05`, `05/01/2024`, `5.1.24`: one separator, day/month/year-sized groups.
fn looks_like_date(s: &str) -> bool {
    let Some(sep) = s.bytes().find(|b| !b.is_ascii_digit()) else { return false };
    if !matches!(sep, b'-' | b'/' | b'.') {
        return false;
    }
    let groups: Vec<&str> = s.split(sep as char).collect();
    if groups.len() != 3 || groups.iter().any(|g| g.is_empty() || !g.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let l: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    l[0] == 4 && l[1] <= 2 && l[2] <= 2 || l[0] <= 2 && l[1] <= 2 && (l[2] == 2 || l[2] == 4)
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
    /// Stretches of digits and number punctuation.
    digits: Vec<(usize, usize)>,
    /// Capitalised words.
    caps: Vec<(usize, usize)>,
    bytes: ByteCounts,
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
    /// One pass, without branches (the compiler makes it vector code).
    fn of(b: &[u8]) -> ByteCounts {
        let mut n = ByteCounts::default();
        for chunk in b.chunks(1 << 30) {
            let (mut digits, mut at, mut colons, mut dashes, mut dots) = (0u32, 0u32, 0u32, 0u32, 0u32);
            for &c in chunk {
                digits += (c.wrapping_sub(b'0') < 10) as u32;
                at += (c == b'@') as u32;
                colons += (c == b':') as u32;
                dashes += (c == b'-') as u32;
                dots += (c == b'.') as u32;
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
        for list in [&mut self.assign, &mut self.said, &mut self.dob, &mut self.street_eu, &mut self.street_de, &mut self.name_cue, &mut self.phone_ctx, &mut self.not_phone] {
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
            if w.chars().next().is_some_and(|c| c.is_alphanumeric()) { format!("(?-u:\\b){e}") } else { e }
        })
        .collect();
    re(&alts.join("|"))
}

/// A match inside a region.
struct Found {
    start: usize,
    end: usize,
}

/// A byte table: digits and the bytes of `extra`.
const fn digits_and(extra: &[u8]) -> [bool; 256] {
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
fn regions(text: &str, within: &[(usize, usize)], min: usize, allowed: &[bool; 256]) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
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
    out
}

/// Every stretch of digits and number punctuation (`+()./- x` and spaces), in one pass: the
/// only places the number detectors look.
fn number_stretches(text: &str, out: &mut Vec<(usize, usize)>) {
    static TABLE: [bool; 256] = digits_and(b" .-/()+x");
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i..].iter().position(|c| c.is_ascii_digit()) {
            None => break,
            Some(p) => i += p,
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

/// Ranges widened by `before`/`after` bytes (at character boundaries) and merged.
fn pad(text: &str, ranges: impl Iterator<Item = (usize, usize)>, before: usize, after: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (a, z) in ranges {
        let (a, z) = (floor(text, a.saturating_sub(before)), ceil(text, z + after));
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(z),
            _ => out.push((a, z)),
        }
    }
    out
}

/// The digits of `s` into `buf` (at most its length).
fn digits_into<'b>(s: &str, buf: &'b mut [u8]) -> &'b [u8] {
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

/// Where an English-style street line may start: a house number followed by a capitalised
/// word, or "Flat/Unit/Studio/Apartment N".
fn street_starts(text: &str, kw: &Keywords) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for &(from, to) in &kw.digits {
        let mut i = from;
        while i < to {
            if !b[i].is_ascii_digit() || i > 0 && b[i - 1].is_ascii_alphanumeric() {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i - start > 6 {
                continue;
            }
            let mut j = i;
            if j < b.len() && b[j].is_ascii_alphabetic() {
                j += 1;
            }
            if j < b.len() && b[j] == b',' {
                j += 1;
            }
            let spaces = b[j..].iter().take_while(|&&c| c == b' ' || c == b'\t').count();
            if spaces > 0 && b.get(j + spaces).is_some_and(|c| c.is_ascii_uppercase() || *c >= 0x80) {
                out.push(start);
            }
        }
    }
    for &(a, _) in &kw.caps {
        let rest = &text[a..];
        if matches!(rest.as_bytes()[0], b'F' | b'U' | b'S' | b'A') && ["Flat ", "Unit ", "Studio ", "Apartment "].iter().any(|p| rest.starts_with(p)) {
            out.push(a);
        }
    }
    out.sort_unstable();
    out
}

/// Digit runs inside regions: digit groups joined by one space, dash, dot, or ". ".
fn digit_runs(text: &str, regions: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for &(a, z) in regions {
        let mut i = a;
        while i < z {
            if !b[i].is_ascii_digit() {
                i += 1;
                continue;
            }
            let start = i;
            let mut end = i;
            loop {
                while i < z && b[i].is_ascii_digit() {
                    i += 1;
                }
                end = end.max(i);
                // A separator: " ", "-", ".", ". " followed by a digit.
                let sep = if i + 1 < z && b[i] == b'.' && b[i + 1] == b' ' { 2 } else if i < z && matches!(b[i], b' ' | b'-' | b'.') { 1 } else { 0 };
                if sep > 0 && i + sep < z && b[i + sep].is_ascii_digit() {
                    i += sep;
                } else {
                    break;
                }
            }
            out.push((start, end));
        }
    }
    out
}

/// Phone candidates inside regions: the region without trailing separators, an unclosed
/// leading parenthesis, or an "x" that no extension digits follow.
fn phone_candidates(text: &str, regions: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    for &(a, z) in regions {
        let mut start = a;
        let mut end = z;
        // "x" only as an extension: digits (maybe after spaces) must follow; else cut there.
        if let Some(x) = b[start..end].iter().position(|&c| c == b'x') {
            let after = &b[start + x + 1..end];
            let ext = after.iter().skip_while(|&&c| c == b' ').take_while(|c| c.is_ascii_digit()).count();
            if ext == 0 {
                end = start + x;
            } else {
                end = start + x + 1 + after.iter().take_while(|&&c| c == b' ').count() + ext;
            }
        }
        while end > start && matches!(b[end - 1], b' ' | b'.' | b'-' | b'/' | b'(' | b'+') {
            end -= 1;
        }
        while start < end && matches!(b[start], b')' | b' ' | b'.' | b'-' | b'/') {
            start += 1;
        }
        let s = &text[start..end];
        if s.starts_with('(') && !s[1..].contains(')') {
            start += 1;
        }
        if end > start && b[start..end].iter().any(u8::is_ascii_digit) {
            out.push((start, end));
        }
    }
    out
}

/// MAC address shapes, left to right and not overlapping: six hex pairs joined by `:` or `-`
/// ("00:1A:2B:3C:4D:5E"), else three groups of four hex digits joined by dots ("001a.2b3c.4d5e").
fn mac_shapes(b: &[u8]) -> Vec<(usize, usize)> {
    let hex = |i: usize, n: usize| b[i..i + n].iter().all(u8::is_ascii_hexdigit);
    // The separators first: they rule out almost every place.
    let pairs = |i: usize| {
        i + 17 <= b.len() && (0..5).all(|k| matches!(b[i + 2 + 3 * k], b':' | b'-')) && hex(i, 2) && (0..5).all(|k| hex(i + 3 + 3 * k, 2))
    };
    let quads = |i: usize| i + 14 <= b.len() && b[i + 4] == b'.' && b[i + 9] == b'.' && hex(i, 4) && hex(i + 5, 4) && hex(i + 10, 4);
    let mut out = Vec::new();
    let mut i = 0;
    while i + 14 <= b.len() {
        if pairs(i) {
            out.push((i, i + 17));
            i += 17;
        } else if quads(i) {
            out.push((i, i + 14));
            i += 14;
        } else {
            i += 1;
        }
    }
    out
}

/// Matches of `re` inside `regions` (offsets in `text`).
fn find_in(re: &Regex, text: &str, regions: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for &(a, z) in regions {
        for m in re.find_iter(&text[a..z]) {
            out.push((a + m.start(), a + m.end()));
        }
    }
    out
}

/// Capitalised words: an upper-case letter at a word start, then lower-case letters
/// (apostrophes and inner hyphens allowed: "O'Neil", "Wulff-Rörricht"), and a trailing dot
/// ("Dr."). Byte ranges.
fn capitalised_words(text: &str, out: &mut Vec<(usize, usize)>) {
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

/// Card numbers are written whole or in issuer groups (4-4-4-4, 4-6-5, 4-6-4, 4-4-4-4-3).
fn card_grouping(sizes: &[usize]) -> bool {
    match sizes {
        [_] => true,
        _ => sizes[..sizes.len() - 1].iter().all(|&s| s == 4) || sizes == [4, 6, 5] || sizes == [4, 6, 4],
    }
}

/// Phone-like grouping without a context word: NANP 3-3-4 or (3) 3-4, national numbers that
/// start with a trunk 0 and are written in groups.
fn phone_shaped(main: &str, groups: &[usize], d: &[u8]) -> bool {
    let paren = main.contains('(') && main.contains(')');
    if groups == [3, 3, 4] || groups == [1, 3, 3, 4] && d[0] == 1 {
        return true;
    }
    if paren && d.len() >= 9 {
        return true;
    }
    d[0] == 0 && d[1] != 0 && groups.len() >= 2 && (9..=12).contains(&d.len()) && groups[0] >= 2 && groups.iter().all(|&g| g >= 2)
}

/// German tax id: 11 digits, first not 0, ISO 7064 mod 11,10 check digit.
fn steuer_id(d: &[u8]) -> bool {
    if d.len() != 11 || d[0] == 0 {
        return false;
    }
    let mut product = 10u32;
    for &x in &d[..10] {
        let mut sum = (x as u32 + product) % 10;
        if sum == 0 {
            sum = 10;
        }
        product = (sum * 2) % 11;
    }
    let check = (11 - product) % 10;
    check == d[10] as u32
}

/// A placeholder rather than a value: `<password>`, `${DB_PASS}`, `****`, `xxx`.
fn placeholder(v: &str) -> bool {
    let v = v.trim();
    let lower = v.to_ascii_lowercase();
    let env = v.strip_prefix('$').is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
    v.is_empty()
        || env
        || v.starts_with("${") || v.starts_with("$(") || v.starts_with("%(") || v.starts_with("{{")
        || v.starts_with('{') && v.ends_with('}')
        || v.starts_with('<') && v.ends_with('>')
        || v.starts_with('[') && v.ends_with(']')
        || v.chars().all(|c| c == v.chars().next().unwrap_or('x'))
        || ["xxx", "...", "null", "none", "nil", "undefined", "true", "false", "redacted", "hidden", "changeme_in_prod", "your_password", "yourpassword", "your-password", "password_here", "placeholder", "example", "required", "optional", "string", "str", "int", "bool", "secretstr", "env", "os.environ", "process.env", "getenv"]
            .iter()
            .any(|p| lower == *p || lower.starts_with("os.") || lower.starts_with("process.") || lower.starts_with("env.") || lower.starts_with("settings.") || lower.starts_with("config."))
}

/// The value after `key =`: quoted, or up to the next space or delimiter. Code (calls, fields,
/// type annotations), placeholders and short values are not secrets. `prose`: after "password
/// is", where a plain word is more likely prose than a password.
fn assigned_value(text: &str, from: usize, prose: bool) -> Option<(usize, usize)> {
    let rest = &text[from..];
    let first = rest.chars().next()?;
    let (s, e) = if first == '"' || first == '\'' || first == '`' {
        let close = rest[1..].find(first)?;
        (from + 1, from + 1 + close)
    } else {
        let n = rest.find(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'' | '<' | '>')).unwrap_or(rest.len());
        let mut e = from + n;
        loop {
            let v = &text[from..e];
            let unbalanced = |o: char, c: char| v.ends_with(c) && v.matches(o).count() < v.matches(c).count();
            if e > from && (v.ends_with(['.', ':', '!', '?']) || unbalanced('(', ')') || unbalanced('[', ']') || unbalanced('{', '}')) {
                e -= 1;
            } else {
                break;
            }
        }
        // A call or an index is code: `get_token(user)`, `os.environ["X"]`.
        let ident_len = text[from..].bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.').count();
        let ident = &text[from..from + ident_len];
        let random = ident.bytes().any(|b| b.is_ascii_digit()) && ident.bytes().any(|b| b.is_ascii_uppercase());
        if ident_len > 0 && !random && text[from + ident_len..].starts_with(['(', '[']) {
            return None;
        }
        (from, e)
    };
    let v = &text[s..e];
    if v.chars().count() < 4 || v.chars().count() > 200 || placeholder(v) || v.contains('\n') {
        return None;
    }
    if first != '"' && first != '\'' {
        // Dotted identifiers (`self.password`, `config.token`) and bare type names are code.
        let ident = |w: &str| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && w.chars().all(|c| c.is_alphanumeric() || c == '_');
        if v.contains('.') && v.split('.').all(ident) || ident(v) && v.contains('_') && v.chars().all(|c| !c.is_ascii_uppercase()) {
            return None;
        }
        if v.starts_with('/') || v.starts_with("./") || v.starts_with('~') || v.starts_with("http") {
            return None;
        }
        if v.chars().all(|c| c.is_ascii_digit()) && v.len() < 6 {
            return None;
        }
    }
    if prose {
        let has_digit = v.chars().any(|c| c.is_ascii_digit());
        let has_symbol = v.chars().any(|c| !c.is_alphanumeric());
        let mixed = v.chars().any(char::is_uppercase) && v.chars().any(char::is_lowercase);
        if !(has_digit || has_symbol || mixed) || v.len() < 5 && !has_digit {
            return None;
        }
    }
    Some((s, e))
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
    // Kept hits by start; they do not overlap, so only the neighbours of a new one can.
    let mut kept: Vec<Hit> = Vec::with_capacity(hits.len());
    for h in hits.iter() {
        let at = kept.partition_point(|k| k.start < h.start);
        let left_ok = at == 0 || kept[at - 1].end <= h.start;
        let right_ok = at == kept.len() || kept[at].start >= h.end;
        if left_ok && right_ok {
            kept.insert(at, *h);
        }
    }
    kept
}

/// Hits in the normalised text → spans in the input's characters.
pub fn to_spans(text: &str, norm: &Normalized, hits: &[Hit]) -> Vec<Span> {
    // Byte offset of every character (once, not per span).
    let offsets: Option<Vec<usize>> =
        (!text.is_ascii() && hits.len() > 1).then(|| text.char_indices().map(|(b, _)| b).chain(std::iter::once(text.len())).collect());
    hits.iter()
        .map(|h| {
            let (start, end) = norm.chars_of(h.start, h.end);
            let value = match &offsets {
                Some(o) => &text[o[start.min(o.len() - 1)]..o[end.min(o.len() - 1)]],
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
        assert!(found.iter().any(|(t, k)| t == value && *k == kind), "{text:?}: wanted {value:?} {kind}, got {found:?}");
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
        one("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk", "SECRET");
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
        one("I live at 1600 Pennsylvania Avenue, Washington, DC 20500", "1600 Pennsylvania Avenue, Washington, DC 20500", "ADDRESS");
        one("Adresse: Hauptstraße 5, 10115 Berlin", "Hauptstraße 5, 10115 Berlin", "ADDRESS");
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
