//! The context words of every detector, found in one pass over the lower-case text.
//!
//! At each place the longest keyword that starts there is taken and the scan goes on after it,
//! as a regular expression made of the keywords (longest first) would match them. A bit per
//! code of three bytes rules out most places at once.

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
}

pub const PHONE_CONTEXT: &[&str] = &[
    "phone", "tel", "call", "mobile", "cell", "fax", "contact", "reach", "text me", "whatsapp", "sms", "dial",
    "ring", "hotline", "landline", "telefon", "handy", "rufnummer", "ruf", "anrufen", "téléphone", "portable", "joindre",
    "teléfono", "móvil", "movil", "llama", "telefono", "cellulare", "chiama", "bel ", "mobiel",
];

/// Words before a number that make it something other than a phone number.
pub const NOT_PHONE_CONTEXT: &[&str] = &[
    "order", "invoice", "ticket", "ref", "tracking", "serial", "sku", "isbn", "version", "build", "id ", "id:", "id#",
    "#", "account", "acct", "case", "po ", "item", "part", "model", "batch", "lot ", "transaction", "txn", "receipt",
    "confirmation", "booking", "issue", "pr ", "commit", "port", "pid", "uid", "gid", "hash", "checksum", "size",
    "bytes", "iban", "card", "ssn", "bsn", "sin ", "aadhaar", "invalid", "checksum", "kreditkarte", "carte", "tarjeta", "carta",
];

pub const KEYWORDS: &[(Kw, &[&str])] = &[
    (Kw::Assign, &["password", "passwd", "passphrase", "pwd", "secret_key", "secretkey", "client_secret", "clientsecret", "secret",
        "auth_token", "authtoken", "access_token", "accesstoken", "token", "api_key", "apikey", "access_key", "accesskey",
        "private_key", "privatekey", "credentials", "credential"]),
    (Kw::Said, &["password", "passcode", "passwort", "kennwort", "mot de passe", "contraseña", "pin"]),
    (Kw::Dob, &["born", "birth", "dob", "d.o.b", "b-day", "bday", "née", "né le", "naissance", "geboren", "geb.", "geburts",
        "nacimiento", "nacido", "nacida", "nato il", "nata il", "nascita", "geboortedatum", "aged"]),
    (Kw::StreetEu, &["rue", "avenue", "av.", "boulevard", "bd", "chemin", "allée", "impasse", "place", "quai", "route", "cours",
        "passage", "calle", "c/", "avenida", "avda.", "paseo", "plaza", "camino", "carrer", "carretera", "ronda", "glorieta",
        "cuesta", "callejón", "rambla", "travesía", "via", "viale", "piazza", "piazzale", "corso", "largo", "vicolo", "contrada",
        "borgo", "strada", "rua", "travessa", "praça", "alameda"]),
    (Kw::StreetDe, &["straße", "strasse", "str.", "weg", "gasse", "platz", "allee", "damm", "ufer", "steig", "chaussee",
        "straat", "laan", "plein", "gracht", "kade", "baan", "dijk", "singel", "dreef", "steeg"]),
    (Kw::NameCue, &["my name is ", "name is ", "i'm ", "i am "]),
    (Kw::PhoneCtx, PHONE_CONTEXT),
    (Kw::NotPhone, NOT_PHONE_CONTEXT),
];

/// The keywords, ready to find.
pub struct KeywordTable {
    /// Keywords of three bytes or more with the detectors they serve, ordered by their first
    /// three bytes and, within those, longest first.
    long: Vec<(&'static str, Vec<Kw>)>,
    /// For each three leading bytes that some keyword has: the range of `long` they lead, in an
    /// open-addressed table (`slot`); an empty slot holds head 0.
    heads: Vec<(u32, u16, u16)>,
    /// One bit per `code` of three bytes: could a keyword start with bytes of that code? Set
    /// for every code that a keyword's first three bytes have, and for every code that starts
    /// like a short keyword.
    maybe: Box<[u64; 512]>,
    /// Keywords of one or two bytes ("#", "bd"), longest first.
    short: Vec<(&'static str, Vec<Kw>)>,
}

/// The first three bytes as a number.
fn head(b: &[u8]) -> u32 {
    (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32
}

/// The low five bits of a byte: letters keep their identity, so few places pass.
fn code(b: u8) -> usize {
    (b & 31) as usize
}

/// Slots of the table of heads: four times the heads there are, or more.
const SLOTS: usize = 1024;

fn slot(head: u32) -> usize {
    (head.wrapping_mul(0x9E37_79B1) >> 22) as usize
}

impl KeywordTable {
    pub fn new() -> KeywordTable {
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
            set(code(b[0]) << 10 | code(b[1]) << 5 | code(b[2]));
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
        assert!(groups.len() * 4 <= SLOTS);
        let mut heads = vec![(0, 0, 0); SLOTS];
        for g in groups {
            let mut k = slot(g.0);
            while heads[k].0 != 0 {
                k = (k + 1) % SLOTS;
            }
            heads[k] = g;
        }
        KeywordTable { long, heads, maybe, short }
    }

    /// Each keyword found in `lower`: its byte range and the detectors it serves, left to right.
    pub fn find_all(&self, lower: &str, mut found: impl FnMut(usize, usize, &[Kw])) {
        let b = lower.as_bytes();
        let mut i = 0;
        while i < b.len() {
            // Most places start no keyword: the code of three bytes, rolled along, tells.
            if i + 2 < b.len() {
                let mut c = code(b[i]) << 5 | code(b[i + 1]);
                loop {
                    c = (c << 5 | code(b[i + 2])) & 0x7fff;
                    if self.maybe[c / 64] & 1 << (c % 64) != 0 {
                        break;
                    }
                    i += 1;
                    if i + 2 == b.len() {
                        break;
                    }
                }
            }
            match self.longest_at(&b[i..]) {
                Some((len, kinds)) => {
                    found(i, i + len, kinds);
                    i += len;
                }
                None => i += 1,
            }
        }
    }

    fn longest_at(&self, rest: &[u8]) -> Option<(usize, &[Kw])> {
        if rest.len() >= 3 {
            let h = head(rest);
            let mut k = slot(h);
            while self.heads[k].0 != 0 {
                if self.heads[k].0 == h {
                    let (_, from, to) = self.heads[k];
                    if let Some((w, kinds)) = self.long[from as usize..to as usize].iter().find(|(w, _)| rest.starts_with(w.as_bytes())) {
                        return Some((w.len(), kinds));
                    }
                    break;
                }
                k = (k + 1) % SLOTS;
            }
        }
        self.short.iter().find(|(w, _)| rest.starts_with(w.as_bytes())).map(|(w, kinds)| (w.len(), kinds.as_slice()))
    }
}

impl Default for KeywordTable {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, Vec<Kw>)> {
        let mut out = Vec::new();
        KeywordTable::new().find_all(text, |s, e, k| out.push((text[s..e].to_string(), k.to_vec())));
        out
    }

    #[test]
    fn longest_first_then_after_it() {
        assert_eq!(found("db_password=x"), vec![("password".to_string(), vec![Kw::Assign, Kw::Said])]);
        assert_eq!(found("secret_key secret"), vec![("secret_key".to_string(), vec![Kw::Assign]), ("secret".to_string(), vec![Kw::Assign])]);
        assert_eq!(found("order #12"), vec![("order".to_string(), vec![Kw::NotPhone]), ("#".to_string(), vec![Kw::NotPhone])]);
        assert_eq!(found("née le"), vec![("née".to_string(), vec![Kw::Dob])]);
        assert_eq!(found("hauptstraße 5"), vec![("straße".to_string(), vec![Kw::StreetDe])]);
        assert!(found("nothing here").is_empty());
    }
}
