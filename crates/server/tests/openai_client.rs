//! The official `openai` Python package against the real server (scripted backend): see
//! `openai_client.py`. The Python comes from `$SOLO_PYTHON` (what `.ci/run` sets up), else
//! `python3`. Without a Python that can `import openai` the test fails under CI (`CI=true`) and
//! is skipped, loudly, elsewhere.

mod common;

use common::*;
use std::io::Write;
use std::path::Path;
use std::process::Command;

const WEATHER_CALL: &str = "I need the weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

#[test]
fn the_official_openai_client_works() {
    let python = std::env::var("SOLO_PYTHON").unwrap_or_else(|_| "python3".into());
    let usable = Command::new(&python).args(["-c", "import openai"]).output().is_ok_and(|o| o.status.success());
    if !usable {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        let why = format!("`{python}` cannot `import openai` (install it with `pip install openai`, or point SOLO_PYTHON at a Python that has it)");
        assert!(!ci, "{why}; .ci/run should have set this up");
        // Straight to stderr: the test harness captures `eprintln!` of passing tests.
        let _ = writeln!(std::io::stderr(), "\n********\n*** SKIPPED the openai client test: {why}\n********\n");
        return;
    }
    let mut config = config();
    config.api_key = Some("test-key".into());
    let server = start_scripted(
        config,
        vec![
            Script::text("ADD", "Two plus two.\n</think>\n\nThe answer is 4."),
            Script::text("WEATHER", WEATHER_CALL),
            Script::text("FORECAST", "Sunny it is.\n</think>\n\nIt is sunny in Paris."),
        ],
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openai_client.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(format!("http://{}/v1", server.addr()))
        // Loopback only, whatever proxy the environment names.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openai_client.py failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    eprintln!("{stdout}");
}
