//! The policy: which outcome each entity type and each topic category gets for each destination.
//! Rules are read from a TOML file; when several rules match a type, and when a text holds
//! several types or categories, the strictest outcome wins (`refuse` > `keep_local` >
//! `ask_consent` > `mask` > `allow`). A rule's `types` name entity types (`EMAIL`) and categories
//! (`HEALTH`) alike; `"*"` names them all. A category's `mask` masks every value the request
//! holds (the subject goes out, not whose it is).
//!
//! ```toml
//! default = "mask"            # types no rule names
//! on_cloud_error = "local"    # or "fail": what a request does when the cloud is unreachable
//!
//! [[rule]]
//! types = ["SECRET", "CARD", "HEALTH"]
//! outcome = "keep_local"
//! destination = "cloud"       # "cloud" (default), "local" or "any"
//! ```

use crate::{Category, EntityType};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use toml::Spanned;

/// What happens to a request, mildest first (the order is the strictness).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Sent as it is.
    Allow,
    /// Sent with the values replaced by placeholders; the answer is restored.
    Mask,
    /// The client must confirm (428 + a consent token); with the token, sent as it is.
    AskConsent,
    /// Answered by the local engine; nothing leaves.
    KeepLocal,
    /// 403: not answered at all.
    Refuse,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::Mask => "mask",
            Outcome::AskConsent => "ask_consent",
            Outcome::KeepLocal => "keep_local",
            Outcome::Refuse => "refuse",
        }
    }

    fn parse(s: &str) -> Option<Outcome> {
        [Outcome::Allow, Outcome::Mask, Outcome::AskConsent, Outcome::KeepLocal, Outcome::Refuse]
            .into_iter()
            .find(|o| o.name() == s)
    }
}

/// Where a request would go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    Cloud,
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RuleDestination {
    Cloud,
    Local,
    Any,
}

#[derive(Clone, Debug)]
struct Rule {
    types: Vec<EntityType>,
    categories: Vec<Category>,
    outcome: Outcome,
    destination: RuleDestination,
}

/// When the cloud cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnCloudError {
    /// The local engine answers (the original request: nothing leaves the machine).
    Local,
    /// 502 with a clear message.
    Fail,
}

#[derive(Clone, Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    default: Outcome,
    pub on_cloud_error: OnCloudError,
}

/// The outcome for a set of types and categories, and each one's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub per_type: BTreeMap<EntityType, Outcome>,
    pub per_category: BTreeMap<Category, Outcome>,
}

impl Decision {
    /// Types whose own outcome is `o`.
    pub fn types_with(&self, o: Outcome) -> Vec<EntityType> {
        self.per_type.iter().filter(|(_, &x)| x == o).map(|(&t, _)| t).collect()
    }

    /// Categories whose own outcome is `o`.
    pub fn categories_with(&self, o: Outcome) -> Vec<Category> {
        self.per_category.iter().filter(|(_, &x)| x == o).map(|(&c, _)| c).collect()
    }

    /// The strictest of the per-type and per-category outcomes (after a caller changed some).
    pub fn recompute(&mut self) {
        self.outcome =
            self.per_type.values().chain(self.per_category.values()).copied().max().unwrap_or(Outcome::Allow);
    }
}

/// The shipped policy: credentials, cards and government ids never leave; contact details and
/// other identifying numbers are masked; names need the user's consent.
pub const DEFAULT_POLICY: &str = include_str!("../data/default_policy.toml");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    default: Option<Spanned<String>>,
    on_cloud_error: Option<Spanned<String>>,
    #[serde(default)]
    rule: Vec<RuleFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    types: Vec<Spanned<String>>,
    outcome: Spanned<String>,
    destination: Option<Spanned<String>>,
}

/// 1-based line of byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

impl Default for Policy {
    fn default() -> Self {
        Policy::parse(DEFAULT_POLICY).expect("the shipped policy parses")
    }
}

impl Policy {
    /// Reads a policy; errors name the line.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let file: File = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            let msg = e.message().to_string();
            match line {
                Some(l) => format!("line {l}: {msg}"),
                None => msg,
            }
        })?;
        let at = |s: &Spanned<String>| line_of(text, s.span().start);
        let outcome = |s: &Spanned<String>| {
            Outcome::parse(s.get_ref()).ok_or_else(|| {
                format!(
                    "line {}: unknown outcome {:?} (allow, mask, ask_consent, keep_local, refuse)",
                    at(s),
                    s.get_ref()
                )
            })
        };
        let default = match &file.default {
            Some(d) => outcome(d)?,
            None => Outcome::Mask,
        };
        let on_cloud_error = match &file.on_cloud_error {
            None => OnCloudError::Local,
            Some(s) => match s.get_ref().as_str() {
                "local" => OnCloudError::Local,
                "fail" => OnCloudError::Fail,
                other => {
                    return Err(format!("line {}: on_cloud_error must be \"local\" or \"fail\", got {other:?}", at(s)))
                }
            },
        };
        let mut rules = Vec::new();
        for r in &file.rule {
            let (mut types, mut categories) = (Vec::new(), Vec::new());
            for t in &r.types {
                let name = t.get_ref();
                if name == "*" {
                    types.extend(EntityType::ALL);
                    categories.extend(Category::ALL);
                } else if let Some(kind) = EntityType::from_name(name) {
                    types.push(kind);
                } else if let Some(c) = Category::from_name(name) {
                    categories.push(c);
                } else {
                    let all: Vec<&str> = EntityType::ALL.iter().map(|t| t.name()).collect();
                    let cats: Vec<&str> = Category::ALL.iter().map(|c| c.name()).collect();
                    return Err(format!(
                        "line {}: unknown entity type or category {name:?} (types: {}; categories: {}; or \"*\")",
                        at(t),
                        all.join(", "),
                        cats.join(", ")
                    ));
                }
            }
            let destination = match &r.destination {
                None => RuleDestination::Cloud,
                Some(d) => match d.get_ref().as_str() {
                    "cloud" => RuleDestination::Cloud,
                    "local" => RuleDestination::Local,
                    "any" | "*" => RuleDestination::Any,
                    other => {
                        return Err(format!(
                            "line {}: destination must be \"cloud\", \"local\" or \"any\", got {other:?}",
                            at(d)
                        ))
                    }
                },
            };
            rules.push(Rule { types, categories, outcome: outcome(&r.outcome)?, destination });
        }
        Ok(Policy { rules, default, on_cloud_error })
    }

    /// Reads a policy file; errors name the file and the line.
    pub fn load(path: &std::path::Path) -> Result<Policy, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read policy {}: {e}", path.display()))?;
        Policy::parse(&text).map_err(|e| format!("policy {}: {e}", path.display()))
    }

    /// The outcome of one type for a destination: the strictest matching rule; for the cloud,
    /// the default when no rule names it; for the local engine, `allow` unless a rule says so.
    pub fn outcome_of(&self, kind: EntityType, destination: Destination) -> Outcome {
        self.outcome_where(|r| r.types.contains(&kind), destination)
    }

    /// The outcome of one category, as `outcome_of` gives a type's.
    pub fn outcome_of_category(&self, c: Category, destination: Destination) -> Outcome {
        self.outcome_where(|r| r.categories.contains(&c), destination)
    }

    fn outcome_where(&self, names: impl Fn(&Rule) -> bool, destination: Destination) -> Outcome {
        let matching = self.rules.iter().filter(|r| {
            names(r)
                && matches!(
                    (r.destination, destination),
                    (RuleDestination::Any, _)
                        | (RuleDestination::Cloud, Destination::Cloud)
                        | (RuleDestination::Local, Destination::Local)
                )
        });
        let best = matching.map(|r| r.outcome).max();
        match destination {
            Destination::Cloud => best.unwrap_or(self.default),
            // Nothing leaves: masking and keeping local mean nothing there.
            Destination::Local => match best {
                Some(o @ (Outcome::Refuse | Outcome::AskConsent)) => o,
                _ => Outcome::Allow,
            },
        }
    }

    pub fn decide(&self, kinds: impl IntoIterator<Item = EntityType>, destination: Destination) -> Decision {
        self.decide_all(kinds, [], destination)
    }

    /// The decision for the types and the categories a request holds.
    pub fn decide_all(
        &self,
        kinds: impl IntoIterator<Item = EntityType>,
        categories: impl IntoIterator<Item = Category>,
        destination: Destination,
    ) -> Decision {
        let per_type = kinds.into_iter().map(|k| (k, self.outcome_of(k, destination))).collect();
        let per_category = categories.into_iter().map(|c| (c, self.outcome_of_category(c, destination))).collect();
        let mut d = Decision { outcome: Outcome::Allow, per_type, per_category };
        d.recompute();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EntityType::*;

    #[test]
    fn shipped_policy() {
        let p = Policy::default();
        assert_eq!(p.outcome_of(Secret, Destination::Cloud), Outcome::KeepLocal);
        assert_eq!(p.outcome_of(Card, Destination::Cloud), Outcome::KeepLocal);
        assert_eq!(p.outcome_of(Email, Destination::Cloud), Outcome::Mask);
        assert_eq!(p.outcome_of(Person, Destination::Cloud), Outcome::AskConsent);
        assert_eq!(p.outcome_of(Secret, Destination::Local), Outcome::Allow);
        assert_eq!(p.decide([Email, Person], Destination::Cloud).outcome, Outcome::AskConsent);
        assert_eq!(p.decide([Email, Person, Ssn], Destination::Cloud).outcome, Outcome::KeepLocal);
        assert_eq!(p.decide([], Destination::Cloud).outcome, Outcome::Allow);
        for c in Category::ALL {
            assert_eq!(p.outcome_of_category(c, Destination::Cloud), Outcome::KeepLocal, "{c}");
            assert_eq!(p.outcome_of_category(c, Destination::Local), Outcome::Allow, "{c}");
        }
        let d = p.decide_all([Email], [Category::Health], Destination::Cloud);
        assert_eq!((d.outcome, d.categories_with(Outcome::KeepLocal)), (Outcome::KeepLocal, vec![Category::Health]));
    }

    #[test]
    fn categories_map_to_any_outcome() {
        let p = Policy::parse(
            "default = \"allow\"\n[[rule]]\ntypes = [\"HEALTH\"]\noutcome = \"mask\"\n[[rule]]\ntypes = [\"POLITICS\", \"EMAIL\"]\noutcome = \"refuse\"\ndestination = \"any\"\n",
        )
        .unwrap();
        assert_eq!(p.outcome_of_category(Category::Health, Destination::Cloud), Outcome::Mask);
        assert_eq!(p.outcome_of_category(Category::Politics, Destination::Local), Outcome::Refuse);
        assert_eq!(p.outcome_of_category(Category::Finance, Destination::Cloud), Outcome::Allow);
        assert_eq!(p.outcome_of(Email, Destination::Cloud), Outcome::Refuse);
        let e = Policy::parse("[[rule]]\ntypes = [\"HEALTHY\"]\noutcome = \"mask\"\n").unwrap_err();
        assert!(e.starts_with("line 2:") && e.contains("HEALTHY") && e.contains("SEX_LIFE"), "{e}");
    }

    #[test]
    fn strictest_wins_and_errors_name_the_line() {
        let p = Policy::parse("default = \"allow\"\n[[rule]]\ntypes = [\"EMAIL\"]\noutcome = \"mask\"\n[[rule]]\ntypes = [\"*\"]\noutcome = \"refuse\"\ndestination = \"any\"\n").unwrap();
        assert_eq!(p.outcome_of(Email, Destination::Cloud), Outcome::Refuse);
        assert_eq!(p.outcome_of(Email, Destination::Local), Outcome::Refuse);
        let e = Policy::parse("default = \"mask\"\n\n[[rule]]\ntypes = [\"EMAIL\", \"EMIAL\"]\noutcome = \"mask\"\n")
            .unwrap_err();
        assert!(e.starts_with("line 4:") && e.contains("EMIAL"), "{e}");
        let e = Policy::parse("[[rule]]\ntypes = [\"EMAIL\"]\noutcome = \"hide\"\n").unwrap_err();
        assert!(e.starts_with("line 3:"), "{e}");
        let e = Policy::parse("default = \"mask\"\nbogus = 1\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = Policy::parse("default = \"mask\n").unwrap_err();
        assert!(e.starts_with("line 1:"), "{e}");
    }
}
