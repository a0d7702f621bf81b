//! The privacy gate: finds personal data and secrets in text, decides by a policy what may leave
//! the machine, masks what must not with typed placeholders (`[EMAIL_1]`), and restores the real
//! values in the answer, streamed or not.
//!
//! ```text
//! normalize.rs  NFKC with offsets back to the input's characters
//! detect.rs     the detectors (patterns, checksums, context words, name lists), one file each
//!               in detect/
//! keywords.rs   every detector's context words, found in one pass
//! scan.rs       small scans the detectors share
//! checks.rs     Luhn, mod-97, national-id rules, dates
//! conversation.rs  values seen so far in a conversation: repeats, placeholders, restoration
//! split.rs      values cut across turns (a card number in two messages)
//! topics.rs     what a text is about: a person's health, money, legal matters… (categories)
//! topic_model.rs  the learned topic classifier beside the lexicon (weights in data/)
//! word_table.rs  the lexicon's hash table, looked up by hashes made from a word's prefixes
//! policy.rs     the TOML policy: type or category (and destination) → outcome, strictest wins
//! eval.rs       precision/recall/latency over a labelled corpus
//! ```

pub mod checks;
pub mod conversation;
pub mod detect;
pub mod eval;
pub mod keywords;
pub mod normalize;
pub mod policy;
pub mod scan;
pub mod split;
pub mod topic_model;
pub mod topics;
pub mod word_table;

#[cfg(test)]
pub(crate) mod test_rng {
    /// xorshift64: the random inputs of the scanners' tests (each test seeds its own).
    pub struct TestRng(pub u64);

    impl TestRng {
        /// Steps the state and returns it.
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// The next state modulo n.
        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }
}

pub use conversation::{Conversation, Restorer};
pub use detect::Detector;
pub use policy::{Decision, Destination, Outcome, Policy};
pub use topic_model::TopicModel;
pub use topics::{Assessment, Category, Evidence, Mode, Topic, Topics};

use serde::{Deserialize, Serialize};

/// What a span is. The names (`EMAIL`, `DATE_OF_BIRTH`, …) are the stable interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EntityType {
    Person,
    Email,
    Phone,
    Address,
    DateOfBirth,
    Card,
    Iban,
    Ssn,
    NationalId,
    IpAddress,
    MacAddress,
    Secret,
    UrlCredentials,
}

impl EntityType {
    pub const ALL: [EntityType; 13] = [
        EntityType::Person,
        EntityType::Email,
        EntityType::Phone,
        EntityType::Address,
        EntityType::DateOfBirth,
        EntityType::Card,
        EntityType::Iban,
        EntityType::Ssn,
        EntityType::NationalId,
        EntityType::IpAddress,
        EntityType::MacAddress,
        EntityType::Secret,
        EntityType::UrlCredentials,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EntityType::Person => "PERSON",
            EntityType::Email => "EMAIL",
            EntityType::Phone => "PHONE",
            EntityType::Address => "ADDRESS",
            EntityType::DateOfBirth => "DATE_OF_BIRTH",
            EntityType::Card => "CARD",
            EntityType::Iban => "IBAN",
            EntityType::Ssn => "SSN",
            EntityType::NationalId => "NATIONAL_ID",
            EntityType::IpAddress => "IP_ADDRESS",
            EntityType::MacAddress => "MAC_ADDRESS",
            EntityType::Secret => "SECRET",
            EntityType::UrlCredentials => "URL_CREDENTIALS",
        }
    }

    pub fn from_name(name: &str) -> Option<EntityType> {
        EntityType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Types with a fixed shape (and mostly a checksum), as opposed to names and addresses.
    pub fn structured(self) -> bool {
        !matches!(self, EntityType::Person | EntityType::Address)
    }
}

impl std::fmt::Display for EntityType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A finding: characters `start..end` (end exclusive) of the input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    #[serde(rename = "type")]
    pub kind: EntityType,
    pub text: String,
}

/// The detectors and the policy together: what `solo gate` and the router use.
pub struct Gate {
    pub detector: Detector,
    pub topics: Topics,
    pub policy: Policy,
}

/// The result of gating one text for one destination.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub outcome: Outcome,
    pub spans: Vec<Span>,
    /// What the text is about, when that is sensitive (`HEALTH`, …), strongest first.
    pub categories: Vec<Topic>,
    /// No category, but a topic score in the band where `solo serve --gate-judge local` asks the
    /// local model (`Assessment::unsure`).
    pub unsure: bool,
}

impl Gate {
    pub fn new(policy: Policy) -> Gate {
        Gate { detector: Detector::new(), topics: Topics::default(), policy }
    }

    /// Spans and categories of one stand-alone text, and the outcome for `destination`.
    pub fn check(&self, text: &str, destination: Destination) -> Report {
        let spans = self.detector.detect(text);
        let assessed = self.topics.assess(text, &spans);
        let unsure = assessed.unsure();
        let categories = assessed.topics;
        let outcome = self
            .policy
            .decide_all(spans.iter().map(|s| s.kind), categories.iter().map(|c| c.kind), destination)
            .outcome;
        Report { outcome, spans, categories, unsure }
    }
}
