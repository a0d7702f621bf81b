//! The parser against whole outputs and against every way of cutting them into pieces.

use super::*;
use serde_json::{json, Value};

#[derive(Debug, Default, PartialEq)]
struct Parsed {
    reasoning: String,
    content: String,
    /// (name, arguments parsed as JSON)
    calls: Vec<(String, Value)>,
}

fn collect(deltas: Vec<Delta>) -> Parsed {
    let mut p = Parsed::default();
    let mut args: Vec<String> = Vec::new();
    let mut ids = Vec::new();
    for d in deltas {
        match d {
            Delta::Reasoning(t) => p.reasoning += &t,
            Delta::Content(t) => p.content += &t,
            Delta::ToolCallStart { index, id, name } => {
                assert_eq!(index, p.calls.len(), "calls start in order");
                assert!(id.starts_with("call_") && id.len() == 29 && !ids.contains(&id), "{id}");
                ids.push(id);
                p.calls.push((name, Value::Null));
                args.push(String::new());
            }
            Delta::ToolCallArgs { index, fragment } => args[index] += &fragment,
        }
    }
    for (call, a) in p.calls.iter_mut().zip(args) {
        call.1 = serde_json::from_str(&a).unwrap_or_else(|e| panic!("arguments {a:?} are not JSON: {e}"));
    }
    p
}

fn tools() -> Option<ToolSchemas> {
    Some(ToolSchemas::from_tools(&[
        json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}),
        json!({"type": "function", "function": {"name": "search", "parameters": {"type": "object",
            "properties": {"q": {"type": "string"}}}}}),
    ]))
}

fn parse(start: Channel, tools: Option<ToolSchemas>, pieces: &[&str]) -> Parsed {
    let mut parser = OutputParser::new(start, tools, 7);
    let mut deltas = Vec::new();
    for piece in pieces {
        deltas.extend(parser.push(piece));
    }
    deltas.extend(parser.finish());
    collect(deltas)
}

/// Reasoning with a call inside it, content with a call after it, and text full of near-tags.
const SAMPLE: &str = "Let me think.\nI should check the weather <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\nmore thought </thin\n</think>\n\nHere you go: a < b, <b>bold</b> <tool_cal <thin\n<tool_call>\n<function=search>\n<parameter=q>\nline1\nline2 </param\n</parameter>\n</function>\n</tool_call>\n";

fn sample_expected() -> Parsed {
    Parsed {
        reasoning: "Let me think.\nI should check the weather\nmore thought </thin".into(),
        content: "Here you go: a < b, <b>bold</b> <tool_cal <thin".into(),
        calls: vec![
            ("get_weather".into(), json!({"city": "Paris", "days": 3})),
            ("search".into(), json!({"q": "line1\nline2 </param"})),
        ],
    }
}

fn boundaries(s: &str) -> Vec<usize> {
    (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect()
}

#[test]
fn whole_sample() {
    assert_eq!(parse(Channel::Reasoning, tools(), &[SAMPLE]), sample_expected());
}

#[test]
fn every_split_point() {
    let want = sample_expected();
    for i in boundaries(SAMPLE) {
        assert_eq!(parse(Channel::Reasoning, tools(), &[&SAMPLE[..i], &SAMPLE[i..]]), want, "split at {i}");
    }
}

#[test]
fn every_pair_of_split_points() {
    let want = sample_expected();
    let cuts = boundaries(SAMPLE);
    for (n, &i) in cuts.iter().enumerate() {
        for &j in &cuts[n..] {
            let pieces = [&SAMPLE[..i], &SAMPLE[i..j], &SAMPLE[j..]];
            assert_eq!(parse(Channel::Reasoning, tools(), &pieces), want, "splits at {i}, {j}");
        }
    }
}

#[test]
fn one_character_at_a_time() {
    let chars: Vec<String> = SAMPLE.chars().map(String::from).collect();
    let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(parse(Channel::Reasoning, tools(), &pieces), sample_expected());
}

#[test]
fn streaming_never_emits_part_of_a_tag() {
    let mut parser = OutputParser::new(Channel::Reasoning, tools(), 1);
    for c in SAMPLE.chars() {
        for d in parser.push(&c.to_string()) {
            if let Delta::Reasoning(t) | Delta::Content(t) = d {
                assert!(!t.contains("<tool_call>") && !t.contains("</think>") && !t.ends_with("<tool_c"), "{t:?}");
            }
        }
    }
}

#[test]
fn thinking_off_and_no_tools() {
    let text = "<think>\n\n</think>\n\nAnswer <tool_call>\n<function=f>\n</function>\n</tool_call>";
    // Thinking off: output is content; an empty think block at its start is dropped.
    let got = parse(Channel::Content, tools(), &[text]);
    assert_eq!(got.reasoning, "");
    assert_eq!(got.content, "Answer");
    assert_eq!(got.calls, vec![("f".to_string(), json!({}))]);
    // Without tools in the request, tool-call markup is plain content.
    let got = parse(Channel::Content, None, &["Answer <tool_call>x</tool_call>"]);
    assert_eq!(got.content, "Answer <tool_call>x</tool_call>");
    assert!(got.calls.is_empty());
}

#[test]
fn reasoning_that_never_closes_is_all_reasoning() {
    let got = parse(Channel::Reasoning, tools(), &["still thinking <think", "ing"]);
    assert_eq!((got.reasoning.as_str(), got.content.as_str()), ("still thinking <thinking", ""));
}

#[test]
fn unterminated_call_is_closed_with_what_it_has() {
    let got = parse(Channel::Content, tools(), &["<tool_call>\n<function=get_weather>\n<parameter=city>\nRo"]);
    assert_eq!(got.calls, vec![("get_weather".to_string(), json!({"city": "Ro"}))]);
    let got = parse(Channel::Content, tools(), &["ok <tool_call>\n<functi"]);
    assert_eq!(got.content, "ok <tool_call>\n<functi");
}

#[test]
fn missing_parameter_end_tags_are_tolerated() {
    let text =
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2\n</function>\n</tool_call>";
    let got = parse(Channel::Content, tools(), &[text]);
    assert_eq!(got.calls, vec![("get_weather".to_string(), json!({"city": "Oslo", "days": 2}))]);
}

#[test]
fn json_call_inside_the_block_and_junk_blocks() {
    let got = parse(
        Channel::Content,
        tools(),
        &["<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>"],
    );
    assert_eq!(got.calls, vec![("search".to_string(), json!({"q": "x"}))]);
    let got = parse(Channel::Content, tools(), &["<tool_call>nonsense</tool_call> after"]);
    assert_eq!((got.content.as_str(), got.calls.len()), ("<tool_call>nonsense</tool_call> after", 0));
}

#[test]
fn two_calls_in_a_row_get_distinct_indices_and_ids() {
    let one = "<tool_call>\n<function=search>\n<parameter=q>\na\n</parameter>\n</function>\n</tool_call>";
    let got = parse(Channel::Content, tools(), &[one, "\n", one]);
    assert_eq!(got.calls.len(), 2);
    assert_eq!(got.content, "");
}
