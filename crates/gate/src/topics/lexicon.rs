//! The topic lexicon: what its entries say of a word (`Role`), and reading `data/topics.txt`'s
//! form into the compiled `Topics` (`Topics::parse`).

use super::*;

/// What a lexicon entry says of a word.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Role {
    Word(Category, f32),
    /// A private document's name; with `Some`, also a word of that category.
    Doc(Option<Category>),
    /// Makes a subject someone's own; `true`: a possessive ("my"), which also binds a document.
    Anchor(f32, bool),
    Know,
    /// A pet ("cat", "perro"): a general-knowledge cue, and with a possessive before it ("my
    /// cat") the text is about the animal.
    Pet,
    /// An everyday object or task ("recipe", "Kartoffeln", "fregadero", "road trip").
    Everyday,
    /// A word of loss ("died", "mort"): an everyday word does not silence the model.
    Loss,
    /// "In general", "allgemein": a general-knowledge cue for its whole sentence.
    General,
    Meta,
    Paste,
    /// A word that is itself, not another listed word inflected ("essayer" is not "essay" + "er").
    Plain,
    /// A verb whose subject is left out ("got pulled over", "been feeling low", "wurde erwischt"):
    /// an anchor of that strength where it starts a sentence.
    Start(f32),
    /// A person named by a role, with no possessive ("Opa", "der Nachbar", "la vecina", "le
    /// collègue"): an anchor of that strength as written (not inflected), not after an indefinite
    /// article or "your" ("a neighbour", "tu vecino": anyone's), weak in a writing cue's text.
    Person(f32),
}

/// A word's or a phrase's roles, and the length in words of the longest phrase that it starts
/// (0: none).
#[derive(Clone, Default)]
pub(super) struct Entry {
    pub(super) roles: Vec<Role>,
    pub(super) phrase: usize,
}

impl Topics {
    /// Reads a lexicon (`data/topics.txt`'s form); errors name the line.
    pub fn parse(text: &str) -> Result<Topics, String> {
        let mut t = Topics {
            mode: Mode::default(),
            exact: WordTable::default(),
            stems: WordTable::default(),
            stem_lens: (usize::MAX, 0),
            stem_heads: WordTable::default(),
            suffixes: Vec::new(),
            suffix_tails: HashMap::default(),
            tail_bits: Box::new([0; 1024]),
        };
        let mut roles: Vec<Role> = Vec::new();
        let mut scratch = Words::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(head) = line.strip_prefix('[') {
                let head = head.strip_suffix(']').ok_or_else(|| format!("line {}: unclosed section", n + 1))?;
                roles = section(head).map_err(|e| format!("line {}: {e}", n + 1))?;
                continue;
            }
            if roles.is_empty() {
                return Err(format!("line {}: words before any section", n + 1));
            }
            for term in line.split_whitespace() {
                if let Some(ending) = term.strip_prefix('*') {
                    let mut folded = String::new();
                    fold_into(ending, &mut folded);
                    if folded.is_empty() || !folded.chars().all(char::is_alphanumeric) {
                        return Err(format!("line {}: an ending is letters: {term:?}", n + 1));
                    }
                    match t.suffixes.iter_mut().find(|(s, _)| **s == *folded) {
                        Some((_, r)) => r.extend(roles.iter().filter(|x| !r.contains(x)).copied().collect::<Vec<_>>()),
                        None => t.suffixes.push((folded.into_boxed_str(), roles.clone())),
                    }
                    continue;
                }
                let (term, stem) = match term.strip_suffix('*') {
                    Some(s) => (s, true),
                    None => (term, false),
                };
                words(&term.replace('_', " "), |_| false, &mut scratch);
                let parts: Vec<&str> = (0..scratch.list.len())
                    .map(|i| std::str::from_utf8(scratch.text(i)).expect("folded words are UTF-8"))
                    .collect();
                if parts.is_empty() {
                    return Err(format!("line {}: {term:?} has no letters", n + 1));
                }
                let key = parts.join(" ");
                let entry = if stem {
                    if parts.len() > 1 {
                        return Err(format!("line {}: a stem is one word: {term:?}", n + 1));
                    }
                    t.stem_lens = (t.stem_lens.0.min(key.len()), t.stem_lens.1.max(key.len()));
                    t.stems.entry(key.as_bytes())
                } else {
                    if parts.len() > 1 {
                        let head = t.exact.entry(parts[0].as_bytes());
                        head.phrase = head.phrase.max(parts.len());
                    }
                    &mut t.exact.entry(key.as_bytes()).roles
                };
                for r in &roles {
                    if !entry.contains(r) {
                        entry.push(*r);
                    }
                }
            }
        }
        let lo = t.stem_lens.0;
        let heads: Vec<Vec<u8>> = t.stems.iter().map(|(k, _)| k.get(..lo).unwrap_or(k).to_vec()).collect();
        for h in heads {
            t.stem_heads.entry(&h);
        }
        for (i, (s, _)) in t.suffixes.iter().enumerate() {
            if s.len() < 2 {
                return Err(format!("the ending {s:?} is shorter than two letters"));
            }
            let tail = tail(s.as_bytes());
            t.suffix_tails.entry(tail).or_default().push(i);
            t.tail_bits[tail / 64] |= 1 << (tail % 64);
        }
        Ok(t)
    }
}

/// A section header's roles.
fn section(head: &str) -> Result<Vec<Role>, String> {
    let mut parts = head.split_whitespace();
    let role = parts.next().ok_or("empty section")?;
    let arg = parts.next();
    if parts.next().is_some() {
        return Err(format!("[{head}]: one role and at most one argument"));
    }
    let number = |a: Option<&str>| -> Result<f32, String> {
        let a = a.ok_or_else(|| format!("[{head}] needs a number"))?;
        match a.parse::<f32>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
            _ => Err(format!("[{head}]: {a:?} is not a number from 0 to 1")),
        }
    };
    let category = |a: &str| {
        Category::from_name(a).ok_or_else(|| {
            let all: Vec<&str> = Category::ALL.iter().map(|c| c.name()).collect();
            format!("unknown category {a:?} (one of {})", all.join(", "))
        })
    };
    Ok(match role {
        "ANCHOR" => vec![Role::Anchor(number(arg)?, false)],
        "POSSESSIVE" => vec![Role::Anchor(number(arg)?, true)],
        "KNOW" => vec![Role::Know],
        "PET" => vec![Role::Pet],
        "EVERYDAY" => vec![Role::Everyday],
        "LOSS" => vec![Role::Loss],
        "GENERAL" => vec![Role::General],
        "META" => vec![Role::Meta],
        "PASTE" => vec![Role::Paste],
        "PLAIN" => vec![Role::Plain],
        "START" => vec![Role::Start(number(arg)?)],
        "PERSON" => vec![Role::Person(number(arg)?)],
        "DOC" => vec![Role::Doc(arg.map(category).transpose()?)],
        c => vec![Role::Word(category(c)?, number(arg)?)],
    })
}
