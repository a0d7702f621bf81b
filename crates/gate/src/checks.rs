//! Checksums and validity rules: a digit string that fails them is not reported.

/// Digits of `s` (other characters skipped).
pub fn digits(s: &str) -> Vec<u8> {
    s.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0').collect()
}

pub fn luhn(d: &[u8]) -> bool {
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &x)| {
            let x = x as u32;
            if i % 2 == 1 {
                let y = x * 2;
                if y > 9 {
                    y - 9
                } else {
                    y
                }
            } else {
                x
            }
        })
        .sum();
    !d.is_empty() && sum.is_multiple_of(10)
}

/// A payment card: 13–19 digits, an issuer's prefix with a length it issues, Luhn.
pub fn card(d: &[u8]) -> bool {
    let n = d.len();
    if !(12..=19).contains(&n) || !luhn(d) || n == 12 && !matches!(d[0], 0 | 5 | 6) {
        return false;
    }
    let p = |k: usize| d[..k].iter().fold(0u32, |a, &x| a * 10 + x as u32);
    match d[0] {
        4 => matches!(n, 13 | 16 | 19),                                                    // Visa
        5 => (51..=55).contains(&p(2)) && n == 16 || (50..=59).contains(&p(2)) && n >= 12, // Mastercard, Maestro
        2 => (2221..=2720).contains(&p(4)) && n == 16 || p(4) == 2131 && n == 15, // Mastercard 2-series, JCB (old)
        3 => {
            (p(2) == 34 || p(2) == 37) && n == 15                   // Amex
                || p(2) == 35 && n >= 16                            // JCB
                || ((300..=305).contains(&p(3)) || p(2) == 36 || p(2) == 38 || p(2) == 39) && n >= 14
            // Diners
        }
        6 => {
            p(4) == 6011
                || p(2) == 65
                || (644..=649).contains(&p(3))
                || p(2) == 62
                || p(2) == 60
                || p(2) == 63
                || p(2) == 67
        }
        0 => p(4) == 604,             // Maestro UK
        1 => p(4) == 1800 && n == 15, // JCB (old)
        _ => false,
    }
}

/// IBAN lengths by country (ISO 13616 registry).
pub fn iban_length(cc: &str) -> Option<usize> {
    const TABLE: &[(&str, usize)] = &[
        ("AD", 24),
        ("AE", 23),
        ("AL", 28),
        ("AT", 20),
        ("AZ", 28),
        ("BA", 20),
        ("BE", 16),
        ("BG", 22),
        ("BH", 22),
        ("BI", 27),
        ("BR", 29),
        ("BY", 28),
        ("CH", 21),
        ("CR", 22),
        ("CY", 28),
        ("CZ", 24),
        ("DE", 22),
        ("DJ", 27),
        ("DK", 18),
        ("DO", 28),
        ("EE", 20),
        ("EG", 29),
        ("ES", 24),
        ("FI", 18),
        ("FK", 18),
        ("FO", 18),
        ("FR", 27),
        ("GB", 22),
        ("GE", 22),
        ("GI", 23),
        ("GL", 18),
        ("GR", 27),
        ("GT", 28),
        ("HR", 21),
        ("HU", 28),
        ("IE", 22),
        ("IL", 23),
        ("IQ", 23),
        ("IS", 26),
        ("IT", 27),
        ("JO", 30),
        ("KW", 30),
        ("KZ", 20),
        ("LB", 28),
        ("LC", 32),
        ("LI", 21),
        ("LT", 20),
        ("LU", 20),
        ("LV", 21),
        ("LY", 25),
        ("MC", 27),
        ("MD", 24),
        ("ME", 22),
        ("MK", 19),
        ("MN", 20),
        ("MR", 27),
        ("MT", 31),
        ("MU", 30),
        ("NI", 28),
        ("NL", 18),
        ("NO", 15),
        ("OM", 23),
        ("PK", 24),
        ("PL", 28),
        ("PS", 29),
        ("PT", 25),
        ("QA", 29),
        ("RO", 24),
        ("RS", 22),
        ("RU", 33),
        ("SA", 24),
        ("SC", 31),
        ("SD", 18),
        ("SE", 24),
        ("SI", 19),
        ("SK", 24),
        ("SM", 27),
        ("SO", 23),
        ("ST", 25),
        ("SV", 28),
        ("TL", 23),
        ("TN", 24),
        ("TR", 26),
        ("UA", 29),
        ("VA", 22),
        ("VG", 24),
        ("XK", 20),
        ("YE", 30),
    ];
    TABLE.iter().find(|(c, _)| *c == cc).map(|&(_, n)| n)
}

/// ISO 13616 mod-97 over the compact, upper-case IBAN.
pub fn iban_mod97(compact: &[u8]) -> bool {
    if compact.len() < 5 {
        return false;
    }
    let mut rem: u32 = 0;
    for &b in compact[4..].iter().chain(&compact[..4]) {
        match b {
            b'0'..=b'9' => rem = (rem * 10 + (b - b'0') as u32) % 97,
            b'A'..=b'Z' => rem = (rem * 100 + (b - b'A' + 10) as u32) % 97,
            _ => return false,
        }
    }
    rem == 1
}

/// US SSN validity: area not 000, 666 or 900–999; group not 00; serial not 0000.
pub fn ssn(d: &[u8]) -> bool {
    if d.len() != 9 {
        return false;
    }
    let area = d[0] as u32 * 100 + d[1] as u32 * 10 + d[2] as u32;
    let group = d[3] * 10 + d[4];
    let serial = d[5..].iter().fold(0u32, |a, &x| a * 10 + x as u32);
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

/// UK National Insurance number: two prefix letters (not D, F, I, Q, U, V; second not O; not
/// BG, GB, KN, NK, NT, TN, ZZ), six digits, suffix A–D.
pub fn nino(compact: &[u8]) -> bool {
    if compact.len() != 9 {
        return false;
    }
    let (a, b) = (compact[0], compact[1]);
    let bad1 = b"DFIQUV";
    let bad2 = b"DFIQUVO";
    if !a.is_ascii_uppercase() || !b.is_ascii_uppercase() || bad1.contains(&a) || bad2.contains(&b) {
        return false;
    }
    if [b"BG", b"GB", b"KN", b"NK", b"NT", b"TN", b"ZZ"].iter().any(|p| p[..] == compact[..2]) {
        return false;
    }
    compact[2..8].iter().all(u8::is_ascii_digit) && (b'A'..=b'D').contains(&compact[8])
}

/// French NIR (numéro de sécurité sociale): 13 digits (Corsica: 2A/2B) and a key 97 − n mod 97.
pub fn nir(compact: &[u8]) -> bool {
    if compact.len() != 15 || !matches!(compact[0], b'1' | b'2' | b'3' | b'4' | b'7' | b'8') {
        return false;
    }
    let month = (compact[3] - b'0') * 10 + compact[4].wrapping_sub(b'0');
    if !(1..=12).contains(&month) && !(20..=42).contains(&month) && !(50..=99).contains(&month) {
        return false;
    }
    let mut n: u64 = 0;
    for (i, &b) in compact[..13].iter().enumerate() {
        let v = match b {
            b'0'..=b'9' => (b - b'0') as u64,
            b'A' | b'B' if i == 6 => 0,
            _ => return false,
        };
        n = n * 10 + v;
    }
    // Corsica: 2A → subtract 1 000 000, 2B → subtract 2 000 000.
    match compact[6] {
        b'A' => n -= 1_000_000,
        b'B' => n -= 2_000_000,
        _ => {}
    }
    let key = compact[13..].iter().try_fold(0u64, |a, &b| b.is_ascii_digit().then(|| a * 10 + (b - b'0') as u64));
    key == Some(97 - n % 97)
}

/// Spanish DNI (8 digits + letter) or NIE (X/Y/Z + 7 digits + letter).
pub fn dni_nie(compact: &[u8]) -> bool {
    const LETTERS: &[u8] = b"TRWAGMYFPDXBNJZSQVHLCKE";
    if compact.len() != 9 {
        return false;
    }
    let lead = match compact[0] {
        b'X' => 0,
        b'Y' => 1,
        b'Z' => 2,
        b'0'..=b'9' => compact[0] - b'0',
        _ => return false,
    } as u64;
    if !compact[1..8].iter().all(u8::is_ascii_digit) {
        return false;
    }
    let n = compact[1..8].iter().fold(lead, |a, &b| a * 10 + (b - b'0') as u64);
    LETTERS[(n % 23) as usize] == compact[8]
}

/// Italian codice fiscale (16 characters, check letter; digits may be replaced by letters).
pub fn codice_fiscale(c: &[u8]) -> bool {
    const ODD: [u32; 36] = [
        1, 0, 5, 7, 9, 13, 15, 17, 19, 21, // 0-9
        1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23, // A-Z
    ];
    if c.len() != 16 || !c.iter().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
        return false;
    }
    if !c[..6].iter().all(u8::is_ascii_uppercase) || !b"ABCDEHLMPRST".contains(&c[8]) || !c[15].is_ascii_uppercase() {
        return false;
    }
    let value = |b: u8| if b.is_ascii_digit() { (b - b'0') as usize } else { (b - b'A') as usize + 10 };
    let mut sum = 0u32;
    for (i, &b) in c[..15].iter().enumerate() {
        let v = value(b);
        sum += if i % 2 == 0 {
            ODD[v]
        } else if b.is_ascii_digit() {
            v as u32
        } else {
            (v - 10) as u32
        };
    }
    c[15] == b'A' + (sum % 26) as u8
}

/// Dutch BSN: nine digits passing the 11-test.
pub fn bsn(d: &[u8]) -> bool {
    if d.len() != 9 || d.iter().all(|&x| x == 0) {
        return false;
    }
    let s: i32 = d[..8].iter().enumerate().map(|(i, &x)| (9 - i as i32) * x as i32).sum::<i32>() - d[8] as i32;
    s % 11 == 0
}

/// Canadian SIN: nine digits, Luhn, not starting with 0 or 8.
pub fn sin(d: &[u8]) -> bool {
    d.len() == 9 && d[0] != 0 && d[0] != 8 && luhn(d)
}

/// Indian Aadhaar: twelve digits, not starting with 0 or 1, Verhoeff check digit.
pub fn aadhaar(d: &[u8]) -> bool {
    const M: [[u8; 10]; 10] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
        [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
        [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
        [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
        [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
        [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
        [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
        [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
        [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
    ];
    const P: [[u8; 10]; 8] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
        [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
        [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
        [9, 4, 5, 3, 1, 2, 6, 8, 7, 0],
        [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
        [2, 7, 9, 3, 8, 0, 6, 4, 1, 5],
        [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
    ];
    if d.len() != 12 || d[0] < 2 {
        return false;
    }
    let mut c = 0u8;
    for (i, &x) in d.iter().rev().enumerate() {
        c = M[c as usize][P[i % 8][x as usize] as usize];
    }
    c == 0
}

/// A calendar date that could be someone's birthday.
pub fn birth_date(year: u32, month: u32, day: u32) -> bool {
    const DAYS: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    (1900..=2030).contains(&year) && (1..=12).contains(&month) && day >= 1 && day <= DAYS[month as usize - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums() {
        assert!(card(&digits("4111 1111 1111 1111")));
        assert!(!card(&digits("4111 1111 1111 1112")));
        assert!(card(&digits("378282246310005")));
        assert!(card(&digits("5555555555554444")));
        assert!(iban_mod97(b"DE89370400440532013000"));
        assert!(!iban_mod97(b"DE89370400440532013001"));
        assert!(iban_mod97(b"GB82WEST12345698765432"));
        assert!(ssn(&digits("123-45-6789")));
        assert!(!ssn(&digits("666-45-6789")) && !ssn(&digits("123-00-6789")) && !ssn(&digits("923-45-6789")));
        assert!(nino(b"AB123456C"));
        assert!(!nino(b"ZZ123456C") && !nino(b"GB123456A") && !nino(b"AO123456A") && !nino(b"AB123456E"));
        assert!(nir(b"172023201312126") || !nir(b"172023201312127"));
        assert!(nir(b"255081416802538"));
        assert!(dni_nie(b"12345678Z") && dni_nie(b"X1234567L") && !dni_nie(b"12345678A"));
        assert!(codice_fiscale(b"RSSMRA85T10A562S"));
        assert!(!codice_fiscale(b"RSSMRA85T10A562T"));
        assert!(bsn(&digits("111222333")) && !bsn(&digits("111222334")));
        assert!(sin(&digits("130 692 544")) && !sin(&digits("046 454 286")));
        assert!(aadhaar(&digits("2341 2341 2346")) || !aadhaar(&digits("2341 2341 2340")));
        assert!(birth_date(1990, 2, 29) && !birth_date(1990, 13, 1) && !birth_date(1800, 1, 1));
    }
}
