//! Cutting a text into words, sentences and lines for the lexicon (`Topics::classify`).

use super::*;

/// The words of `text` (letters and digits, and currency signs alone; anything else splits),
/// their sentences (cut at
/// `.`, `!`, `?`, `;` and line ends, not at a `.` inside a number or a word), and the shape of
/// its lines.
pub(super) fn words(text: &str, names: impl Fn(&str) -> bool, out: &mut Words) {
    out.folded.clear();
    out.list.clear();
    out.speakers.clear();
    out.record_lines = 0;
    out.speaker_lines = 0;
    out.value_lines = 0;
    out.lines = 0;
    out.first_line_words = 0;
    out.second_line_words = 0;
    let mut first_colon = false;
    let mut sentence = 0u32;
    let mut chars = 0u32;
    let mut line_start = 0usize;
    let mut line_words = 0usize;
    // The shape of the lines counts only in a text of three lines or more (a record, a thread),
    // so a shorter one is not looked at; and only a colon or a digit makes a line a record's.
    let shapes = text.find('\n').is_some_and(|i| text[i + 1..].contains('\n'));
    let check_line = |line: &str, out: &mut Words| {
        if !shapes || !line.bytes().any(|b| b == b':' || b.is_ascii_digit()) {
            return;
        }
        // A chat line's time stamp ("[10:02] Sam: …", "10:02 Sam: …") is not its label.
        let line = line.trim_start();
        let line = match line.strip_prefix('[').and_then(|l| l.split_once(']')) {
            Some((stamp, rest)) if stamp.bytes().all(|b| b.is_ascii_digit() || b == b':') => rest.trim_start(),
            _ => line.trim_start_matches(|c: char| c.is_ascii_digit() || c == ':'),
        };
        // `Label: value` and `Name: message` lines (labels of one to four words).
        let Some(colon) = line.find(':') else {
            if line.bytes().any(|b| b.is_ascii_digit()) && letter_words_at_most(line, 6) {
                out.value_lines += 1;
            }
            return;
        };
        let (label, value) = (line[..colon].trim(), line[colon + 1..].trim());
        if value.is_empty() || label.is_empty() || label.len() > 40 || label.split_whitespace().count() > 4 {
            return;
        }
        if !label.starts_with(|c: char| c.is_uppercase()) || value.starts_with("//") {
            return;
        }
        out.record_lines += 1;
        if !label.contains(' ') && names(label) && value.split_whitespace().nth(1).is_some() {
            out.speaker_lines += 1;
            if !out.speakers.iter().any(|s| s == label) {
                out.speakers.push(label.to_string());
            }
        }
    };
    let b = text.as_bytes();
    let at = |i: usize| char_at(text, i);
    let mut i = 0;
    while i < b.len() {
        let (c, len) = at(i);
        if alphanumeric(c, len) {
            let (start, cstart) = (i, chars);
            let (mut ascii, mut upper) = (true, true);
            while i < b.len() {
                let (d, l) = at(i);
                if !alphanumeric(d, l) {
                    break;
                }
                ascii &= l == 1;
                upper &= if l == 1 { d.is_ascii_uppercase() } else { d.is_uppercase() };
                chars += 1;
                i += l;
            }
            let w = &text[start..i];
            if !out.list.is_empty() {
                out.folded.push(b' ');
            }
            let a = out.folded.len();
            if ascii {
                out.folded.extend(w.bytes().map(|b| b.to_ascii_lowercase()));
            } else {
                // The ligatures as French and Danish write them out ("cœur" = "coeur", "œil" =
                // "oeil"), so one entry of the lexicon is both.
                fold_chars(w, |c| match c {
                    'œ' => out.folded.extend_from_slice(b"oe"),
                    'æ' => out.folded.extend_from_slice(b"ae"),
                    c => push_char(&mut out.folded, c),
                });
            }
            let caps = chars - cstart >= 2 && upper;
            let capital = w.starts_with(|c: char| c.is_uppercase());
            let inside = out.list.last().is_some_and(|p| p.sentence == sentence);
            let compound = capital && inside || !ascii && w.contains(['ä', 'ö', 'ü', 'ß', 'Ä', 'Ö', 'Ü']);
            out.list.push(Word {
                fold: (a as u32, out.folded.len() as u32),
                chars: (cstart, chars),
                sentence,
                caps,
                bytes: (start as u32, i as u32),
                capital,
                compound,
            });
            line_words += 1;
            continue;
        }
        if matches!(c, '€' | '$' | '£' | '¥') {
            if !out.list.is_empty() {
                out.folded.push(b' ');
            }
            let a = out.folded.len();
            push_char(&mut out.folded, c);
            out.list.push(Word {
                fold: (a as u32, out.folded.len() as u32),
                chars: (chars, chars + 1),
                sentence,
                caps: false,
                bytes: (i as u32, (i + len) as u32),
                capital: false,
                compound: false,
            });
        }
        chars += 1;
        match c {
            '\n' => {
                check_line(&text[line_start..i], out);
                if line_words > 0 {
                    sentence += 1;
                    out.lines += 1;
                    if out.lines == 1 {
                        out.first_line_words = out.list.len();
                        first_colon = text[line_start..i].trim_end().ends_with(':');
                    } else if out.lines == 2 && first_colon {
                        out.second_line_words = out.list.len();
                    }
                }
                line_start = i + 1;
                line_words = 0;
            }
            '!' | '?' | ';' => sentence += 1,
            '.' if i + 1 == b.len() || at(i + 1).0.is_whitespace() => sentence += 1,
            _ => {}
        }
        i += len;
    }
    check_line(&text[line_start..], out);
    if line_words > 0 {
        out.lines += 1;
        if out.lines == 1 {
            out.first_line_words = out.list.len();
        } else if out.lines == 2 && first_colon {
            out.second_line_words = out.list.len();
        }
    }
}
