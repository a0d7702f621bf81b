#!/bin/sh
# The topic numbers of the README's table: each corpus with each detector (the lexicon, the
# learned model, both: the shipped one). Release build; one core; `ALL=1` lists misses.
set -e
cd "$(dirname "$0")/../.."
cargo build --release -q -p solo-gate --example eval
for corpus in topics_heldout topics_fresh_test topics_unseen_test topics_blind_test topics_r4_test topics_private_r5 topics_private_r6 topics_private_r7 topics_private_r8 topics_private_r9 topics_private_r10; do
    for mode in lexicon model combined; do
        echo "== $corpus, $mode"
        MODE=$mode ./target/release/examples/eval "crates/gate/tests/corpus/$corpus.jsonl" |
            grep -E '^(HEALTH|FINANCE|LEGAL|SEX_LIFE|RELIGION|POLITICS|UNION|ETHNICITY|BIOMETRIC|PRIVATE_DOCUMENT) |kept local|flagged:|^  (en|es|de|fr):|mean µs/KB|latency'
    done
done
