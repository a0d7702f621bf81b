//! include/solo.h is generated from src/lib.rs by cbindgen and checked in: this regenerates it
//! and fails when the checked-in header differs (`SOLO_BLESS=1 cargo test -p solo-capi --test
//! header` rewrites it).

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml reads");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses src/lib.rs")
        .write(&mut generated);
    let header = crate_dir.join("../../include/solo.h");
    if std::env::var_os("SOLO_BLESS").is_some() {
        std::fs::write(&header, &generated).expect("include/solo.h writable");
        return;
    }
    let checked_in = std::fs::read(&header).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/solo.h is stale (or missing): it differs from what cbindgen makes of crates/capi/src/lib.rs; \
         regenerate it with `SOLO_BLESS=1 cargo test -p solo-capi --test header`"
    );
    // What every binding relies on is in it.
    let text = String::from_utf8(generated).unwrap();
    for name in ["solo_engine_open", "solo_chat", "solo_cancel", "solo_gate_check", "SOLO_CANCELLED", "solo_error_free"]
    {
        assert!(text.contains(name), "{name} is not in the header");
    }
}
