#!/usr/bin/env python3
"""Builds crates/gate/data/{first_names,last_names,common_words}.txt.

Name lists come from the `names-dataset` package (Apache-2.0; first and last names with per-country
popularity ranks), the common-word stoplist from `wordfreq`. Neither is used by the corpus
generator (scripts/gate/make_corpus.py uses Faker's and presidio-evaluator's names), so the
evaluation does not test the gate on its own lists.

    pip install names-dataset wordfreq && python3 scripts/gate/make_name_lists.py
"""
import gzip
import os
import pickle
import re

import names_dataset
import wordfreq

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "gate", "data")
TOP_FIRST = 1500   # per country
TOP_LAST = 2500
# Countries whose names the gate knows (Western Europe, the Americas, Oceania, India).
COUNTRIES = {"US", "GB", "IE", "CA", "AU", "NZ", "DE", "AT", "CH", "FR", "BE", "NL", "LU", "ES", "PT",
             "IT", "MX", "AR", "CO", "CL", "BR", "PL", "SE", "NO", "DK", "FI", "IN", "ZA"}
WORD = re.compile(r"^[A-Z][a-z'\u00c0-\u024f-]+$")


def load(name):
    path = os.path.join(os.path.dirname(names_dataset.__file__), "v3", name)
    with gzip.open(path) as f:
        return pickle.load(f)


def pick(table, top):
    out = set()
    for name, info in table.items():
        if not WORD.match(name) or len(name) < 2:
            continue
        ranks = info.get("rank") or {}
        if any(r is not None and r <= top and c in COUNTRIES for c, r in ranks.items()):
            out.add(name)
    return out


def main():
    first = pick(load("first_names.pkl.gz"), TOP_FIRST)
    last = pick(load("last_names.pkl.gz"), TOP_LAST)
    common = set()
    for lang in ["en", "de", "fr", "es", "it", "nl", "pt"]:
        common.update(w for w in wordfreq.top_n_list(lang, 8000) if w.isalpha())
    # The most popular names stay names even when they are frequent words ("john", "maria").
    popular = pick(load("first_names.pkl.gz"), 40) | pick(load("last_names.pkl.gz"), 40)
    common -= {n.lower() for n in popular}
    os.makedirs(OUT, exist_ok=True)
    for fname, words in [("first_names.txt", first), ("last_names.txt", last), ("common_words.txt", common)]:
        with open(os.path.join(OUT, fname), "w", encoding="utf-8") as f:
            f.write("\n".join(sorted(words)) + "\n")
        print(fname, len(words))


if __name__ == "__main__":
    main()
