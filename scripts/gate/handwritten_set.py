"""Writes a hand-written topic set (unseen_topics.py, r4_topics.py, r4_dev.py) as the corpus
JSONL that `solo gate eval` reads: per language, the sensitive requests (with their categories),
then the general-knowledge ones, then the everyday ones."""
import json
import pathlib


def write_set(file_name, sensitive, general, everyday):
    out = pathlib.Path(__file__).resolve().parents[2] / "crates/gate/tests/corpus" / file_name
    docs = []
    for lang in ("en", "es", "de", "fr"):
        docs += [{"text": t, "spans": [], "categories": c, "kind": "sensitive", "lang": lang}
                 for c, t in sensitive[lang]]
        docs += [{"text": t, "spans": [], "categories": [], "kind": "general", "lang": lang} for t in general[lang]]
        docs += [{"text": t, "spans": [], "categories": [], "kind": "everyday", "lang": lang}
                 for t in everyday[lang]]
    with open(out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(out.name, len(docs))
