//! `solo chat`: a conversation in the terminal.
//!
//! Prompts go through the server's prompt code (the same template choices that keep multi-turn
//! prompts prefix-stable) and each turn resumes from a snapshot of the sequence state taken
//! where the conversation's messages ended, so a turn prefills only the last reply, the new
//! message and the generation prompt. Replies stream through `output::Printer`: reasoning folded
//! to one dim line (`--show-reasoning` streams it whole), tool calls printed plainly.
//!
//! Ctrl-C while a reply streams stops that reply (the conversation goes on); at the prompt it
//! clears the line. rustyline takes over SIGINT when its editor is created, so the handler that
//! stops replies is installed after the editor.

use crate::commands::{load_engine, sampler_config};
use crate::locate::{self, ModelDir};
use crate::output::{Printer, Reasoning};
use crate::BackendChoice;
use anyhow::{bail, Context, Result};
use rustyline::error::ReadlineError;
use serde_json::{json, Value};
use solo_model::sampler::Sampler;
use solo_model::{Backend, Logits};
use solo_server::prompt::{self, TextAssets};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `solo chat`.
#[derive(clap::Args)]
pub struct ChatArgs {
    /// Checkpoint directory. Default: as for `run`.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Most tokens in one reply.
    #[arg(long, default_value_t = 4096)]
    pub max_tokens: usize,
    #[arg(long)]
    pub temperature: Option<f32>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Start with thinking off (`/think on` turns it back on).
    #[arg(long)]
    pub no_think: bool,
    /// Stream the reasoning whole (dimmed) instead of folding it to one line.
    #[arg(long)]
    pub show_reasoning: bool,
    /// A system prompt.
    #[arg(long)]
    pub system: Option<String>,
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Keep generating past the end-of-turn token, up to --max-tokens (as llama.cpp's
    /// --ignore-eos: for timing long replies, and the test that Ctrl-C stops one).
    #[arg(long)]
    pub ignore_eos: bool,
}

const HELP: &str = "commands: /reset (forget the conversation), /think on|off, /system TEXT, /save FILE, \
                    /exit; Ctrl-C stops a reply, Ctrl-D quits";

pub fn chat(args: ChatArgs) -> Result<()> {
    let ModelDir { path: dir, is_demo } = locate::resolve(args.model.as_deref())?;
    if is_demo {
        eprintln!(
            "solo: Qwen3.6-35B-A3B is not in the Hugging Face cache (`solo pull` downloads it) and no --model \
             was given; chatting with the built-in demo checkpoint, a tiny model that knows a few simple facts."
        );
    }
    let engine = load_engine(&dir, args.backend)?;
    let assets = TextAssets::from_dir(&dir)?;
    let sampler = sampler_config(&dir, args.temperature, args.seed)?;
    match &engine {
        crate::commands::Engine::Cpu(m) => Session::new(&**m, &assets, args, sampler).run(),
        crate::commands::Engine::Cuda(m) => Session::new(&**m, &assets, args, sampler).run(),
    }
}

struct Session<'a, B: Backend> {
    model: &'a B,
    assets: &'a TextAssets,
    args: ChatArgs,
    sampler: Sampler,
    messages: Vec<Value>,
    think: bool,
    system: Option<String>,
    /// The state after `tokens`: where the last prompt's messages ended.
    cached: Option<(Vec<u32>, B::State)>,
    stop: Arc<AtomicBool>,
}

impl<'a, B: Backend> Session<'a, B> {
    fn new(model: &'a B, assets: &'a TextAssets, args: ChatArgs, sampler: solo_model::sampler::SamplerConfig) -> Self {
        let think = !args.no_think;
        let system = args.system.clone();
        Session {
            model,
            assets,
            args,
            sampler: Sampler::new(sampler),
            messages: Vec::new(),
            think,
            system,
            cached: None,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    fn run(mut self) -> Result<()> {
        let terminal = std::io::stdin().is_terminal();
        let mut editor = if terminal { Some(rustyline::DefaultEditor::new()?) } else { None };
        // After the editor: rustyline installs its own SIGINT handling when it is created.
        let stop = self.stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst)).context("cannot install the Ctrl-C handler")?;
        if terminal {
            eprintln!("solo: {HELP}");
        }
        let mut lines = std::io::stdin().lock().lines();
        loop {
            let line = match editor.as_mut() {
                Some(e) => match e.readline("> ") {
                    Ok(line) => {
                        let _ = e.add_history_entry(line.as_str());
                        line
                    }
                    Err(ReadlineError::Interrupted) => continue,
                    Err(ReadlineError::Eof) => break,
                    Err(e) => return Err(e.into()),
                },
                None => match lines.next() {
                    Some(line) => line?,
                    None => break,
                },
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(command) = line.strip_prefix('/') {
                match self.command(command) {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(e) => {
                        eprintln!("solo: {e:#}");
                        continue;
                    }
                }
            }
            self.messages.push(json!({ "role": "user", "content": line }));
            if let Err(e) = self.reply(std::io::stdout().is_terminal()) {
                self.messages.pop();
                eprintln!("solo: error: {e:#}");
            }
        }
        if let Some((_, state)) = self.cached.take() {
            self.model.release_state(state);
        }
        Ok(())
    }

    /// A `/command`; false to quit.
    fn command(&mut self, command: &str) -> Result<bool> {
        let (name, rest) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
        let rest = rest.trim();
        match name {
            "exit" | "quit" | "bye" => return Ok(false),
            "reset" => {
                self.messages.clear();
                eprintln!("solo: conversation cleared");
            }
            "think" => {
                self.think = match rest {
                    "on" => true,
                    "off" => false,
                    _ => bail!("/think on or /think off"),
                };
                eprintln!("solo: thinking {}", if self.think { "on" } else { "off" });
            }
            "system" => {
                self.system = Some(rest.to_string()).filter(|s| !s.is_empty());
                self.messages.clear();
                eprintln!(
                    "solo: system prompt {}; conversation cleared",
                    if self.system.is_some() { "set" } else { "removed" }
                );
            }
            "save" => {
                if rest.is_empty() {
                    bail!("/save FILE");
                }
                let text = serde_json::to_string_pretty(&json!({ "messages": self.all_messages() }))?;
                std::fs::write(rest, text + "\n").with_context(|| format!("cannot write {rest}"))?;
                eprintln!("solo: saved {} messages to {rest}", self.all_messages().len());
            }
            "help" | "?" => eprintln!("solo: {HELP}"),
            _ => bail!("unknown command /{name}; {HELP}"),
        }
        Ok(true)
    }

    fn all_messages(&self) -> Vec<Value> {
        let mut all = Vec::new();
        if let Some(s) = &self.system {
            all.push(json!({ "role": "system", "content": s }));
        }
        all.extend(self.messages.iter().cloned());
        all
    }

    /// Prefills what the cached state does not hold, streams a reply, keeps it in the conversation.
    fn reply(&mut self, terminal: bool) -> Result<()> {
        let messages = Value::Array(self.all_messages());
        let p = prompt::chat(self.assets, Some(&messages), None, Some(self.think), None)
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        let model = self.model;
        // Resume from the cached state where its tokens begin this prompt.
        let (mut state, mut at) = match self.cached.take() {
            Some((tokens, snap)) if p.tokens.starts_with(&tokens) && tokens.len() < p.tokens.len() => {
                let state = model.resume(&snap);
                self.cached = Some((tokens.clone(), snap));
                match state {
                    Some(s) => (s, tokens.len()),
                    None => (model.new_state()?, 0),
                }
            }
            Some((_, snap)) => {
                model.release_state(snap);
                (model.new_state()?, 0)
            }
            None => (model.new_state()?, 0),
        };
        // Snapshot where the messages end (the next turn's prompt starts with them).
        let point = p.snapshot_points.iter().copied().filter(|&n| n > at && n < p.tokens.len()).max();
        let mut logits = Vec::new();
        let mut parts = Vec::new();
        if let Some(n) = point {
            parts.push((at, n));
            parts.push((n, p.tokens.len()));
        } else {
            parts.push((at, p.tokens.len()));
        }
        for (from, to) in parts {
            for chunk in p.tokens[from..to].chunks(model.prefill_chunk()) {
                logits = model.prefill(&mut state, chunk, Logits::Last)?;
            }
            at = to;
            if Some(to) == point {
                if let Some(snap) = model.snapshot(&state) {
                    if let Some((_, old)) = self.cached.replace((p.tokens[..to].to_vec(), snap)) {
                        model.release_state(old);
                    }
                }
            }
        }
        debug_assert_eq!(at, p.tokens.len());

        let reasoning = if self.args.show_reasoning { Reasoning::Shown } else { Reasoning::Folded };
        let mut printer =
            Printer::new(Box::new(std::io::stdout()), None, reasoning, terminal, p.starts_in_reasoning, true);
        let mut text = self.assets.tokenizer.stream_decoder(false);
        self.stop.store(false, Ordering::SeqCst);
        let mut stopped = false;
        for generated in 0..self.args.max_tokens {
            if self.stop.swap(false, Ordering::SeqCst) {
                stopped = true;
                break;
            }
            let token = self.sampler.sample(&logits);
            if !self.args.ignore_eos && self.assets.stop_ids.contains(&token) {
                break;
            }
            if let Some(piece) = text.push(token)? {
                printer.push(&piece)?;
            }
            if generated + 1 < self.args.max_tokens {
                logits = model.decode(&mut state, token)?;
            }
        }
        printer.push(&text.flush()?)?;
        let answer = printer.finish()?;
        model.release_state(state);
        if stopped {
            let (dim, reset) = if terminal { ("\x1b[2m", "\x1b[0m") } else { ("", "") };
            println!("{dim}[stopped]{reset}");
        }
        std::io::stdout().flush()?;
        self.messages.push(json!({ "role": "assistant", "content": answer }));
        Ok(())
    }
}
