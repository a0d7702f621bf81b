//! IP and MAC addresses.

use super::{Detector, Found, Keywords, Work};
use crate::scan::{after, before, ctx_before, digits_and, find_in, has_any, next_byte_in, pad, regions, word_char};
use crate::EntityType;

impl Detector {
    #[inline(never)]
    pub(super) fn network(
        &self,
        text: &str,
        lower: &str,
        kw: &Keywords,
        work: &mut Work,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
        let n = kw.bytes;
        work.found.clear();
        if n.dots >= 3 {
            regions(text, &kw.digits, 4, &const { digits_and(b"./") }, &mut work.regions);
            // An address has three dots.
            work.regions.retain(|&(a, z)| text.as_bytes()[a..z].iter().filter(|&&b| b == b'.').count() >= 3);
            find_in(&self.ipv4, text, &work.regions, &mut work.found);
        }
        for &(ms, me) in &work.found {
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
        work.found.clear();
        if n.colons >= 5 || n.dashes >= 5 || n.dots >= 2 {
            if n.colons + n.dashes >= 5 {
                work.found.extend(self.mac.find_iter(text).map(|m| (m.start(), m.end())));
            } else {
                dotted_macs(text.as_bytes(), &mut work.found);
            }
        }
        for &(ms, me) in &work.found {
            let s = &text[ms..me];
            let consistent = !s.contains(':') || !s.contains('-');
            if consistent
                && !word_char(before(text, ms))
                && !after(text, me).is_some_and(|c| c.is_ascii_alphanumeric() || c == ':' || c == '-')
            {
                push(ms, me, EntityType::MacAddress);
            }
        }
        if n.colons < 2 {
            return;
        }
        // Only around colons with hex digits or colons on both sides.
        let b = text.as_bytes();
        let hexish = |c: u8| c.is_ascii_hexdigit() || c == b':';
        let colons = (1..b.len().saturating_sub(1))
            .filter(|&i| b[i] == b':' && hexish(b[i - 1]) && hexish(b[i + 1]))
            .map(|i| (i, i + 1));
        pad(text, colons, 40, 45, &mut work.near);
        find_in(&self.ipv6, text, &work.near, &mut work.found);
        for &(ms, me) in &work.found {
            let m = Found { start: ms, end: me };
            let s = text[m.start..m.end].trim_end_matches('.');
            let s = if s.ends_with(':') && !s.ends_with("::") { &s[..s.len() - 1] } else { s };
            if s.len() < 6
                || s.matches(':').count() < 2
                || before(text, m.start).is_some_and(|c| c.is_alphanumeric() || c == ':')
            {
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
                if port.len() <= 5
                    && port.bytes().all(|b| b.is_ascii_digit())
                    && addr.parse::<std::net::Ipv6Addr>().is_ok()
                {
                    push(m.start, m.start + addr.len(), EntityType::IpAddress);
                }
            }
        }
    }
}

/// MAC addresses written with dots ("001a.2b3c.4d5e"), left to right and not overlapping: what
/// `mac` finds in a text with fewer than five colons and dashes (its other shape needs five).
fn dotted_macs(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let hex = |i: usize, n: usize| b[i..i + n].iter().all(u8::is_ascii_hexdigit);
    let quads = |i: usize| {
        i + 14 <= b.len() && b[i + 4] == b'.' && b[i + 9] == b'.' && hex(i, 4) && hex(i + 5, 4) && hex(i + 10, 4)
    };
    // Each has a dot four bytes in.
    let mut from = 0;
    let mut dot = next_byte_in(b, 4, b'.', b'.', false);
    while dot < b.len() {
        if dot - 4 >= from && quads(dot - 4) {
            out.push((dot - 4, dot + 10));
            from = dot + 10;
        }
        dot = next_byte_in(b, dot + 1, b'.', b'.', false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_macs_as_the_pattern_finds_them() {
        let mac = Detector::new().mac;
        let alphabet = b"0aF9.:- x";
        let mut rng = crate::test_rng::TestRng(0x9E37_79B9_7F4A_7C15);
        let mut next = move || rng.next() as usize;
        let mut found = 0;
        for k in 0..50_000 {
            let seed: &[u8] = if k % 2 == 0 { b"a 001a.2b3c.4d5e." } else { b"12ab.cdef.0123.4567.89ab x" };
            let mut s = seed.to_vec();
            for _ in 0..next() % 5 {
                let at = next() % (s.len() + 1);
                s.insert(at.min(s.len()), alphabet[next() % alphabet.len()]);
            }
            if s.iter().filter(|&&c| c == b':' || c == b'-').count() >= 5 {
                continue;
            }
            let text = String::from_utf8(s).unwrap();
            let want: Vec<(usize, usize)> = mac.find_iter(&text).map(|m| (m.start(), m.end())).collect();
            let mut got = Vec::new();
            dotted_macs(text.as_bytes(), &mut got);
            assert_eq!(got, want, "{text:?}");
            found += want.len();
        }
        assert!(found > 10_000);
    }
}
