//! Dates of birth.

use super::{Detector, Keywords};
use crate::checks;
use crate::scan::{after, before, ceil, ctx_after, ctx_before, find, floor, has_any, word_char};
use crate::EntityType;

impl Detector {
    /// Dates of birth: dates near a birth word (only those windows are searched).
    #[inline(never)]
    pub(super) fn dates(
        &self,
        text: &str,
        lower: &str,
        kw: &Keywords,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
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
            self.dob_ctx.is_match(ctx_before(lower, start, 48))
                || has_any(ctx_after(lower, end, 24), &["(dob)", "(date of birth)", "(born)", "(birthday)"])
        };
        for m in self.date_numeric.find_iter(text) {
            if before(text, m.start()).is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '-' || c == '/')
                || after(text, m.end()).is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '/')
                || text[m.end()..].starts_with('.') && text[m.end() + 1..].starts_with(|c: char| c.is_ascii_digit())
            {
                continue;
            }
            let mut parts = [0u32; 3];
            let mut n = 0;
            for p in m.as_str().split(['-', '/', '.']).filter_map(|p| p.parse().ok()) {
                if n < 3 {
                    parts[n] = p;
                }
                n += 1;
            }
            if n != 3 {
                continue;
            }
            let year2 = |y: u32| {
                if y < 100 {
                    if y > 30 {
                        1900 + y
                    } else {
                        2000 + y
                    }
                } else {
                    y
                }
            };
            let valid = if m.as_str().as_bytes()[4..5].iter().all(|b| !b.is_ascii_digit())
                && m.as_str().len() >= 8
                && parts[0] > 999
            {
                checks::birth_date(parts[0], parts[1], parts[2])
            } else {
                let y = year2(parts[2]);
                checks::birth_date(y, parts[1], parts[0]) || checks::birth_date(y, parts[0], parts[1])
            };
            if valid && dob_ctx(m.start(), m.end()) {
                push(m.start(), m.end(), EntityType::DateOfBirth);
            }
        }
        for m in self.date_words.find_iter(text) {
            let (day, month, year) = written_date_parts(m.as_str());
            if word_char(before(text, m.start())) || after(text, m.end()).is_some_and(|c| c.is_ascii_digit()) {
                continue;
            }
            let (Ok(d), Some(mo), Ok(y)) = (day.parse::<u32>(), month_number(month), year.parse::<u32>()) else {
                continue;
            };
            if checks::birth_date(y, mo, d) && dob_ctx(m.start(), m.end()) {
                push(m.start(), m.end(), EntityType::DateOfBirth);
            }
        }
    }
}

/// Written dates: "17 March 1985", "17th of March, 1985", "17 de marzo de 1985", "March 17, 1985".
pub(super) fn date_words_pattern() -> String {
    format!(
        r"(?i)(?:([0-9]{{1,2}})(?:st|nd|rd|th|er|º)?\.?\s+(?:of\s+|de\s+)?({MONTHS})\.?,?\s+(?:de\s+)?([0-9]{{4}})|({MONTHS})\.?\s+([0-9]{{1,2}})(?:st|nd|rd|th)?,?\s+([0-9]{{4}}))"
    )
}

/// The day, the month word and the year of a date that `date_words_pattern` matched (what its
/// groups hold, less a dot after the month), read without running the pattern again: the year
/// ends it; a date that starts with its day has the month in the first word after it that is
/// not its ordinal ending ("th", joined to it), "of" or "de"; else the month starts it and the
/// day is its first number.
fn written_date_parts(s: &str) -> (&str, &str, &str) {
    let year = &s[s.len().saturating_sub(4)..];
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let word = |t: &str| t.char_indices().find(|(_, c)| !c.is_alphabetic()).map_or(t.len(), |(i, _)| i);
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        let day = &s[..digits(s)];
        let mut at = day.len();
        let mut month = "";
        while let Some(i) = s[at..].find(char::is_alphabetic) {
            let w = &s[at + i..at + i + word(&s[at + i..])];
            let ending = i == 0 && at == day.len();
            at += i + w.len();
            if !ending && !w.eq_ignore_ascii_case("of") && !w.eq_ignore_ascii_case("de") {
                month = w;
                break;
            }
        }
        (day, month, year)
    } else {
        let month = &s[..word(s)];
        let day = s.find(|c: char| c.is_ascii_digit()).map_or("", |i| &s[i..i + digits(&s[i..])]);
        (day, month, year)
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
    "born",
    "birth",
    "dob",
    "d.o.b",
    "b-day",
    "bday",
    "birthday",
    "née",
    "né le",
    "née le",
    "naissance",
    "geboren",
    "geb.",
    "geburtsdatum",
    "geburtstag",
    "nacimiento",
    "nacido",
    "nacida",
    "nato il",
    "nata il",
    "nascita",
    "geboortedatum",
    "aged",
    "age:",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_date_parts_are_the_patterns_groups() {
        let pattern = regex::Regex::new(&date_words_pattern()).unwrap();
        let seeds = [
            "17 March 1985",
            "17th of March, 1985",
            "March 17, 1985",
            "17 de marzo de 1985",
            "1er janvier 1990",
            "1º de mayo de 1980",
            "3. Mai 1970",
            "Sept. 3rd, 1999",
            "12 févr. 2001",
            "2 gen. 1999",
            "DEC 25TH, 1980",
            "5 OF JUNE 1977",
            "21 de DE de 1980",
        ];
        let alphabet = "0123456789 .,ofdestndrhºéaJjMm".chars().collect::<Vec<_>>();
        let mut rng = crate::test_rng::TestRng(0x2545_F491_4F6C_DD1D);
        let mut next = move || rng.next() as usize;
        let mut matched = 0;
        for k in 0..60_000 {
            let mut s: Vec<char> = seeds[k % seeds.len()].chars().collect();
            for _ in 0..next() % 4 {
                let at = next() % (s.len() + 1);
                let c = alphabet[next() % alphabet.len()];
                match next() % 3 {
                    0 if at < s.len() => s[at] = c,
                    1 if at < s.len() => {
                        s.remove(at);
                    }
                    _ => s.insert(at, c),
                }
            }
            let text: String = s.into_iter().collect();
            for c in pattern.captures_iter(&text) {
                let (day, month, year) = match (c.get(1), c.get(2), c.get(3)) {
                    (Some(d), Some(mo), Some(y)) => (d.as_str(), mo.as_str(), y.as_str()),
                    _ => (
                        c.get(5).map_or("", |x| x.as_str()),
                        c.get(4).map_or("", |x| x.as_str()),
                        c.get(6).map_or("", |x| x.as_str()),
                    ),
                };
                let got = written_date_parts(c.get(0).unwrap().as_str());
                assert_eq!((got.0, got.1, got.2), (day, month.trim_end_matches('.'), year), "{text:?}");
                matched += 1;
            }
        }
        assert!(matched > 10_000, "only {matched} dates");
    }
}
