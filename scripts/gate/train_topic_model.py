#!/usr/bin/env python3
"""Trains the gate's learned topic model (crates/gate/src/topic_model.rs) and writes
crates/gate/data/topic_model.bin. Needs numpy and scipy (pip), and cargo: the features are the
Rust code's own (the `topic_features` example), so training and serving hash alike. CI needs
none of this: the weights are committed.

Training data, made here (never the held-out corpora, the fresh test set or the blind set):
  * make_topic_corpus.py's generator on its dev half only (templates and fillers at even
    positions), several seeds;
  * topics_fresh_dev.jsonl (the fresh corpus's dev half);
  * train_templates.py: sensitive requests composed of an opener, a situation (first or third
    person, by category and language) and a closing question; general-knowledge frames around
    sensitive subjects, fiction and professionals' questions (the hard negatives); everyday
    requests; pasted documents (lab values, statement rows, payslips, message threads, court
    headings) and everyday look-alikes (shopping lists, timetables, recipes);
  * the benign documents of crates/gate/tests/corpus/dev.jsonl (code, logs, prose) as everyday,
    and texts of random frequent words (`salad`).
General subjects that the held-out half of the template fillers uses are left out.

    pip install numpy scipy
    python3 scripts/gate/train_topic_model.py     # writes the model, prints the validation numbers

With the defaults it writes the committed file byte for byte (numpy 2.4.6, scipy 1.17.1).
The thresholds it stores are picked on validation documents that training never sees (see
`pick`); the blind set (topics_blind_test.jsonl) and the held-out corpora are never read here.
"""
import argparse
import json
import pathlib
import random
import struct
import subprocess
import sys

import numpy as np
import scipy.sparse as sp

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import make_topic_corpus as mtc  # noqa: E402
import topic_templates as tt  # noqa: E402
import train_templates as T  # noqa: E402
import everyday_templates as E  # noqa: E402
import everyday_r4 as E4  # noqa: E402
import train_compose as C  # noqa: E402
import train_lexicon as LX  # noqa: E402

CATS = ["HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION", "ETHNICITY", "BIOMETRIC",
        "PRIVATE_DOCUMENT"]
LANGS = ["en", "es", "de", "fr"]
CAT_WEIGHT = {"HEALTH": 4, "FINANCE": 3, "LEGAL": 3, "SEX_LIFE": 1, "RELIGION": 1, "POLITICS": 1, "UNION": 1,
              "ETHNICITY": 1, "BIOMETRIC": 1}


def held_out_fillers():
    out = set()
    for lang in LANGS:
        for xs in tt.FILL[lang].values():
            out |= {x.lower() for i, x in enumerate(xs) if i % 2 == 1}
    return out


class Gen:
    """`part`: "train" draws from the lists' entries at positions not divisible by 5, "val" from the
    others, so the validation documents (which pick the thresholds) are phrasings training never saw."""

    def __init__(self, seed, part="train"):
        self.r = random.Random(seed)
        self.hold = held_out_fillers()
        self.part = part

    def choice(self, xs):
        keep = [x for i, x in enumerate(xs) if (i % 5 == 0) == (self.part == "val")] or xs
        return self.r.choice(keep)

    def fill(self, s, lang):
        r = self.r
        first, last = tt.NAMES[lang]
        name = f"{r.choice(first[::2])} {r.choice(last[::2])}"
        amt = r.choice(["{:,}".format(r.randint(3, 90) * 100), f"{r.randint(2, 60)}k", f"{r.randint(200, 9000)} €", f"${r.randint(2, 40)},000"])
        return (s.replace("{rel}", r.choice(T.REL[lang])).replace("{amt}", amt).replace("{n}", str(r.randint(2, 14)))
                .replace("{v}", str(r.choice([r.randint(3, 250), round(r.uniform(0.5, 15), 1)]))).replace("{name}", name))

    def casing(self, s):
        x = self.r.random()
        if x < 0.25:
            s = s.lower()
        elif x < 0.35:
            s = s.rstrip("?.!")
        if s and self.r.random() < 0.5:
            s = s[0].upper() + s[1:]
        return s

    def sensitive(self, lang):
        cats = [c for c in CAT_WEIGHT for _ in range(CAT_WEIGHT[c])]
        cat = self.r.choice(cats)
        if cat in T.SENS3 and self.r.random() < 0.3:
            body = self.fill(self.choice(T.SENS3[cat][lang]), lang)
            body = body[0].upper() + body[1:]
        else:
            body = self.fill(self.choice(T.SENS[cat][lang]), lang)
        pre, suf = self.choice(T.PREFIX[lang]), self.choice(T.SUFFIX[lang])
        text = pre + body + suf
        if self.r.random() < 0.1:  # after an unrelated request
            text = self.fill(self.choice(T.EVERY[lang]), lang) + T.ALSO[lang] + body
        return {"text": self.casing(text), "categories": [cat], "kind": "sensitive", "lang": lang}

    def general(self, lang):
        topics = [x for x in T.GEN_TOPICS[lang] if x.lower() not in self.hold]
        x = self.r.random()
        if x < 0.2:
            text = self.choice(T.GEN_WHOLE[lang])
        elif x < 0.35:
            text = self.choice(T.GEN_YOU[lang])
        elif x < 0.55:
            text = self.choice(T.GEN_FIRST[lang]).replace("{x}", self.choice(topics))
        else:
            text = self.choice(T.GEN_FRAMES[lang]).replace("{x}", self.choice(topics))
        return {"text": self.casing(text), "categories": [], "kind": "general", "lang": lang}

    def everyday(self, lang):
        x = self.r.random()
        if x < 0.08:
            text = self.choice(T.EVERY_DOCS[lang])
        elif x < 0.18:
            rows = [self.fill(self.choice(T.EVERY_ROWS[lang]), lang) for _ in range(self.r.randint(3, 6))]
            text = "\n".join([self.choice(T.EVERY_ROWS_HEAD[lang])] + rows).strip()
        elif x < 0.5:
            text = self.casing(self.choice(T.PREFIX[lang]) + self.choice(T.EVERY_FIRST[lang]))
        elif x < 0.25:
            names = ["Sam", "Alex", "Me"] if lang == "en" else ["Laura", "Yo"] if lang == "es" else ["Jonas", "Ich"] if lang == "de" else ["Léa", "Moi"]
            text = "\n".join(f"{names[i % 2]}: {m}" for i, m in enumerate(T.CHAT_EVERYDAY[lang]))
        else:
            text = self.casing(self.fill(self.choice(T.EVERY[lang]), lang))
        return {"text": text, "categories": [], "kind": "everyday", "lang": lang}

    def document(self, lang):
        r = self.r
        cue = self.choice(T.DOC_CUES[lang])
        k = r.choice(["lab", "lab", "bank", "pay", "chat", "court"])
        if k == "lab":
            rows = [f"{m}{r.choice([' ', ': ', '  '])}{round(r.uniform(0.3, 300), 1)}{r.choice(['', ' mg/dL', ' g/L', ' mmol/L', ' U/L'])}{r.choice(['', '', ' H', ' L', ' *'])}"
                    for m in r.sample(T.LAB[lang], r.randint(3, 6))]
            cats = ["HEALTH", "PRIVATE_DOCUMENT"]
        elif k == "bank":
            rows = [f"{r.randint(1, 28):02d}/{r.randint(1, 12):02d} {d} {r.choice(['-', '+', ''])}{r.randint(5, 2500)},{r.randint(0, 99):02d}"
                    for d in r.sample(T.BANK[lang], r.randint(3, 6))]
            cats = ["FINANCE", "PRIVATE_DOCUMENT"]
        elif k == "pay":
            rows = [f"{d}{r.choice([' ', ': ', '  '])}{r.randint(30, 4000)}.{r.randint(0, 99):02d}" for d in T.PAY[lang][: r.randint(3, len(T.PAY[lang]))]]
            cats = ["FINANCE", "PRIVATE_DOCUMENT"]
        elif k == "chat":
            first = tt.NAMES[lang][0][::2]
            a, b = r.choice(first), r.choice(["me", "Me", "yo", "ich", "moi", r.choice(first)])
            rows = [f"{[a, b][i % 2]}: {m}" for i, m in enumerate(r.sample(T.CHAT[lang], r.randint(3, 6)))]
            cats = ["PRIVATE_DOCUMENT"]
        else:
            rows = [self.choice(T.COURT[lang]).replace("{d}", f"{r.randint(1, 28)}.{r.randint(1, 12)}.2025")]
            cats = ["LEGAL", "PRIVATE_DOCUMENT"]
        text = "\n".join(([cue] if cue and r.random() < 0.5 else []) + rows + ([cue] if cue and r.random() < 0.3 else []))
        return {"text": text, "categories": cats, "kind": "sensitive", "lang": lang}


def salad(seed, n):
    """Texts of random frequent words (crates/gate/data/common_words.txt, many languages) in
    sentences and lines: long prose on no one's matter, as the span corpus's filler text is."""
    r = random.Random(seed)
    words = [w for w in (ROOT / "crates/gate/data/common_words.txt").read_text(encoding="utf-8").split() if w.isalpha()][:20000]
    out = []
    for _ in range(n):
        lines = []
        for _ in range(r.randint(1, 5)):
            sents = [" ".join(r.choice(words) for _ in range(r.randint(4, 11))) for _ in range(r.randint(1, 4))]
            lines.append(" ".join(x[0].upper() + x[1:] + "." for x in sents))
        out.append({"text": "\n".join(lines), "kind": "everyday"})
    return out


def composed_everyday(seed, n, part="train"):
    """Everyday first-person requests from everyday_templates.py (its own random stream, so the
    rest of the data is as without them)."""
    g = Gen(seed, part)
    return [E.everyday(g, g.r.choice(LANGS)) for _ in range(n)]


def composed_everyday_r4(seed, n, part="train"):
    """Everyday requests from everyday_r4.py (relatives with plans, body and money words said
    innocently), on their own random stream."""
    g = Gen(seed, part)
    return [E4.everyday(g, g.r.choice(LANGS)) for _ in range(n)]


def composed(seed, n, part="train"):
    """Third persons named by a role or a first name, and agents' notes, with each category's
    vocabulary; and their hard negatives (train_compose.py; its own random stream)."""
    g = Gen(seed, part)
    return C.docs(g, n, LANGS, T.GEN_FRAMES)


def lexicon_docs(seed, n, part="train"):
    """The lexicon's own words in short frames, and the same frames' negatives (train_lexicon.py;
    its own random stream)."""
    g = Gen(seed, part)
    return LX.docs(g, n, LANGS, T.REL, T.GEN_FRAMES)


def corpus(seed, n, part="train"):
    g = Gen(seed, part)
    base = mtc.Gen(seed, "dev")
    docs = []
    for _ in range(n):
        lang = g.r.choice(LANGS)
        x = g.r.random()
        if x < 0.30:
            d = g.sensitive(lang)
        elif x < 0.38:
            d = g.document(lang)
        elif x < 0.58:
            d = g.general(lang)
        elif x < 0.70:
            d = g.everyday(lang)
        else:  # the template corpus's dev half
            y = base.r.random()
            d = base.sensitive(lang) if y < 0.45 else base.general(lang) if y < 0.75 else base.everyday(lang) if y < 0.92 else base.identifiers()
        docs.append(d)
    return docs


def read_jsonl(p):
    return [json.loads(l) for l in open(p, encoding="utf-8") if l.strip()]


def features(docs, bits):
    """The rows (one a window of a document: a long text is scored in windows) and each row's
    document."""
    exe = ROOT / "target/release/examples/topic_features"
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "solo-gate", "--example", "topic_features"], cwd=ROOT, check=True)
    inp = "".join(json.dumps({"text": d["text"]}, ensure_ascii=False) + "\n" for d in docs)
    out = subprocess.run([str(exe), str(bits)], input=inp.encode(), capture_output=True, check=True).stdout.decode()
    rows, cols, vals, doc = [], [], [], []
    for i, line in enumerate(out.splitlines()):
        n, *b = [int(x) for x in line.split()]
        doc.append(n)
        rows += [i] * len(b)
        cols += b
        vals += [1.0 / np.sqrt(max(len(b), 1))] * len(b)
    X = sp.csr_matrix((np.array(vals, np.float32), (rows, cols)), shape=(len(doc), 1 << bits))
    return X, np.array(doc)


def labels(docs):
    y = np.zeros((len(docs), 1 + len(CATS)), np.float32)
    for i, d in enumerate(docs):
        if d.get("kind") == "sensitive":
            y[i, 0] = 1
            for c in d.get("categories", []):
                y[i, 1 + CATS.index(c)] = 1
    return y


def train(X, Y, w, steps, l2, lr=0.05):
    n, dim = X.shape
    W = np.zeros((dim, Y.shape[1]), np.float32)
    b = np.zeros(Y.shape[1], np.float32)
    m, v, mb, vb = np.zeros_like(W), np.zeros_like(W), np.zeros_like(b), np.zeros_like(b)
    Xt = X.T.tocsr()
    for t in range(1, steps + 1):
        z = X @ W + b
        p = 1 / (1 + np.exp(-z))
        g = (p - Y) * w[:, None] / w.sum()
        gW = Xt @ g + l2 * W
        gb = g.sum(0)
        m = 0.9 * m + 0.1 * gW
        v = 0.999 * v + 0.001 * gW * gW
        mb = 0.9 * mb + 0.1 * gb
        vb = 0.999 * vb + 0.001 * gb * gb
        W -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        b -= lr * (mb / (1 - 0.9 ** t)) / (np.sqrt(vb / (1 - 0.999 ** t)) + 1e-8)
        if t % 100 == 0:
            loss = -(w[:, None] * (Y * np.log(p + 1e-7) + (1 - Y) * np.log(1 - p + 1e-7))).sum() / w.sum()
            print(f"step {t}: loss {loss:.4f}", file=sys.stderr)
    return W, b


def quantise(W):
    scale = np.maximum(np.abs(W).max(0), 1e-6) / 127.0
    q = np.clip(np.round(W / scale), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def write(path, bits, q, scale, bias, thr, thr_c):
    body = b"SOLOTM01" + struct.pack("<II", bits, q.shape[1]) + struct.pack("<ff", thr, thr_c)
    body += scale.astype("<f4").tobytes() + bias.astype("<f4").tobytes() + q.astype(np.int8).tobytes(order="C")
    path.write_bytes(body + struct.pack("<I", fnv(body)))


def fnv(data):
    """The checksum: FNV-1a 64 over a tag byte 0, then the body; its low 32 bits (topic_model.rs)."""
    h = (0xcbf29ce484222325 * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h & 0xFFFFFFFF


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bits", type=int, default=14)
    ap.add_argument("--docs", type=int, default=24000)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--l2", type=float, default=1e-4)
    ap.add_argument("--negative-weight", type=float, default=1.5)
    ap.add_argument("--everyday", type=int, default=0, help="composed everyday requests (everyday_templates.py) added; 0: none (the committed model)")
    ap.add_argument("--everyday-r4", type=int, default=0, help="composed everyday requests of everyday_r4.py added; 0: none")
    ap.add_argument("--composed", type=int, default=0, help="composed third-person and note documents (train_compose.py) added; 0: none")
    ap.add_argument("--lexicon", type=int, default=0, help="documents of the lexicon's words in frames (train_lexicon.py) added; 0: none")
    ap.add_argument("--flag-alone", type=float, default=0.025, help="validation negatives the model alone may flag")
    ap.add_argument("--flag-combined", type=float, default=0.0, help="… beside the lexicon")
    ap.add_argument("--threshold-combined", type=float, default=None,
                    help="store this threshold beside the lexicon instead of the one `pick` finds")
    ap.add_argument("--out", default=str(ROOT / "crates/gate/data/topic_model.bin"))
    args = ap.parse_args()
    docs = corpus(7, args.docs)
    docs += [{"text": d["text"], "kind": "everyday"} for d in read_jsonl(ROOT / "crates/gate/tests/corpus/dev.jsonl") if not d["spans"]]
    docs += salad(9, 3000)
    docs += composed_everyday(11, args.everyday)
    docs += composed_everyday_r4(13, args.everyday_r4)
    docs += composed(15, args.composed)
    docs += lexicon_docs(17, args.lexicon)
    # Validation, to pick the thresholds: the other fifth of this script's templates, and the fresh
    # corpus's dev half (written apart from them).
    val = corpus(8, 3000, "val") + salad(10, 500) + composed_everyday(12, args.everyday // 8, "val") + composed_everyday_r4(14, args.everyday_r4 // 8, "val") + lexicon_docs(18, args.lexicon // 8, "val") + read_jsonl(ROOT / "crates/gate/tests/corpus/topics_fresh_dev.jsonl")
    print(f"{len(docs)} training documents, {len(val)} validation", file=sys.stderr)
    X, rows = features(docs, args.bits)
    Y = labels(docs)[rows]
    # Negatives weigh more: a flagged general question is what the lexicon never does.
    w = np.where(Y[:, 0] > 0, 1.0, args.negative_weight).astype(np.float32)
    # A long document's windows share its weight.
    w /= np.bincount(rows)[rows]
    W, b = train(X, Y, w, args.steps, args.l2)
    q, scale = quantise(W)
    Xv, vrows = features(val, args.bits)
    pw = 1 / (1 + np.exp(-((Xv @ q.astype(np.float32)) * scale + b)[:, 0]))
    p = np.zeros(len(val))
    np.maximum.at(p, vrows, pw)  # a document: its strongest window
    kinds = np.array([d.get("kind") for d in val])
    fresh = np.arange(len(val)) >= len(val) - len(read_jsonl(ROOT / "crates/gate/tests/corpus/topics_fresh_dev.jsonl"))
    for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        row = []
        for name, m in (("val", ~fresh), ("fresh_dev", fresh)):
            row.append(f"{name}: sensitive {np.mean(p[m & (kinds == 'sensitive')] >= t):.3f} general {np.mean(p[m & (kinds == 'general')] >= t):.3f} "
                       f"everyday {np.mean(p[m & (kinds == 'everyday')] >= t):.3f}")
        print(f"threshold {t}: " + " | ".join(row), file=sys.stderr)
    neg = (kinds == "general") | (kinds == "everyday")

    def pick(limit_fresh, limit_val):
        """The lowest threshold flagging at most these shares of the validation's negatives: of the
        fresh corpus's dev half, of this script's held-back fifth."""
        for t in np.arange(0.3, 0.96, 0.01):
            if np.mean(p[neg & fresh] >= t) <= limit_fresh and np.mean(p[neg & ~fresh] >= t) <= limit_val:
                return float(round(t, 2))
        return 0.95
    thr, thr_c = pick(args.flag_alone, 2 * args.flag_alone), pick(args.flag_combined, 0.01)
    if args.threshold_combined is not None:
        thr_c = args.threshold_combined
    print(f"thresholds: alone {thr}, combined {thr_c}", file=sys.stderr)
    sens = kinds == "sensitive"
    print(f"at them: fresh_dev sensitive {np.mean(p[fresh & sens] >= thr):.3f} / {np.mean(p[fresh & sens] >= thr_c):.3f}, "
          f"held-back fifth {np.mean(p[~fresh & sens] >= thr):.3f} / {np.mean(p[~fresh & sens] >= thr_c):.3f}", file=sys.stderr)
    write(pathlib.Path(args.out), args.bits, q, scale, b, thr, thr_c)
    print(f"wrote {args.out} ({pathlib.Path(args.out).stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
