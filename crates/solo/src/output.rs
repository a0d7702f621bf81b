//! Where a reply's parts go on a terminal: the answer, the reasoning, tool calls.
//!
//! The model's streamed text goes through the server's output parser (the same split as
//! `reasoning_content` / `content` / `tool_calls` over HTTP), so the template's `<think>` /
//! `</think>` markers and the blank lines around them never reach the answer.

use solo_server::parser::{Channel, Delta, OutputParser};
use solo_server::tool_args::ToolSchemas;
use std::io::{IsTerminal, Write};

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// How the reasoning is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasoning {
    /// Not at all.
    Hidden,
    /// All of it, as it streams.
    Shown,
    /// One line: "thinking…" while it streams, then its start, cut to the line.
    Folded,
}

/// Streams one reply: `push` each decoded piece, then `finish`.
pub struct Printer<'a> {
    parser: OutputParser,
    answer: Box<dyn Write + 'a>,
    /// Where reasoning goes (the answer's stream when `None`).
    thoughts: Option<Box<dyn Write + 'a>>,
    reasoning: Reasoning,
    /// Dim the reasoning (an ANSI escape) and fold it in place: only where it goes to a terminal.
    dim: bool,
    thought: String,
    /// A reasoning line is open (not yet ended with a newline).
    thinking: bool,
    /// An open tool call: its closing parenthesis is still due.
    in_call: bool,
    content: String,
    /// The answer's stream is at the start of a line (after a tool call's line).
    line_start: bool,
}

impl<'a> Printer<'a> {
    /// `starts_in_reasoning`: the prompt ended inside `<think>`. `tools`: parse `<tool_call>`
    /// blocks into calls (printed as `name(arguments)`) instead of leaving them as text.
    pub fn new(
        answer: Box<dyn Write + 'a>,
        thoughts: Option<Box<dyn Write + 'a>>,
        reasoning: Reasoning,
        dim: bool,
        starts_in_reasoning: bool,
        tools: bool,
    ) -> Self {
        let start = if starts_in_reasoning { Channel::Reasoning } else { Channel::Content };
        Printer {
            parser: OutputParser::new(start, tools.then(ToolSchemas::default), 0),
            answer,
            thoughts,
            reasoning,
            dim,
            thought: String::new(),
            thinking: false,
            in_call: false,
            content: String::new(),
            line_start: true,
        }
    }

    /// `solo run`: the answer alone on stdout; reasoning on stderr (dimmed on a terminal) unless hidden.
    pub fn for_run(show_reasoning: bool, starts_in_reasoning: bool) -> Printer<'static> {
        let reasoning = if show_reasoning { Reasoning::Shown } else { Reasoning::Hidden };
        let dim = std::io::stderr().is_terminal();
        Printer::new(
            Box::new(std::io::stdout()),
            Some(Box::new(std::io::stderr())),
            reasoning,
            dim,
            starts_in_reasoning,
            false,
        )
    }

    pub fn push(&mut self, text: &str) -> std::io::Result<()> {
        let deltas = self.parser.push(text);
        self.emit(deltas)
    }

    /// The end of the reply: what the parser still held, and a final newline after the answer.
    /// Returns the answer (content) text.
    pub fn finish(&mut self) -> std::io::Result<String> {
        let deltas = self.parser.finish();
        self.emit(deltas)?;
        self.close_call()?;
        self.end_thought()?;
        if !self.content.is_empty() && !self.line_start {
            self.answer.write_all(b"\n")?;
        }
        self.answer.flush()?;
        Ok(std::mem::take(&mut self.content))
    }

    fn emit(&mut self, deltas: Vec<Delta>) -> std::io::Result<()> {
        for delta in deltas {
            match delta {
                Delta::Reasoning(text) => self.reason(&text)?,
                Delta::Content(text) => {
                    self.close_call()?;
                    self.end_thought()?;
                    self.content.push_str(&text);
                    self.answer.write_all(text.as_bytes())?;
                    self.line_start = text.is_empty() && self.line_start;
                }
                Delta::ToolCallStart { name, .. } => {
                    self.close_call()?;
                    self.end_thought()?;
                    let sep = if self.content.is_empty() || self.content.ends_with('\n') { "" } else { "\n" };
                    write!(self.answer, "{sep}[tool call] {name}(")?;
                    self.in_call = true;
                    self.line_start = false;
                }
                Delta::ToolCallArgs { fragment, .. } => self.answer.write_all(fragment.as_bytes())?,
            }
            self.answer.flush()?;
        }
        Ok(())
    }

    fn close_call(&mut self) -> std::io::Result<()> {
        if std::mem::take(&mut self.in_call) {
            self.answer.write_all(b")\n")?;
            self.line_start = true;
        }
        Ok(())
    }

    fn reason(&mut self, text: &str) -> std::io::Result<()> {
        let first = self.thought.is_empty();
        self.thought.push_str(text);
        let (dim, reset) = if self.dim { (DIM, RESET) } else { ("", "") };
        let out: &mut dyn Write = match self.thoughts.as_mut() {
            Some(w) => w.as_mut(),
            None => self.answer.as_mut(),
        };
        match self.reasoning {
            Reasoning::Hidden => return Ok(()),
            Reasoning::Shown => write!(out, "{dim}{text}{reset}")?,
            Reasoning::Folded if first && self.dim => write!(out, "{dim}thinking…{reset}")?,
            Reasoning::Folded => {} // the line comes when the reasoning ends
        }
        out.flush()?;
        self.thinking = true;
        Ok(())
    }

    /// Ends the reasoning's line; folded, replaces "thinking…" with the thought's first words.
    fn end_thought(&mut self) -> std::io::Result<()> {
        if !std::mem::take(&mut self.thinking) {
            return Ok(());
        }
        let (dim, reset) = if self.dim { (DIM, RESET) } else { ("", "") };
        let folded = self.reasoning == Reasoning::Folded;
        let line = fold(&self.thought, 72);
        let out: &mut dyn Write = match self.thoughts.as_mut() {
            Some(w) => w.as_mut(),
            None => self.answer.as_mut(),
        };
        if folded && self.dim {
            write!(out, "\r\x1b[2K{dim}(thought: {line}){reset}\n")?;
        } else if folded {
            writeln!(out, "(thought: {line})")?;
        } else {
            writeln!(out)?;
        }
        out.flush()
    }
}

/// `text` on one line (whitespace runs become one space), cut to `width` characters with "…".
pub fn fold(text: &str, width: usize) -> String {
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= width {
        return words;
    }
    let cut: String = words.chars().take(width.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Clone, Default)]
    struct Buf(Rc<RefCell<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Buf {
        fn text(&self) -> String {
            String::from_utf8(self.0.borrow().clone()).unwrap()
        }
    }

    /// Streams `pieces` through a printer; returns (answer stream, reasoning stream, answer).
    fn stream(pieces: &[&str], reasoning: Reasoning, split: bool, tools: bool) -> (String, String, String) {
        stream_to(pieces, reasoning, split, tools, false)
    }

    fn stream_to(
        pieces: &[&str],
        reasoning: Reasoning,
        split: bool,
        tools: bool,
        tty: bool,
    ) -> (String, String, String) {
        let (out, err) = (Buf::default(), Buf::default());
        let thoughts: Option<Box<dyn Write>> = if split { Some(Box::new(err.clone())) } else { None };
        let mut p = Printer::new(Box::new(out.clone()), thoughts, reasoning, tty, true, tools);
        for piece in pieces {
            p.push(piece).unwrap();
        }
        let answer = p.finish().unwrap();
        (out.text(), err.text(), answer)
    }

    const REPLY: &[&str] = &["The user", " asks.\n</", "think>\n\n", "Black and", " white.", "\n"];

    #[test]
    fn the_answer_alone_goes_to_the_answer_stream() {
        let (out, err, answer) = stream(REPLY, Reasoning::Shown, true, false);
        assert_eq!(out, "Black and white.\n");
        assert_eq!(answer, "Black and white.");
        assert_eq!(err, "The user asks.\n");
        let (out, err, _) = stream(REPLY, Reasoning::Hidden, true, false);
        assert_eq!((out.as_str(), err.as_str()), ("Black and white.\n", ""));
    }

    #[test]
    fn folded_reasoning_is_one_line() {
        let (out, _, _) = stream_to(REPLY, Reasoning::Folded, false, false, true);
        assert_eq!(out, "\x1b[2mthinking…\x1b[0m\r\x1b[2K\x1b[2m(thought: The user asks.)\x1b[0m\nBlack and white.\n");
        let (out, _, _) = stream(REPLY, Reasoning::Folded, false, false);
        assert_eq!(out, "(thought: The user asks.)\nBlack and white.\n");
    }

    #[test]
    fn tool_calls_print_plainly() {
        let call =
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
        let (out, _, _) = stream(&["Hm.\n</think>\n\nLet me look.\n", call], Reasoning::Hidden, true, true);
        assert_eq!(out, "Let me look.\n[tool call] get_weather({\"city\": \"Paris\"})\n");
    }

    #[test]
    fn fold_cuts_long_thoughts() {
        assert_eq!(fold("a  b\n c", 10), "a b c");
        assert_eq!(fold("abcdefghijkl", 6), "abcde…");
    }
}
