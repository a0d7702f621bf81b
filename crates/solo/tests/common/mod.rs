//! What the `solo` binary's tests share: running it from the workspace root as a user would, and
//! the one-line error a user must get.
#![allow(dead_code)] // each test file uses its own part

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

/// The workspace root (where the fixtures are).
pub fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).canonicalize().unwrap()
}

pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Exit 0 and no panic.
    pub fn ok(self) -> Self {
        assert_eq!(self.code, Some(0), "solo failed; stderr:\n{}", self.stderr);
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        self
    }
}

/// `solo ARGS` in the workspace root, with the variables `unset` removed and then `env` set.
pub fn solo_with<V: AsRef<OsStr>>(args: &[&str], unset: &[&str], env: &[(&str, V)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_solo"));
    cmd.args(args).current_dir(root());
    for var in unset {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("cannot run the solo binary");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A failure as a user must see it: non-zero exit, nothing on stdout, exactly one stderr line
/// `solo: error: …` that names each of `names`, and no panic.
pub fn assert_one_line_error(out: &Output, names: &[&str]) {
    assert!(!out.stderr.contains("panicked"), "panicked:\n{}", out.stderr);
    assert!(matches!(out.code, Some(c) if c != 0), "exit code {:?}; stderr:\n{}", out.code, out.stderr);
    assert_eq!(out.stdout, "", "stdout on error");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr is not one line:\n{}", out.stderr);
    assert!(lines[0].starts_with("solo: error: "), "{}", lines[0]);
    for name in names {
        assert!(lines[0].contains(name), "error does not name `{name}`: {}", lines[0]);
    }
}
