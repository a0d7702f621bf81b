#!/usr/bin/env python3
"""Writes two held-out sets for the ninth round of issue #42 (private topics kept local), written
by hand before any detector change of that round and without looking at the lexicon's word lists
or the model's training templates, with vocabulary chosen to differ from the fifth to eighth
rounds' sets:

- crates/gate/tests/corpus/topics_private_r9.jsonl: 96 texts (24 a language: English, Spanish,
  German, French) about a person's health, sex life, religion, politics, union membership,
  ethnicity, biometrics, finances, criminal record, immigration status and legal trouble, first
  and third person, some by a condition's or a procedure's own name (dialysis, mastectomy,
  pacemaker, Proyecto Hombre, Duldung, OQTF, Strafbefehl, Pflegegrad), some as an agent's,
  an applicant file's or a care report's notes ("agent note: …", "ficha del solicitante: …",
  "Pflegebericht: …", "compte rendu pour la mutuelle : …"). A gate that lets one go is a miss.
- crates/gate/tests/corpus/topics_everyday_r9.jsonl: 96 everyday requests (24 a language) with no
  private fact about any person, many with tricky words on purpose (a landlord's boiler, a hedge
  fund, habeas corpus, DNA fingerprinting, a pharmacy assistant's job ad, a diversity workshop,
  Día de Muertos, Leitzins, Betriebsrat in general, Notarzt, CSE, galette des rois, and agent or
  tool notes with nothing private in them). A gate that keeps one local is a false keep.

Nothing is tuned on these files: they are measured once before the round's changes and once at
the end. Run: python3 scripts/gate/heldout_r9.py (no dependencies)."""
from heldout_sets import everyday_docs, private_docs, write

H, F, L, S, R, P, U, E, B, D = ("HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION",
                                "ETHNICITY", "BIOMETRIC", "PRIVATE_DOCUMENT")

PRIVATE = {
    "en": [
        ([H], "agent note: customer asked to freeze the gym membership, she's having chemo until March"),
        ([H], "my dad had a mini-stroke last night and his speech is still slurred"),
        ([H], "I've been purging after dinner again and my teeth are starting to hurt"),
        ([H], "the new hire told me she's on dialysis three mornings a week, can we shift her rota?"),
        ([H], "my girlfriend's pregnancy test was positive and we're thinking about ending it"),
        ([H], "I relapsed on oxy after eleven months clean and my sponsor doesn't know"),
        ([H], "referral letter summary: 58M, COPD, two admissions this winter, on home oxygen"),
        ([F], "I owe the IRS about 40k in back taxes and they just garnished my wages"),
        ([F], "my sister's house is going into foreclosure and she hasn't told her kids"),
        ([F], "applicant note: bankruptcy discharged 2022, three payday loans outstanding, credit score 512"),
        ([F], "Grandpa lost his savings to a romance scammer and is too ashamed to tell the bank"),
        ([L], "my cousin got a DUI on Friday and the arraignment is Tuesday, what should he expect?"),
        ([L], "the guy next door is on the sex offender register and the new tenants have no idea"),
        ([L], "case file: client's asylum claim refused, appeal lodged, reporting to the Home Office monthly"),
        ([L], "our foster son's birth mom has a restraining order against his dad"),
        ([S], "I think I'm gay and I'm terrified to tell my parents"),
        ([S], "my husband can't keep it up anymore and refuses to see anyone about it"),
        ([S], "the intern told me she does OnlyFans on the side and asked me to keep it quiet"),
        ([R], "my parents are Jehovah's Witnesses and won't let my brother have a blood transfusion"),
        ([R], "I stopped wearing my hijab last month and my aunties keep calling"),
        ([P], "my landlord found out I'm a member of the Communist Party and hinted he won't renew"),
        ([U], "I'm the shop steward at the depot and HR keeps putting me on the worst shifts"),
        ([E], "my son is mixed race and the other parents keep asking where his 'real' dad is from"),
        ([B], "the payroll app wants a face scan and my fingerprint before it shows my payslip"),
    ],
    "es": [
        ([H], "nota del agente: la clienta pide aplazar la cuota porque está con la quimio"),
        ([H], "a mi abuelo le ha dado un ictus y no puede mover el brazo derecho"),
        ([H], "mi compañera de piso vomita después de cada comida y está en los huesos"),
        ([H], "me han subido la sertralina a 100 y me paso el día dormida"),
        ([H], "mi hermano lleva tres meses en Proyecto Hombre por la coca"),
        ([H], "me he notado un bulto en un testículo y me da vergüenza ir al urólogo"),
        ([H], "informe para la mutua: trabajador con hernia discal L5, de baja desde marzo, pendiente de resonancia"),
        ([F], "Hacienda me ha embargado la cuenta por una deuda de cuando era autónomo"),
        ([F], "mi tía firmó una hipoteca inversa sin entender nada y ahora le reclaman intereses"),
        ([F], "ficha del solicitante: ingresos 900 €/mes, dos microcréditos impagados, avala su madre"),
        ([F], "el casero nos echa el día 15 y no tenemos adónde ir con los niños"),
        ([L], "a mi novio lo pararon en un control y dio positivo en drogas, ¿le quitan el carné?"),
        ([L], "mi cuñada está sin papeles y su jefe le paga en negro, ¿puede denunciarle?"),
        ([L], "tengo antecedentes por un hurto de hace años y me piden el certificado para trabajar"),
        ([L], "el ex de mi hermana tiene una orden de alejamiento pero sigue apareciendo en el portal"),
        ([S], "mi hijo de 15 años me ha dicho que le gustan los chicos y las chicas y no sé cómo reaccionar"),
        ([S], "lo hice sin condón con uno que no conozco y quiero la pastilla del día después"),
        ([S], "mi marido ve porno a todas horas y ya no me toca"),
        ([R], "dejé los Testigos de Jehová y ahora mis padres no me hablan"),
        ([R], "el chico de prácticas ayuna en Ramadán y pregunta si puede salir antes"),
        ([P], "estoy afiliada a Podemos y en la entrevista me preguntaron a quién voto"),
        ([U], "me han despedido justo después de presentarme como delegada de CCOO"),
        ([E], "en la inmobiliaria me dijeron que el piso ya no estaba en cuanto oyeron mi acento marroquí"),
        ([B], "el gimnasio quiere mi huella dactilar para entrar y no me dan otra opción"),
    ],
    "de": [
        ([H], "Gesprächsnotiz: Kundin kündigt das Abo, weil sie nach der Mastektomie gerade nicht trainieren kann"),
        ([H], "mein Vater hatte einen Schlaganfall und erkennt meine Mutter manchmal nicht"),
        ([H], "ich nehme seit einem Jahr Ritalin ohne Rezept, um durchs Studium zu kommen"),
        ([H], "meine Tochter ritzt sich an den Oberschenkeln, was soll ich tun?"),
        ([H], "der Hausarzt vermutet Multiple Sklerose, nächste Woche ist das MRT"),
        ([H], "die Kollegin hatte eine Fehlgeburt und kommt Montag wieder, wie spreche ich sie an?"),
        ([H], "Pflegebericht: Bewohnerin Zimmer 12 nässt nachts ein, verweigert Insulin, Pflegegrad 3 beantragt"),
        ([F], "ich habe 23.000 Euro Schulden bei drei Banken und meine Schufa ist komplett rot"),
        ([F], "mein Bruder hat Privatinsolvenz angemeldet und will sich Geld von Oma leihen"),
        ([F], "Antragsnotiz: Antragsteller bezieht Bürgergeld, Mietrückstand zwei Monate, Lohnpfändung läuft"),
        ([F], "der Gerichtsvollzieher war heute bei meinen Eltern und hat das Auto mitgenommen"),
        ([L], "mein Mann hat einen Strafbefehl wegen Körperverletzung bekommen, sollen wir Einspruch einlegen?"),
        ([L], "meine Schwägerin hat nur eine Duldung und soll nächsten Monat abgeschoben werden"),
        ([L], "gegen mich läuft ein Ermittlungsverfahren wegen Steuerhinterziehung"),
        ([L], "der Onkel meiner Frau sitzt in der JVA Tegel und wir wollen ihn besuchen"),
        ([S], "ich bin lesbisch und meine Oma fragt bei jedem Familienfest nach meinem Freund"),
        ([S], "ich habe mir beim Sex Chlamydien eingefangen und muss es meinem Ex sagen"),
        ([S], "mein Mitbewohner arbeitet als Escort und bringt manchmal Kunden mit"),
        ([R], "mein Freund ist Jude und trägt seine Kippa in der U-Bahn nicht mehr"),
        ([R], "meine Schwester ist zum Buddhismus übergetreten und lebt jetzt in einem Kloster"),
        ([P], "ich bin AfD-Mitglied und habe Angst, dass es auf der Arbeit rauskommt"),
        ([U], "ich bin bei Verdi und der Chef hat meinen Vertrag nach dem Streik nicht verlängert"),
        ([E], "bei der Wohnungsbesichtigung hieß es, man vermiete nicht an Roma"),
        ([B], "die Bank will per Video-Ident mein Gesicht und meine Stimme aufnehmen, was passiert damit?"),
    ],
    "fr": [
        ([H], "note de l'agent : la cliente demande un report, elle est en chimio jusqu'en avril"),
        ([H], "mon grand-père a fait un AVC et il a du mal à parler depuis"),
        ([H], "je me fais vomir après les repas depuis le lycée et personne ne le sait"),
        ([H], "mon frère est sous méthadone et part en vacances, comment fait-il pour son traitement ?"),
        ([H], "ma collègue a fait une fausse couche et revient lundi, que lui dire ?"),
        ([H], "le cardiologue veut me poser un pacemaker et j'ai peur de l'opération"),
        ([H], "compte rendu pour la mutuelle : assuré en arrêt pour dépression depuis 8 mois, suivi psychiatrique"),
        ([F], "je suis interdit bancaire depuis un chèque sans provision et aucune banque ne m'ouvre de compte"),
        ([F], "mes parents ont déposé un dossier de surendettement à la Banque de France"),
        ([F], "fiche client : revenus instables, trois crédits renouvelables, loyers impayés depuis janvier"),
        ([F], "un huissier est passé chez mon oncle pour saisir ses meubles"),
        ([L], "mon fils a été placé en garde à vue pour détention de cannabis"),
        ([L], "ma voisine est sous OQTF et se cache chez sa sœur"),
        ([L], "j'ai un casier pour conduite en état d'ivresse et je postule comme chauffeur"),
        ([L], "mon ex ne respecte pas l'ordonnance de protection et rôde autour de l'école"),
        ([S], "je suis bi et ma copine ne le sait pas encore"),
        ([S], "j'ai eu un rapport non protégé et je voudrais me faire dépister sans que mes parents le sachent"),
        ([S], "mon mari est accro aux sites de cam et y dépense des fortunes"),
        ([R], "ma fille veut porter le voile au lycée et son père menace de la mettre dehors"),
        ([R], "mon beau-père est devenu très pratiquant depuis son pèlerinage à La Mecque et veut que ma mère arrête de travailler"),
        ([P], "je milite à La France insoumise et mon patron a vu mon tract sur Facebook"),
        ([U], "je suis délégué CGT et la direction m'a changé de poste sans prévenir"),
        ([E], "aux contrôles de police, ils ne fouillent que mon cousin parce qu'il est noir"),
        ([B], "la cantine veut scanner la main des enfants pour les repas, on peut refuser ?"),
    ],
}

EVERYDAY = {
    "en": """Write a haiku about the first frost on a pumpkin patch.
How do I paste a Word table into Google Sheets without losing the formatting?
Explain what a hedge fund does, in plain English, for a podcast intro.
Give me a 20-minute kettlebell workout I can do in a hotel room.
Draft an email to my landlord asking when the boiler service is scheduled.
What happens in the first season of Breaking Bad? No spoilers past episode 7.
Write a catchy headline for our church bake sale flyer.
Write a SQL query that finds duplicate emails in a users table.
What's the story behind the Labour Party's red rose logo?
Recommend true crime podcasts that aren't too gory.
What's the difference between an ETF and a mutual fund?
Write a birthday card message for my grandmother who just turned ninety.
How long should I rest a brisket after smoking it?
Agent note: customer wants paperless billing and a new delivery address, nothing else.
Explain how DNA fingerprinting works for a GCSE biology revision sheet.
Plan a three-day itinerary in Lisbon with a day trip to Sintra.
My tomato leaves have yellow spots, what plant disease could that be?
Write a job ad for a part-time pharmacy assistant.
What does "habeas corpus" mean, simply?
Give me icebreaker questions for a diversity and inclusion workshop.
Summarize the main arguments for and against a four-day work week.
Tool output: build #4412 failed on test_login_timeout, 2 flaky tests skipped.
What are good stretches after a long-haul flight?
Write a short toast for my friend's Diwali party.""",
    "es": """¿Cómo hago una tortilla de patatas jugosa?
Escribe un correo al casero preguntando cuándo vienen a revisar la caldera.
Explica qué es la inflación con un ejemplo de la compra del súper.
¿Qué series policiacas españolas me recomiendas?
Ideas para la mesa dulce de la primera comunión de mi sobrino.
¿Cómo configuro una VPN en el router de casa?
Resume la Guerra Civil española en diez líneas para un trabajo de clase.
¿Qué ejercicios de espalda puedo hacer en la oficina?
Nota del agente: el cliente quiere cambiar la entrega del sofá al sábado por la mañana.
Escribe un poema corto sobre el otoño en Galicia.
¿Qué diferencia hay entre una hipoteca a tipo fijo y una variable, en general?
¿Cuánto tiempo hay que hervir un huevo para que quede mollet?
Traduce al francés: "el médico de guardia recomienda beber mucha agua en verano".
Hazme una lista de reproducción para un viaje en coche por la costa.
¿Cómo se cuida un bonsái de olivo?
Escribe una consulta SQL que cuente los pedidos por mes.
¿Por qué se celebra el Día de Muertos en México?
Ideas para un taller de teatro con niños de primaria.
¿Qué diferencia hay entre un sindicato y un comité de empresa, en general?
Redacta una oferta de empleo para un auxiliar de farmacia.
¿Qué es el IBEX 35 y cómo se calcula?
Dame un menú semanal barato para una familia de cuatro.
Resultado de la herramienta: 2 incidencias abiertas: wifi lento en la sala 3, monitor roto.
¿Cómo se limpian las juntas de los azulejos del baño?""",
    "de": """Wie mache ich einen fluffigen Hefezopf?
Schreib eine E-Mail an die Hausverwaltung wegen der kaputten Klingel.
Erklär mir den Unterschied zwischen ETF und Aktienfonds ganz allgemein.
Welche Krimiserien aus Skandinavien kannst du empfehlen?
Wie richte ich an der Fritzbox einen Gastzugang ein?
Fasse die Weimarer Republik in zehn Sätzen für ein Referat zusammen.
Gib mir Übungen für den Rücken, die man im Büro machen kann.
Gesprächsnotiz: Kunde möchte den Liefertermin des Sofas auf Samstag verschieben.
Schreib ein kurzes Gedicht über den Herbst an der Ostsee.
Was ist der Leitzins und warum ändert ihn die EZB?
Wie lange muss ein Ei kochen, damit es wachsweich ist?
Übersetze ins Französische: "Der Notarzt kam nach zehn Minuten."
Stell mir eine Playlist für eine Autofahrt nach Italien zusammen.
Wie pflege ich eine Orchidee, die nicht mehr blüht?
Schreib eine SQL-Abfrage, die Bestellungen pro Monat zählt.
Warum feiern wir Sankt Martin mit Laternen?
Ideen für ein Sommerfest im Kindergarten?
Was macht ein Betriebsrat allgemein? Kurz erklärt für die Berufsschule.
Formuliere eine Stellenanzeige für eine pharmazeutisch-technische Assistentin.
Was ist der DAX und wie wird er berechnet?
Wochenplan für günstiges Familienessen, vier Personen.
Tool-Ausgabe: Build 2231 fehlgeschlagen, Test test_checkout_timeout rot, 1 Warnung.
Wie reinige ich die Fugen im Badezimmer?
Welche Dokus über den Mauerfall eignen sich für Jugendliche?""",
    "fr": """Comment réussir une tarte tatin ?
Écris un mail au syndic pour signaler une fuite dans le hall.
Explique l'inflation avec un exemple de courses au supermarché.
Quelles séries policières françaises me conseilles-tu ?
Comment configurer le contrôle parental sur une Freebox ?
Résume la Révolution française en dix phrases pour un exposé.
Quels exercices pour le dos peut-on faire au bureau ?
Note de l'agent : le client veut décaler la livraison du frigo à samedi.
Écris un petit poème sur l'automne en Bretagne.
C'est quoi le taux directeur de la BCE ?
Combien de temps faut-il cuire un œuf mollet ?
Traduis en espagnol : « le pharmacien de garde ferme à 20 h ».
Fais une playlist pour un road trip dans le Sud.
Comment entretenir un ficus qui perd ses feuilles ?
Écris une requête SQL qui compte les commandes par mois.
Pourquoi mange-t-on la galette des rois en janvier ?
Idées d'activités pour la kermesse de l'école.
À quoi sert un comité social et économique, en gros ?
Rédige une offre d'emploi pour un préparateur en pharmacie.
Qu'est-ce que le CAC 40 ?
Menu de la semaine pas cher pour quatre personnes.
Résultat de l'outil : 3 tickets ouverts : imprimante, badge perdu, accès VPN pour le stagiaire.
Comment nettoyer les joints de carrelage de la salle de bain ?
Quel film voir pour comprendre la guerre d'Algérie, avec des lycéens ?""",
}


def main():
    write("topics_private_r9.jsonl", private_docs(PRIVATE, 24))
    write("topics_everyday_r9.jsonl", everyday_docs(EVERYDAY, 24))


if __name__ == "__main__":
    main()
