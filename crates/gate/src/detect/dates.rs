//! Dates of birth.

use super::{Detector, Keywords};
use crate::EntityType;
use crate::checks;
use crate::scan::{after, before, ceil, ctx_after, ctx_before, find, floor, has_any, word_char};

impl Detector {
    /// Dates of birth: dates near a birth word (only those windows are searched).
    #[inline(never)]
    pub(super) fn dates(&self, text: &str, lower: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
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

    pub(super) fn dates_in(&self, text: &str, lower: &str, push: &mut impl FnMut(usize, usize, EntityType)) {
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
}

pub(super) const MONTHS: &str = "jan(?:uary|vier|uari|uar|\\.)?|feb(?:ruary|ruar|ruari|\\.)?|f[ée]vrier|mar(?:ch|s|\\.)?|m[äa]rz|maart|apr(?:il|ile|\\.)?|avril|abril|may|mai|mei|mayo|maggio|jun(?:e|i|io|\\.)?|juin|giugno|jul(?:y|i|\\.)?|juillet|julio|luglio|aug(?:ust|ustus|\\.)?|ao[uû]t|agosto|sep(?:t|tember|tembre|\\.)?|septiembre|settembre|oct(?:ober|obre|\\.)?|okt(?:ober)?|octubre|ottobre|nov(?:ember|embre|iembre|\\.)?|dec(?:ember|\\.)?|d[ée]cembre|dez(?:ember)?|diciembre|dicembre|enero|gennaio|febrero|febbraio|marzo|aprile|juni|junio|juli|gen\\.?|giu\\.?|lug\\.?|ago\\.?|set\\.?|ott\\.?|dic\\.?";

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

pub(super) const DOB_CONTEXT: &[&str] = &[
    "born", "birth", "dob", "d.o.b", "b-day", "bday", "birthday", "née", "né le", "née le", "naissance", "geboren", "geb.",
    "geburtsdatum", "geburtstag", "nacimiento", "nacido", "nacida", "nato il", "nata il", "nascita", "geboortedatum",
    "aged", "age:",
];
