//! Phone numbers.

use super::{Detector, Keywords, Pos, Work};
use crate::scan::{after, before, ctx_before, digits_into};
use crate::EntityType;

impl Detector {
    #[inline(never)]
    pub(super) fn phones(
        &self,
        text: &str,
        lower: &str,
        kw: &Keywords,
        work: &mut Work,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
        // The stretches with seven digits or more (phone numbers are made of the bytes that
        // stretches are: `regions` with them would give the same).
        let b = text.as_bytes();
        work.regions.clear();
        work.regions.extend(
            kw.digits.iter().copied().filter(|&(a, z)| b[a..z].iter().filter(|c| c.is_ascii_digit()).count() >= 7),
        );
        for (ms, me) in work.regions.iter().filter_map(|&(a, z)| phone_candidate(text, a, z)) {
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
            if before(text, start).is_some_and(|c| {
                c.is_alphanumeric()
                    || c == '_'
                    || c == '.'
                    || c == '/'
                    || c == ':'
                    || c == '-'
                    || c == '#'
                    || c == '$'
                    || c == '€'
                    || c == '£'
            }) || after(text, end)
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '%' || c == '€')
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
            let card_like = groups.len() >= 3 && groups[..groups.len() - 1].iter().all(|&g| g == 4)
                || groups.len() == 1 && d.len() >= 12;
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
}

/// The phone candidate in a region: the region without trailing separators, an unclosed
/// leading parenthesis, or an "x" that no extension digits follow.
fn phone_candidate(text: &str, a: usize, z: usize) -> Option<(usize, usize)> {
    let b = text.as_bytes();
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
    (end > start && b[start..end].iter().any(u8::is_ascii_digit)).then_some((start, end))
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
    d[0] == 0
        && d[1] != 0
        && groups.len() >= 2
        && (9..=12).contains(&d.len())
        && groups[0] >= 2
        && groups.iter().all(|&g| g >= 2)
}

/// `2024-01-05`, `05/01/2024`, `5.1.24`: one separator, day/month/year-sized groups.
fn looks_like_date(s: &str) -> bool {
    let Some(sep) = s.bytes().find(|b| !b.is_ascii_digit()) else { return false };
    if !matches!(sep, b'-' | b'/' | b'.') {
        return false;
    }
    let mut l = [0usize; 3];
    for (k, g) in s.split(sep as char).enumerate() {
        if k == 3 || g.is_empty() || !g.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        l[k] = g.len();
    }
    if l[2] == 0 {
        return false;
    }
    l[0] == 4 && l[1] <= 2 && l[2] <= 2 || l[0] <= 2 && l[1] <= 2 && (l[2] == 2 || l[2] == 4)
}
