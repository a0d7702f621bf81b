#!/usr/bin/env python3
"""Writes crates/gate/tests/corpus/leaks_heldout.jsonl: the held-out set of issue #42, written
before any detector changed. 64 multi-turn and agent-style chat requests (16 each in English,
Spanish, German and French) whose private values or private-topic facts sit where the gate did not
look: system and tool turns in the third person, a topic split over turns, request fields
(metadata, user, names, tool definitions, stop), numbers split over turns, credentials passed
positionally in code. Each line: {"id", "lang", "kind", "request": <chat request>, "private":
[strings that must never reach the cloud]}. crates/server/tests/gate_leaks.rs sends each through
`solo serve --cloud-url` to a capture server and asserts none of the strings arrived.

Run: python3 scripts/gate/leaks_heldout.py (no dependencies)."""
import json
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "gate", "tests", "corpus", "leaks_heldout.jsonl")

def u(t): return {"role": "user", "content": t}
def a(t): return {"role": "assistant", "content": t}
def s(t): return {"role": "system", "content": t}
def tool(t, i="call_1"): return {"role": "tool", "tool_call_id": i, "content": t}
def call(name, args, i="call_1"):
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]}
def fn(name, desc, props):
    return {"type": "function", "function": {"name": name, "description": desc,
            "parameters": {"type": "object", "properties": props}}}

CASES = []
def add(lang, kind, request, private):
    request.setdefault("model", "solo")
    CASES.append({"id": f"{lang}-{len([c for c in CASES if c['lang'] == lang]) + 1:02}", "lang": lang, "kind": kind,
                  "request": request, "private": private})

# ---------------------------------------------------------------- English
L = "en"
add(L, "system_third_person", {"messages": [
    s("You are a friendly assistant. Context about the user: she was diagnosed with multiple sclerosis last year and takes interferon injections weekly."),
    u("Can you suggest a good thriller to watch tonight?")]}, ["multiple sclerosis", "interferon"])
add(L, "system_third_person", {"messages": [
    s("Memory: the user is going through a divorce and filed for Chapter 13 bankruptcy in March."),
    u("What's a quick pasta recipe for two?")]}, ["Chapter 13", "divorce"])
add(L, "tool_third_person", {"messages": [
    u("Pull up the account and then draft a friendly reminder email."),
    call("crm_lookup", {"account": "A-2291"}),
    tool(json.dumps({"account": "A-2291", "notes": "customer disclosed he is HIV positive and on antiretroviral therapy; asked for discretion"})),
    u("Now write the reminder about the renewal date.")],
    "tools": [fn("crm_lookup", "Look up a CRM account", {"account": {"type": "string"}})]}, ["HIV positive", "antiretroviral"])
add(L, "tool_third_person", {"messages": [
    u("Check the case file and tell me what to prepare for the meeting."),
    call("case_file", {"id": "77"}),
    tool(json.dumps({"status": "applicant detained by immigration; removal hearing set for May 12; asylum claim pending"})),
    u("Give me a checklist for the meeting.")]}, ["detained", "removal hearing", "asylum"])
add(L, "split_topic", {"messages": [
    u("got a call from the oncologist this morning"), a("How are you feeling after that call?"),
    u("the scan showed the tumour has spread to my liver"), a("I'm so sorry."),
    u("anyway, recommend me a funny podcast")]}, ["tumour", "spread to my liver"])
add(L, "split_topic", {"messages": [
    u("the bank called again today"), a("What did they say?"),
    u("they're repossessing the car next week because I missed four payments"), a("That sounds stressful."),
    u("what's a good board game for a rainy evening?")]}, ["repossessing", "missed four payments"])
add(L, "fields", {"messages": [u("Summarise the benefits of a standing desk.")],
    "metadata": {"diagnosis": "bipolar disorder type II", "patient_id": "MRN-4471903"},
    "user": "marcus.whitfield@greenmail.com"}, ["bipolar", "MRN-4471903", "marcus.whitfield@greenmail.com"])
add(L, "fields", {"messages": [
    {"role": "user", "name": "Jennifer_Morales", "content": "What should I pack for a weekend in Lisbon?"}],
    "stop": ["call me at +1 415 555 0187"]}, ["Jennifer_Morales", "415 555 0187"])
add(L, "tool_definition", {"messages": [u("Book a follow-up for next Tuesday.")],
    "tools": [fn("book_visit", "Books a visit for patient Daniel Okafor (daniel.okafor@protonmail.com, +44 7700 900481), who has epilepsy and needs a ground-floor room.",
                 {"slot": {"type": "string", "description": "ISO date"}})]},
    ["daniel.okafor@protonmail.com", "7700 900481", "epilepsy"])
add(L, "split_value", {"messages": [
    u("my card number starts 4539 1488"), a("Go on."), u("and ends 0343 6467, expiry 09/28. Can you check if it's a Visa?")]},
    ["4539 1488", "0343 6467"])
add(L, "split_value", {"messages": [
    u("my mum's mobile is 07700"), a("And the rest?"), u("900 123 — can you format it for a contact card?")]},
    ["07700", "900 123"])
add(L, "positional_secret", {"messages": [u("Why does this fail with a timeout?\n\n```python\nserver = Imap('mail.northwind.local')\nserver.login('ops@northwind.local', 'Winter2024!Northwind')\nserver.select('INBOX')\n```")]},
    ["Winter2024!Northwind"])
add(L, "positional_secret", {"messages": [u("Fix the connection string please:\n\n```python\nconn = psycopg2.connect(host='db1', user='billing', password='Tq7#pLm2xR9v')\n```")]},
    ["Tq7#pLm2xR9v"])
add(L, "tool_arguments", {"messages": [
    u("Send the invoice."),
    call("send_invoice", {"to": "laura.benning@outlook.com", "iban": "GB33BUKB20201555555555", "amount": 120}),
    tool("sent"), u("Thanks, now write a short thank-you note.")]}, ["laura.benning@outlook.com", "GB33BUKB20201555555555"])
add(L, "retrieval", {"messages": [
    s("Answer using these retrieved notes.\n[doc 1] Employee file: Priya Raman was placed on leave after a psychiatric hospitalisation for severe depression."),
    u("What's our office's policy on remote Fridays?")]}, ["psychiatric hospitalisation", "severe depression"])
add(L, "developer_third_person", {"messages": [
    {"role": "developer", "content": "The caller is a member of the Teamsters union and is on strike; he was arrested at the picket line yesterday."},
    u("Recommend a documentary about space.")]}, ["Teamsters", "arrested at the picket line"])

# ---------------------------------------------------------------- Spanish
L = "es"
add(L, "system_third_person", {"messages": [
    s("Eres un asistente amable. Contexto sobre el usuario: tiene cáncer de mama en estadio 3 y está en quimioterapia."),
    u("¿Me recomiendas una película de comedia para esta noche?")]}, ["cáncer de mama", "quimioterapia"])
add(L, "system_third_person", {"messages": [
    s("Memoria: el usuario está en situación irregular y tiene una audiencia de deportación el 3 de junio."),
    u("¿Qué receta fácil puedo hacer con garbanzos?")]}, ["situación irregular", "deportación"])
add(L, "tool_third_person", {"messages": [
    u("Busca al cliente y prepara un correo de seguimiento."),
    call("buscar_cliente", {"id": "C-118"}),
    tool(json.dumps({"notas": "el cliente se ha declarado en concurso de acreedores y tiene embargada la nómina"}, ensure_ascii=False)),
    u("Escribe el correo, que sea cordial.")]}, ["concurso de acreedores", "embargada"])
add(L, "tool_third_person", {"messages": [
    u("Consulta el expediente y dime qué falta."),
    call("expediente", {"id": "88"}),
    tool(json.dumps({"estado": "solicitud de asilo denegada; el solicitante está detenido en un CIE"}, ensure_ascii=False)),
    u("Haz una lista de documentos para la reunión.")]}, ["asilo denegada", "detenido"])
add(L, "split_topic", {"messages": [
    u("hoy me llamaron de la clínica"), a("¿Qué te dijeron?"),
    u("la biopsia salió maligna"), a("Lo siento mucho."),
    u("bueno, recomiéndame un podcast divertido")]}, ["biopsia", "maligna"])
add(L, "split_topic", {"messages": [
    u("ayer vino el casero otra vez"), a("¿Y qué pasó?"),
    u("nos van a desahuciar porque debemos cinco meses de alquiler"), a("Vaya."),
    u("¿qué juego de mesa me recomiendas para niños?")]}, ["desahuciar", "cinco meses de alquiler"])
add(L, "fields", {"messages": [u("Resume las ventajas de caminar cada día.")],
    "metadata": {"diagnostico": "VIH positivo", "historia": "HC-5582013"},
    "user": "lucia.ferrer@correo.es"}, ["VIH positivo", "HC-5582013", "lucia.ferrer@correo.es"])
add(L, "fields", {"messages": [
    {"role": "user", "name": "Alejandro_Quintana", "content": "¿Qué llevo para un fin de semana en Granada?"}],
    "stop": ["llámame al 612 345 678"]}, ["Alejandro_Quintana", "612 345 678"])
add(L, "tool_definition", {"messages": [u("Reserva la revisión para el martes.")],
    "tools": [fn("reservar_cita", "Reserva cita para la paciente Carmen Villalobos (carmen.villalobos@gmail.com, 655 112 334), que tiene diabetes tipo 1.",
                 {"fecha": {"type": "string"}})]}, ["carmen.villalobos@gmail.com", "655 112 334", "diabetes tipo 1"])
add(L, "split_value", {"messages": [
    u("mi tarjeta empieza por 5425 2334"), a("¿Y el resto?"), u("3010 9903, caduca en 11/27. ¿Es Mastercard?")]},
    ["5425 2334", "3010 9903"])
add(L, "split_value", {"messages": [
    u("mi IBAN es ES91 2100 0418"), a("Sigue."), u("4502 0005 1332, ¿está bien formado?")]},
    ["ES91 2100 0418", "4502 0005 1332"])
add(L, "positional_secret", {"messages": [u("¿Por qué falla esto?\n\n```python\ncliente = Ftp('ftp.empresa.es')\ncliente.login('contabilidad', 'Verano2023$Sevilla')\n```")]},
    ["Verano2023$Sevilla"])
add(L, "positional_secret", {"messages": [u("Arregla esto:\n\n```js\nconst db = mysql.createConnection({host: 'bd', user: 'ventas', password: 'Kx9!qWe4Lm'});\n```")]},
    ["Kx9!qWe4Lm"])
add(L, "tool_arguments", {"messages": [
    u("Envía la factura."),
    call("enviar_factura", {"a": "jorge.santamaria@telefonica.net", "telefono": "+34 699 221 047"}),
    tool("enviada"), u("Gracias, ahora una nota de agradecimiento.")]}, ["jorge.santamaria@telefonica.net", "699 221 047"])
add(L, "retrieval", {"messages": [
    s("Responde con estas notas recuperadas.\n[doc 1] Ficha: Marta Iglesias está de baja por un trastorno de ansiedad grave y toma sertralina."),
    u("¿Cuál es el horario de verano de la oficina?")]}, ["trastorno de ansiedad", "sertralina"])
add(L, "developer_third_person", {"messages": [
    {"role": "developer", "content": "El usuario es testigo de Jehová y rechaza transfusiones; está ingresado en cardiología."},
    u("Recomiéndame un libro de viajes.")]}, ["testigo de Jehová", "transfusiones"])

# ---------------------------------------------------------------- German
L = "de"
add(L, "system_third_person", {"messages": [
    s("Du bist ein freundlicher Assistent. Kontext zum Nutzer: Er hat Parkinson und bekommt eine tiefe Hirnstimulation."),
    u("Kannst du mir einen lustigen Film für heute Abend empfehlen?")]}, ["Parkinson", "Hirnstimulation"])
add(L, "system_third_person", {"messages": [
    s("Gedächtnis: Die Nutzerin ist überschuldet, hat eine Privatinsolvenz beantragt und ihr Konto ist gepfändet."),
    u("Was koche ich schnell mit Linsen?")]}, ["Privatinsolvenz", "gepfändet"])
add(L, "tool_third_person", {"messages": [
    u("Schau in die Kundenakte und schreib dann eine Erinnerung."),
    call("kundenakte", {"id": "K-441"}),
    tool(json.dumps({"notiz": "Kunde ist alkoholabhängig und macht gerade einen Entzug in der Klinik"}, ensure_ascii=False)),
    u("Schreib die Erinnerung an den Vertragstermin.")]}, ["alkoholabhängig", "Entzug"])
add(L, "tool_third_person", {"messages": [
    u("Prüf die Akte und sag mir, was fehlt."),
    call("akte", {"id": "19"}),
    tool(json.dumps({"status": "Asylantrag abgelehnt; Abschiebung für den 4. Juli angesetzt"}, ensure_ascii=False)),
    u("Mach mir eine Checkliste für den Termin.")]}, ["Asylantrag abgelehnt", "Abschiebung"])
add(L, "split_topic", {"messages": [
    u("heute hat die Praxis angerufen"), a("Was haben sie gesagt?"),
    u("der Befund ist bösartig, ich muss zur Chemo"), a("Das tut mir leid."),
    u("egal, empfiehl mir einen witzigen Podcast")]}, ["bösartig", "Chemo"])
add(L, "split_topic", {"messages": [
    u("der Gerichtsvollzieher war wieder da"), a("Oh je."),
    u("wir haben die Räumungsklage bekommen, Mietrückstand seit Februar"), a("Das klingt schwer."),
    u("welches Brettspiel passt für einen Regentag?")]}, ["Räumungsklage", "Mietrückstand"])
add(L, "fields", {"messages": [u("Fass die Vorteile von Radfahren zusammen.")],
    "metadata": {"diagnose": "Schizophrenie", "fallnummer": "KH-2026-88413"},
    "user": "tobias.kranz@web.de"}, ["Schizophrenie", "KH-2026-88413", "tobias.kranz@web.de"])
add(L, "fields", {"messages": [
    {"role": "user", "name": "Katharina_Wendt", "content": "Was packe ich für ein Wochenende in Hamburg ein?"}],
    "stop": ["ruf mich an unter 0151 23456789"]}, ["Katharina_Wendt", "0151 23456789"])
add(L, "tool_definition", {"messages": [u("Buch den Kontrolltermin für Dienstag.")],
    "tools": [fn("termin_buchen", "Bucht Termine für den Patienten Jürgen Habermann (j.habermann@t-online.de, 0171 9988776), der an Epilepsie leidet.",
                 {"datum": {"type": "string"}})]}, ["j.habermann@t-online.de", "0171 9988776", "Epilepsie"])
add(L, "split_value", {"messages": [
    u("meine Karte fängt mit 4916 3385 an"), a("Und weiter?"), u("0608 2832, gültig bis 03/29. Ist das Visa?")]},
    ["4916 3385", "0608 2832"])
add(L, "split_value", {"messages": [
    u("meine IBAN ist DE44 5001 0517"), a("Weiter?"), u("5407 3249 31 — stimmt die Prüfziffer?")]},
    ["DE44 5001 0517", "5407 3249 31"])
add(L, "positional_secret", {"messages": [u("Warum schlägt das fehl?\n\n```python\nsmtp = SMTP('mail.firma.de')\nsmtp.login('buchhaltung@firma.de', 'Sommer2025#Kiel')\n```")]},
    ["Sommer2025#Kiel"])
add(L, "positional_secret", {"messages": [u("Bitte korrigieren:\n\n```python\nengine = connect('lager', 'Zr8$vB1nQp')\n```")]},
    ["Zr8$vB1nQp"])
add(L, "tool_arguments", {"messages": [
    u("Schick die Rechnung."),
    call("rechnung_senden", {"an": "sabine.hoffmann@gmx.de", "telefon": "+49 30 901820"}),
    tool("gesendet"), u("Danke, jetzt noch ein kurzes Dankeschön.")]}, ["sabine.hoffmann@gmx.de", "30 901820"])
add(L, "retrieval", {"messages": [
    s("Antworte mit diesen Notizen.\n[Dok 1] Personalakte: Lukas Brenner ist wegen einer Depression krankgeschrieben und war in der Psychiatrie."),
    u("Wie sind die Öffnungszeiten der Kantine?")]}, ["Depression", "Psychiatrie"])
add(L, "developer_third_person", {"messages": [
    {"role": "developer", "content": "Der Anrufer ist Verdi-Mitglied, streikt gerade und wurde gestern bei der Demo festgenommen."},
    u("Empfiehl mir eine Doku über Vulkane.")]}, ["Verdi-Mitglied", "festgenommen"])

# ---------------------------------------------------------------- French
L = "fr"
add(L, "system_third_person", {"messages": [
    s("Tu es un assistant sympathique. Contexte sur l'utilisateur : il est séropositif et suit une trithérapie."),
    u("Tu me conseilles un film drôle pour ce soir ?")]}, ["séropositif", "trithérapie"])
add(L, "system_third_person", {"messages": [
    s("Mémoire : l'utilisatrice est en situation de surendettement et a déposé un dossier à la Banque de France."),
    u("Quelle recette rapide avec des lentilles ?")]}, ["surendettement", "dossier à la Banque de France"])
add(L, "tool_third_person", {"messages": [
    u("Regarde la fiche client puis rédige un rappel."),
    call("fiche_client", {"id": "F-903"}),
    tool(json.dumps({"notes": "le client est en cure de désintoxication pour alcoolisme"}, ensure_ascii=False)),
    u("Rédige le rappel pour la date de renouvellement.")]}, ["désintoxication", "alcoolisme"])
add(L, "tool_third_person", {"messages": [
    u("Consulte le dossier et dis-moi ce qui manque."),
    call("dossier", {"id": "55"}),
    tool(json.dumps({"statut": "demande d'asile rejetée ; obligation de quitter le territoire notifiée"}, ensure_ascii=False)),
    u("Fais-moi une liste pour le rendez-vous.")]}, ["demande d'asile rejetée", "quitter le territoire"])
add(L, "split_topic", {"messages": [
    u("le labo m'a appelé ce matin"), a("Qu'ont-ils dit ?"),
    u("la biopsie est maligne, je commence la chimio lundi"), a("Je suis désolé."),
    u("bref, conseille-moi un podcast drôle")]}, ["biopsie", "chimio"])
add(L, "split_topic", {"messages": [
    u("l'huissier est repassé hier"), a("Ah."),
    u("on a reçu l'avis d'expulsion, on doit six mois de loyer"), a("C'est dur."),
    u("quel jeu de société pour un dimanche pluvieux ?")]}, ["expulsion", "six mois de loyer"])
add(L, "fields", {"messages": [u("Résume les bienfaits de la natation.")],
    "metadata": {"diagnostic": "anorexie mentale", "dossier": "IPP-3390217"},
    "user": "camille.rousseau@orange.fr"}, ["anorexie", "IPP-3390217", "camille.rousseau@orange.fr"])
add(L, "fields", {"messages": [
    {"role": "user", "name": "Mathilde_Garnier", "content": "Que mettre dans ma valise pour un week-end à Lyon ?"}],
    "stop": ["appelle-moi au 06 12 34 56 78"]}, ["Mathilde_Garnier", "06 12 34 56 78"])
add(L, "tool_definition", {"messages": [u("Réserve le contrôle pour mardi.")],
    "tools": [fn("reserver_rdv", "Réserve pour le patient Antoine Lefebvre (antoine.lefebvre@free.fr, 07 81 22 90 14), atteint de sclérose en plaques.",
                 {"date": {"type": "string"}})]}, ["antoine.lefebvre@free.fr", "07 81 22 90 14", "sclérose en plaques"])
add(L, "split_value", {"messages": [
    u("ma carte commence par 4970 1012"), a("Et ensuite ?"), u("3456 7893, expire 05/28. C'est une Visa ?")]},
    ["4970 1012", "3456 7893"])
add(L, "split_value", {"messages": [
    u("mon numéro c'est le 06 45"), a("La suite ?"), u("78 21 09, tu peux le mettre au format international ?")]},
    ["06 45", "78 21 09"])
add(L, "positional_secret", {"messages": [u("Pourquoi ça échoue ?\n\n```python\nftp = FTP('ftp.societe.fr')\nftp.login('compta', 'Automne2024!Brest')\n```")]},
    ["Automne2024!Brest"])
add(L, "positional_secret", {"messages": [u("Corrige ça :\n\n```php\n$pdo = new PDO('mysql:host=bd;dbname=ventes', 'admin', 'Pw4%hJk8Ls');\n```")]},
    ["Pw4%hJk8Ls"])
add(L, "tool_arguments", {"messages": [
    u("Envoie la facture."),
    call("envoyer_facture", {"a": "julien.marchand@laposte.net", "iban": "FR76 3000 6000 0112 3456 7890 189"}),
    tool("envoyée"), u("Merci, maintenant un petit mot de remerciement.")]}, ["julien.marchand@laposte.net", "3000 6000 0112 3456 7890 189"])
add(L, "retrieval", {"messages": [
    s("Réponds avec ces notes.\n[doc 1] Dossier RH : Élodie Fournier est en arrêt pour burn-out et suit une psychothérapie."),
    u("Quels sont les horaires de la cafétéria ?")]}, ["burn-out", "psychothérapie"])
add(L, "developer_third_person", {"messages": [
    {"role": "developer", "content": "L'appelant est syndiqué à la CGT, en grève, et a été placé en garde à vue hier."},
    u("Conseille-moi un documentaire sur l'océan.")]}, ["CGT", "garde à vue"])

assert len(CASES) == 64, len(CASES)
with open(OUT, "w", encoding="utf-8") as f:
    for c in CASES:
        f.write(json.dumps(c, ensure_ascii=False) + "\n")
print(f"wrote {len(CASES)} conversations to {os.path.normpath(OUT)}")
