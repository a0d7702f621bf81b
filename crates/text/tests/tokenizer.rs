//! Tokenizer ids must equal HF's; decoding and streaming must give back the text exactly.

mod common;

use common::{cases, ids, TOKENIZER_DIR};
use solo_text::Tokenizer;

fn tokenizer() -> Tokenizer {
    Tokenizer::from_dir(TOKENIZER_DIR).unwrap()
}

fn encode_cases() -> Vec<(String, String, Vec<u32>)> {
    let cases = cases();
    let list = cases["encode"].as_array().expect("encode cases");
    assert!(list.len() >= 4, "fixture should hold the plain-text encode cases");
    list.iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_string();
            (name, c["text"].as_str().unwrap().to_string(), ids(&c["expected_ids"]))
        })
        .collect()
}

#[test]
fn encode_matches_hf() {
    let tok = tokenizer();
    for (name, text, want) in encode_cases() {
        assert_eq!(tok.encode(&text).unwrap(), want, "{name}: {text:?}");
    }
}

#[test]
fn decode_round_trips() {
    let tok = tokenizer();
    for (name, text, want) in encode_cases() {
        assert_eq!(tok.decode(&want, false).unwrap(), text, "{name}");
    }
}

#[test]
fn special_tokens_are_recognised_and_skippable() {
    let tok = tokenizer();
    let im_start = tok.token_id("<|im_start|>").expect("<|im_start|> in vocab");
    let im_end = tok.token_id("<|im_end|>").expect("<|im_end|> in vocab");
    let tool_call = tok.token_id("<tool_call>").expect("<tool_call> in vocab");
    assert!((im_end as usize) < tok.vocab_size());
    assert_eq!(tok.token_id("no such token"), None);

    // No implicit BOS/EOS, but marker strings in the text become their ids.
    let got = tok.encode("<|im_start|>hi<|im_end|><tool_call>").unwrap();
    assert_eq!(got.first(), Some(&im_start));
    assert_eq!(&got[got.len() - 2..], &[im_end, tool_call]);
    assert_eq!(tok.encode("").unwrap(), Vec::<u32>::new());

    // `<tool_call>` is not a special token (the release's tokenizer_config says so), so skipping specials keeps it.
    assert_eq!(tok.decode(&got, true).unwrap(), "hi<tool_call>");
    assert_eq!(tok.decode(&got, false).unwrap(), "<|im_start|>hi<|im_end|><tool_call>");
}

/// Feeds `ids` one at a time; returns every emitted piece (flush included, if non-empty).
fn stream(tok: &Tokenizer, ids: &[u32], skip_special: bool) -> Vec<String> {
    let mut decoder = tok.stream_decoder(skip_special);
    let mut pieces: Vec<String> = ids.iter().filter_map(|&id| decoder.push(id).unwrap()).collect();
    pieces.extend(Some(decoder.flush().unwrap()).filter(|s| !s.is_empty()));
    assert_eq!(decoder.ids(), ids);
    pieces
}

#[test]
fn stream_decoder_emits_each_character_once() {
    let tok = tokenizer();
    let text = "naïve café 東京 🙂 done";
    let ids = tok.encode(text).unwrap();
    // The fixture vocabulary is tiny, so 東, 京 and 🙂 are split over several byte tokens.
    let split_chars = text.chars().filter(|c| c.len_utf8() > 1).count();
    assert!(ids.len() > text.chars().count() - split_chars, "multi-byte chars span tokens");

    let pieces = stream(&tok, &ids, false);
    assert_eq!(pieces.concat(), text);
    assert!(pieces.iter().all(|p| !p.contains('\u{FFFD}')), "no partial characters: {pieces:?}");

    // The byte tokens of 🙂 emit nothing until the last one completes the character.
    let smile = tok.encode("🙂").unwrap();
    assert!(smile.len() >= 2, "🙂 spans several tokens in the fixture vocabulary");
    let mut decoder = tok.stream_decoder(false);
    let (last, head) = smile.split_last().unwrap();
    assert!(head.iter().all(|&id| decoder.push(id).unwrap().is_none()));
    assert_eq!(decoder.push(*last).unwrap().as_deref(), Some("🙂"));
    assert_eq!(decoder.flush().unwrap(), "");
}

#[test]
fn stream_decoder_skips_specials_and_flushes_a_cut_character() {
    let tok = tokenizer();
    let im_end = tok.token_id("<|im_end|>").unwrap();
    let mut ids = tok.encode("ok 🙂").unwrap();
    ids.push(im_end);
    assert_eq!(stream(&tok, &ids, true).concat(), "ok 🙂");
    assert_eq!(stream(&tok, &ids, false).concat(), "ok 🙂<|im_end|>");

    // Generation stopped inside 🙂: the incomplete bytes come out once, at flush, as U+FFFD.
    let cut = &ids[..ids.len() - 2];
    let pieces = stream(&tok, cut, false);
    assert_eq!(pieces.concat(), tok.decode(cut, false).unwrap());
    assert!(pieces.last().unwrap().contains('\u{FFFD}'));
}

#[test]
fn from_dir_errors_name_the_directory() {
    let dir = common::temp_dir("no-tokenizer");
    let err = Tokenizer::from_dir(&dir).err().expect("no tokenizer.json must fail");
    assert!(format!("{err:#}").contains(&dir.display().to_string()), "{err:#}");
}

#[test]
fn token_bytes_concatenate_to_the_text() {
    let tok = tokenizer();
    for (name, text, ids) in encode_cases() {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| tok.token_bytes(id).unwrap()).collect();
        assert_eq!(bytes, text.as_bytes(), "{name}");
    }
    let think = tok.token_id("<think>").unwrap();
    assert_eq!(tok.token_bytes(think).unwrap(), b"<think>");
    assert_eq!(tok.token_bytes(1_000_000), None);
}
