//! Stop ids are the union of generation_config.json and config.json eos ids.

mod common;

use common::{temp_dir, TOKENIZER_DIR};
use solo_text::stop_token_ids;

#[test]
fn fixture_checkpoint() {
    // generation_config: [<|im_end|>, <|endoftext|>]; config.json text_config: <|endoftext|>.
    assert_eq!(stop_token_ids(TOKENIZER_DIR).unwrap(), vec![382, 380]);
}

#[test]
fn union_in_stable_order_without_duplicates() {
    let dir = temp_dir("stop-union");
    std::fs::write(dir.join("generation_config.json"), r#"{"eos_token_id": [7, 3]}"#).unwrap();
    std::fs::write(dir.join("config.json"), r#"{"eos_token_id": 3, "text_config": {"eos_token_id": [9, 7]}}"#).unwrap();
    assert_eq!(stop_token_ids(&dir).unwrap(), vec![7, 3, 9]);

    std::fs::write(dir.join("generation_config.json"), r#"{"eos_token_id": 5}"#).unwrap();
    std::fs::write(dir.join("config.json"), r#"{"text_config": {"eos_token_id": null}}"#).unwrap();
    assert_eq!(stop_token_ids(&dir).unwrap(), vec![5]);
}

#[test]
fn missing_files_are_fine_bad_json_is_named() {
    let dir = temp_dir("stop-missing");
    assert_eq!(stop_token_ids(&dir).unwrap(), Vec::<u32>::new());
    std::fs::write(dir.join("config.json"), r#"{"eos_token_id": 2}"#).unwrap();
    assert_eq!(stop_token_ids(&dir).unwrap(), vec![2]);

    std::fs::write(dir.join("generation_config.json"), "{oops").unwrap();
    let err = stop_token_ids(&dir).unwrap_err();
    assert!(format!("{err:#}").contains("generation_config.json"), "{err:#}");
}
