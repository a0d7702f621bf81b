//! IP and MAC addresses.

use super::{Detector, Found, Keywords, Work};
use crate::EntityType;
use crate::scan::{after, before, ctx_before, digits_and, find_in, has_any, next_byte_in, pad, regions, word_char};

impl Detector {
    #[inline(never)]
    pub(super) fn network(&self, text: &str, lower: &str, kw: &Keywords, work: &mut Work, push: &mut impl FnMut(usize, usize, EntityType)) {
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
            mac_shapes(text.as_bytes(), n.colons + n.dashes >= 5, &mut work.found);
        }
        for &(ms, me) in &work.found {
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
        pad(text, colons, 40, 45, &mut work.near);
        find_in(&self.ipv6, text, &work.near, &mut work.found);
        for &(ms, me) in &work.found {
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
}

/// MAC address shapes, left to right and not overlapping: six hex pairs joined by `:` or `-`
/// ("00:1A:2B:3C:4D:5E"), else three groups of four hex digits joined by dots ("001a.2b3c.4d5e").
/// `can_pair`: the text has five colons and dashes, which the first shape needs.
fn mac_shapes(b: &[u8], can_pair: bool, out: &mut Vec<(usize, usize)>) {
    let hex = |i: usize, n: usize| b[i..i + n].iter().all(u8::is_ascii_hexdigit);
    // The separators first: they rule out almost every place.
    let pairs = |i: usize| {
        i + 17 <= b.len() && (0..5).all(|k| matches!(b[i + 2 + 3 * k], b':' | b'-')) && hex(i, 2) && (0..5).all(|k| hex(i + 3 + 3 * k, 2))
    };
    let quads = |i: usize| i + 14 <= b.len() && b[i + 4] == b'.' && b[i + 9] == b'.' && hex(i, 4) && hex(i + 5, 4) && hex(i + 10, 4);
    out.clear();
    if !can_pair {
        // Fewer than five colons and dashes: only dotted shapes, each with a dot four bytes in.
        let mut i = 0;
        let mut dot = next_byte_in(b, 4, b'.', b'.', false);
        while dot < b.len() {
            if dot - 4 >= i && quads(dot - 4) {
                out.push((dot - 4, dot + 10));
                i = dot + 10;
            }
            dot = next_byte_in(b, dot + 1, b'.', b'.', false);
        }
        return;
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_shapes_alone_when_no_pair_can_stand() {
        let alphabet = b"0aF9.:- x";
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as usize
        };
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
            let (mut all, mut dotted) = (Vec::new(), Vec::new());
            mac_shapes(&s, true, &mut all);
            mac_shapes(&s, false, &mut dotted);
            assert_eq!(all, dotted, "{:?}", String::from_utf8_lossy(&s));
            found += all.len();
        }
        assert!(found > 10_000);
    }
}
