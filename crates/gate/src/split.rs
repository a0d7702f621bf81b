//! Values cut across a conversation's turns: "my card starts 4539 1488" … "and ends 0343 6467".
//! Neither turn holds a value the detectors accept; the two pieces together do. Each pair of
//! consecutive texts is tried: the last run of digits of the first (with the words before it, for
//! a phone's context) joined to each of the first two runs of the second, and the detectors run
//! on the join. A card, IBAN, phone, SSN or national id that crosses the join marks both pieces.

use crate::{Detector, EntityType};

/// A piece of a split value: characters `start..end` of text `text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub text: usize,
    pub start: usize,
    pub end: usize,
    pub kind: EntityType,
}

/// Byte ranges of the runs of a text: digits with spaces, dashes, dots or slashes between them,
/// a leading `+` or a two-letter country code (an IBAN's `ES91`), at least two digits.
fn runs(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let mut start = i;
        if start >= 2 && b[start - 1].is_ascii_uppercase() && b[start - 2].is_ascii_uppercase() {
            let word_start = start < 3 || !b[start - 3].is_ascii_alphanumeric();
            if word_start {
                start -= 2;
            }
        } else if start >= 1 && b[start - 1] == b'+' {
            start -= 1;
        }
        let mut end = i;
        let mut j = i;
        while j < b.len() {
            if b[j].is_ascii_digit() {
                j += 1;
                end = j;
            } else if matches!(b[j], b' ' | b'-' | b'.' | b'/') && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
                j += 1;
            } else {
                break;
            }
        }
        if b[start..end].iter().filter(|c| c.is_ascii_digit()).count() >= 2 {
            out.push((start, end));
        }
        i = end.max(i + 1);
    }
    out
}

fn chars_before(text: &str, byte: usize) -> usize {
    text[..byte].chars().count()
}

/// The pieces of values split across consecutive `texts` (a conversation's user turns, in order).
pub fn split_values(detector: &Detector, texts: &[&str]) -> Vec<Piece> {
    let mut out = Vec::new();
    for (i, pair) in texts.windows(2).enumerate() {
        let (a, b) = (pair[0], pair[1]);
        let Some(&(a0, a1)) = runs(a).last() else { continue };
        // Some words before the first piece: a phone is found by its context ("mobile is").
        let mut ctx = a0.saturating_sub(40);
        while !a.is_char_boundary(ctx) {
            ctx -= 1;
        }
        for &(b0, b1) in runs(b).iter().take(2) {
            let head = &a[ctx..a1];
            let joined = format!("{head} {}", &b[b0..b1]);
            let cut = head.chars().count();
            let piece_a = chars_before(head, a0 - ctx);
            for s in detector.detect(&joined) {
                let kind_ok = matches!(
                    s.kind,
                    EntityType::Card | EntityType::Iban | EntityType::Phone | EntityType::Ssn | EntityType::NationalId
                );
                if kind_ok && s.start < cut && s.end > cut + 1 && s.end > piece_a {
                    out.push(Piece { text: i, start: chars_before(a, a0), end: chars_before(a, a1), kind: s.kind });
                    out.push(Piece { text: i + 1, start: chars_before(b, b0), end: chars_before(b, b1), kind: s.kind });
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(texts: &[&str]) -> Vec<(usize, String, &'static str)> {
        let d = Detector::new();
        split_values(&d, texts)
            .into_iter()
            .map(|p| (p.text, texts[p.text].chars().skip(p.start).take(p.end - p.start).collect(), p.kind.name()))
            .collect()
    }

    #[test]
    fn cards_ibans_and_phones_across_turns() {
        let card = found(&["my card number starts 4539 1488", "and ends 0343 6467, expiry 09/28. Is it a Visa?"]);
        assert_eq!(card, vec![(0, "4539 1488".into(), "CARD"), (1, "0343 6467".into(), "CARD")]);
        let iban = found(&["mi IBAN es ES91 2100 0418", "4502 0005 1332, ¿está bien formado?"]);
        assert_eq!(iban, vec![(0, "ES91 2100 0418".into(), "IBAN"), (1, "4502 0005 1332".into(), "IBAN")]);
        let phone = found(&["mon numéro c'est le 06 45", "78 21 09, tu peux le formater ?"]);
        assert_eq!(phone.iter().map(|p| p.2).collect::<Vec<_>>(), vec!["PHONE", "PHONE"], "{phone:?}");
    }

    #[test]
    fn numbers_that_do_not_join_into_a_value_are_left() {
        assert!(found(&["I need 12 eggs and 3 lemons", "and 250 g of sugar"]).is_empty());
        assert!(found(&["my card starts 4539 1488", "and ends 0343 6468"]).is_empty(), "Luhn fails");
        assert!(found(&["the meeting is at 10:30", "room 4.12 on floor 2"]).is_empty());
    }
}
