"""Training documents for the learned topic model (train_topic_model.py --lexicon N) made of the
lexicon's own vocabulary: each category's words (data/topics.txt, topics_families.txt,
topics_icd10.txt; weight 0.5 or more, stems as written, phrases as words) in short frames of the
four languages (first and third person, agents' notes, clinical shorthand), so that the model
learns the words' 4-byte pieces over the whole lexicon rather than over the templates' few
hundred words, and carries to inflections and compounds the lexicon does not list. The same
frames around an everyday object ([EVERYDAY]) are the negatives, and general-knowledge frames
around category words (train_templates.GEN_FRAMES) the hard negatives, so that the frame alone
says nothing. A word's language is not known: any frame takes any word."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = ["topics.txt", "topics_families.txt", "topics_icd10.txt"]
CATS = ["HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION", "ETHNICITY", "BIOMETRIC"]

# {rel}: a relative (train_templates.REL), {w}: the word; {age}: a number.
FRAMES = {
    "en": ["{rel} has {w}", "{rel} was told it's {w}", "so the {w} came up again for {rel}",
           "note: customer mentioned {w}, asked to pause the account", "{rel} and the {w}, what do we do now",
           "just found out about the {w}, I'm a mess", "{rel} is dealing with {w} and won't talk about it",
           "caller says {w}, wants a callback", "ever since the {w} I can't focus at work"],
    "es": ["{rel} tiene {w}", "nota del cliente: menciona {w}, pide aplazar el pago", "lo de {w} de {rel} va a peor",
           "me acabo de enterar de lo de {w}, estoy fatal", "{rel} está con {w} y no quiere hablar de ello",
           "desde lo de {w} no me concentro en el trabajo", "el titular comenta {w}, pide que le llamen"],
    "de": ["{rel} hat {w}", "Kundennotiz: erwähnt {w}, bittet um Aufschub", "das mit {w} bei {rel} wird schlimmer",
           "hab gerade von {w} erfahren, bin fertig", "{rel} kämpft mit {w} und will nicht darüber reden",
           "seit {w} kann ich mich auf der Arbeit nicht konzentrieren", "Anrufer nennt {w}, bittet um Rückruf"],
    "fr": ["{rel} a {w}", "note client : mentionne {w}, demande un report", "cette histoire de {w} de {rel} empire",
           "je viens d'apprendre pour {w}, je suis à bout", "{rel} vit avec {w} et refuse d'en parler",
           "depuis {w} je n'arrive plus à me concentrer au travail", "l'appelant évoque {w}, veut être rappelé"],
}
# Clinical shorthand: a patient by age and sex, then the word (positives only: the header is the cue).
CLINICAL = {
    "en": ["Pt {age}{sex}, {w}, review in 2 weeks", "{age}{sex}, known {w}, admitted overnight", "pt {age}yo, {w}, lives alone"],
    "es": ["Pac. {age}a, {w}, control en dos semanas", "paciente de {age} años, {w}, ingresa de urgencia"],
    "de": ["Pat. {age} J., {w}, Kontrolle in 2 Wochen", "Patientin, {age} Jahre, bekannte {w}, stationär aufgenommen"],
    "fr": ["Pte {age} ans, {w}, contrôle dans 15 jours", "patient de {age} ans, {w} connue, hospitalisé cette nuit"],
}


def lexicon():
    """(category words, everyday words) of the lexicon files."""
    cats = {c: [] for c in CATS}
    every = []
    for name in FILES:
        section = None
        for line in (ROOT / "crates/gate/data" / name).read_text(encoding="utf-8").splitlines():
            line = line.split("#")[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"\[([A-Z_ ]+?)(?: ([0-9.]+))?\]", line)
            if m:
                role, w = m.group(1), float(m.group(2) or 1)
                role = role.removeprefix("DOC ").strip()
                section = role if (role in CATS and w >= 0.5) else "EVERYDAY" if role == "EVERYDAY" else None
                continue
            if section is None:
                continue
            for tok in line.split():
                if tok.startswith("*"):
                    continue
                tok = tok.rstrip("*").replace("_", " ")
                if len(tok) < 4:
                    continue
                (every if section == "EVERYDAY" else cats[section]).append(tok)
    return {c: sorted(set(ws)) for c, ws in cats.items() if ws}, sorted(set(every))


def docs(g, n, langs, rel, gen_frames):
    """`n` documents on the generator `g`'s random stream: half sensitive, a quarter everyday, a
    quarter general knowledge."""
    cats, every = lexicon()
    names = sorted(cats)
    r = g.r
    out = []
    for _ in range(n):
        lang = r.choice(langs)
        x = r.random()
        if x < 0.5:
            cat = r.choice(names)
            w = g.choice(cats[cat])
            frames = FRAMES[lang] + (CLINICAL[lang] if cat == "HEALTH" else [])
            text = g.choice(frames)
            kind, labels = "sensitive", [cat]
        elif x < 0.75:
            w, text, kind, labels = g.choice(every), g.choice(FRAMES[lang]), "everyday", []
        else:
            cat = r.choice(names)
            w, text, kind, labels = g.choice(cats[cat]), g.choice(gen_frames[lang]).replace("{x}", "{w}"), "general", []
        text = (text.replace("{rel}", r.choice(rel[lang])).replace("{w}", w).replace("{age}", str(r.randint(19, 94)))
                .replace("{sex}", r.choice(["M", "F"])))
        out.append({"text": g.casing(text), "categories": labels, "kind": kind, "lang": lang})
    return out
