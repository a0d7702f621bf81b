"""What the held-out set scripts (heldout_r5.py to heldout_r9.py) share: their
hand-written texts become jsonl documents under crates/gate/tests/corpus/."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "crates", "gate", "tests", "corpus")


def private_docs(rows_by_lang, per_lang):
    """(categories, text) rows per language -> sensitive documents; each language has `per_lang`."""
    docs = []
    for lang, rows in rows_by_lang.items():
        assert len(rows) == per_lang, (lang, len(rows))
        docs += [{"text": t, "spans": [], "categories": cats, "kind": "sensitive", "lang": lang} for cats, t in rows]
    return docs


def everyday_docs(blocks_by_lang, per_lang):
    """A block of one request a line per language -> everyday documents; `per_lang` lines each."""
    docs = []
    for lang, block in blocks_by_lang.items():
        lines = [l.strip() for l in block.strip().split("\n") if l.strip()]
        assert len(lines) == per_lang, (lang, len(lines))
        docs += [{"text": t, "spans": [], "categories": [], "kind": "everyday", "lang": lang} for t in lines]
    return docs


def write(name, docs):
    path = os.path.normpath(os.path.join(CORPUS, name))
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(f"wrote {len(docs)} documents to {path}")
