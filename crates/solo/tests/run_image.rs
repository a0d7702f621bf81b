//! `solo run --image FILE`: the image goes through tiny-a's vision tower before the prompt's
//! text; a checkpoint whose tower cannot run, a missing file and a corrupt one fail in one line.

use std::path::PathBuf;
use std::process::Command;

fn solo(args: &[&str]) -> (Option<i32>, String, String) {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).canonicalize().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_solo")).args(args).current_dir(root).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn prompt_tokens(stderr: &str) -> usize {
    let line = stderr.lines().find(|l| l.starts_with("solo: prompt ")).unwrap_or_else(|| panic!("{stderr}"));
    line["solo: prompt ".len()..].split_whitespace().next().unwrap().parse().unwrap()
}

const RUN: [&str; 10] = [
    "run",
    "--model",
    "fixtures/tiny-a",
    "--prompt",
    "What is it?",
    "--max-tokens",
    "6",
    "--temperature",
    "0",
    "--no-think",
];

#[test]
fn run_with_an_image() {
    let (code, _, text_only) = solo(&RUN);
    assert_eq!(code, Some(0), "{text_only}");
    let mut args = RUN.to_vec();
    args.extend(["--image", "fixtures/images/wide.png"]);
    let (code, stdout, stderr) = solo(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.is_empty());
    assert!(stderr.contains("solo: 1 image(s), 24 tokens, vision tower"), "{stderr}");
    // <|vision_start|>, 24 placeholders (48×32 pixels: 6×4 merged tokens), <|vision_end|>.
    assert_eq!(prompt_tokens(&stderr), prompt_tokens(&text_only) + 26);
    let (_, again, _) = solo(&args);
    assert_eq!(again, stdout, "greedy with an image is deterministic");
}

#[test]
fn run_image_errors_are_one_line() {
    let cases: [(&[&str], &str); 3] = [
        (&["--image", "fixtures/images/missing.png"], "missing.png"),
        (&["--image", "fixtures/tiny-a/config.json"], "not a PNG, JPEG, WebP or GIF"),
        (&["--image", "fixtures/images/wide.png"], "head dim of 6"),
    ];
    for (i, (extra, needle)) in cases.into_iter().enumerate() {
        let mut args = RUN.to_vec();
        if i == 2 {
            args[2] = "fixtures/tiny-b";
        }
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = solo(&args);
        assert!(matches!(code, Some(c) if c != 0), "{stderr}");
        assert_eq!(stdout, "");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("solo: error: ")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(needle), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
