//! The context words of every detector, found in one pass over the lower-case text.
//!
//! At each place the longest keyword that starts there is taken and the scan goes on after it,
//! as a regular expression made of the keywords (longest first) would match them. A bit per
//! code of three bytes rules out most places at once.

use crate::scan::{code, code3, Prefixes};

/// Which detector a keyword serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kw {
    Assign,
    Said,
    Dob,
    StreetEu,
    StreetDe,
    NameCue,
    PhoneCtx,
    NotPhone,
    /// Parts of a key's name (`DEPLOY_KEY`, `SERVICE_AUTH`): a random value assigned to it.
    KeyName,
    /// `Bearer TOKEN`.
    Bearer,
    /// A national id's name before a value ("DNI", "passport number").
    IdLabel,
    /// Words before an address ("I live at", "Lieferadresse:").
    AddressCue,
}

/// Words after which a number and capitalised words, a comma and a city are an address even
/// without a street-type word ("I live at 12 Kingsmead, Cambridge").
pub const ADDRESS_CUES: &[&str] = &[
    "live at",
    "living at",
    "lives at",
    "address is",
    "address:",
    "send it to",
    "send them to",
    "ship it to",
    "deliver to",
    "delivered to",
    "moved to",
    "lieferadresse",
    "anschrift",
    "adresse",
    "ich wohne",
    "wohnt",
    "vivo en",
    "dirección",
    "direccion",
    "envíalo a",
    "enviadlo a",
    "j'habite",
    "habite au",
    "habite à",
    "envoie-le au",
    "envoie-le à",
    "livraison",
];

/// Names of national ids and identity documents: the id after one is kept even when its
/// checksum fails (a typo'd or unknown id is still an id).
pub const ID_LABELS: &[&str] = &[
    "dni",
    "nif",
    "nie:",
    "nie ",
    "nir",
    "nino",
    "national insurance",
    "ni number",
    "steuer-id",
    "steuerid",
    "steuer-identifikationsnummer",
    "steueridentifikationsnummer",
    "tax id",
    "passport",
    "pasaporte",
    "reisepass",
    "passeport",
    "personalausweis",
    "ausweisnummer",
    "id card",
    "id number",
    "identity card",
    "carte d'identité",
    "carte d'identite",
    "sécurité sociale",
    "securite sociale",
    "documento de identidad",
    "bsn",
    "burgerservicenummer",
    "aadhaar",
    "codice fiscale",
];

pub const PHONE_CONTEXT: &[&str] = &[
    "phone",
    "tel",
    "call",
    "mobile",
    "cell",
    "fax",
    "contact",
    "reach",
    "text me",
    "whatsapp",
    "sms",
    "dial",
    "ring",
    "hotline",
    "landline",
    "telefon",
    "handy",
    "rufnummer",
    "ruf",
    "anrufen",
    "téléphone",
    "portable",
    "joindre",
    "teléfono",
    "móvil",
    "movil",
    "llama",
    "llámame",
    "llamame",
    "appelle",
    "appelez",
    "telefono",
    "cellulare",
    "chiama",
    "bel ",
    "mobiel",
];

/// Words before a number that make it something other than a phone number.
pub const NOT_PHONE_CONTEXT: &[&str] = &[
    "order",
    "invoice",
    "ticket",
    "ref",
    "tracking",
    "serial",
    "sku",
    "isbn",
    "version",
    "build",
    "id ",
    "id:",
    "id#",
    "#",
    "account",
    "acct",
    "case",
    "po ",
    "item",
    "part",
    "model",
    "batch",
    "lot ",
    "transaction",
    "txn",
    "receipt",
    "confirmation",
    "booking",
    "issue",
    "pr ",
    "commit",
    "port",
    "pid",
    "uid",
    "gid",
    "hash",
    "checksum",
    "size",
    "bytes",
    "iban",
    "card",
    "ssn",
    "bsn",
    "sin ",
    "aadhaar",
    "invalid",
    "checksum",
    "kreditkarte",
    "carte",
    "tarjeta",
    "carta",
];

pub const KEYWORDS: &[(Kw, &[&str])] = &[
    (
        Kw::Assign,
        &[
            "password",
            "passwd",
            "passphrase",
            "pwd",
            "secret_key",
            "secretkey",
            "client_secret",
            "clientsecret",
            "secret",
            "auth_token",
            "authtoken",
            "access_token",
            "accesstoken",
            "token",
            "api_key",
            "apikey",
            "access_key",
            "accesskey",
            "private_key",
            "privatekey",
            "credentials",
            "credential",
        ],
    ),
    (Kw::Said, &["password", "passcode", "passwort", "kennwort", "mot de passe", "contraseña", "pin"]),
    (
        Kw::Dob,
        &[
            "born",
            "birth",
            "dob",
            "d.o.b",
            "b-day",
            "bday",
            "née",
            "né le",
            "naissance",
            "geboren",
            "geb.",
            "geburts",
            "nacimiento",
            "nacido",
            "nacida",
            "nato il",
            "nata il",
            "nascita",
            "geboortedatum",
            "aged",
        ],
    ),
    (
        Kw::StreetEu,
        &[
            "rue",
            "avenue",
            "av.",
            "boulevard",
            "bd",
            "chemin",
            "allée",
            "impasse",
            "place",
            "quai",
            "route",
            "cours",
            "passage",
            "calle",
            "c/",
            "avenida",
            "avda.",
            "paseo",
            "plaza",
            "camino",
            "carrer",
            "carretera",
            "ronda",
            "glorieta",
            "cuesta",
            "callejón",
            "rambla",
            "travesía",
            "via",
            "viale",
            "piazza",
            "piazzale",
            "corso",
            "largo",
            "vicolo",
            "contrada",
            "borgo",
            "strada",
            "rua",
            "travessa",
            "praça",
            "alameda",
        ],
    ),
    (
        Kw::StreetDe,
        &[
            "straße", "strasse", "str.", "weg", "gasse", "platz", "allee", "damm", "ufer", "steig", "chaussee",
            "straat", "laan", "plein", "gracht", "kade", "baan", "dijk", "singel", "dreef", "steeg",
        ],
    ),
    (Kw::NameCue, &["my name is ", "name is ", "i'm ", "i am "]),
    (Kw::PhoneCtx, PHONE_CONTEXT),
    (Kw::NotPhone, NOT_PHONE_CONTEXT),
    (Kw::KeyName, &["_key", "auth"]),
    (Kw::Bearer, &["bearer "]),
    (Kw::IdLabel, ID_LABELS),
    (Kw::AddressCue, ADDRESS_CUES),
];

/// The keywords, ready to find.
pub struct KeywordTable {
    /// Keywords of three bytes or more with the detectors they serve, ordered by their first
    /// three bytes and, within those, longest first.
    long: Vec<Word>,
    /// For each three leading bytes that some keyword has: the range of `long` they lead, in an
    /// open-addressed table (`slot`); an empty slot holds head 0.
    heads: Vec<(u32, u16, u16)>,
    /// One bit per `code` of three bytes: could a keyword start with bytes of that code? Set
    /// for every code that a keyword's first three bytes have, and for every code that starts
    /// like a short keyword.
    maybe: Box<[u64; 512]>,
    /// Keywords of one or two bytes ("#", "bd"), longest first.
    short: Vec<Word>,
    /// Literal prefixes looked for in the same pass, in the text as written (the keys of
    /// `secrets`: "AKIA", "ghp_", "eyJ"…); their codes are in `maybe` too.
    prefixes: Prefixes,
}

/// A keyword with the detectors it serves, and its first eight bytes as a number: most places
/// are told apart with one load and one comparison.
struct Word {
    text: &'static str,
    kinds: Vec<Kw>,
    head: u64,
    mask: u64,
}

impl Word {
    fn new(text: &'static str, kinds: Vec<Kw>) -> Word {
        let mut first = [0u8; 8];
        let n = text.len().min(8);
        first[..n].copy_from_slice(&text.as_bytes()[..n]);
        Word { text, kinds, head: u64::from_le_bytes(first), mask: u64::MAX >> (64 - 8 * n) }
    }

    /// Does `rest` start with this word?
    #[inline]
    fn starts(&self, rest: &[u8]) -> bool {
        let w = self.text.as_bytes();
        match rest.first_chunk::<8>() {
            Some(eight) => {
                u64::from_le_bytes(*eight) & self.mask == self.head
                    && (w.len() <= 8 || rest.get(8..w.len()) == Some(&w[8..]))
            }
            None => rest.starts_with(w),
        }
    }
}

/// The first three bytes as a number.
fn head(b: &[u8]) -> u32 {
    (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32
}

/// Slots of the table of heads: four times the heads there are, or more.
const SLOTS: usize = 1024;

fn slot(head: u32) -> usize {
    (head.wrapping_mul(0x9E37_79B1) >> 22) as usize
}

impl KeywordTable {
    pub fn new(prefixes: &[&'static str]) -> KeywordTable {
        let mut all: Vec<(&'static str, Vec<Kw>)> = Vec::new();
        for (kind, words) in KEYWORDS {
            for w in *words {
                match all.iter_mut().find(|(x, _)| x == w) {
                    Some((_, kinds)) if !kinds.contains(kind) => kinds.push(*kind),
                    Some(_) => {}
                    None => all.push((w, vec![*kind])),
                }
            }
        }
        let (mut long, mut short): (Vec<_>, Vec<_>) = all.into_iter().partition(|(w, _)| w.len() >= 3);
        long.sort_by_key(|(w, _)| (head(w.as_bytes()), std::cmp::Reverse(w.len())));
        short.sort_by_key(|(w, _)| std::cmp::Reverse(w.len()));
        let mut maybe = Box::new([0u64; 512]);
        let mut set = |c: usize| maybe[c / 64] |= 1 << (c % 64);
        let mut groups: Vec<(u32, u16, u16)> = Vec::new();
        for (i, (w, _)) in long.iter().enumerate() {
            let b = w.as_bytes();
            set(code3(b));
            let h = head(b);
            match groups.last_mut() {
                Some(last) if last.0 == h => last.2 = i as u16 + 1,
                _ => groups.push((h, i as u16, i as u16 + 1)),
            }
        }
        for (w, _) in &short {
            let b = w.as_bytes();
            for rest in 0..1 << (5 * (3 - b.len())) {
                let known = b.iter().fold(0, |c, &x| c << 5 | code(x));
                set(known << (5 * (3 - b.len())) | rest);
            }
        }
        for p in prefixes {
            set(code3(p.as_bytes()));
        }
        assert!(groups.len() * 4 <= SLOTS);
        let mut heads = vec![(0, 0, 0); SLOTS];
        for g in groups {
            let mut k = slot(g.0);
            while heads[k].0 != 0 {
                k = (k + 1) % SLOTS;
            }
            heads[k] = g;
        }
        let word = |(text, kinds): (&'static str, Vec<Kw>)| Word::new(text, kinds);
        KeywordTable {
            long: long.into_iter().map(word).collect(),
            heads,
            maybe,
            short: short.into_iter().map(word).collect(),
            prefixes: Prefixes::new(prefixes),
        }
    }

    /// Each keyword found in `lower` (the text in lower case): its byte range and the detectors
    /// it serves, left to right. Returns the first place where one of the prefixes starts in
    /// `text` (the same text as written).
    pub fn find_all(&self, text: &str, lower: &str, mut found: impl FnMut(usize, usize, &[Kw])) -> Option<usize> {
        let (b, written) = (lower.as_bytes(), text.as_bytes());
        let mut first_prefix = None;
        let mut i = 0;
        while i < b.len() {
            // Most places start no keyword and no prefix: the code of three bytes, rolled
            // along, tells.
            if i + 2 < b.len() {
                let mut c = code(b[i]) << 5 | code(b[i + 1]);
                let skip = b[i + 2..].iter().position(|&x| {
                    c = (c << 5 | code(x)) & 0x7fff;
                    self.maybe[c / 64] & 1 << (c % 64) != 0
                });
                i += skip.unwrap_or(b.len() - i - 2);
            }
            if first_prefix.is_none() && self.prefixes.at(&written[i..]) {
                first_prefix = Some(i);
            }
            match self.longest_at(&b[i..]) {
                Some((len, kinds)) => {
                    found(i, i + len, kinds);
                    // A prefix may start inside the keyword.
                    if first_prefix.is_none() {
                        first_prefix = (i + 1..i + len).find(|&k| self.prefixes.at(&written[k..]));
                    }
                    i += len;
                }
                None => i += 1,
            }
        }
        first_prefix
    }

    fn longest_at(&self, rest: &[u8]) -> Option<(usize, &[Kw])> {
        if rest.len() >= 3 {
            let h = head(rest);
            let mut k = slot(h);
            while self.heads[k].0 != 0 {
                if self.heads[k].0 == h {
                    let (_, from, to) = self.heads[k];
                    if let Some(w) = self.long[from as usize..to as usize].iter().find(|w| w.starts(rest)) {
                        return Some((w.text.len(), &w.kinds));
                    }
                    break;
                }
                k = (k + 1) % SLOTS;
            }
        }
        self.short.iter().find(|w| w.starts(rest)).map(|w| (w.text.len(), w.kinds.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, Vec<Kw>)> {
        let mut out = Vec::new();
        KeywordTable::new(&[]).find_all(text, text, |s, e, k| out.push((text[s..e].to_string(), k.to_vec())));
        out
    }

    #[test]
    fn longest_first_then_after_it() {
        assert_eq!(found("db_password=x"), vec![("password".to_string(), vec![Kw::Assign, Kw::Said])]);
        assert_eq!(
            found("secret_key secret"),
            vec![("secret_key".to_string(), vec![Kw::Assign]), ("secret".to_string(), vec![Kw::Assign])]
        );
        assert_eq!(
            found("order #12"),
            vec![("order".to_string(), vec![Kw::NotPhone]), ("#".to_string(), vec![Kw::NotPhone])]
        );
        assert_eq!(found("née le"), vec![("née".to_string(), vec![Kw::Dob])]);
        assert_eq!(found("hauptstraße 5"), vec![("straße".to_string(), vec![Kw::StreetDe])]);
        assert!(found("nothing here").is_empty());
    }

    #[test]
    fn finds_what_the_longest_keyword_at_each_place_is() {
        // Each place: the longest keyword that starts there, then on after it.
        let table = KeywordTable::new(&[]);
        let mut all: Vec<&str> = KEYWORDS.iter().flat_map(|(_, words)| words.iter().copied()).collect();
        all.sort_by_key(|w| std::cmp::Reverse(w.len()));
        let reference = |lower: &str| {
            let (b, mut i, mut out) = (lower.as_bytes(), 0, Vec::new());
            while i < b.len() {
                match all.iter().find(|w| b[i..].starts_with(w.as_bytes())) {
                    Some(w) => {
                        out.push((i, i + w.len()));
                        i += w.len();
                    }
                    None => i += 1,
                }
            }
            out
        };
        let pieces =
            ["#", "bd", "c/", "c", "cd", "d", "b", "co", "phone", "tel", "order", "id ", "dob", " ", "x", "née", "ß"];
        let mut rng = crate::test_rng::TestRng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let text: String = (0..1 + rng.0 % 8).map(|_| pieces[rng.below(pieces.len())]).collect();
            let mut got = Vec::new();
            table.find_all(&text, &text, |s, e, _| got.push((s, e)));
            assert_eq!(got, reference(&text), "{text:?}");
        }
    }

    #[test]
    fn first_prefix_as_a_scan_of_its_own_would_find_it() {
        let prefixes = ["AKIA", "ghp_", "sk-", "eyJ", "hf_", "SG.", "xoxb-"];
        let table = KeywordTable::new(&prefixes);
        let alone = Prefixes::new(&prefixes);
        // Some start inside a keyword: "birth" + "f_" holds "hf_", "phone" + "yJ" holds "eyJ".
        let pieces = [
            "AKIA",
            "ghp_",
            "sk-",
            "eyJ",
            "hf_",
            "SG.",
            "xoxb-",
            "passwordsk-",
            "birth",
            "f_",
            "phone",
            "yJ",
            "#",
            " ",
            "akia",
            "SSN",
        ];
        let mut rng = crate::test_rng::TestRng(0x2545_F491_4F6C_DD1D);
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..1 + rng.0 % 6 {
                text.push_str(pieces[rng.below(pieces.len())]);
            }
            let lower = text.to_ascii_lowercase();
            assert_eq!(table.find_all(&text, &lower, |_, _, _| {}), alone.first(text.as_bytes()), "{text:?}");
        }
    }
}
