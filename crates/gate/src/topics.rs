//! Topic sensitivity: what a text is about, beside the values it holds. A request whose subject
//! is a person's own health, money, legal matters, sex life, religion, politics, union
//! membership, ethnic origin or biometric data, or that pastes a private document, is sensitive;
//! a general question on the same subject is not.
//!
//! The text is cut into words (lower case, accents folded) and the words are looked up in the
//! lexicon (`data/topics.txt`, English, Spanish, German and French): words of a category, each
//! with a weight, and anchors, the words that make a subject someone's own ("my", "ich", "j'",
//! "nuestro"; a person named by a role, "Opa", "la vecina", but not anyone's, "a neighbour", nor
//! a general pair, "from mother to daughter"); a German compound is read by its head
//! ("Spielschulden": "schulden"). A category word counts as much as the nearest anchor of its sentence binds it
//! (closer binds more; a general-knowledge word such as "how" between them unbinds), or of the
//! sentence before, or of the whole text when the text is a record (label: value lines, or lines
//! of a few words and a number: lab values, a statement's rows), carries identifiers (a name, an
//! e-mail…) or is a pasted document ("here is my payslip:", or a document's name heading a text of
//! several lines). A category's score is `1 - Π(1 - weight × binding)` over its words; it is
//! reported from `THRESHOLD` up, or, when none reaches it, from `COMBINED` for two weak
//! categories together. Writing, fiction and professional cues ("a story where", "my essay on",
//! "I'm a nurse") weaken far and third-person anchors; asking the assistant for help ("¿me
//! ayudas?") does not anchor. Deterministic; the words are cut byte by byte (ASCII without
//! decoding) and looked up in one open-addressing table (`word_table.rs`) by hashes made from
//! their bytes (a phrase's from its words' hashes), the lists kept from text to text: no
//! allocation per word or per text once warm (about 15 µs per KB in release builds).

use crate::detect::Fnv;
use crate::topic_model::{ModelScratch, Tokens, TopicModel};
use crate::word_table::{extend, hash, join, WordTable};
use crate::{EntityType, Span};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::OnceLock;

mod cut;
mod lexicon;
use cut::words;
use lexicon::{Entry, Role};

/// What a text is about. The names (`HEALTH`, `SEX_LIFE`, …) are the stable interface; the
/// policy names them beside the entity types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Category {
    Health,
    Finance,
    Legal,
    SexLife,
    Religion,
    Politics,
    Union,
    Ethnicity,
    Biometric,
    PrivateDocument,
}

impl Category {
    pub const ALL: [Category; 10] = [
        Category::Health,
        Category::Finance,
        Category::Legal,
        Category::SexLife,
        Category::Religion,
        Category::Politics,
        Category::Union,
        Category::Ethnicity,
        Category::Biometric,
        Category::PrivateDocument,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::Health => "HEALTH",
            Category::Finance => "FINANCE",
            Category::Legal => "LEGAL",
            Category::SexLife => "SEX_LIFE",
            Category::Religion => "RELIGION",
            Category::Politics => "POLITICS",
            Category::Union => "UNION",
            Category::Ethnicity => "ETHNICITY",
            Category::Biometric => "BIOMETRIC",
            Category::PrivateDocument => "PRIVATE_DOCUMENT",
        }
    }

    pub fn from_name(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Characters `start..end` of the input (end exclusive) that led to a category.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub start: usize,
    pub end: usize,
}

/// A category found in a text: its score (0..1, reported from `THRESHOLD` up) and the words
/// that led to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topic {
    #[serde(rename = "type")]
    pub kind: Category,
    pub score: f32,
    pub evidence: Vec<Evidence>,
}

/// A category is reported from this score up.
pub const THRESHOLD: f32 = 0.55;

/// The longest text (in words) that an everyday object or a pet keeps from the learned model's
/// flag alone (`[EVERYDAY]`, `[PET]` in data/topics.txt).
const EVERYDAY_WORDS: usize = 64;

/// Two or more categories, each short of `THRESHOLD`, whose scores together reach this report the
/// strongest of them.
pub const COMBINED: f32 = 0.6;

/// The judge's band (`solo serve --gate-judge local`): a text with no category is unsure when
/// the lexicon's strongest category score reaches `UNSURE_LEXICON` (short of `THRESHOLD`) or the
/// model's private head reaches `UNSURE_MODEL` (short of its `threshold_combined`).
pub const UNSURE_LEXICON: f32 = 0.3;
pub const UNSURE_MODEL: f32 = 0.3;
const _: () = assert!(UNSURE_LEXICON > 0.0 && UNSURE_LEXICON < THRESHOLD && UNSURE_MODEL > 0.0);

/// What the first stage says of a text, and how sure it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Assessment {
    /// The categories found (`Topics::classify`), strongest first.
    pub topics: Vec<Topic>,
    /// The lexicon's strongest category score (0..1), reported or not; 0 when it did not run.
    pub lexicon: f32,
    /// The model's private head (0..1); `None` where it did not run (the lexicon found a
    /// category, or the text has a writing or professional cue).
    pub model: Option<f32>,
}

impl Assessment {
    /// No category, but a score in the band: the second stage (the local model as judge) asks.
    pub fn unsure(&self) -> bool {
        self.topics.is_empty() && (self.lexicon >= UNSURE_LEXICON || self.model.is_some_and(|p| p >= UNSURE_MODEL))
    }
}

/// The shipped lexicon: written by hand (four languages, every category), and HEALTH words from
/// the ICD-10 titles (English; made by scripts/gate/make_topic_lexicon.py).
pub const LEXICON: &str = include_str!("../data/topics.txt");
pub const LEXICON_ICD10: &str = include_str!("../data/topics_icd10.txt");
/// The families of issue #42's eighth round (drug stems, procedures, third persons by a generic
/// noun or a pronoun, four-language core families).
pub const LEXICON_FAMILIES: &str = include_str!("../data/topics_families.txt");

/// Which detector `Topics::classify` runs: the lexicon, the learned model
/// (`topic_model.rs`), or both (the shipped default: the lexicon's categories, or when it finds
/// none, the model's from `TopicModel::threshold_combined`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    Lexicon,
    Model,
    #[default]
    Combined,
}

/// The lexicon, compiled.
#[derive(Clone)]
pub struct Topics {
    pub mode: Mode,
    /// Whole words and phrases ("blood test", words joined by one space).
    exact: WordTable<Entry>,
    /// Stems (`blut*`) → roles.
    stems: WordTable<Vec<Role>>,
    stem_lens: (usize, usize),
    /// The first `stem_lens.0` bytes of every stem: a word that starts otherwise has none.
    stem_heads: WordTable<()>,
    /// Endings (`*itis`, `*statin`) → roles; a word must be `SUFFIX_ROOM` bytes longer.
    suffixes: Vec<(Box<str>, Vec<Role>)>,
    /// The endings by their last two bytes (`tail`), in the lexicon's order, and a bit per
    /// `tail` that some ending has (most words have none: one test, no look-up).
    suffix_tails: HashMap<usize, Vec<usize>, BuildHasherDefault<Fnv>>,
    tail_bits: Box<[u64; 1024]>,
}

impl Default for Topics {
    fn default() -> Self {
        Topics::shipped().clone()
    }
}

impl std::fmt::Debug for Topics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topics").field("words", &self.exact.len()).field("stems", &self.stems.len()).finish()
    }
}

/// What `classify` reuses from one text to the next.
#[derive(Default)]
struct Scratch {
    words: Words,
    tokens: Tokens,
    model: ModelScratch,
}

/// A word of the text: its folded form (in `Words::folded`), byte and character range.
#[derive(Clone, Copy, Debug)]
struct Word {
    fold: (u32, u32),
    chars: (u32, u32),
    sentence: u32,
    /// Written in capitals only ("US", "MY"): not an anchor.
    caps: bool,
    /// Its bytes in the text, and whether it starts with a capital (a name's shape).
    bytes: (u32, u32),
    capital: bool,
    /// Written as a German compound may be: with `ä`, `ö`, `ü` or `ß`, or capitalised inside its
    /// sentence (see `Topics::at`).
    compound: bool,
}

/// What `classify_in` finds at the words: category words (first word, words, category, weight),
/// anchors (first word, last word, strength), possessives, general-knowledge cues, paste cues,
/// document names (first word, words).
#[derive(Default)]
struct Found {
    terms: Vec<(usize, usize, Category, f32)>,
    anchors: Vec<(usize, usize, f32)>,
    possessives: Vec<usize>,
    know: Vec<usize>,
    /// The sentences with a `Role::General` cue.
    general: Vec<u32>,
    pastes: Vec<usize>,
    docs: Vec<(usize, usize)>,
    /// Capitalised first names that the name detector did not report.
    lone_names: Vec<usize>,
    /// Persons named by a role (`Role::Person`): word, strength.
    persons: Vec<(usize, f32)>,
}

impl Found {
    fn clear(&mut self) {
        self.terms.clear();
        self.anchors.clear();
        self.possessives.clear();
        self.know.clear();
        self.general.clear();
        self.pastes.clear();
        self.docs.clear();
        self.lone_names.clear();
        self.persons.clear();
    }
}

#[derive(Default)]
struct Words {
    /// `classify_in`'s lists.
    found: Found,
    /// The folded words (UTF-8), one space between two (so that a phrase is one piece of it).
    folded: Vec<u8>,
    list: Vec<Word>,
    /// Lines that read `Label: value`, and lines that read `Name: message` with the names
    /// (these and `value_lines` counted only in a text of three lines or more: 0 otherwise).
    record_lines: usize,
    speakers: Vec<String>,
    speaker_lines: usize,
    /// Lines of a table or a list of values: a few words and a number ("HGB 10.8 L",
    /// "03/04 SALARY ACME +3,412.00").
    value_lines: usize,
    /// Lines with words, and the words of the first of them.
    lines: usize,
    /// Whether the last `classify_in` saw a writing, fiction or professional cue.
    meta: bool,
    /// Whether the last `classify_in` found the text about an everyday object or a pet and no
    /// category word bound to a person (`Topics::everyday`): the model alone does not flag it.
    everyday: bool,
    /// The last `classify_in`'s strongest category score (before the threshold).
    best: f32,
    /// The last `classify_in`'s heaviest category word, bound or not, and its strongest anchor.
    raw: f32,
    anchor: f32,
    first_line_words: usize,
    /// The words of the first two lines, when the first ends in a colon ("this came in the post
    /// today:"): a document's name on the second line heads it. 0 otherwise.
    second_line_words: usize,
}

impl Words {
    fn text(&self, i: usize) -> &[u8] {
        let (a, b) = self.list[i].fold;
        &self.folded[a as usize..b as usize]
    }
}

/// Lower case, accents off (`é` → `e`, `ß` → `ss`), into `out`.
pub(crate) fn fold_into(word: &str, out: &mut String) {
    if word.is_ascii() {
        out.extend(word.bytes().map(|b| b.to_ascii_lowercase() as char));
        return;
    }
    fold_chars(word, |c| out.push(c));
}

/// `fold_into` for a word that is not ASCII, each character of the folded form given to `push`.
pub(crate) fn fold_chars(word: &str, mut push: impl FnMut(char)) {
    for c in word.chars() {
        if c == 'ß' {
            push('s');
            push('s');
            continue;
        }
        let mut base = None;
        unicode_normalization::char::decompose_canonical(c, |d| {
            if base.is_none() {
                base = Some(d);
            }
        });
        base.unwrap_or(c).to_lowercase().for_each(&mut push);
    }
}

/// A character's UTF-8 bytes onto `out`.
pub(crate) fn push_char(out: &mut Vec<u8>, c: char) {
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
}

/// The character at byte `i` of `text` and its length: ASCII without decoding (most text).
#[inline(always)]
fn char_at(text: &str, i: usize) -> (char, usize) {
    match text.as_bytes()[i] {
        x @ 0..0x80 => (x as char, 1),
        _ => {
            let c = text[i..].chars().next().expect("a character");
            (c, c.len_utf8())
        }
    }
}

/// `c.is_alphanumeric()`, of a character `len` bytes long.
#[inline(always)]
fn alphanumeric(c: char, len: usize) -> bool {
    if len == 1 {
        c.is_ascii_alphanumeric()
    } else {
        c.is_alphanumeric()
    }
}

/// Are at most `max` of the whitespace-separated words of `line` ones with a letter?
fn letter_words_at_most(line: &str, max: usize) -> bool {
    let mut n = 0;
    let (mut i, mut in_word, mut lettered) = (0, false, false);
    while i < line.len() {
        let (c, len) = char_at(line, i);
        if c.is_whitespace() {
            n += lettered as usize;
            (in_word, lettered) = (false, false);
        } else {
            in_word = true;
            lettered |= if len == 1 { c.is_ascii_alphabetic() } else { c.is_alphabetic() };
        }
        if n > max {
            return false;
        }
        i += len;
    }
    n + (in_word && lettered) as usize <= max
}

/// How a chat log names its writer's own lines.
/// Prepositions and articles before a place's name (see `classify_in`'s first names).
const PLACE_BEFORE: &[&[u8]] = &[
    b"in", b"to", b"from", b"of", b"at", b"the", b"en", b"de", b"del", b"la", b"el", b"los", b"las", b"le", b"les",
    b"des", b"du", b"au", b"aux", b"nach", b"aus", b"von", b"im", b"der", b"die", b"das", b"dem", b"den",
];

/// Words before a role noun that make it anyone's ("a neighbour", "tu vecino", "eine Kollegin",
/// "votre collègue"): see `Role::Person`.
const ANYONE_BEFORE: &[&[u8]] = &[
    b"a", b"an", b"any", b"every", b"each", b"your", b"un", b"una", b"uno", b"une", b"cada", b"chaque", b"tu", b"tus",
    b"ton", b"ta", b"tes", b"votre", b"vos", b"ein", b"eine", b"einen", b"einem", b"einer", b"eines", b"jede",
    b"jeder", b"jeden", b"dein", b"deine", b"deinen", b"deinem", b"deiner", b"euer", b"eure", b"de",
    // A pronoun after "if" is anyone ("if she is pregnant, can she …").
    b"if", b"si", b"wenn", b"falls",
];

/// Children and kin in a general pair ("mother-to-child", "de padres a hijos"), the words that
/// join such a pair, definite articles, and the verbs of asking what someone may do: see
/// `classify_in`'s persons.
const CHILD: &[&[u8]] = &[
    b"child",
    b"children",
    b"baby",
    b"babies",
    b"fetus",
    b"son",
    b"daughter",
    b"nino",
    b"nina",
    b"ninos",
    b"hijo",
    b"hija",
    b"hijos",
    b"bebe",
    b"feto",
    b"kind",
    b"kinder",
    b"sohn",
    b"tochter",
    b"enfant",
    b"enfants",
    b"fils",
    b"fille",
    b"foetus",
];
const PAIR_JOIN: &[&[u8]] = &[b"to", b"a", b"en", b"auf", b"zu", b"into", b"hacia"];
const THE: &[&[u8]] = &[b"the", b"el", b"la", b"der", b"die", b"das", b"le", b"l"];
const MAY: &[&[u8]] = &[
    b"can", b"may", b"could", b"should", b"must", b"does", b"is", b"darf", b"kann", b"muss", b"soll", b"puede",
    b"debe", b"tiene", b"peut", b"doit",
];

/// The copulas of the four languages, before an origin (`classify_in`); not "'s", which is a
/// possessive as often ("Grandma's Turkish coffee").
const COPULA: &[&[u8]] = &[
    b"am", b"m", b"is", b"are", b"re", b"was", b"were", b"soy", b"es", b"eres", b"somos", b"son", b"era", b"bin",
    b"bist", b"ist", b"sind", b"war", b"suis", b"est", b"sommes", b"sont", b"etait",
];

/// Verbs of calling someone a name, before an origin (`classify_in`), and the words that may
/// stand between them ("llaman 'el chino'", "call him the", "nennen ihn den", "traitent de").
#[rustfmt::skip]
const CALLING: &[&[u8]] = &[
    b"call", b"calls", b"called", b"calling", b"llaman", b"llamaban", b"llamaron", b"llama", b"nennen", b"nennt",
    b"nannten", b"nannte", b"appellent", b"appelaient", b"appelle", b"traitent", b"traitaient", b"traite",
];
#[rustfmt::skip]
const CALLED_BETWEEN: &[&[u8]] = &[
    b"him", b"her", b"me", b"them", b"us", b"a", b"an", b"the", b"el", b"la", b"lo", b"le", b"les", b"los", b"las",
    b"te", b"nos", b"ihn", b"sie", b"mich", b"uns", b"den", b"die", b"der", b"einen", b"eine", b"de", b"du", b"l",
    b"m", b"t", b"my", b"his", b"our", b"mi", b"su", b"nuestro", b"mein", b"meinen", b"meine", b"seinen", b"unseren",
    b"mon", b"ma", b"notre", b"son", b"daughter", b"kid", b"boy", b"girl", b"hijo", b"hija", b"nino", b"nina",
    b"sohn", b"tochter", b"fils", b"fille",
];

/// Words of a duration up to now, and its units (`classify_in`).
const SINCE: &[&[u8]] = &[b"for", b"since", b"seit", b"desde", b"hace", b"depuis", b"llevo", b"lleva"];
const UNITS: &[&[u8]] = &[
    b"days",
    b"weeks",
    b"months",
    b"years",
    b"tagen",
    b"wochen",
    b"monaten",
    b"jahren",
    b"dias",
    b"semanas",
    b"meses",
    b"anos",
    b"jours",
    b"semaines",
    b"mois",
    b"ans",
];

/// The subject pronouns listed as persons (data/topics_families.txt).
const PRONOUNS: &[&[u8]] = &[b"he", b"she", b"er", b"ella", b"elle", b"il"];

const SELF_LABELS: &[&str] = &["Me", "I", "Yo", "Ich", "Moi", "Je"];

/// Inflectional endings of English, Spanish, German and French, tried off a word that the lexicon
/// does not list.
const INFLECTIONS: &[&str] = &["ing", "ed", "es", "en", "er", "ern", "s", "e", "n", "d"];

/// The shortest word read as a compound (see `Topics::at`).
const COMPOUND_MIN: usize = 10;

/// A word that ends in a lexicon's ending is at least this much longer than the ending.
const SUFFIX_ROOM: usize = 4;

impl Topics {
    /// The shipped lexicon, compiled once.
    pub fn shipped() -> &'static Topics {
        static T: OnceLock<Topics> = OnceLock::new();
        T.get_or_init(|| {
            Topics::parse(&format!("{LEXICON}\n{LEXICON_FAMILIES}\n{LEXICON_ICD10}"))
                .expect("the shipped topic lexicon parses")
        })
    }

    /// The roles of a listed word or phrase, whose hash is `h`.
    fn word_at(&self, h: u64, key: &[u8]) -> Option<&[Role]> {
        self.exact.get(h, key).map(|e| e.roles.as_slice()).filter(|r| !r.is_empty())
    }

    fn word(&self, key: &[u8]) -> Option<&[Role]> {
        self.word_at(hash(key), key)
    }

    /// The roles of the longest entry at word `i`, and how many words it takes. A phrase's hash
    /// is made from its words' hashes.
    fn at<'a>(&'a self, w: &Words, i: usize) -> Option<(usize, &'a [Role])> {
        let first = w.text(i);
        let h = hash(first);
        let entry = self.exact.get(h, first);
        if let Some(longest) = entry.map(|e| e.phrase).filter(|&n| n > 1) {
            // Words i..i+len are one piece of `folded`, one space between two.
            let n = longest.min(w.list.len() - i);
            let mut hashes = [h; 8];
            for len in 2..=n.min(8) {
                let next = w.text(i + len - 1);
                hashes[len - 1] = join(hashes[len - 2], hash(next), next.len());
            }
            let from = w.list[i].fold.0 as usize;
            for len in (2..=n).rev() {
                let key = &w.folded[from..w.list[i + len - 1].fold.1 as usize];
                let h = if len <= 8 { hashes[len - 1] } else { hash(key) };
                if let Some(r) = self.word_at(h, key) {
                    return Some((len, r));
                }
            }
        }
        if let Some(e) = entry.filter(|e| !e.roles.is_empty()) {
            return Some((1, &e.roles));
        }
        // (A prefix equal to a key, which is whole characters, ends at a character boundary.)
        let (lo, hi) = self.stem_lens;
        if first.len() >= lo && self.stem_heads.get(hash(&first[..lo]), &first[..lo]).is_some() {
            for len in (lo..=hi.min(first.len())).rev() {
                if let Some(r) = self.stems.get(hash(&first[..len]), &first[..len]) {
                    return Some((1, r));
                }
            }
        }
        let t = tail(first);
        if self.tail_bits[t / 64] & 1 << (t % 64) != 0 {
            for &e in self.suffix_tails.get(&t).map_or(&[][..], |e| e) {
                let (s, r) = &self.suffixes[e];
                if first.len() >= s.len() + SUFFIX_ROOM && first.ends_with(s.as_bytes()) {
                    return Some((1, r.as_slice()));
                }
            }
        }
        // An inflected form of a listed word ("streiken", "inherited", "deudas"): the word less
        // a common ending of the four languages.
        if first.len() >= 6 && first.is_ascii() {
            for ending in INFLECTIONS {
                if let Some(base) = first.strip_suffix(ending.as_bytes()) {
                    if let Some(r) = self.word_at(hash(base), base) {
                        return Some((1, r));
                    }
                }
            }
            // A drug's or a condition's name as another language writes it: "Sertralin",
            // "prednisona", "ibuprofeno" for the listed "sertraline", "prednisone", "ibuprofen".
            let n = first.len() - matches!(first.last(), Some(b'a' | b'o')) as usize;
            let base = &first[..n];
            let plus_e = |k: &[u8]| k.len() == n + 1 && k.starts_with(base) && k[n] == b'e';
            let with_e = self.exact.get_by(extend(hash(base), b'e'), plus_e);
            if let Some(r) = with_e
                .map(|e| e.roles.as_slice())
                .filter(|r| !r.is_empty())
                .or_else(|| self.word_at(hash(base), base).filter(|_| n != first.len()))
            {
                return Some((1, r));
            }
            // A German compound ("Spielschulden", "alkoholabhängig", "Steuerhinterziehung"; not
            // "felicitación": `Word::compound`): the longest category word that it ends in, of 6
            // bytes or more after 4 or more.
            if first.len() >= COMPOUND_MIN && w.list[i].compound {
                for start in 4..=first.len() - 6 {
                    let head = &first[start..];
                    let words = |r: &&[Role]| r.iter().all(|r| matches!(r, Role::Word(..)));
                    if let Some(r) = self.word_at(hash(head), head).filter(words) {
                        return Some((1, r));
                    }
                    // A stem of 6 bytes or more ("alkohol|abhängig": `abhangig*`).
                    if head.len() >= lo.max(6) && self.stem_heads.get(hash(&head[..lo]), &head[..lo]).is_some() {
                        for len in (lo.max(6)..=hi.min(head.len())).rev() {
                            if let Some(r) =
                                self.stems.get(hash(&head[..len]), &head[..len]).map(|r| r.as_slice()).filter(words)
                            {
                                return Some((1, r));
                            }
                        }
                    }
                }
            }
        }
        None
    }

    /// The categories of `text`, strongest first. `spans` are the detector's findings in it
    /// (character offsets): a name binds the words near it, other identifiers the whole text.
    pub fn classify(&self, text: &str, spans: &[Span]) -> Vec<Topic> {
        self.assess(text, spans).topics
    }

    /// `classify` with how sure it is: the lexicon's strongest score and the model's private
    /// head beside the categories (`Assessment::unsure`: the judge's band).
    pub fn assess(&self, text: &str, spans: &[Span]) -> Assessment {
        self.assess_bound(text, spans, 0.0)
    }

    /// `assess` for a text that is known to be about a person whatever its wording (a tool's
    /// result, a request's `metadata`): every category word is bound at least `floor` (0..1), as
    /// the words of a record are.
    pub fn assess_bound(&self, text: &str, spans: &[Span], floor: f32) -> Assessment {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> = Default::default();
        }
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut s) => self.classify_with(text, spans, floor, &mut s),
            Err(_) => self.classify_with(text, spans, floor, &mut Scratch::default()),
        })
    }

    /// What the detectors see of a text, for tuning (`examples/probe.rs`): the lexicon's
    /// strongest bound score, its heaviest category word bound or not, its strongest anchor, and
    /// the model's private head (run whatever the lexicon found).
    #[doc(hidden)]
    pub fn probe(&self, text: &str, spans: &[Span], model: &TopicModel) -> [f32; 5] {
        let mut s = Scratch::default();
        self.classify_in(text, spans, 0.0, &mut s.words);
        s.tokens.read(text);
        let p = model.predict_in(&s.tokens, &mut s.model).private;
        [s.words.best, s.words.raw, s.words.anchor, p, s.words.meta as u8 as f32]
    }

    /// The shipped lexicon with another `mode`.
    pub fn with_mode(mode: Mode) -> Topics {
        Topics { mode, ..Topics::default() }
    }

    fn classify_with(&self, text: &str, spans: &[Span], floor: f32, s: &mut Scratch) -> Assessment {
        let model = |s: &mut Scratch| {
            let m = TopicModel::shipped();
            s.tokens.read(text);
            let t = if self.mode == Mode::Model { m.threshold } else { m.threshold_combined };
            m.classify_in(&s.tokens, &mut s.model, t)
        };
        match self.mode {
            Mode::Lexicon => {
                let topics = self.classify_in(text, spans, floor, &mut s.words);
                Assessment { topics, lexicon: s.words.best, model: None }
            }
            Mode::Model => {
                let (p, topics) = model(s);
                Assessment { topics, lexicon: 0.0, model: Some(p) }
            }
            // The lexicon first (its categories are the more precise, its evidence the exact
            // words); the model only where the lexicon found nothing, from its higher threshold.
            Mode::Combined => {
                let found = self.classify_in(text, spans, floor, &mut s.words);
                let lexicon = s.words.best;
                if found.is_empty() && !s.words.meta {
                    let (p, mut topics) = model(s);
                    // An everyday object or a pet, and no category word of the lexicon's: the
                    // model's guess rests on the phrasing alone (the text stays in the judge's
                    // band by the model's score).
                    if s.words.everyday {
                        topics.clear();
                    }
                    // The second opinion, trained on more everyday requests: both must agree.
                    if !topics.is_empty() {
                        let veto = TopicModel::veto();
                        if veto.predict_in(&s.tokens, &mut s.model).private < veto.threshold_combined {
                            topics.clear();
                        }
                    }
                    Assessment { topics, lexicon, model: Some(p) }
                } else {
                    Assessment { topics: found, lexicon, model: None }
                }
            }
        }
    }

    fn classify_in(&self, text: &str, spans: &[Span], floor: f32, w: &mut Words) -> Vec<Topic> {
        let names = crate::detect::names();
        words(text, |label| names.kind(label) & crate::detect::FIRST != 0 || SELF_LABELS.contains(&label), w);
        // What each word is.
        // (The lists are the scratch's, kept from text to text: no allocation for them.)
        let mut found = std::mem::take(&mut w.found);
        found.clear();
        let Found { terms, anchors, possessives, know, general, pastes, docs, lone_names, persons } = &mut found;
        let mut meta = false;
        let (mut everyday, mut loss, mut pet) = (false, false, false);
        let mut i = 0;
        while i < w.list.len() {
            let Some((len, roles)) = self.at(w, i) else {
                // A first name alone ("Julien trompe sa femme", "Ahmed reza cinco veces al
                // día"), which the name detector leaves (it wants a surname or a cue), binds as a
                // named person does: a capitalised word of the first-name list that is no word of
                // the lexicon, no common word (listed in lower case: "Do", "Will", "May" are
                // words), and not after a preposition or an article, where it is a place more
                // often ("en France", "in India", "la Victoria").
                let x = &w.list[i];
                if x.capital && !x.caps && !(i > 0 && PLACE_BEFORE.contains(&w.text(i - 1))) {
                    let k = names.kind(&text[x.bytes.0 as usize..x.bytes.1 as usize]);
                    if k & crate::detect::FIRST != 0
                        && !std::str::from_utf8(w.text(i)).is_ok_and(|l| names.kind(l) & crate::detect::COMMON != 0)
                    {
                        lone_names.push(i);
                    }
                }
                i += 1;
                continue;
            };
            for r in roles {
                match *r {
                    Role::Word(c, weight) => terms.push((i, len, c, weight)),
                    Role::Doc(c) => {
                        docs.push((i, len));
                        if let Some(c) = c {
                            terms.push((i, len, c, 1.0));
                        }
                    }
                    Role::Anchor(s, possessive) if !w.list[i].caps => {
                        anchors.push((i, i + len - 1, s));
                        if possessive {
                            possessives.push(i);
                        }
                    }
                    Role::Anchor(..) => {}
                    Role::Start(s) if i == 0 || w.list[i - 1].sentence != w.list[i].sentence => {
                        anchors.push((i, i + len - 1, s));
                    }
                    Role::Start(_) => {}
                    Role::Person(s) => {
                        // "a neighbour", "tu vecino": anyone's; a form not listed ("grandpas"): none.
                        let anyone = i > 0
                            && w.list[i - 1].sentence == w.list[i].sentence
                            && ANYONE_BEFORE.contains(&w.text(i - 1));
                        let written = len > 1 || self.word(w.text(i)).is_some_and(|r| r.contains(&Role::Person(s)));
                        // A pronoun in a question's inversion ("can she …", "darf er …", "dure-t-elle",
                        // "est-elle fréquente"): the question's subject, anyone.
                        let inverted = PRONOUNS.contains(&w.text(i))
                            && (i > 0 && MAY.contains(&w.text(i - 1))
                                || text[..w.list[i].bytes.0 as usize].ends_with('-'));
                        if !w.list[i].caps && !anyone && !inverted && written {
                            persons.push((i, s));
                        }
                    }
                    Role::Know => know.push(i),
                    Role::Pet => {
                        know.push(i);
                        // "my cat", "mi gato", "meine alte Katze", "mon petit chien".
                        let owned = |p: usize| matches!(self.word(w.text(p)), Some(r) if r.iter().any(|r| matches!(r, Role::Anchor(_, true))));
                        let same = |p: usize| w.list[p].sentence == w.list[i].sentence;
                        pet |= (1..=2).any(|d| i >= d && same(i - d) && owned(i - d));
                    }
                    Role::Everyday => everyday = true,
                    Role::Loss => loss = true,
                    Role::General => {
                        know.push(i);
                        general.push(w.list[i].sentence);
                    }
                    Role::Meta => meta = true,
                    Role::Paste => pastes.push(i + len - 1),
                    Role::Plain => {}
                }
            }
            // A subject's phrase that starts with an anchor ("me duele", "i m bi") keeps the
            // anchor; an asking phrase ("m'a demandé") does not.
            let subject = roles.iter().any(|r| matches!(r, Role::Word(..) | Role::Doc(_)));
            // A Spanish infinitive or gerund with "me" or "nos" on its end ("embargarme",
            // "despedirnos", "operándome") is its own anchor.
            if len == 1 && subject && !w.list[i].caps && enclitic(w.text(i)) {
                anchors.push((i, i, 1.0));
            }
            if len > 1 && subject && !w.list[i].caps {
                let starts = i == 0 || w.list[i - 1].sentence != w.list[i].sentence;
                for r in self.word(w.text(i)).unwrap_or_default() {
                    match *r {
                        Role::Anchor(s, possessive) => {
                            anchors.push((i, i, s));
                            if possessive {
                                possessives.push(i);
                            }
                        }
                        // "got pulled over …": the verb of a message without its subject.
                        Role::Start(s) if starts => anchors.push((i, i, s)),
                        _ => {}
                    }
                }
            }
            i += len;
        }
        // A duration up to now ("for three weeks", "seit Tagen", "desde hace un mes", "depuis deux
        // mois"): what lasts so is someone's own, as a message with no subject tells it ("Blut im
        // Stuhl seit drei Tagen").
        for i in 0..w.list.len() {
            if SINCE.contains(&w.text(i)) && !w.list[i].caps {
                let unit = (i + 1..(i + 4).min(w.list.len()))
                    .find(|&j| w.list[j].sentence == w.list[i].sentence && UNITS.contains(&w.text(j)));
                if let Some(j) = unit {
                    anchors.push((i, j, 0.7));
                }
            }
        }
        // An origin said with a copula ("I'm Kurdish", "soy marroquí", "ich bin Kurde", "elle est
        // malienne") is a person's, not a cuisine's or a language's: the whole weight.
        for t in terms.iter_mut() {
            let after_copula =
                t.0 > 0 && w.list[t.0 - 1].sentence == w.list[t.0].sentence && COPULA.contains(&w.text(t.0 - 1));
            // German puts it last in a clause: "weil ich Türkin bin", "dass du Kurde bist".
            let before_copula = t.0 + t.1 < w.list.len()
                && w.list[t.0 + t.1].sentence == w.list[t.0].sentence
                && matches!(w.text(t.0 + t.1), b"bin" | b"bist");
            // Or as a name someone is called ("le llaman 'el chino'", "they call my son the …",
            // "nennen ihn den Türken", "le traitent de rebeu"): a calling verb, then only
            // pronouns, articles, possessives and a child up to the word.
            let called = || {
                (t.0.saturating_sub(6)..t.0).rev().find(|&j| !CALLED_BETWEEN.contains(&w.text(j))).is_some_and(|j| {
                    w.list[j].sentence == w.list[t.0].sentence && CALLING.contains(&w.text(j)) && t.0 - j <= 5
                })
            };
            if t.2 == Category::Ethnicity && (after_copula || before_copula || called()) {
                t.3 = 1.0;
            }
        }
        // (A writing cue weakens a name's binding, as below.)
        anchors.extend(lone_names.iter().map(|&i| (i, i, if meta { 0.2 } else { 0.9 })));
        // A role in a general statement is nobody's: a pair ("from mother to daughter", "de madre
        // a hija", "vom Vater auf den Sohn", "mother-to-child") or the subject of a question of what
        // a role may do ("can the landlord …", "¿puede el casero …?", "darf der Vermieter …", "le
        // propriétaire peut-il …").
        let at = |p: usize| (p < w.list.len()).then(|| w.text(p));
        let kin = |p: usize| at(p).is_some_and(|t| CHILD.contains(&t)) || persons.iter().any(|&(q, _)| q == p);
        let joined = |a: usize, b: usize| {
            w.list[a].sentence == w.list[b].sentence && PAIR_JOIN.contains(&w.text(a + 1)) && kin(b)
        };
        let pair = |i: usize| {
            (i + 2..=i + 3).any(|j| j < w.list.len() && joined(i, j))
                || (i.saturating_sub(3)..i.saturating_sub(1)).any(|j| kin(j) && joined(j, i))
        };
        let asked = |i: usize| {
            i >= 2
                && w.list[i - 2].sentence == w.list[i].sentence
                && THE.contains(&w.text(i - 1))
                && MAY.contains(&w.text(i - 2))
                || at(i + 1).is_some_and(|t| MAY.contains(&t))
                    && at(i + 2).is_some_and(|t| t == b"il" || t == b"elle" || t == b"ils")
        };
        anchors.extend(
            persons
                .iter()
                .filter(|&&(i, _)| !pair(i) && !asked(i))
                .map(|&(i, s)| (i, i, if meta { s.min(0.2) } else { s })),
        );
        // Names bind like third persons; other identifiers make the whole text someone's.
        let mut whole: f32 = floor;
        for s in spans {
            if s.kind == EntityType::Person {
                let first = w.list.partition_point(|x| (x.chars.1 as usize) <= s.start);
                let last = w.list.partition_point(|x| (x.chars.0 as usize) < s.end);
                if first < last {
                    anchors.push((first, last - 1, if meta { 0.2 } else { 0.9 }));
                }
            } else {
                whole = whole.max(0.6);
            }
        }
        // A clinical note's header ("Pt 71F, …", "58M, COPD, …", "Pat. 78 J., …", "Pte 82 ans"):
        // the text is that patient's record.
        if patient_header(text, w) {
            whole = whole.max(0.9);
        }
        anchors.sort_by_key(|a| a.0);
        let record = w.lines >= 3 && w.record_lines + w.value_lines >= 3;
        if record {
            whole = whole.max(0.8);
        }
        // A document word that heads a text of several lines ("Laborbefund", "NOTICE TO APPEAR").
        let heading = |d: usize| w.lines >= 3 && (d < w.first_line_words || d < w.second_line_words);
        // A document word bound by a possessive or a paste cue a few words before it, or a heading.
        let bound_doc = |&(d, _): &(usize, usize)| {
            let near = |p: usize| {
                p < d && d - p <= 4 && w.list[p].sentence == w.list[d].sentence && !know.iter().any(|&k| k > p && k < d)
            };
            possessives.iter().any(|&p| near(p)) || pastes.iter().any(|&p| near(p)) || heading(d)
        };
        let pasted: Vec<(usize, usize)> = docs.iter().copied().filter(bound_doc).collect();
        if !pasted.is_empty() {
            whole = whole.max(0.8);
        }
        let thread = w.speaker_lines >= 3 && w.speakers.len() >= 2;
        let mut scores = [0f32; Category::ALL.len()];
        let mut evidence: [Vec<Evidence>; Category::ALL.len()] = Default::default();
        for &(t, len, c, weight) in terms.iter() {
            let sentence = w.list[t].sentence;
            let mut bind = whole;
            for &(a0, a1, strength) in anchors.iter() {
                let (sa, sb) = (w.list[a0].sentence, w.list[a1].sentence);
                let same = sa == sentence || sb == sentence;
                // The sentence before, or the one after ("colonoscopy found two polyps. how
                // worried should i be?"): half.
                let previous = sb + 1 == sentence || sa == sentence + 1;
                if !same && !previous {
                    continue;
                }
                let (from, to) = if a1 < t { (a1, t) } else { (t + len - 1, a0) };
                let d = to.saturating_sub(from);
                let mut b = if !same {
                    0.5
                } else if d <= 3 {
                    1.0
                } else if d <= 8 {
                    0.85
                } else {
                    0.65
                };
                if same && (know.iter().any(|&k| k > from && k < to) || general.contains(&sentence)) {
                    b *= 0.3;
                }
                if meta && d > 3 {
                    b *= 0.3;
                }
                bind = bind.max(b * strength);
            }
            let x = weight * bind;
            if x > 0.0 {
                let i = c as usize;
                scores[i] = 1.0 - (1.0 - scores[i]) * (1.0 - x);
                if x >= 0.2 {
                    let (a, b) = (w.list[t].chars.0, w.list[t + len - 1].chars.1);
                    evidence[i].push(Evidence { start: a as usize, end: b as usize });
                }
            }
        }
        w.best = scores.iter().copied().fold(0.0, f32::max);
        w.raw = terms.iter().filter(|t| t.2 != Category::PrivateDocument).map(|t| t.3).fold(0.0, f32::max);
        w.anchor = anchors.iter().map(|a| a.2).fold(0.0, f32::max);
        // Subjects that are each short of the threshold but together say a person's matter
        // ("my husband is Nigerian and gets stopped by the police"): the strongest one counts.
        if scores.iter().all(|&x| x < THRESHOLD) {
            let together = 1.0 - scores.iter().filter(|&&x| x >= 0.3).map(|x| 1.0 - x).product::<f32>();
            let (top, _) = scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).expect("ten categories");
            if together >= COMBINED && scores.iter().filter(|&&x| x >= 0.3).count() >= 2 {
                scores[top] = THRESHOLD;
            }
        }
        // A private document: named and bound ("here is my payslip"), or shaped as one (a record
        // with a sensitive subject or identifiers, a message thread).
        let doc = Category::PrivateDocument as usize;
        let sensitive = scores.iter().any(|&s| s >= THRESHOLD) || spans.iter().any(|s| s.kind != EntityType::Person);
        if !pasted.is_empty() {
            scores[doc] = 0.9;
            for &(d, len) in &pasted {
                evidence[doc]
                    .push(Evidence { start: w.list[d].chars.0 as usize, end: w.list[d + len - 1].chars.1 as usize });
            }
        } else if thread || record && sensitive {
            scores[doc] = 0.85;
            if let (Some(first), Some(last)) = (w.list.first(), w.list.last()) {
                evidence[doc].push(Evidence { start: first.chars.0 as usize, end: last.chars.1 as usize });
            }
        }
        let mut out: Vec<Topic> = Vec::new();
        for (i, kind) in Category::ALL.into_iter().enumerate() {
            if scores[i] >= THRESHOLD {
                let evidence = std::mem::take(&mut evidence[i]);
                out.push(Topic { kind, score: (scores[i] * 100.0).round() / 100.0, evidence });
            }
        }
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.kind.cmp(&b.kind)));
        w.found = found;
        w.meta = meta;
        // An everyday object with no category word at all, or "my cat" with none bound to the
        // person: what the text is about is known, and it is not a person's private matter. Only
        // in a request's length: in a long text (an agent's system prompt, a tool's result) an
        // everyday word says little of the rest.
        w.everyday = !loss && w.list.len() <= EVERYDAY_WORDS && (everyday && w.raw == 0.0 || pet && w.best < THRESHOLD);
        out
    }
}

/// The words that name a patient at the head of a clinical note, and the units of an age after
/// one (`patient_header`).
const PATIENT: &[&[u8]] = &[b"pt", b"pat", b"pac", b"pte", b"patient", b"patiente", b"patientin", b"paciente"];
const AGE_UNITS: &[&[u8]] =
    &[b"j", b"jahre", b"a", b"anos", b"ans", b"years", b"yrs", b"yo", b"y", b"m", b"f", b"w", b"h"];

/// Does a line of `text` start as a clinical note does, with a patient's age and sex: "58M, …"
/// (an age of at most 110 with `m`, `f`, `w` or `yo`, then a comma and a word in capitals: not
/// "12M, downloads"), or a patient's word and,
/// within three words, an age with its unit ("Pt 71F", "Pat. 78 J.", "Pac. 64a", "Pte 82 ans",
/// "paciente de 64 años")? A line here starts the text, follows a line end or a label's colon.
fn patient_header(text: &str, w: &Words) -> bool {
    let n = w.list.len();
    let heads_line = |i: usize| {
        let before = text[..w.list[i].bytes.0 as usize].trim_end_matches([' ', '\t']);
        matches!(before.chars().last(), None | Some('\n' | ':'))
    };
    // An age (digits, at most 110) and what follows it in the word ("71f" → "f").
    fn age(t: &[u8]) -> Option<&[u8]> {
        let d = t.iter().take_while(|b| b.is_ascii_digit()).count();
        if d == 0 || d > 3 {
            return None;
        }
        let v = t[..d].iter().fold(0u32, |v, &b| v * 10 + (b - b'0') as u32);
        (1..=110).contains(&v).then(|| &t[d..])
    }
    (0..n).any(|i| {
        if !heads_line(i) {
            return false;
        }
        let t = w.text(i);
        let after = &text[w.list[i].bytes.1 as usize..];
        let abbreviation_next = i + 1 < n && w.list[i + 1].caps;
        if age(t).is_some_and(|sex| matches!(sex, b"m" | b"f" | b"w" | b"yo"))
            && after.starts_with(',')
            && abbreviation_next
        {
            return true;
        }
        PATIENT.contains(&t)
            && (i + 1..(i + 4).min(n)).any(|j| match age(w.text(j)) {
                Some(b"") => j + 1 < n && AGE_UNITS.contains(&w.text(j + 1)),
                Some(unit) => AGE_UNITS.contains(&unit),
                None => false,
            })
    })
}

/// Does a (folded) word end in a Spanish infinitive's or gerund's "me" or "nos"?
fn enclitic(word: &[u8]) -> bool {
    const ENDS: [&[u8]; 8] = [b"arme", b"erme", b"irme", b"arnos", b"ernos", b"irnos", b"andome", b"iendome"];
    word.len() >= 7 && ENDS.iter().any(|e| word.ends_with(e))
}

/// The last two bytes of `s` as one index (a shorter `s`: its bytes).
fn tail(s: &[u8]) -> usize {
    s.iter().rev().take(2).fold(0, |acc, &b| acc << 8 | b as usize)
}

#[cfg(test)]
#[path = "topics_tests.rs"]
mod tests;
