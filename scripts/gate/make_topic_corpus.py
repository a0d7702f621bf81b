#!/usr/bin/env python3
"""Builds the topic corpus of the privacy gate (JSON lines, what `solo gate eval --corpus` reads):

    {"text": "...", "spans": [...], "categories": ["HEALTH"], "kind": "sensitive", "lang": "en"}

`kind` is `sensitive` (a person's own health, money, legal matters... or a pasted private
document; `categories` say which), `general` (general knowledge on the same subjects, fiction,
homework: no category) or `everyday` (requests on other subjects: no category). `spans` label the
names, phones, ids and tokens the documents hold, in character offsets (end exclusive), as
scripts/gate/make_corpus.py does.

English, Spanish, German and French. Every list of templates and of fillers is cut in two, by
position (even: dev, odd: held out): the held-out documents are made of templates and words that
the dev documents never show, so a detector tuned on dev is measured on sentences it has not
seen. Standard library only (no Faker): the names and numbers are made here.

    python3 scripts/gate/make_topic_corpus.py --split dev --seed 1 --docs 1200 > crates/gate/tests/corpus/topics_dev.jsonl
    python3 scripts/gate/make_topic_corpus.py --split heldout --seed 2 --docs 1600 > crates/gate/tests/corpus/topics_heldout.jsonl
"""
import argparse
import base64
import json
import random
import re
import string
import sys

from topic_templates import CATEGORIES, GENERAL, EVERYDAY, FILL, NAMES, DOCS

SPLITS = {"dev": 0, "heldout": 1}


def part(xs, split):
    """The half of a list that belongs to a split (by position)."""
    return [x for i, x in enumerate(xs) if i % 2 == SPLITS[split]] or xs


class Doc:
    def __init__(self):
        self.parts, self.spans, self.len = [], [], 0

    def add(self, text, kind=None):
        text = str(text)
        if kind:
            self.spans.append({"start": self.len, "end": self.len + len(text), "type": kind})
        self.parts.append(text)
        self.len += len(text)

    def text(self):
        return "".join(self.parts)


class Gen:
    def __init__(self, seed, split):
        self.r = random.Random(seed)
        self.split = split

    def pick(self, xs):
        return self.r.choice(part(xs, self.split))

    def name(self, lang):
        first, last = NAMES[lang]
        return self.pick(first) + " " + self.pick(last)

    def digits(self, n):
        return "".join(self.r.choice(string.digits) for _ in range(n))

    def slot(self, lang, key):
        """A filler: a name (PERSON), a phone, an amount, or words from FILL."""
        if key == "name":
            return self.name(lang), "PERSON"
        if key == "first":
            return self.pick(NAMES[lang][0]), None
        if key == "phone":
            style = self.r.random()
            if style < 0.4:
                return f"+{self.r.choice(['34', '49', '33', '44'])} {self.digits(3)} {self.digits(3)} {self.digits(3)}", "PHONE"
            if style < 0.7:
                return f"({self.r.randint(201, 989)}) {self.digits(3)}-{self.digits(4)}", "PHONE"
            return f"0{self.r.randint(6, 7)}{self.digits(1)} {self.digits(3)} {self.digits(2)} {self.digits(2)}", "PHONE"
        if key == "amount":
            return f"{self.r.randint(1, 98)}{self.r.choice([',', '.'])}{self.digits(3)}", None
        if key == "small":
            return str(self.r.randint(2, 99)), None
        if key == "value":
            return f"{self.r.randint(4, 300)}{self.r.choice(['', '.' + self.digits(1)])}", None
        if key == "date":
            return f"{self.r.randint(1, 28):02d}/{self.r.randint(1, 12):02d}/{self.r.randint(2019, 2026)}", None
        if key == "last4":
            return self.digits(4), None
        return self.pick(FILL[lang][key]), None

    def fill(self, template, lang):
        doc = Doc()
        pos = 0
        for m in re.finditer(r"\{(\w+)\}", template):
            doc.add(template[pos:m.start()])
            text, kind = self.slot(lang, m.group(1))
            doc.add(text, kind)
            pos = m.end()
        doc.add(template[pos:])
        return doc

    def sensitive(self, lang):
        r = self.r.random()
        if r < 0.18:
            cats, template = self.pick(DOCS[lang])
        else:
            cat = self.r.choice(sorted(CATEGORIES))
            template = self.pick(CATEGORIES[cat][lang])
            cats = [cat]
        doc = self.fill(template, lang)
        return {"text": doc.text(), "spans": doc.spans, "categories": sorted(cats), "kind": "sensitive", "lang": lang}

    def general(self, lang):
        cat = self.r.choice(sorted(GENERAL))
        doc = self.fill(self.pick(GENERAL[cat][lang]), lang)
        return {"text": doc.text(), "spans": doc.spans, "categories": [], "kind": "general", "lang": lang, "topic": cat}

    def everyday(self, lang):
        doc = self.fill(self.pick(EVERYDAY[lang]), lang)
        return {"text": doc.text(), "spans": doc.spans, "categories": [], "kind": "everyday", "lang": lang}

    def identifiers(self):
        """The identifier forms the gate once missed: bearer tokens and KEY=value secrets,
        national ids with spaces or labelled (checksum failing), phones after a verb, names
        introduced by context, addresses without a street-type word."""
        an = string.ascii_letters + string.digits
        kind = self.r.choice(["bearer", "keyvalue", "id", "phone", "name", "address"])
        lang = self.r.choice(["en", "es", "de", "fr"])
        if kind == "bearer":
            def b64(o):
                return base64.urlsafe_b64encode(json.dumps(o).encode()).decode().rstrip("=")
            if self.r.random() < 0.5:
                v = b64({"alg": "RS256", "kid": self.digits(4)}) + "." + b64({"sub": self.digits(6), "exp": 1700000000}) + "." + "".join(self.r.choice(an + "-_") for _ in range(40))
            else:
                v = "".join(self.r.choice(an) for _ in range(self.r.randint(24, 48)))
            t = self.pick(["curl -H \"Authorization: Bearer {v}\" https://api.example.com/v1/items",
                           "Authorization: Bearer {v}\nContent-Type: application/json",
                           "why does the server answer 401 to authorization: bearer {v} ?",
                           "headers = {{'Authorization': 'Bearer {v}'}}"])
            return self.one(t, v, "SECRET", lang)
        if kind == "keyvalue":
            v = "".join(self.r.choice(an) for _ in range(self.r.randint(20, 40)))
            name = self.pick(["API_TOKEN", "STRIPE_KEY", "SERVICE_AUTH", "SESSION_SECRET", "DEPLOY_KEY", "BOT_TOKEN", "ACCESS_KEY_ID", "WEBHOOK_SECRET"])
            t = self.pick(["{n}={v}", "export {n}={v}", "{n}: {v}", "set {n}=\"{v}\" in the .env file"])
            return self.one(t.replace("{n}", name), v, "SECRET", lang)
        if kind == "id":
            kinds = [("DNI", lambda: f"{self.digits(8)}-{self.r.choice(string.ascii_uppercase)}"),
                     ("NIE", lambda: f"{self.r.choice('XYZ')} {self.digits(7)} {self.r.choice(string.ascii_uppercase)}"),
                     ("NIR", lambda: f"{self.r.choice('12')} {self.digits(2)} {self.digits(2)} {self.digits(2)} {self.digits(3)} {self.digits(3)} {self.digits(2)}"),
                     ("Steuer-ID", lambda: f"{self.r.randint(1, 9)}{self.digits(1)} {self.digits(3)} {self.digits(3)} {self.digits(3)}"),
                     ("national insurance number", lambda: f"{self.r.choice('ABCEHJKLMNPRSTWXY')}{self.r.choice('ABCEHJKLMNPRSTWXY')} {self.digits(2)} {self.digits(2)} {self.digits(2)} {self.r.choice('ABCD')}"),
                     ("passport number", lambda: f"{self.r.choice(string.ascii_uppercase)}{self.digits(8)}")]
            label, make = self.pick(kinds)
            t = self.pick(["My {label} is {v}.", "{label}: {v}", "Here is my {label} {v} for the form"])
            return self.one(t.replace("{label}", label), make(), "NATIONAL_ID", lang)
        if kind == "phone":
            v, _ = self.slot(lang, "phone")
            t = self.pick(FILL[lang]["phone_verbs"])
            return self.one(t, v, "PHONE", lang)
        if kind == "name":
            v = self.name(lang)
            t = self.pick(FILL[lang]["name_cues"])
            return self.one(t, v, "PERSON", lang)
        v = self.pick(FILL[lang]["addresses"]).format(n=self.r.randint(2, 180), p=self.digits(5))
        t = self.pick(FILL[lang]["address_cues"])
        return self.one(t, v, "ADDRESS", lang)

    def one(self, template, value, kind, lang):
        doc = Doc()
        a, b = template.split("{v}", 1)
        doc.add(a)
        doc.add(value, kind)
        doc.add(b)
        return {"text": doc.text(), "spans": doc.spans, "categories": [], "kind": "identifier", "lang": lang}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=sorted(SPLITS), default="heldout")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--docs", type=int, default=1600)
    args = ap.parse_args()
    g = Gen(args.seed, args.split)
    for _ in range(args.docs):
        lang = g.r.choice(["en", "es", "de", "fr"])
        x = g.r.random()
        if x < 0.45:
            d = g.sensitive(lang)
        elif x < 0.70:
            d = g.general(lang)
        elif x < 0.88:
            d = g.everyday(lang)
        else:
            d = g.identifiers()
        sys.stdout.write(json.dumps(d, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
