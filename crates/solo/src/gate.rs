//! `solo gate`: the privacy gate on the command line (crate `solo-gate`).
//!
//! - `solo gate [--policy FILE]`: text on stdin → `{"outcome", "spans": [{"start", "end", "type", "text"}],
//!   "categories": [{"type", "score", "evidence": [{"start", "end"}]}], "unsure"}` (offsets in
//!   Unicode characters, end exclusive; the outcome is the policy's for the cloud; `unsure`: no
//!   category, a score in the band where `solo serve --gate-judge local` asks the local model).
//! - `solo gate --jsonl`: one `{"text": …}` per input line → one result per output line, in order.
//! - `solo gate eval --corpus FILE.jsonl`: precision/recall/F1 per type, benign flag rate, latency;
//!   for topic-labelled documents, per-category precision/recall, sensitive requests kept local,
//!   general-knowledge and everyday requests flagged, per language.

use anyhow::{Context as _, Result};
use solo_gate::{Destination, Gate, Policy};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GateArgs {
    #[command(subcommand)]
    action: Option<GateAction>,
    /// Policy file (TOML). Default: the shipped policy.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Many documents: one JSON object `{"text": …}` per input line, one result per output line.
    #[arg(long)]
    jsonl: bool,
}

#[derive(clap::Subcommand)]
enum GateAction {
    /// Scores the detectors on a labelled corpus (JSON lines `{"text", "spans": [{"start", "end", "type"}]}`,
    /// topic-labelled lines with `"categories"`, `"kind"`, `"lang"`).
    Eval {
        #[arg(long)]
        corpus: PathBuf,
        /// Print the results as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Join consecutive documents into inputs of at least this many bytes (a conversation
        /// is gated at once): latency without the per-call cost of tiny documents.
        #[arg(long)]
        join: Option<usize>,
    },
}

fn policy(path: Option<&Path>) -> Result<Policy> {
    match path {
        Some(p) => Policy::load(p).map_err(anyhow::Error::msg),
        None => Ok(Policy::default()),
    }
}

pub fn gate(args: GateArgs) -> Result<()> {
    let gate = Gate::new(policy(args.policy.as_deref())?);
    match args.action {
        Some(GateAction::Eval { corpus, json, join }) => eval(&gate, &corpus, json, join),
        None if args.jsonl => jsonl(&gate),
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("stdin is not UTF-8 text")?;
            let report = gate.check(&text, Destination::Cloud);
            let mut out = std::io::stdout().lock();
            serde_json::to_writer(&mut out, &report)?;
            writeln!(out)?;
            Ok(())
        }
    }
}

fn jsonl(gate: &Gate) -> Result<()> {
    let stdin = std::io::stdin().lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (n, line) in stdin.lines().enumerate() {
        let line = line.context("stdin is not UTF-8 text")?;
        let text = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v.get("text").and_then(|t| t.as_str()).map(str::to_string));
        match text {
            Some(text) => serde_json::to_writer(&mut out, &gate.check(&text, Destination::Cloud))?,
            None => serde_json::to_writer(
                &mut out,
                &serde_json::json!({"error": format!("line {}: expected a JSON object with a string \"text\"", n + 1)}),
            )?,
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(())
}

fn eval(gate: &Gate, corpus: &Path, json: bool, join: Option<usize>) -> Result<()> {
    let mut docs = solo_gate::eval::read_corpus(corpus).map_err(anyhow::Error::msg)?;
    if let Some(bytes) = join {
        docs = solo_gate::eval::join(docs, bytes);
    }
    let results = solo_gate::eval::evaluate(&gate.detector, &docs);
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", results.table());
    }
    Ok(())
}
