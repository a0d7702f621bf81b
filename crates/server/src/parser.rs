//! Splits the model's streamed output into reasoning, content and tool calls.
//!
//! With thinking on, the prompt ends inside `<think>`, so output starts as reasoning until
//! `</think>`; the rest is content. A `<tool_call>` block anywhere (also inside the reasoning,
//! where the model sometimes puts it) becomes an OpenAI tool call:
//!
//! ```text
//! <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>
//! ```
//!
//! Text arrives in arbitrary pieces, so a tag may be split anywhere: text that could still become
//! a tag is held back until the next piece decides it, and tool-call elements are acted on only
//! once complete. A call's `arguments` stream as JSON fragments, one per parameter, which
//! concatenate to the JSON object. Leading and trailing whitespace of reasoning and content is
//! trimmed (the chat template trims both when the turn is sent back).

use crate::tool_args::{json_call, ToolSchemas};
use solo_model::sampler::SplitMix;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
    Reasoning(String),
    Content(String),
    /// A new call; its arguments follow as `ToolCallArgs` with the same index.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallArgs {
        index: usize,
        fragment: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Reasoning = 0,
    Content = 1,
}

const THINK: &str = "<think>";
const THINK_END: &str = "</think>";
const CALL: &str = "<tool_call>";
const CALL_END: &str = "</tool_call>";
const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAM: &str = "<parameter=";
const PARAM_END: &str = "</parameter>";

enum Mode {
    Text(Channel),
    Call(Call),
}

/// Inside `<tool_call>`.
struct Call {
    /// Where text goes once the call ends.
    resume: Channel,
    /// Text consumed so far, for a block that turns out to hold no `<function=`; with the
    /// whitespace that preceded the block, which then is not trailing after all.
    raw: String,
    held: String,
    function: Option<Function>,
    /// A function of this block has been emitted (the block is not plain text).
    emitted: bool,
}

struct Function {
    index: usize,
    name: String,
    params: usize,
    /// Name of the parameter whose value is being read.
    open_param: Option<String>,
}

/// Trailing whitespace of a channel is held until more text shows it is not trailing.
#[derive(Default)]
struct Trim {
    started: bool,
    held: String,
}

pub struct OutputParser {
    mode: Mode,
    buf: String,
    /// `None`: tool calls are not parsed (no tools in the request, or `tool_choice: none`).
    tools: Option<ToolSchemas>,
    calls: usize,
    rng: SplitMix,
    trim: [Trim; 2],
    out: Vec<Delta>,
}

impl OutputParser {
    /// `start` is where output begins: `Reasoning` when the prompt opened a think block.
    /// `seed` makes the tool-call ids.
    pub fn new(start: Channel, tools: Option<ToolSchemas>, seed: u64) -> Self {
        OutputParser {
            mode: Mode::Text(start),
            buf: String::new(),
            tools,
            calls: 0,
            rng: SplitMix(seed),
            trim: Default::default(),
            out: Vec::new(),
        }
    }

    /// Number of tool calls started so far.
    pub fn tool_calls(&self) -> usize {
        self.calls
    }

    pub fn push(&mut self, text: &str) -> Vec<Delta> {
        self.buf.push_str(text);
        while match self.mode {
            Mode::Text(channel) => self.step_text(channel),
            Mode::Call(_) => self.step_call(),
        } {}
        std::mem::take(&mut self.out)
    }

    /// End of output: everything still held is released (a partial tag is text; an unfinished
    /// call is closed with the parameters it has).
    pub fn finish(&mut self) -> Vec<Delta> {
        let rest = std::mem::take(&mut self.buf);
        match std::mem::replace(&mut self.mode, Mode::Text(Channel::Content)) {
            Mode::Text(channel) => self.emit(channel, &rest),
            Mode::Call(mut call) => {
                if let Some(mut f) = call.function.take() {
                    if let Some(param) = f.open_param.take() {
                        self.param(&mut f, &param, &rest);
                    }
                    self.close(f);
                } else if !call.emitted {
                    let text = format!("{}{CALL}{}{rest}", call.held, call.raw);
                    self.emit(call.resume, &text);
                }
            }
        }
        std::mem::take(&mut self.out)
    }

    fn tags(&self, channel: Channel) -> &'static [&'static str] {
        match (channel, self.tools.is_some()) {
            (Channel::Reasoning, true) => &[THINK_END, CALL, THINK],
            (Channel::Reasoning, false) => &[THINK_END, THINK],
            (Channel::Content, true) => &[CALL, THINK],
            (Channel::Content, false) => &[THINK],
        }
    }

    /// Emits text up to the next tag and acts on it; false when more input is needed.
    fn step_text(&mut self, channel: Channel) -> bool {
        let tags = self.tags(channel);
        let found = tags.iter().filter_map(|t| self.buf.find(t).map(|at| (at, *t))).min();
        let Some((at, tag)) = found else {
            let hold = tags.iter().map(|t| partial_tag_suffix(&self.buf, t)).max().unwrap_or(0);
            let text: String = self.buf.drain(..self.buf.len() - hold).collect();
            self.emit(channel, &text);
            return false;
        };
        let before: String = self.buf.drain(..at).collect();
        self.emit(channel, &before);
        self.buf.drain(..tag.len());
        match tag {
            THINK_END => {
                self.end_channel(Channel::Reasoning);
                self.mode = Mode::Text(Channel::Content);
            }
            CALL => {
                let held = std::mem::take(&mut self.trim[channel as usize].held);
                self.mode =
                    Mode::Call(Call { resume: channel, raw: String::new(), held, function: None, emitted: false });
            }
            // A think block opened where the answer should start: what follows is reasoning.
            THINK if channel == Channel::Content && !self.trim[1].started => {
                self.mode = Mode::Text(Channel::Reasoning);
            }
            THINK if channel == Channel::Content => self.emit(channel, THINK),
            _ => {} // `<think>` inside reasoning says nothing
        }
        true
    }

    /// Acts on the next complete element of a tool call; false when more input is needed.
    fn step_call(&mut self) -> bool {
        let Mode::Call(call) = &mut self.mode else { return false };
        let Some(function) = call.function.as_mut() else {
            // Before `<function=NAME>`.
            let f = self.buf.find(FUNCTION);
            let end = self.buf.find(CALL_END);
            if let Some(end) = end.filter(|&e| f.is_none_or(|f| e < f)) {
                let body = format!("{}{}", call.raw, &self.buf[..end]);
                let (resume, emitted, held) = (call.resume, call.emitted, std::mem::take(&mut call.held));
                self.buf.drain(..end + CALL_END.len());
                self.mode = Mode::Text(resume);
                if !emitted {
                    self.block_without_function(resume, &held, &body);
                }
                return true;
            }
            let Some(f) = f else { return false };
            let Some(gt) = self.buf[f..].find('>').map(|g| f + g) else { return false };
            let name = self.buf[f + FUNCTION.len()..gt].trim().to_string();
            call.raw.extend(self.buf.drain(..gt + 1));
            let index = self.calls;
            self.calls += 1;
            call.function = Some(Function { index, name: name.clone(), params: 0, open_param: None });
            call.emitted = true;
            let id = call_id(&mut self.rng);
            self.out.push(Delta::ToolCallStart { index, id, name });
            return true;
        };
        if let Some(param) = function.open_param.clone() {
            // A value ends at `</parameter>`, or where a later element shows it was left open.
            let ends = [PARAM_END, PARAM, FUNCTION_END, CALL_END];
            let Some((at, tag)) = ends.iter().filter_map(|t| self.buf.find(t).map(|at| (at, *t))).min() else {
                return false;
            };
            let value: String = self.buf.drain(..at).collect();
            if tag == PARAM_END {
                self.buf.drain(..PARAM_END.len());
            }
            let mut f = take_function(&mut self.mode);
            f.open_param = None;
            self.param(&mut f, &param, &value);
            put_function(&mut self.mode, f);
            return true;
        }
        let ends = [PARAM, FUNCTION_END, CALL_END];
        let Some((at, tag)) = ends.iter().filter_map(|t| self.buf.find(t).map(|at| (at, *t))).min() else {
            return false;
        };
        match tag {
            PARAM => {
                let Some(gt) = self.buf[at..].find('>').map(|g| at + g) else { return false };
                function.open_param = Some(self.buf[at + PARAM.len()..gt].trim().to_string());
                self.buf.drain(..gt + 1);
            }
            FUNCTION_END => {
                self.buf.drain(..at + FUNCTION_END.len());
                let f = take_function(&mut self.mode);
                self.close(f);
            }
            _ => {
                // `</tool_call>` with the function left open.
                self.buf.drain(..at + CALL_END.len());
                let f = take_function(&mut self.mode);
                self.close(f);
                if let Mode::Call(call) = &self.mode {
                    self.mode = Mode::Text(call.resume);
                }
            }
        }
        true
    }

    fn param(&mut self, f: &mut Function, name: &str, raw: &str) {
        let member = self.tools.as_ref().map_or_else(String::new, |t| t.json_member(&f.name, name, raw));
        let sep = if f.params == 0 { "{" } else { ", " };
        f.params += 1;
        self.out.push(Delta::ToolCallArgs { index: f.index, fragment: format!("{sep}{member}") });
    }

    fn close(&mut self, f: Function) {
        let fragment = if f.params == 0 { "{}" } else { "}" };
        self.out.push(Delta::ToolCallArgs { index: f.index, fragment: fragment.into() });
    }

    /// A `<tool_call>` block with no `<function=`: a JSON call, or else text (nothing is lost).
    fn block_without_function(&mut self, resume: Channel, held: &str, body: &str) {
        if let Some((name, args)) = json_call(body) {
            let index = self.calls;
            self.calls += 1;
            let id = call_id(&mut self.rng);
            self.out.push(Delta::ToolCallStart { index, id, name });
            self.out.push(Delta::ToolCallArgs { index, fragment: args });
        } else {
            self.emit(resume, &format!("{held}{CALL}{body}{CALL_END}"));
        }
    }

    fn emit(&mut self, channel: Channel, text: &str) {
        let trim = &mut self.trim[channel as usize];
        let mut text = text;
        if !trim.started {
            text = text.trim_start();
            if text.is_empty() {
                return;
            }
            trim.started = true;
        }
        let body = text.trim_end().len();
        if body == 0 {
            trim.held.push_str(text);
            return;
        }
        let out = std::mem::take(&mut trim.held) + &text[..body];
        trim.held = text[body..].to_string();
        self.out.push(match channel {
            Channel::Reasoning => Delta::Reasoning(out),
            Channel::Content => Delta::Content(out),
        });
    }

    /// The channel's text ended: its trailing whitespace is dropped.
    fn end_channel(&mut self, channel: Channel) {
        self.trim[channel as usize].held.clear();
    }
}

fn take_function(mode: &mut Mode) -> Function {
    match mode {
        Mode::Call(call) => call.function.take().expect("inside a function"),
        Mode::Text(_) => unreachable!("only called inside a tool call"),
    }
}

fn put_function(mode: &mut Mode, f: Function) {
    if let Mode::Call(call) = mode {
        call.function = Some(f);
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `tag`.
fn partial_tag_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len()).rev().find(|&n| text.ends_with(&tag[..n])).unwrap_or(0)
}

/// `call_` and 24 alphanumerics, like OpenAI's.
fn call_id(rng: &mut SplitMix) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let id: String = (0..24).map(|_| ALPHABET[(rng.next_u64() % ALPHABET.len() as u64) as usize] as char).collect();
    format!("call_{id}")
}

#[cfg(test)]
#[path = "parser_tests.rs"]
mod tests;
