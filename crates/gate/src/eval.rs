//! `solo gate eval`: per-type precision, recall and F1 over a labelled corpus, the share of
//! benign documents flagged, latency per KB, and whether repeats of found values are caught; for
//! documents labelled with topic categories, per-category precision and recall, the share of
//! sensitive requests the shipped policy keeps local, and the share of general-knowledge and
//! everyday requests flagged, in all and per language.
//!
//! Corpus: JSON lines `{"text": …, "spans": [{"start", "end", "type"}, …]}` (character offsets,
//! end exclusive); a document with no spans is benign. A predicted span counts as a true positive
//! when it overlaps a gold span of the same type (each gold span matched once); `exact` also
//! counts the predictions whose offsets equal the gold span's. Topic-labelled documents add
//! `"categories": ["HEALTH", …]`, `"kind"` (`sensitive`, `general`, `everyday` or another kind,
//! such as `identifier`, that only the spans score) and `"lang"`; an unlabelled benign document
//! counts as everyday.

use crate::conversation::Conversation;
use crate::detect::Detector;
use crate::policy::{Destination, Outcome, Policy};
use crate::topics::{Assessment, Category, Topics};
use crate::EntityType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(Deserialize)]
pub struct Doc {
    pub text: String,
    #[serde(default)]
    pub spans: Vec<Gold>,
    /// The document's categories (topic-labelled documents only).
    #[serde(default)]
    pub categories: Option<Vec<Category>>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub lang: Option<String>,
}

impl Doc {
    pub fn new(text: String, spans: Vec<Gold>) -> Doc {
        Doc { text, spans, categories: None, kind: None, lang: None }
    }
}

#[derive(Deserialize, Clone)]
pub struct Gold {
    pub start: usize,
    pub end: usize,
    #[serde(rename = "type")]
    pub kind: EntityType,
}

#[derive(Default, Clone, Serialize)]
pub struct Counts {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    pub exact: usize,
}

impl Counts {
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

#[derive(Default, Serialize)]
pub struct Results {
    pub documents: usize,
    pub per_type: BTreeMap<EntityType, Counts>,
    pub benign_documents: usize,
    pub benign_flagged: usize,
    pub latency_us_per_kb_p50: f64,
    pub latency_us_per_kb_p99: f64,
    /// Total time over total size.
    pub latency_us_per_kb_mean: f64,
    pub repeats: usize,
    pub repeats_caught: usize,
    /// A few repeats that were missed (type: text), to look at.
    pub missed_repeats: Vec<String>,
    pub topics: TopicResults,
}

/// How a share of documents came out: `hit` of `of`.
#[derive(Default, Clone, Copy, Serialize)]
pub struct Share {
    pub hit: usize,
    pub of: usize,
}

impl Share {
    fn add(&mut self, hit: bool) {
        self.of += 1;
        self.hit += hit as usize;
    }
    pub fn rate(&self) -> f64 {
        ratio(self.hit, self.of)
    }
}

/// The topic numbers: per category, and the shares of sensitive requests kept local (by the
/// shipped policy, categories and spans together) and of other requests flagged.
#[derive(Default, Serialize)]
pub struct TopicResults {
    pub per_category: BTreeMap<Category, Counts>,
    /// Sensitive documents the policy keeps local (or refuses).
    pub kept_local: Share,
    /// Sensitive documents with at least one category found.
    pub categorised: Share,
    /// General-knowledge documents with a category found.
    pub general_flagged: Share,
    /// Everyday documents with a category found.
    pub everyday_flagged: Share,
    /// Documents with no category whose scores are in the judge's band (`Assessment::unsure`:
    /// `solo serve --gate-judge local` would ask the local model): of the sensitive documents
    /// the first stage lets go, of the general and of the everyday ones.
    pub judge_sensitive_sent: Share,
    pub judge_general: Share,
    pub judge_everyday: Share,
    /// Per language: (kept local, general flagged, everyday flagged).
    pub per_lang: BTreeMap<String, (Share, Share, Share)>,
    /// A few misses and false flags (kind: text), to look at.
    pub examples: Vec<String>,
}

impl TopicResults {
    fn table(&self) -> String {
        if self.kept_local.of + self.general_flagged.of == 0 {
            return String::new();
        }
        let mut out = format!("\n{:<16} {:>6} {:>6} {:>6} {:>6} {:>6}\n", "category", "P", "R", "tp", "fp", "fn");
        for (c, x) in &self.per_category {
            out += &format!(
                "{:<16} {:>6.3} {:>6.3} {:>6} {:>6} {:>6}\n",
                c.name(),
                x.precision(),
                x.recall(),
                x.tp,
                x.fp,
                x.fn_
            );
        }
        let share = |s: &Share| format!("{}/{} = {:.1} %", s.hit, s.of, 100.0 * s.rate());
        out += &format!("sensitive kept local: {}\n", share(&self.kept_local));
        out += &format!("sensitive with a category: {}\n", share(&self.categorised));
        out += &format!("general knowledge flagged: {}\n", share(&self.general_flagged));
        out += &format!("everyday flagged: {}\n", share(&self.everyday_flagged));
        out += &format!(
            "judge band (--gate-judge local asks): sensitive sent {}, general {}, everyday {}\n",
            share(&self.judge_sensitive_sent),
            share(&self.judge_general),
            share(&self.judge_everyday)
        );
        for (lang, (k, g, e)) in &self.per_lang {
            out += &format!(
                "  {lang}: kept local {:.3} ({}), general flagged {:.3} ({}), everyday flagged {:.3} ({})\n",
                k.rate(),
                k.of,
                g.rate(),
                g.of,
                e.rate(),
                e.of
            );
        }
        for x in self.examples.iter().take(12) {
            out += &format!("  {x}\n");
        }
        out
    }
}

impl Results {
    pub fn structured(&self) -> Counts {
        let mut c = Counts::default();
        for (t, x) in &self.per_type {
            if t.structured() {
                c.tp += x.tp;
                c.fp += x.fp;
                c.fn_ += x.fn_;
                c.exact += x.exact;
            }
        }
        c
    }

    /// The table `solo gate eval` prints.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<16} {:>6} {:>6} {:>6} {:>9} {:>6} {:>6} {:>7}\n",
            "type", "P", "R", "F1", "exact", "tp", "fp", "fn"
        );
        let mut row = |name: &str, c: &Counts| {
            out += &format!(
                "{:<16} {:>6.3} {:>6.3} {:>6.3} {:>9.3} {:>6} {:>6} {:>7}\n",
                name,
                c.precision(),
                c.recall(),
                c.f1(),
                ratio(c.exact, c.tp),
                c.tp,
                c.fp,
                c.fn_
            );
        };
        for (t, c) in &self.per_type {
            row(t.name(), c);
        }
        row("(structured)", &self.structured());
        out += &format!(
            "benign flagged: {}/{} = {:.2} %\nlatency µs/KB: p50 {:.1}, p99 {:.1}, mean {:.1} (one core; each document's median of {} timed passes)\nrepeats caught: {}/{}\ndocuments: {}\n",
            self.benign_flagged,
            self.benign_documents,
            100.0 * ratio(self.benign_flagged, self.benign_documents.max(1)),
            self.latency_us_per_kb_p50,
            self.latency_us_per_kb_p99,
            self.latency_us_per_kb_mean,
            TIMED_PASSES,
            self.repeats_caught,
            self.repeats,
            self.documents
        );
        for m in self.missed_repeats.iter().take(8) {
            out += &format!("  missed repeat: {m}\n");
        }
        out += &self.topics.table();
        out
    }
}

/// A value written another way: its letters and digits regrouped with other separators, or its
/// case changed.
pub fn reformat(value: &str, kind: EntityType, seed: usize) -> String {
    match kind {
        EntityType::Email
        | EntityType::Person
        | EntityType::Address
        | EntityType::UrlCredentials
        | EntityType::Secret => {
            if seed.is_multiple_of(2) {
                value.to_uppercase()
            } else {
                value.to_lowercase()
            }
        }
        _ => {
            let compact: Vec<char> = value.chars().filter(|c| c.is_alphanumeric()).collect();
            let sep = ["-", " ", "", " - ", "  "][seed % 5];
            let group = [3, 4, 2, 5][seed % 4];
            let mut s = String::new();
            for (i, c) in compact.iter().enumerate() {
                if i > 0 && i % group == 0 {
                    s += sep;
                }
                s.push(*c);
            }
            s
        }
    }
}

/// The documents of a corpus file (JSON lines, blank lines skipped); an error names the file
/// and, for a line that is not a document, its number.
pub fn read_corpus(path: &std::path::Path) -> Result<Vec<Doc>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| serde_json::from_str(line).map_err(|e| format!("{} line {}: {e}", path.display(), n + 1)))
        .collect()
}

/// Consecutive documents joined (blank line between) into inputs of at least `bytes` bytes, as
/// a whole conversation is gated at once: latency per KB without the per-call cost dominating.
pub fn join(docs: Vec<Doc>, bytes: usize) -> Vec<Doc> {
    let mut out: Vec<Doc> = Vec::new();
    let mut cur = Doc::new(String::new(), Vec::new());
    let mut chars = 0;
    for d in docs {
        if !cur.text.is_empty() {
            cur.text.push_str("\n\n");
            chars += 2;
        }
        cur.spans.extend(d.spans.iter().map(|g| Gold { start: g.start + chars, end: g.end + chars, kind: g.kind }));
        chars += d.text.chars().count();
        cur.text.push_str(&d.text);
        if cur.text.len() >= bytes {
            cur.kind = Some("joined".into());
            out.push(std::mem::replace(&mut cur, Doc::new(String::new(), Vec::new())));
            chars = 0;
        }
    }
    if !cur.text.is_empty() {
        cur.kind = Some("joined".into());
        out.push(cur);
    }
    out
}

/// Timed passes over the corpus (see `evaluate`).
pub const TIMED_PASSES: usize = 5;

/// `evaluate_with` the shipped lexicon and policy.
pub fn evaluate(detector: &Detector, docs: &[Doc]) -> Results {
    evaluate_with(detector, Topics::shipped(), &Policy::default(), docs)
}

/// The scores of the detectors and the topic lexicon over `docs`; `policy` decides which
/// sensitive documents are kept local. The time measured is the gate's: spans and categories.
pub fn evaluate_with(detector: &Detector, topics: &Topics, policy: &Policy, docs: &[Doc]) -> Results {
    let mut r = Results { documents: docs.len(), ..Default::default() };
    let gate = |text: &str| {
        let spans = detector.detect(text);
        let assessed = topics.assess(text, &spans);
        (spans, assessed)
    };
    // Warm up first (the regexes' lazy DFAs build their states on first use), as a running
    // server would be.
    for doc in docs {
        std::hint::black_box(gate(&doc.text));
    }
    // The timed passes: the gate alone, document after document, TIMED_PASSES times over the
    // corpus; a document's time is the median of its passes. One pass over the held-out corpus
    // is ~10 ms of gating, short enough that a busy neighbour on a shared machine moved its p50
    // by half (41 → 67 µs/KB on an idle 2-core VM); the median of passes spread over ~50 ms does not.
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(TIMED_PASSES); docs.len()];
    let mut all_spans = Vec::with_capacity(docs.len());
    for pass in 0..TIMED_PASSES {
        for (doc, t_doc) in docs.iter().zip(&mut times) {
            let t = Instant::now();
            let found = gate(&doc.text);
            t_doc.push(t.elapsed().as_secs_f64() * 1e6);
            if pass == 0 {
                all_spans.push(found);
            }
        }
    }
    let mut per_kb: Vec<f64> = Vec::with_capacity(docs.len());
    let (mut total_us, mut total_kb) = (0.0, 0.0);
    for (doc, t_doc) in docs.iter().zip(&mut times) {
        t_doc.sort_by(f64::total_cmp);
        let us = t_doc[t_doc.len() / 2];
        let kb = doc.text.len() as f64 / 1024.0;
        per_kb.push(us / kb.max(1e-9));
        total_us += us;
        total_kb += kb;
    }
    for (n, (doc, (spans, assessed))) in docs.iter().zip(all_spans).enumerate() {
        score_topics(&mut r.topics, policy, doc, &spans, &assessed);
        if doc.spans.is_empty() {
            r.benign_documents += 1;
            if !spans.is_empty() {
                r.benign_flagged += 1;
            }
        }
        let mut matched = vec![false; doc.spans.len()];
        let mut found_as: Vec<Option<usize>> = vec![None; doc.spans.len()];
        for (si, s) in spans.iter().enumerate() {
            let hit = doc
                .spans
                .iter()
                .enumerate()
                .find(|(i, g)| !matched[*i] && g.kind == s.kind && s.start < g.end && g.start < s.end);
            let c = r.per_type.entry(s.kind).or_default();
            match hit {
                Some((i, g)) => {
                    matched[i] = true;
                    found_as[i] = Some(si);
                    c.tp += 1;
                    if g.start == s.start && g.end == s.end {
                        c.exact += 1;
                    }
                }
                None => c.fp += 1,
            }
        }
        for (i, g) in doc.spans.iter().enumerate() {
            if !matched[i] {
                r.per_type.entry(g.kind).or_default().fn_ += 1;
            }
        }
        // Repeats: the values the gate found, reformatted, in a later message of the conversation.
        if doc.spans.is_empty() {
            continue;
        }
        let mut conv = Conversation::new();
        conv.scan(detector, &doc.text);
        for (k, g) in doc.spans.iter().enumerate() {
            let Some(si) = found_as[k] else { continue }; // only values the gate found are known
            let value = spans[si].text.as_str();
            let variant = reformat(value, g.kind, n + k);
            let later = format!("As I said before, it is {variant} — please keep that in mind.");
            let found = conv.scan(detector, &later);
            let at =
                later.chars().count() - "— please keep that in mind.".chars().count() - 1 - variant.chars().count();
            r.repeats += 1;
            if found.iter().any(|s| s.kind == g.kind && s.start < at + variant.chars().count() && at < s.end) {
                r.repeats_caught += 1;
            } else if r.missed_repeats.len() < 20 {
                r.missed_repeats.push(format!(
                    "{}: {value:?} as {variant:?} -> {:?}",
                    g.kind,
                    found.iter().map(|s| (s.kind.name(), &s.text)).collect::<Vec<_>>()
                ));
            }
        }
    }
    per_kb.sort_by(f64::total_cmp);
    let pct = |p: f64| per_kb.get(((per_kb.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
    r.latency_us_per_kb_p50 = pct(0.5);
    r.latency_us_per_kb_p99 = pct(0.99);
    r.latency_us_per_kb_mean = if total_kb > 0.0 { total_us / total_kb } else { 0.0 };
    r
}

/// One document's topic scores.
fn score_topics(r: &mut TopicResults, policy: &Policy, doc: &Doc, spans: &[crate::Span], assessed: &Assessment) {
    let found = &assessed.topics[..];
    let unsure = assessed.unsure();
    let kind = match (&doc.kind, &doc.categories) {
        (Some(k), Some(_)) => k.as_str(),
        (None, None) if doc.spans.is_empty() => "everyday",
        _ => return,
    };
    let gold: &[Category] = doc.categories.as_deref().unwrap_or(&[]);
    let lang = r.per_lang.entry(doc.lang.clone().unwrap_or_else(|| "-".into())).or_default();
    let flagged = !found.is_empty();
    let note = |r: &mut Vec<String>, what: &str| {
        if r.len() < 200 {
            let names: Vec<&str> = found.iter().map(|t| t.kind.name()).collect();
            r.push(format!("{what}: {:?} -> {names:?}", doc.text.chars().take(90).collect::<String>()));
        }
    };
    match kind {
        "sensitive" => {
            let outcome = policy
                .decide_all(spans.iter().map(|s| s.kind), found.iter().map(|t| t.kind), Destination::Cloud)
                .outcome;
            let local = outcome >= Outcome::KeepLocal;
            r.kept_local.add(local);
            lang.0.add(local);
            r.categorised.add(flagged);
            if !local {
                r.judge_sensitive_sent.add(unsure);
                note(&mut r.examples, "sensitive, sent");
            }
        }
        "general" => {
            r.general_flagged.add(flagged);
            r.judge_general.add(unsure);
            lang.1.add(flagged);
            if flagged {
                note(&mut r.examples, "general, flagged");
            }
        }
        "everyday" => {
            r.everyday_flagged.add(flagged);
            r.judge_everyday.add(unsure);
            lang.2.add(flagged);
            if flagged {
                note(&mut r.examples, "everyday, flagged");
            }
        }
        _ => {}
    }
    if doc.categories.is_none() {
        return;
    }
    for c in Category::ALL {
        let (want, got) = (gold.contains(&c), found.iter().any(|t| t.kind == c));
        if want || got {
            let x = r.per_category.entry(c).or_default();
            match (want, got) {
                (true, true) => x.tp += 1,
                (true, false) => x.fn_ += 1,
                _ => x.fp += 1,
            }
        }
    }
}
