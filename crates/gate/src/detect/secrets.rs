//! Secrets (keys, tokens, private keys, assigned passwords), credentials in URLs, e-mail addresses.

use super::{Detector, Keywords};
use crate::scan::{after, before, find};
use crate::EntityType;

/// The literal prefixes of the keys that `token` finds (found with the keywords, in one pass).
pub(super) const KEY_PREFIXES: &[&str] = &[
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "AIDA",
    "AROA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "sk-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "xapp-",
    "https://hooks.slack.com/services/",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "whsec_",
    "AIza",
    "npm_",
    "hf_",
    "SG.",
    "eyJ",
];

impl Detector {
    #[inline(never)]
    pub(super) fn secrets(
        &self,
        text: &str,
        lower: &str,
        kw: &Keywords,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
        let pem = if kw.bytes.dashes >= 10 && text.contains("-----BEGIN") {
            self.pem.find_iter(text).collect()
        } else {
            Vec::new()
        };
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
        let from = kw.key_start.unwrap_or(text.len());
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
        let creds = if kw.bytes.colons > 0 && text.contains("://") {
            self.url_creds.captures_iter(text).collect()
        } else {
            Vec::new()
        };
        for m in creds {
            let (user, pass) = (m.get(1).unwrap(), m.get(2).unwrap());
            let scheme = text[..m.get(0).unwrap().start()]
                .bytes()
                .rev()
                .take_while(|b| b.is_ascii_alphanumeric() || b"+.-".contains(b))
                .count();
            if placeholder(pass.as_str()) || scheme == 0 || scheme > 16 {
                continue;
            }
            push(user.start(), pass.end(), EntityType::UrlCredentials);
        }
        for (m, strict) in kw.assign.iter().map(|m| (m, false)).chain(kw.key_name.iter().map(|m| (m, true))) {
            // `ACCESS_KEY_ID=`: the key's name may go on with `_id`.
            let end =
                m.end() + if text[m.end()..].get(..3).is_some_and(|s| s.eq_ignore_ascii_case("_id")) { 3 } else { 0 };
            // `==` compares, `max_tokens: 100` counts, `password: str` annotates.
            let Some(tail) = assignment(&text.as_bytes()[end..]) else { continue };
            if text[end..end + tail].contains("==") || after(text, end).is_some_and(|c| c.is_alphanumeric()) {
                continue;
            }
            if let Some((s, e)) = assigned_value(text, end + tail, false) {
                // A name that only ends like a key's (`sort_key`, `oauth`) needs a random value.
                if !strict || random(&text[s..e]) {
                    push(s, e, EntityType::Secret);
                }
            }
        }
        for m in &kw.bearer {
            let v = text[m.end()..].bytes().take_while(|b| b.is_ascii_alphanumeric() || b"._~+/=-".contains(b)).count();
            if v >= 16 && random(&text[m.end()..m.end() + v]) {
                push(m.end(), m.end() + v, EntityType::Secret);
            }
        }
        for m in &kw.said {
            if let Some((s, e)) = assigned_value(text, m.end(), true) {
                push(s, e, EntityType::Secret);
            }
        }
        if lower.contains('(') && (lower.contains('\'') || lower.contains('"')) {
            positional(text, lower, push);
        }
    }

    #[inline(never)]
    pub(super) fn emails(&self, text: &str, push: &mut impl FnMut(usize, usize, EntityType)) {
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
}

/// Calls that take a credential by position: `login('user', 'pw')`, `connect('db', 'pw')`,
/// `new PDO('dsn', 'user', 'pw')`, `smtp.auth(user, 'pw')`.
const CREDENTIAL_CALLS: &[&str] = &[
    "login(",
    "log_in(",
    "logon(",
    "signin(",
    "sign_in(",
    "auth(",
    "authenticate(",
    "authorize(",
    "connect(",
    "connection(",
    "pdo(",
    "bind(",
    "credentials(",
    "credential(",
    "setcredentials(",
    "basicauth(",
    "httpbasicauth(",
];

/// The last quoted argument (not the first) of a credential call, when it looks like a
/// password: a secret by its position, with no `password=` before it.
fn positional(text: &str, lower: &str, push: &mut impl FnMut(usize, usize, EntityType)) {
    for name in CREDENTIAL_CALLS {
        let mut from = 0;
        while let Some(i) = find(&lower[from..], name) {
            let open = from + i + name.len();
            from = open;
            // The arguments up to the closing parenthesis (or the line's end): quoted strings and
            // bare words, split at commas outside quotes.
            let b = text.as_bytes();
            let mut j = open;
            let mut args: Vec<Option<(usize, usize)>> = vec![None];
            while j < b.len() && b[j] != b')' && b[j] != b'\n' {
                match b[j] {
                    q @ (b'\'' | b'"' | b'`') => {
                        let start = j + 1;
                        let Some(k) = b[start..].iter().position(|&c| c == q || c == b'\n') else { break };
                        if b[start + k] != q {
                            break;
                        }
                        if let Some(last) = args.last_mut() {
                            *last = Some((start, start + k));
                        }
                        j = start + k + 1;
                    }
                    b',' => {
                        args.push(None);
                        j += 1;
                    }
                    _ => j += 1,
                }
            }
            if args.len() < 2 {
                continue;
            }
            if let Some((s, e)) = args[1..].iter().rev().flatten().next().copied() {
                if password_like(&text[s..e]) {
                    push(s, e, EntityType::Secret);
                }
            }
        }
    }
}

/// A password rather than a user name, a host or a path: 6 to 64 characters, no spaces, at least
/// three of lower case, upper case, digits and symbols, not an e-mail, a URL or a DSN.
fn password_like(v: &str) -> bool {
    let classes = [
        v.bytes().any(|c| c.is_ascii_lowercase()),
        v.bytes().any(|c| c.is_ascii_uppercase()),
        v.bytes().any(|c| c.is_ascii_digit()),
        v.bytes().any(|c| !c.is_ascii_alphanumeric()),
    ];
    (6..=64).contains(&v.len())
        && !v.contains(char::is_whitespace)
        && !v.contains("://")
        && !v.contains('@')
        && !v.contains(":host=")
        && !v.starts_with('/')
        && classes.iter().filter(|&&c| c).count() >= 3
        && !placeholder(v)
}

/// The assignment after a key, as the pattern `^["']?[ \t]*(?::=|=>|==?|:)[ \t]*` would match
/// it: its length, or `None`.
fn assignment(b: &[u8]) -> Option<usize> {
    let blanks = |mut i: usize| {
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        i
    };
    let i = blanks(matches!(b.first(), Some(b'"' | b'\'')) as usize);
    let op = match (b.get(i), b.get(i + 1)) {
        (Some(b':'), Some(b'=')) | (Some(b'='), Some(b'>' | b'=')) => 2,
        (Some(b':' | b'='), _) => 1,
        _ => return None,
    };
    Some(blanks(i + op))
}

/// A value that looks generated: 12 characters or more, letters and digits, no spaces.
fn random(v: &str) -> bool {
    v.len() >= 12
        && !v.contains(char::is_whitespace)
        && v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes().any(|b| b.is_ascii_alphabetic())
        && !placeholder(v)
}

/// A placeholder rather than a value: `<password>`, `${DB_PASS}`, `****`, `xxx`.
fn placeholder(v: &str) -> bool {
    let v = v.trim();
    let starts = |p: &str| v.len() >= p.len() && v.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    let env = v
        .strip_prefix('$')
        .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
    v.is_empty()
        || env
        || v.starts_with("${")
        || v.starts_with("$(")
        || v.starts_with("%(")
        || v.starts_with("{{")
        || v.starts_with('{') && v.ends_with('}')
        || v.starts_with('<') && v.ends_with('>')
        || v.starts_with('[') && v.ends_with(']')
        || v.chars().all(|c| c == v.chars().next().unwrap_or('x'))
        || [
            "xxx",
            "...",
            "null",
            "none",
            "nil",
            "undefined",
            "true",
            "false",
            "redacted",
            "hidden",
            "changeme_in_prod",
            "your_password",
            "yourpassword",
            "your-password",
            "password_here",
            "placeholder",
            "example",
            "required",
            "optional",
            "string",
            "str",
            "int",
            "bool",
            "secretstr",
            "env",
            "os.environ",
            "process.env",
            "getenv",
        ]
        .iter()
        .any(|p| v.eq_ignore_ascii_case(p))
        || ["os.", "process.", "env.", "settings.", "config."].iter().any(|p| starts(p))
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
        let n = rest
            .find(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'' | '<' | '>'))
            .unwrap_or(rest.len());
        let mut e = from + n;
        loop {
            let v = &text[from..e];
            let unbalanced = |o: char, c: char| v.ends_with(c) && v.matches(o).count() < v.matches(c).count();
            if e > from
                && (v.ends_with(['.', ':', '!', '?'])
                    || unbalanced('(', ')')
                    || unbalanced('[', ']')
                    || unbalanced('{', '}'))
            {
                e -= 1;
            } else {
                break;
            }
        }
        // A call or an index is code: `get_token(user)`, `os.environ["X"]`.
        let ident_len =
            text[from..].bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.').count();
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
        let ident = |w: &str| {
            w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
                && w.chars().all(|c| c.is_alphanumeric() || c == '_')
        };
        if v.contains('.') && v.split('.').all(ident)
            || ident(v) && v.contains('_') && v.chars().all(|c| !c.is_ascii_uppercase())
        {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_matches_as_the_pattern_would() {
        let pattern = regex::Regex::new(r#"^["']?[ \t]*(?::=|=>|==?|:)[ \t]*"#).unwrap();
        let alphabet = b"\"' \t:=>x";
        // Every string of up to five of these bytes.
        let mut cases: Vec<Vec<u8>> = vec![Vec::new()];
        let mut last = cases.clone();
        for _ in 0..5 {
            last = last.iter().flat_map(|c| alphabet.iter().map(move |&b| [c.as_slice(), &[b]].concat())).collect();
            cases.extend(last.iter().cloned());
        }
        for case in cases {
            let text = String::from_utf8(case).unwrap();
            assert_eq!(assignment(text.as_bytes()), pattern.find(&text).map(|m| m.end()), "{text:?}");
        }
    }
}

#[cfg(test)]
mod positional_tests {
    use crate::{Detector, EntityType};

    fn secrets(text: &str) -> Vec<String> {
        Detector::new().detect(text).into_iter().filter(|s| s.kind == EntityType::Secret).map(|s| s.text).collect()
    }

    #[test]
    fn credentials_passed_by_position() {
        assert_eq!(secrets("server.login('ops@northwind.local', 'Winter2024!Northwind')"), ["Winter2024!Northwind"]);
        assert_eq!(secrets("engine = connect('lager', \"Zr8$vB1nQp\")"), ["Zr8$vB1nQp"]);
        assert_eq!(secrets("$pdo = new PDO('mysql:host=bd;dbname=ventas', 'admin', 'Pw4%hJk8Ls');"), ["Pw4%hJk8Ls"]);
        assert_eq!(secrets("ftp.login('compta', 'Automne2024!Brest')"), ["Automne2024!Brest"]);
        // Not a password: hosts, user names, a DSN, a placeholder, one argument.
        assert!(secrets("db.connect('db1.internal', 'billing')").is_empty());
        assert!(secrets("client.login(user, '<password>')").is_empty());
        assert!(secrets("socket.connect('127.0.0.1', 8080)").is_empty());
        assert!(secrets("api.login('Winter2024!Northwind')").is_empty());
    }
}
