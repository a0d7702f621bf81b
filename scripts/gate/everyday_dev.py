"""A dev set for issue #27's second round (looked at while tuning, never a test): everyday
first-person requests (home, family, hobbies, work, things), written by hand after the learned
model's everyday false flags showed on other data; with a few general-knowledge and sensitive
requests in each language (whose misses were looked at and led to words of data/topics.txt). On
its 80 everyday requests the learned model alone flags 18, the shipped detector 11.
Run: python3 scripts/gate/everyday_dev.py (writes crates/gate/tests/corpus/topics_everyday_dev.jsonl)"""
import json
import pathlib
E = {
"en": ["my daughter wants a unicorn cake for her party, how do I make one", "I'm learning to knit and my scarf keeps curling at the edges",
 "my sister and I are planning a road trip through Portugal", "my spreadsheet has duplicates, how do I remove them",
 "I want to surprise my husband with breakfast in bed", "my neighbour's cat keeps sleeping in my car", "I need a catchy name for my bakery",
 "my son is scared of the dark, any bedtime story ideas", "I bought too many lemons, what can I make", "my jeans shrank in the wash",
 "help me reply to my landlord about the parking space", "my podcast has 12 listeners, how do I grow it", "I can't get my toddler to nap",
 "my grandpa wants to learn to use WhatsApp", "I keep killing my succulents", "my presentation is tomorrow and I'm bored of my slides",
 "I want to write a poem for my best friend's wedding", "my team lost again, cheer me up with a joke", "my bathroom mirror fogs up, any tips",
 "what board game should my family play on Sunday"],
"es": ["mi hija quiere una tarta de unicornio, ¿cómo la hago?", "estoy aprendiendo a tejer y la bufanda se me enrolla",
 "mi hermana y yo planeamos un viaje por Portugal", "mi hoja de cálculo tiene duplicados, ¿cómo los quito?",
 "quiero sorprender a mi marido con el desayuno en la cama", "el gato del vecino duerme en mi coche", "necesito un nombre pegadizo para mi panadería",
 "mi hijo tiene miedo a la oscuridad, ¿ideas de cuentos?", "compré demasiados limones, ¿qué hago con ellos?", "mis vaqueros encogieron en la lavadora",
 "ayúdame a contestar a mi casero sobre la plaza de garaje", "mi podcast tiene 12 oyentes, ¿cómo crezco?", "no consigo que mi bebé duerma la siesta",
 "mi abuelo quiere aprender a usar WhatsApp", "se me mueren todas las suculentas", "mi presentación es mañana y mis diapositivas son aburridas",
 "quiero escribir un poema para la boda de mi mejor amiga", "mi equipo ha vuelto a perder, cuéntame un chiste", "el espejo del baño se empaña",
 "¿a qué juego de mesa jugamos en familia el domingo?"],
"de": ["meine Tochter will eine Einhorntorte zum Geburtstag, wie backe ich die?", "ich lerne stricken und mein Schal rollt sich an den Rändern ein",
 "meine Schwester und ich planen einen Roadtrip durch Portugal", "meine Tabelle hat doppelte Einträge, wie entferne ich sie?",
 "ich will meinen Mann mit Frühstück im Bett überraschen", "die Katze vom Nachbarn schläft in meinem Auto", "ich brauche einen griffigen Namen für meine Bäckerei",
 "mein Sohn hat Angst im Dunkeln, hast du Ideen für Gutenachtgeschichten?", "ich hab zu viele Zitronen gekauft, was mache ich damit?", "meine Jeans ist beim Waschen eingelaufen",
 "hilf mir, meinem Vermieter wegen des Parkplatzes zu antworten", "mein Podcast hat 12 Hörer, wie wachse ich?", "mein Kleinkind will keinen Mittagsschlaf machen",
 "mein Opa will WhatsApp lernen", "meine Sukkulenten gehen immer ein", "meine Präsentation ist morgen und meine Folien langweilen mich",
 "ich will ein Gedicht für die Hochzeit meiner besten Freundin schreiben", "mein Verein hat wieder verloren, erzähl mir einen Witz", "mein Badezimmerspiegel beschlägt ständig",
 "welches Brettspiel spielen wir am Sonntag mit der Familie?"],
"fr": ["ma fille veut un gâteau licorne pour son anniversaire, comment le faire ?", "j'apprends à tricoter et mon écharpe s'enroule sur les bords",
 "ma sœur et moi préparons un road trip au Portugal", "mon tableur a des doublons, comment les supprimer ?",
 "je veux faire une surprise à mon mari avec un petit-déjeuner au lit", "le chat du voisin dort dans ma voiture", "il me faut un nom accrocheur pour ma boulangerie",
 "mon fils a peur du noir, des idées d'histoires ?", "j'ai acheté trop de citrons, j'en fais quoi ?", "mon jean a rétréci au lavage",
 "aide-moi à répondre à mon propriétaire pour la place de parking", "mon podcast a 12 auditeurs, comment grandir ?", "mon bébé ne veut pas faire la sieste",
 "mon grand-père veut apprendre WhatsApp", "je tue toutes mes plantes grasses", "ma présentation est demain et mes diapos m'ennuient",
 "je veux écrire un poème pour le mariage de ma meilleure amie", "mon équipe a encore perdu, raconte-moi une blague", "le miroir de ma salle de bain s'embue",
 "à quel jeu de société jouer en famille dimanche ?"],
}

GENERAL = {
    "en": ["I'm curious why people with asthma use two inhalers", "my class is reading about the civil rights movement, summarise it",
           "I have an exam on labour law, what is collective bargaining?", "I'm a social worker; how do payday loans trap people?",
           "my friend asked me how vaccines are tested, what do I tell her"],
    "es": ["tengo curiosidad: ¿por qué los asmáticos usan dos inhaladores?", "en clase leemos sobre la Transición, resúmemela",
           "tengo un examen de derecho laboral, ¿qué es un convenio colectivo?", "soy trabajadora social, ¿cómo atrapan los microcréditos?",
           "una amiga me preguntó cómo se prueban las vacunas, ¿qué le digo?"],
    "de": ["mich interessiert, warum Asthmatiker zwei Sprays nehmen", "wir lesen in der Schule über die Wende, fass sie zusammen",
           "ich habe eine Prüfung in Arbeitsrecht, was ist ein Tarifvertrag?", "ich bin Sozialarbeiterin, wie geraten Leute in die Schuldenfalle?",
           "eine Freundin hat mich gefragt, wie Impfstoffe getestet werden"],
    "fr": ["je me demande pourquoi les asthmatiques ont deux inhalateurs", "en classe on étudie Mai 68, tu peux résumer ?",
           "j'ai un examen de droit du travail, c'est quoi une convention collective ?", "je suis assistante sociale, comment les crédits renouvelables piègent les gens ?",
           "une amie m'a demandé comment on teste les vaccins, je lui dis quoi ?"],
}
SENSITIVE = {
    "en": [(["HEALTH"], "my ankle has been swollen for a week and it's warm to touch"), (["FINANCE"], "the bailiffs are coming for my furniture on Monday"),
           (["LEGAL"], "my ex keeps texting me threats, can I get a restraining order?"), (["HEALTH"], "since the accident I flinch at every car horn and can't drive"),
           (["SEX_LIFE"], "my girlfriend wants to try things in bed I'm not comfortable with")],
    "es": [(["HEALTH"], "tengo el tobillo hinchado desde hace una semana y está caliente"), (["FINANCE"], "el lunes vienen a embargarme los muebles"),
           (["LEGAL"], "mi ex me manda amenazas, ¿puedo pedir una orden de alejamiento?"), (["HEALTH"], "desde el accidente me sobresalto con cada claxon y no puedo conducir"),
           (["SEX_LIFE"], "mi novia quiere probar cosas en la cama con las que no estoy cómodo")],
    "de": [(["HEALTH"], "mein Knöchel ist seit einer Woche dick und fühlt sich warm an"), (["FINANCE"], "am Montag wird bei mir gepfändet"),
           (["LEGAL"], "mein Ex schickt mir Drohungen, kann ich ein Kontaktverbot beantragen?"), (["HEALTH"], "seit dem Unfall zucke ich bei jeder Hupe zusammen und kann nicht fahren"),
           (["SEX_LIFE"], "meine Freundin will im Bett Dinge ausprobieren, mit denen ich mich unwohl fühle")],
    "fr": [(["HEALTH"], "ma cheville est gonflée depuis une semaine et elle est chaude"), (["FINANCE"], "l'huissier vient saisir mes meubles lundi"),
           (["LEGAL"], "mon ex m'envoie des menaces, je peux demander une ordonnance de protection ?"), (["HEALTH"], "depuis l'accident je sursaute à chaque klaxon et je ne peux plus conduire"),
           (["SEX_LIFE"], "ma copine veut essayer des choses au lit qui me mettent mal à l'aise")],
}


def main():
    out = pathlib.Path(__file__).resolve().parents[2] / "crates/gate/tests/corpus/topics_everyday_dev.jsonl"
    docs = []
    for lang in ("en", "es", "de", "fr"):
        docs += [{"text": t, "spans": [], "categories": [], "kind": "everyday", "lang": lang} for t in E[lang]]
        docs += [{"text": t, "spans": [], "categories": [], "kind": "general", "lang": lang} for t in GENERAL[lang]]
        docs += [{"text": t, "spans": [], "categories": c, "kind": "sensitive", "lang": lang} for c, t in SENSITIVE[lang]]
    with open(out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(out.name, len(docs))


if __name__ == "__main__":
    main()
