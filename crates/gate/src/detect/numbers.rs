//! Numbers with checksums: IBANs, cards, SSNs and national ids.

use super::{Detector, Found, Keywords, Work};
use crate::checks;
use crate::scan::{
    after, before, ceil, ctx_before, digits_and, digits_into, find_in, floor, has_any, pad, regions, word_char,
};
use crate::EntityType;

impl Detector {
    #[inline(never)]
    pub(super) fn ibans(&self, text: &str, kw: &Keywords, push: &mut impl FnMut(usize, usize, EntityType)) {
        let bytes = text.as_bytes();
        // Two letters, two digits: a digit stretch that starts right after two letters.
        let anchors = kw
            .digits
            .iter()
            .map(|&(a, _)| a)
            .filter(|&a| {
                a >= 2
                    && a + 1 < bytes.len()
                    && bytes[a - 2].is_ascii_alphabetic()
                    && bytes[a - 1].is_ascii_alphabetic()
                    && bytes[a].is_ascii_digit()
                    && bytes[a + 1].is_ascii_digit()
            })
            .map(|a| a - 2);
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
                } else if (b == b' ' || b == b'-')
                    && i + 1 < bytes.len()
                    && bytes[i + 1].is_ascii_alphanumeric()
                    && end == i
                {
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
    pub(super) fn numbers(
        &self,
        text: &str,
        lower: &str,
        kw: &Keywords,
        work: &mut Work,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
        let Work { regions: spaced, found: runs, groups, seps, windows, taken, .. } = work;
        regions(text, &kw.digits, 9, &const { digits_and(b" .-") }, spaced);
        digit_runs(text, spaced, runs);
        for &(ms, me) in runs.iter() {
            let m = Found { start: ms, end: me };
            if before(text, m.start).is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '_') {
                continue;
            }
            // Groups of the run, and the separators between them: byte ranges.
            groups.clear();
            seps.clear();
            let b = text.as_bytes();
            let mut i = m.start;
            while i < m.end {
                let s = i;
                while i < m.end && b[i].is_ascii_digit() {
                    i += 1;
                }
                groups.push((s, i));
                let t = i;
                while i < m.end && !b[i].is_ascii_digit() {
                    i += 1;
                }
                if i > t {
                    seps.push((t, i));
                }
            }
            let sep = |k: usize| &text[seps[k].0..seps[k].1];
            let ctx_of = || ctx_before(lower, m.start, 48);
            taken.clear();
            // Windows of consecutive groups, longest first.
            let n = groups.len();
            let len = |i: usize, j: usize| groups[i..=j].iter().map(|g| g.1 - g.0).sum::<usize>();
            windows.clear();
            windows.extend(
                (0..n)
                    .flat_map(|i| (i..n.min(i + 8)).map(move |j| (i, j)))
                    .filter(|&(i, j)| (9..=19).contains(&len(i, j))),
            );
            windows.sort_by_key(|&(i, j)| std::cmp::Reverse(groups[j].1 - groups[i].0));
            for &(i, j) in windows.iter() {
                let (start, end) = (groups[i].0, groups[j].1);
                if !taken.iter().all(|&(x, y)| end <= x || start >= y) {
                    continue;
                }
                // Separators inside the window: spaces and dashes only (dots make versions/dates).
                let inner = i..j;
                if inner.clone().any(|k| sep(k).contains('.')) && j > i {
                    continue;
                }
                if j + 1 < n && after(text, end).is_some_and(|c| c.is_ascii_digit()) {
                    continue;
                }
                if i > 0 && sep(i - 1) == "-" || j + 1 < n && sep(j) == "-" {
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
                let card_ctx = || {
                    has_any(
                        ctx_of(),
                        &[
                            "card",
                            "karte",
                            "kreditkarte",
                            "carte",
                            "tarjeta",
                            "carta",
                            "pay",
                            "visa",
                            "mastercard",
                            "maestro",
                            "debit",
                            "credit",
                            "kaart",
                        ],
                    )
                };
                let kind = if checks::card(d)
                    && card_grouping(sizes)
                    && (d.len() >= 16 || whole)
                    && (d.len() >= 16 || d[0] == 3 || card_ctx())
                {
                    Some(EntityType::Card)
                } else if !whole {
                    None
                } else if d.len() == 9
                    && checks::ssn(d)
                    && (sizes == [3, 2, 4] && inner.clone().all(|k| sep(k) == "-" || sep(k) == " ")
                        || has_any(ctx_of(), &["ssn", "social security", "soc sec", "ss#", "ss #"]))
                {
                    Some(EntityType::Ssn)
                } else if d.len() == 15
                    && (sizes.len() == 1 || sizes == [1, 2, 2, 2, 3, 3, 2])
                    && checks::nir(text[start..end].replace(' ', "").as_bytes())
                    || d.len() == 9
                        && checks::bsn(d)
                        && has_any(
                            ctx_of(),
                            &["bsn", "burgerservicenummer", "sofinummer", "sofi-nummer", "citizen service number"],
                        )
                    || d.len() == 9
                        && checks::sin(d)
                        && (sizes == [3, 3, 3] || sizes.len() == 1)
                        && has_any(ctx_of(), &["sin", "social insurance", "assurance sociale", "nas"])
                    || d.len() == 12
                        && checks::aadhaar(d)
                        && (sizes == [4, 4, 4] || has_any(ctx_of(), &["aadhaar", "aadhar", "uidai", "uid"]))
                    || d.len() == 11
                        && sizes.len() == 1
                        && has_any(
                            ctx_of(),
                            &[
                                "steuer-id",
                                "steueridentifikationsnummer",
                                "steuer-identifikationsnummer",
                                "tax id",
                                "idnr",
                            ],
                        )
                        && steuer_id(d)
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
    pub(super) fn ids(
        &self,
        text: &str,
        lower: &str,
        kw: &Keywords,
        work: &mut Work,
        push: &mut impl FnMut(usize, usize, EntityType),
    ) {
        let _ = lower;
        let bounded = |s: usize, e: usize| !word_char(before(text, s)) && !word_char(after(text, e));
        // Only near digits: every id shape has some.
        pad(text, kw.digits.iter().copied(), 16, 16, &mut work.near);
        find_in(&self.ids, text, &work.near, &mut work.found);
        for &(ms, me) in &work.found {
            let m = Found { start: ms, end: me };
            if !bounded(m.start, m.end) {
                continue;
            }
            // The id without its spaces and dashes (the longest shape has 25 bytes).
            let mut buf = [0u8; 32];
            let mut n = 0;
            for b in text[m.start..m.end].bytes().filter(|b| *b != b' ' && *b != b'-').take(buf.len()) {
                buf[n] = b;
                n += 1;
            }
            let compact = &buf[..n];
            if checks::nino(compact)
                || checks::codice_fiscale(compact)
                || checks::dni_nie(compact)
                || checks::nir(compact)
            {
                push(m.start, m.end, EntityType::NationalId);
            }
        }
        // After an id's name ("DNI", "passport number"), the value is an id whatever its checksum
        // says, unless the text says it is not one ("invalid", "such as").
        for m in &kw.id_label {
            if let Some((s, e)) = labelled_id(text, m.end()) {
                let around = &lower[floor(lower, m.start().saturating_sub(60))..ceil(lower, e + 60)];
                if !has_any(around, NOT_AN_ID) {
                    push(s, e, EntityType::NationalId);
                }
            }
        }
    }
}

/// Card numbers are written whole or in issuer groups (4-4-4-4, 4-6-5, 4-6-4, 4-4-4-4-3).
fn card_grouping(sizes: &[usize]) -> bool {
    match sizes {
        [_] => true,
        _ => sizes[..sizes.len() - 1].iter().all(|&s| s == 4) || sizes == [4, 6, 5] || sizes == [4, 6, 4],
    }
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

/// Digit runs inside regions: digit groups joined by one space, dash, dot, or ". ".
fn digit_runs(text: &str, regions: &[(usize, usize)], out: &mut Vec<(usize, usize)>) {
    let b = text.as_bytes();
    out.clear();
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
                let sep = if i + 1 < z && b[i] == b'.' && b[i + 1] == b' ' {
                    2
                } else if i < z && matches!(b[i], b' ' | b'-' | b'.') {
                    1
                } else {
                    0
                };
                if sep > 0 && i + sep < z && b[i + sep].is_ascii_digit() {
                    i += sep;
                } else {
                    break;
                }
            }
            out.push((start, end));
        }
    }
}

/// Words that say a number is not a real id.
const NOT_AN_ID: &[&str] = &[
    "invalid",
    "not valid",
    "such as",
    "example",
    "e.g.",
    "fake",
    "ungültig",
    "beispiel",
    "no válido",
    "no es válido",
    "ejemplo",
    "invalide",
    "exemple",
    "pas valide",
];

/// The id after a label: past a few linking words (`is`, `:`, `number`, `no.`, `es`, `ist`),
/// groups of letters and digits joined by single spaces or dashes, 6 to 20 of them with 5 digits
/// or more, the first group with a digit or one or two capitals. Returns its byte range.
fn labelled_id(text: &str, from: usize) -> Option<(usize, usize)> {
    const LINKS: &[&str] = &[
        "number", "numbers", "no.", "no", "nr.", "nº", "n°", "num.", "is", "was", "es", "est", "ist", "lautet", "el",
        "le", "la", "de", "du", "my", "mi", "mon", "ma", "meine", "mein", "for", "para", "pour", "id", "(nino)",
        "(nie)", "n.",
    ];
    let b = text.as_bytes();
    let mut i = from;
    // Linking words and punctuation, up to 30 bytes.
    loop {
        while i < b.len() && matches!(b[i], b' ' | b':' | b'\t' | b'#' | b'=') {
            i += 1;
        }
        let word = text[i..].split([' ', ':', '\t']).next().unwrap_or("");
        if i - from < 30 && !word.is_empty() && LINKS.iter().any(|l| word.eq_ignore_ascii_case(l)) {
            i += word.len();
            continue;
        }
        break;
    }
    let start = i;
    let (mut alnum, mut digits, mut end) = (0, 0, i);
    let mut group_start = i;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || c.is_ascii_uppercase() {
            alnum += 1;
            digits += c.is_ascii_digit() as usize;
            i += 1;
            end = i;
        } else if (c == b' ' || c == b'-')
            && i > group_start
            && i + 1 < b.len()
            && (b[i + 1].is_ascii_digit() || b[i + 1].is_ascii_uppercase())
        {
            i += 1;
            group_start = i;
        } else {
            break;
        }
    }
    let bounded = !b.get(end).is_some_and(|c| c.is_ascii_alphanumeric());
    (bounded && (6..=20).contains(&alnum) && digits >= 5).then_some((start, end))
}
