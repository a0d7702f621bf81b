#!/usr/bin/env python3
"""Builds the privacy gate's labelled corpus (JSON lines, what `solo gate eval --corpus` reads):

    {"text": "...", "spans": [{"start": 10, "end": 27, "type": "EMAIL"}], "source": "..."}

Offsets are Unicode characters, end exclusive; a document without spans is benign.

Sources: presidio-evaluator's sentence templates (filled with Faker identities), templates of our
own for the types those lack (secrets, MAC, national ids, dates of birth, ...), Faker in ten
locales, and benign look-alikes: order and tracking numbers, version strings, timestamps, invalid
card numbers and IBANs, hashes, UUIDs, code, prices, ordinary prose with capitalised words.

    pip install faker presidio-evaluator   # presidio-evaluator only for its templates file
    python3 scripts/gate/make_corpus.py --seed 1 --docs 1500 > crates/gate/tests/corpus/dev.jsonl
    python3 scripts/gate/make_corpus.py --seed 2 --docs 3000 > crates/gate/tests/corpus/heldout.jsonl

The detectors were tuned on the dev corpus (seed 1) only; the held-out corpus (seed 2) is the one
whose numbers are reported.
"""
import argparse
import base64
import json
import os
import random
import re
import string
import sys

from faker import Faker

LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "en_IN", "en_AU", "en_CA"]


def templates_file():
    try:
        import presidio_evaluator
        path = os.path.join(os.path.dirname(presidio_evaluator.__file__), "data_generator", "raw_data", "templates.txt")
        with open(path, encoding="utf-8-sig") as f:
            return [l.rstrip("\n") for l in f if l.strip()]
    except ImportError:
        return []


class Doc:
    """Text built piece by piece, with labelled pieces."""

    def __init__(self):
        self.parts = []
        self.spans = []
        self.len = 0

    def add(self, text, kind=None):
        text = str(text)
        if kind:
            self.spans.append({"start": self.len, "end": self.len + len(text), "type": kind})
        self.parts.append(text)
        self.len += len(text)
        return self

    def json(self, source):
        return {"text": "".join(self.parts), "spans": self.spans, "source": source}


def fill(template, values):
    """`template` with {name} slots; values: name -> (text, type or None). Returns a Doc."""
    doc = Doc()
    pos = 0
    for m in re.finditer(r"\{(\w+)\}", template):
        doc.add(template[pos:m.start()])
        text, kind = values[m.group(1)]
        doc.add(text, kind)
        pos = m.end()
    doc.add(template[pos:])
    return doc


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.fakers = {}
        for i, loc in enumerate(LOCALES):
            f = Faker(loc)
            f.seed_instance(seed * 100 + i)
            self.fakers[loc] = f
        self.templates = templates_file()

    def f(self, loc=None):
        return self.fakers[loc or self.r.choice(LOCALES)]

    def choice(self, xs):
        return self.r.choice(xs)

    # ------------------------------------------------------------------ values

    def person(self, loc=None):
        f = self.f(loc)
        return self.choice([f.name, f.name, lambda: f.first_name() + " " + f.last_name()])()

    def address(self, loc=None):
        a = self.f(loc).address()
        return a.replace("\n", self.choice([", ", ", ", "\n", " "]))

    def phone(self, loc=None):
        return self.f(loc).phone_number()

    def email(self):
        f = self.f()
        return self.choice([f.email, f.free_email, f.company_email, f.safe_email])()

    def card(self):
        num = self.f("en_US").credit_card_number()
        style = self.r.random()
        if style < 0.4 or len(num) not in (15, 16):
            return num
        sep = self.choice([" ", "-"])
        if len(num) == 16:
            return sep.join(num[i:i + 4] for i in range(0, 16, 4))
        return sep.join([num[:4], num[4:10], num[10:]])

    def iban(self):
        loc = self.choice(["de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "en_GB"])
        iban = self.f(loc).iban()
        if self.r.random() < 0.5:
            iban = " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
        return iban

    def ssn(self):
        s = self.f("en_US").ssn()
        return s if self.r.random() < 0.8 else s.replace("-", " ")

    def nino(self):
        first = "ABCEGHJKLMNOPRSTWXYZ"
        second = "ABCEGHJKLMNPRSTWXYZ"
        while True:
            p = self.choice(first) + self.choice(second)
            if p not in ("BG", "GB", "KN", "NK", "NT", "TN", "ZZ"):
                break
        d = "".join(self.choice(string.digits) for _ in range(6))
        suffix = self.choice("ABCD")
        if self.r.random() < 0.5:
            return f"{p} {d[:2]} {d[2:4]} {d[4:]} {suffix}"
        return f"{p}{d}{suffix}"

    def national_id(self):
        kind = self.choice(["nino", "nir", "cf", "dni", "nie", "bsn", "sin", "aadhaar"])
        if kind == "nino":
            return self.nino(), self.choice(["My National Insurance number is {v}.", "NI number: {v}", "NINO {v} for the payroll form"])
        if kind == "nir":
            v = self.f("fr_FR").ssn()
            if self.r.random() < 0.4:
                v = f"{v[0]} {v[1:3]} {v[3:5]} {v[5:7]} {v[7:10]} {v[10:13]} {v[13:]}"
            return v, self.choice(["Mon numéro de sécurité sociale est le {v}.", "NIR : {v}", "French social security number {v}"])
        if kind == "cf":
            return self.f("it_IT").ssn(), self.choice(["Il mio codice fiscale è {v}.", "Codice fiscale: {v}", "tax code {v} attached"])
        if kind == "dni":
            return self.f("es_ES").nif(), self.choice(["Mi DNI es {v}.", "DNI: {v}", "NIF {v} para la factura"])
        if kind == "nie":
            return self.f("es_ES").nie(), self.choice(["Mi NIE es {v}.", "NIE: {v}"])
        if kind == "bsn":
            return self.f("nl_NL").ssn(), self.choice(["Mijn BSN is {v}.", "burgerservicenummer: {v}", "BSN {v} staat op het formulier"])
        if kind == "sin":
            return self.f("en_CA").ssn(), self.choice(["My SIN is {v}.", "Social Insurance Number: {v}", "numéro d'assurance sociale (NAS) {v}"])
        v = self.aadhaar()
        return v, self.choice(["My Aadhaar number is {v}.", "Aadhaar: {v}"])

    def aadhaar(self):
        """Faker's aadhaar_id uses Luhn and may start with 1; UIDAI numbers start with 2-9 and
        end in a Verhoeff check digit."""
        d = [self.r.randint(2, 9)] + [self.r.randint(0, 9) for _ in range(10)]
        M = [[0,1,2,3,4,5,6,7,8,9],[1,2,3,4,0,6,7,8,9,5],[2,3,4,0,1,7,8,9,5,6],[3,4,0,1,2,8,9,5,6,7],[4,0,1,2,3,9,5,6,7,8],
             [5,9,8,7,6,0,4,3,2,1],[6,5,9,8,7,1,0,4,3,2],[7,6,5,9,8,2,1,0,4,3],[8,7,6,5,9,3,2,1,0,4],[9,8,7,6,5,4,3,2,1,0]]
        P = [[0,1,2,3,4,5,6,7,8,9],[1,5,7,6,2,8,3,0,9,4],[5,8,0,3,7,9,6,1,4,2],[8,9,1,6,0,4,3,5,2,7],[9,4,5,3,1,2,6,8,7,0],
             [4,2,8,6,5,7,3,9,0,1],[2,7,9,3,8,0,6,4,1,5],[7,0,4,6,9,1,3,2,5,8]]
        INV = [0,4,3,2,1,5,6,7,8,9]
        c = 0
        for i, x in enumerate(reversed(d)):
            c = M[c][P[(i + 1) % 8][x]]
        s = "".join(map(str, d + [INV[c]]))
        return s if self.r.random() < 0.6 else f"{s[:4]} {s[4:8]} {s[8:]}"

    def dob(self):
        d = self.f().date_of_birth(minimum_age=1, maximum_age=95)
        fmt = self.choice(["%Y-%m-%d", "%d/%m/%Y", "%m/%d/%Y", "%d.%m.%Y", "%B %d, %Y", "%d %B %Y", "%b %d, %Y", "%d %b %Y", "%-d %B %Y"])
        return d.strftime(fmt)

    def ip(self):
        f = self.f()
        return self.choice([f.ipv4, f.ipv4_public, f.ipv4_private, f.ipv6])()

    def mac(self):
        m = self.f().mac_address()
        s = self.r.random()
        if s < 0.3:
            return m.upper()
        if s < 0.5:
            return m.replace(":", "-").upper()
        if s < 0.6:
            h = m.replace(":", "")
            return f"{h[:4]}.{h[4:8]}.{h[8:]}"
        return m

    def rand(self, alphabet, n):
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def secret(self):
        an = string.ascii_letters + string.digits
        kind = self.choice(["aws", "github", "openai", "slack", "stripe", "jwt", "pem", "assign", "assign", "google"])
        if kind == "aws":
            v = "AKIA" + self.rand(string.ascii_uppercase + string.digits, 16)
            return v, self.choice(["aws_access_key_id = {v}", "Here is the key {v} for the bucket", "export AWS_ACCESS_KEY_ID={v}"])
        if kind == "github":
            v = self.choice(["ghp_", "gho_", "ghs_"]) + self.rand(an, 36)
            return v, self.choice(["use this token: {v}", "git clone https://{v}@github.com/acme/app.git", "GITHUB_TOKEN={v}"])
        if kind == "openai":
            v = self.choice(["sk-", "sk-proj-"]) + self.rand(an + "_-", 48)
            return v, self.choice(["my key is {v}, why does it fail?", "OPENAI_API_KEY={v}", 'client = OpenAI(api_key="{v}")'])
        if kind == "slack":
            v = f"xoxb-{self.rand(string.digits, 12)}-{self.rand(string.digits, 12)}-{self.rand(an, 24)}"
            return v, self.choice(["slack bot token {v}", "SLACK_BOT_TOKEN={v}"])
        if kind == "stripe":
            v = self.choice(["sk_live_", "rk_live_", "sk_test_"]) + self.rand(an, 24)
            return v, self.choice(["stripe.api_key = '{v}'", "Stripe secret: {v}"])
        if kind == "google":
            v = "AIza" + self.rand(an + "_-", 35)
            return v, self.choice(["maps key {v}", "GOOGLE_API_KEY={v}"])
        if kind == "jwt":
            def b64(obj):
                return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
            v = b64({"alg": "HS256", "typ": "JWT"}) + "." + b64({"sub": self.rand(string.digits, 8), "name": "x", "iat": 1516239022}) + "." + self.rand(an + "_-", 43)
            return v, self.choice(["Authorization: Bearer {v}", "decode this jwt {v} please"])
        if kind == "pem":
            body = "\n".join(self.rand(an + "+/", 64) for _ in range(self.r.randint(3, 8)))
            label = self.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
            v = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
            return v, self.choice(["Why does ssh reject this key?\n{v}\n", "key.pem:\n{v}"])
        pw = self.f().password(length=self.r.randint(8, 16))
        tpl = self.choice(['password = "{v}"', "DB_PASSWORD={v}", '"password": "{v}"', "passwd: {v}", "my password is {v}", "mysql -u root --password={v}", "SECRET_KEY='{v}'"])
        return pw, tpl

    def url_creds(self):
        f = self.f()
        user = f.user_name()
        pw = f.password(length=self.r.randint(8, 14), special_chars=False)
        scheme = self.choice(["postgres", "mysql", "mongodb", "redis", "https", "ftp", "amqp"])
        host = self.choice([f.domain_name(), "db.internal", "localhost"])
        return user + ":" + pw, scheme + "://", "@" + host + self.choice([":5432/app", "/", ":6379", "/db", ""])

    # ------------------------------------------------------------------ documents

    def from_presidio(self):
        """A presidio-evaluator template filled with Faker values (and labelled)."""
        while True:
            t = self.choice(self.templates)
            if "us_driver_license" in t or re.search(r"(?<!\{)\{(\w+)\}(?!\})", t):
                continue
            break
        loc = self.choice(LOCALES)
        f = self.f(loc)
        t = t.replace("\\n", "\n")
        addr_parts = {"building_number", "street_name", "secondary_address", "city", "postcode", "zipcode", "state_abbr", "country"}
        doc = Doc()
        pos = 0
        slots = list(re.finditer(r"\{\{(\w+)\}\}", t))
        # Group consecutive address parts (only whitespace and commas between) into one ADDRESS.
        groups = []
        for m in slots:
            name = m.group(1)
            if groups and name in addr_parts and groups[-1][0] == "addr" and re.fullmatch(r"[\s,]*", t[groups[-1][2]:m.start()]):
                groups[-1] = ("addr", groups[-1][1], m.end(), groups[-1][3] + [m])
            elif name in addr_parts:
                groups.append(("addr", m.start(), m.end(), [m]))
            else:
                groups.append(("one", m.start(), m.end(), [m]))
        person = {"person", "name", "first_name", "last_name", "name_female", "name_male", "first_name_male",
                  "first_name_female", "first_name_nonbinary", "last_name_male", "last_name_female"}
        values = {
            "organization": lambda: f.company(), "city": lambda: f.city(), "country": lambda: f.country(),
            "credit_card_number": self.card, "phone_number": lambda: f.phone_number(), "email": self.email,
            "building_number": lambda: f.building_number(), "street_name": lambda: f.street_name(),
            "secondary_address": lambda: getattr(f, "secondary_address", lambda: "Apt. 2")(),
            "postcode": lambda: f.postcode(), "zipcode": lambda: self.f("en_US").zipcode(),
            "state_abbr": lambda: self.f("en_US").state_abbr(), "age": lambda: str(self.r.randint(18, 90)),
            "year": lambda: str(self.r.randint(1950, 2024)), "nationality": lambda: self.choice(["French", "German", "Indian", "Canadian"]),
            "nation_woman": lambda: "Italian woman", "nation_plural": lambda: "Spaniards", "url": lambda: f.url(),
            "job": lambda: f.job(), "iban": self.iban, "ssn": self.ssn, "ip_address": self.ip,
            "date_time": lambda: str(f.date_time()), "day_of_week": lambda: f.day_of_week(),
            "date_of_birth": self.dob, "prefix_male": lambda: self.choice(["Mr.", "Dr."]),
            "prefix_female": lambda: self.choice(["Mrs.", "Ms.", "Dr."]), "prefix": lambda: self.choice(["Mr.", "Ms."]),
            "person": lambda: self.person(loc), "name": lambda: self.person(loc), "first_name": f.first_name,
            "last_name": f.last_name, "name_female": f.name_female, "name_male": f.name_male,
            "first_name_male": f.first_name_male, "first_name_female": f.first_name_female,
            "first_name_nonbinary": f.first_name, "last_name_male": f.last_name, "last_name_female": f.last_name,
        }
        kinds = {"credit_card_number": "CARD", "phone_number": "PHONE", "email": "EMAIL", "iban": "IBAN", "ssn": "SSN",
                 "ip_address": "IP_ADDRESS", "date_of_birth": "DATE_OF_BIRTH"}
        for kind, start, end, ms in groups:
            doc.add(t[pos:start])
            if kind == "addr":
                names = [m.group(1) for m in ms]
                piece = ""
                p = start
                for m in ms:
                    piece += t[p:m.start()] + values[m.group(1)]()
                    p = m.end()
                label = "ADDRESS" if len(ms) >= 2 and ("street_name" in names or "building_number" in names) else None
                if len(ms) == 1 and names[0] in ("street_name",):
                    label = None
                doc.add(piece, label)
            else:
                name = ms[0].group(1)
                label = "PERSON" if name in person else kinds.get(name)
                doc.add(values[name](), label)
            pos = end
        doc.add(t[pos:])
        return doc.json("presidio:" + loc)

    def ours(self):
        """Templates of our own, one type each (several languages)."""
        kind = self.choice(["EMAIL", "PHONE", "CARD", "IBAN", "SSN", "NATIONAL_ID", "IP_ADDRESS", "MAC_ADDRESS",
                            "SECRET", "SECRET", "URL_CREDENTIALS", "DATE_OF_BIRTH", "PERSON", "ADDRESS", "MIXED"])
        loc = self.choice(LOCALES)
        if kind == "EMAIL":
            t = self.choice(["Send the report to {v} by Friday.", "contact: {v}", "Schreib mir an {v}.", "Mon adresse e-mail est {v}",
                             "cc {v} on the thread", "From: {v}\nSubject: invoice"])
            return fill(t, {"v": (self.email(), kind)}).json("ours")
        if kind == "PHONE":
            t = self.choice(["Call me at {v} after 5pm.", "My phone number is {v}", "Tel.: {v}", "Ruf mich an unter {v}.",
                             "Vous pouvez me joindre au {v}.", "Mi número de teléfono es {v}", "Il mio cellulare è {v}",
                             "mobile {v}", "You can reach the office on {v}."])
            return fill(t, {"v": (self.phone(loc), kind)}).json("ours:" + loc)
        if kind == "CARD":
            t = self.choice(["Charge it to my card {v}, exp 09/27.", "card number: {v}", "Meine Kreditkarte: {v}", "Pay with {v} please",
                             "The Visa ending in 1234 is old, use {v}"])
            return fill(t, {"v": (self.card(), kind)}).json("ours")
        if kind == "IBAN":
            t = self.choice(["Please wire the money to {v}.", "IBAN: {v}", "Mon IBAN est {v}", "Bitte überweisen Sie auf {v}.", "Cuenta {v}"])
            return fill(t, {"v": (self.iban(), kind)}).json("ours")
        if kind == "SSN":
            t = self.choice(["My social security number is {v}.", "SSN: {v}", "ssn {v} on the W-2", "Here is my SSN {v}, is that safe?"])
            return fill(t, {"v": (self.ssn(), kind)}).json("ours")
        if kind == "NATIONAL_ID":
            v, t = self.national_id()
            return fill(t, {"v": (v, kind)}).json("ours")
        if kind == "IP_ADDRESS":
            t = self.choice(["The server at {v} is down.", "ssh into {v} and restart nginx", "blocked IP {v} after the attack",
                             "Connection refused from {v}:443", "my home IP is {v}"])
            return fill(t, {"v": (self.ip(), kind)}).json("ours")
        if kind == "MAC_ADDRESS":
            t = self.choice(["The laptop's MAC is {v}.", "whitelist {v} on the router", "hw address {v}", "Device {v} keeps reconnecting"])
            return fill(t, {"v": (self.mac(), kind)}).json("ours")
        if kind == "SECRET":
            v, t = self.secret()
            return fill(t, {"v": (v, kind)}).json("ours")
        if kind == "URL_CREDENTIALS":
            creds, head, tail = self.url_creds()
            t = self.choice(["DATABASE_URL={head}{v}{tail}", "connect with {head}{v}{tail} and run the migration", "The broker is {head}{v}{tail}"])
            return fill(t, {"head": (head, None), "v": (creds, kind), "tail": (tail, None)}).json("ours")
        if kind == "DATE_OF_BIRTH":
            t = self.choice(["I was born on {v}.", "Date of birth: {v}", "DOB {v}", "born {v} in Lyon", "Geburtsdatum: {v}",
                             "Né le {v} à Paris", "Fecha de nacimiento: {v}", "My birthday is {v}", "patient (DOB: {v}) reports pain"])
            return fill(t, {"v": (self.dob(), kind)}).json("ours")
        if kind == "PERSON":
            t = self.choice(["Please forward this to {v}.", "My name is {v}.", "Dear {v},\nthank you for your letter.", "{v} will join the call.",
                             "I had lunch with {v} yesterday.", "Best regards,\n{v}", "Ich heiße {v}.", "Je m'appelle {v}.", "Me llamo {v}.",
                             "Meeting notes (attendees: {v}, {w})"])
            return fill(t, {"v": (self.person(loc), kind), "w": (self.person(loc), kind)}).json("ours:" + loc)
        if kind == "ADDRESS":
            t = self.choice(["Ship it to {v}.", "My address is {v}", "I moved to {v} last month.", "Lieferadresse: {v}", "Adresse : {v}",
                             "Send the documents to:\n{v}\nThanks"])
            return fill(t, {"v": (self.address(loc), kind)}).json("ours:" + loc)
        # A message with several types.
        f = self.f(loc)
        t = self.choice([
            "Hi, I'm {p}. My email is {e} and my phone is {ph}. Card {c}.",
            "Customer {p} (born {d}) lives at {a}; reach them on {ph}.",
            "Patient: {p}\nDOB: {d}\nAddress: {a}\nPhone: {ph}\nSSN: {s}",
            "{p} <{e}> wrote: please refund to IBAN {i}.",
        ])
        return fill(t, {"p": (self.person(loc), "PERSON"), "e": (self.email(), "EMAIL"), "ph": (f.phone_number(), "PHONE"),
                        "c": (self.card(), "CARD"), "d": (self.dob(), "DATE_OF_BIRTH"), "a": (self.address(loc), "ADDRESS"),
                        "s": (self.ssn(), "SSN"), "i": (self.iban(), "IBAN")}).json("ours:mixed:" + loc)

    def benign(self):
        r = self.r
        f = self.f("en_US")
        digits = lambda n: "".join(r.choice(string.digits) for _ in range(n))
        hexs = lambda n: "".join(r.choice("0123456789abcdef") for _ in range(n))

        def bad_card():
            while True:
                d = self.card().replace(" ", "").replace("-", "")
                d = d[:-1] + str((int(d[-1]) + r.randint(1, 9)) % 10)
                return " ".join(d[i:i + 4] for i in range(0, len(d), 4)) if r.random() < 0.5 else d

        def bad_iban():
            i = self.iban().replace(" ", "")
            return i[:2] + "%02d" % ((int(i[2:4]) + r.randint(1, 50)) % 100) + i[4:]

        texts = [
            lambda: f"Order #{digits(r.randint(8, 12))} has shipped and should arrive on {f.date_this_year()}.",
            lambda: f"Tracking number 1Z{hexs(6).upper()}{digits(10)} — delivered.",
            lambda: f"Invoice INV-{digits(4)}-{digits(5)} is due in 30 days (total ${r.randint(10, 9999)}.{digits(2)}).",
            lambda: f"We released version {r.randint(0, 12)}.{r.randint(0, 30)}.{r.randint(0, 99)} yesterday; build {digits(5)} is next.",
            lambda: f"Upgrade to release {r.randint(1, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}.{r.randint(0, 99)} to fix the crash.",
            lambda: f"The job started at {f.date_time_this_year().isoformat()} and ended at {f.time()}.",
            lambda: f"Log: {f.date_time_this_decade()} INFO worker-{r.randint(1, 9)} processed {r.randint(1, 99999)} items in {r.random():.3f}s",
            lambda: f"This card number is invalid: {bad_card()} (checksum fails).",
            lambda: f"Test with {bad_card()}; it must be rejected.",
            lambda: f"The IBAN {bad_iban()} was rejected by the bank.",
            lambda: f"SSNs never start with 000, so 000-{digits(2)}-{digits(4)} is invalid, as is 666-{digits(2)}-{digits(4)}.",
            lambda: f"commit {hexs(40)} fixed the build; sha256 {hexs(64)}",
            lambda: f"request id {hexs(8)}-{hexs(4)}-{hexs(4)}-{hexs(4)}-{hexs(12)} failed with status 502",
            lambda: f"def login(user):\n    password = input('Password: ')\n    token = get_token(user)\n    return check(user, password)",
            lambda: "const apiKey = process.env.API_KEY;\nconst password = req.body.password;\nif (password == null) return;",
            lambda: "api_key = os.environ[\"OPENAI_API_KEY\"]\nclient = OpenAI(api_key=api_key)",
            lambda: "fn main() { let v: std::vec::Vec<u8> = Vec::new(); let t = std::time::Instant::now(); }",
            lambda: f"for (int i = 0; i < {r.randint(10, 9999)}; i++) {{ sum += a[i] * {r.random():.4f}; }}",
            lambda: "password: str = Field(..., min_length=8)\ntoken: Optional[str] = None",
            lambda: f"The price went from €{r.randint(100, 9999)},{digits(2)} to €{r.randint(100, 9999)},{digits(2)} in Q{r.randint(1, 4)} {r.randint(2015, 2025)}.",
            lambda: f"Coordinates: {r.uniform(-90, 90):.4f}, {r.uniform(-180, 180):.4f}",
            lambda: f"ISBN 978-{r.randint(0, 9)}-{digits(3)}-{digits(5)}-{r.randint(0, 9)}",
            lambda: f"Population grew to {r.randint(1, 999)},{digits(3)},{digits(3)} by {r.randint(1990, 2024)}.",
            lambda: f"Open http://localhost:{r.randint(1024, 65535)}/docs and click Try it out.",
            lambda: f"Use color #{hexs(6)} for the header and #{hexs(3)} for links.",
            lambda: f"The meeting is on {f.date_this_year().strftime('%B %d, %Y')} at {r.randint(1, 12)}:{r.choice(['00', '15', '30', '45'])} in room {r.randint(100, 999)}.",
            lambda: f"Deadline: {f.date_this_year().strftime('%d/%m/%Y')}. Budget: {r.randint(1, 99)}k.",
            lambda: f"SKU {digits(3)}-{digits(3)}-{digits(4)} is out of stock; ticket #{digits(7)} opened.",
            lambda: f"Run pip install numpy=={r.randint(1, 2)}.{r.randint(0, 26)}.{r.randint(0, 9)} and restart the kernel.",
            lambda: f"The Great Wall of China and New York City are on the list; Microsoft Teams and Visual Studio Code are installed.",
            lambda: f"In May the team visited the Grand Canyon; June was spent on the Quarterly Business Review.",
            lambda: f"Temperature {r.uniform(-20, 40):.1f}°C, humidity {r.randint(10, 99)}%, pressure {r.randint(980, 1040)} hPa.",
            lambda: f"Matrix dims {r.randint(1, 4096)}x{r.randint(1, 4096)}, lr={r.random() / 100:.6f}, batch={r.randint(1, 512)}",
            lambda: f"Call the function with {r.randint(2, 9)} arguments and check the return value.",
            lambda: f"The file is {r.randint(1, 999)}.{digits(2)} MB and has {r.randint(1000, 999999)} lines.",
            lambda: f"Case {digits(4)}/{digits(2)}: the court ruled on {f.date_this_decade()}.",
            lambda: f"Phone numbers must have 10 digits; {r.randint(100, 999)} is only an area code.",
            lambda: f"Temporary NI numbers such as ZZ {digits(2)} {digits(2)} {digits(2)} A are not valid.",
            lambda: f"Email support if the issue persists; the address is on the website.",
            lambda: f"Set max_tokens = {r.randint(16, 4096)} and temperature = 0.{r.randint(0, 9)} in the config.",
            lambda: f"The IPv6 loopback is ::1 and timestamps look like 12:{r.randint(10, 59)}:{r.randint(10, 59)}.",
            lambda: " ".join(f.paragraphs(nb=r.randint(1, 3))),
            lambda: f.text(max_nb_chars=r.randint(100, 600)),
        ]
        plain = [t for t in self.templates if "{" not in t]
        if plain and r.random() < 0.15:
            return {"text": r.choice(plain), "spans": [], "source": "presidio:benign"}
        return {"text": r.choice(texts)(), "spans": [], "source": "benign"}

    def long_doc(self):
        """A longer message: prose with a few labelled values (for latency per KB)."""
        parts = []
        for _ in range(self.r.randint(4, 10)):
            parts.append(self.benign() if self.r.random() < 0.6 else self.ours())
        doc = Doc()
        for p in parts:
            offset = doc.len
            doc.parts.append(p["text"] + "\n\n")
            for s in p["spans"]:
                doc.spans.append({"start": s["start"] + offset, "end": s["end"] + offset, "type": s["type"]})
            doc.len += len(p["text"]) + 2
        return doc.json("long")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--docs", type=int, default=3000)
    args = ap.parse_args()
    g = Gen(args.seed)
    out = []
    for _ in range(args.docs):
        x = g.r.random()
        if x < 0.40:
            d = g.benign()
        elif x < 0.62 and g.templates:
            d = g.from_presidio()
        elif x < 0.95:
            d = g.ours()
        else:
            d = g.long_doc()
        out.append(d)
    for d in out:
        sys.stdout.write(json.dumps(d, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
