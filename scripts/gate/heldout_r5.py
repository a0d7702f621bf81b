#!/usr/bin/env python3
"""Writes two held-out sets for the fifth round of issue #42's false keeps, written by hand before
any detector change of that round and without looking at the lexicon's word lists or the model's
training templates:

- crates/gate/tests/corpus/topics_everyday_r5.jsonl: 160 everyday requests (40 each in English,
  Spanish, German and French) an agent, a coder, a cook, a traveller, a shopper or a colleague
  sends: no private fact about any person. Many are tricky on purpose: health, money, law,
  politics, religion and body words in a sense that says nothing about a person ("health check
  endpoint", "kill the child process", "tech debt", "a union type", "blood orange", "a vote on the
  team lunch", "the church as a wedding venue", a VAT calculation). A gate that keeps one local
  is a false keep.
- crates/gate/tests/corpus/topics_private_r5.jsonl: 96 texts (24 a language) about a person's
  health, sex life, religion, politics, union membership, ethnicity, biometrics, finances,
  criminal record and legal trouble, first and third person (a relative, a colleague, a named
  person, "the user", a customer), some pasted (notes, a record). A gate that lets one go is a
  miss.

Nothing is tuned on these files: they are measured once before and once after the round's change.
Run: python3 scripts/gate/heldout_r5.py (no dependencies)."""
from heldout_sets import everyday_docs, private_docs, write

EVERYDAY = {
    "en": """Add a /health endpoint to my Express server that returns 200 when the database is reachable.
How do I kill a child process in Node when the parent exits?
Our tech debt is piling up. Write a short proposal to spend one sprint a quarter paying it down.
In TypeScript, what's the difference between a union type and an intersection type?
Write a SQL query with UNION ALL that merges the 2023 and 2024 orders tables.
I'm making a salad with blood oranges and fennel, what dressing goes with it?
Can you draft a Slack message asking the team to vote on where we go for the Friday lunch?
We booked a church as a wedding venue for my cousin, what should the seating plan look like?
Calculate the VAT on an invoice of 1,240 euros at 21 % and show the net amount.
My git branch is 40 commits behind main, should I rebase or merge?
Summarise this email: "Dear all, the quarterly budget review moves to Tuesday 10am in room 4B. Please bring your forecasts."
What's a good stretching routine for the back after a day at a desk? Keep it general.
Write a Python function that checks whether a credit card number passes the Luhn test.
My sourdough loaf is dense in the middle. Too little proofing or too much?
Plan a three-day itinerary in Lisbon for two people who like food and old trams.
The stock market game in my economics class: how do I explain short selling to teenagers?
Which is better for a small kitchen, an induction hob or a gas one?
My React app crashes with "Cannot read properties of undefined (reading 'map')". What does it mean?
Write a product description for a stainless steel water bottle that keeps drinks cold for 24 hours.
Explain how a bill becomes a law in the US, for a civics quiz.
Our Docker container gets OOM-killed at 512 MB. How do I find what eats the memory?
I'm hosting a board game night for eight, which games work for that many players?
Translate into Spanish: "The meeting is postponed until further notice. Thanks for your patience."
How long should I boil eggs for a runny yolk?
Is it cheaper to fly or take the train from London to Edinburgh in August?
Reply to this customer: "My order #48213 arrived with a cracked lid." Offer a replacement politely.
In Monopoly, what happens when a player goes bankrupt to another player?
Write a unit test for a function that parses dates like 2024-03-01T10:00:00Z.
What wine goes with mushroom risotto?
How do I set up a cron job that runs a backup script every night at 2am?
Our team retro: suggest five questions that get quiet people to speak up.
The painting tutorial says to use a dry brush stroke for grass, how is that done?
Explain the difference between a Roth 401k and a regular 401k in general terms.
My tomato plants have yellow leaves at the bottom, is it overwatering?
Write a cover letter opening for a junior data analyst job at a logistics company.
What's the fastest way to learn touch typing as an adult?
Help me name a cat: she's grey, fluffy and very lazy.
How does the electoral college work? I'm writing a blog post for international readers.
Generate a weekly meal prep plan with 120 g of protein a day for a gym beginner.
The Kubernetes liveness probe keeps failing after deploy, what should I check first?""",
    "es": """¿Cómo añado un endpoint /health a mi API en FastAPI que compruebe la base de datos?
Escribe un correo a mi jefa pidiendo el viernes libre para una mudanza.
¿Qué diferencia hay entre un ERTE y un ERE? Es para un trabajo de clase.
Tengo pimientos, huevos y patatas, ¿qué cena rápida me sale?
Mi script de Bash falla con "permission denied" al ejecutarlo, ¿qué hago?
Resume este mensaje del grupo de padres: "La excursión al museo es el jueves, traed almuerzo y 5 euros."
¿Cuánto IVA lleva una factura de 850 euros al 21 %? Dame el total.
Vamos a Asturias en septiembre con dos niños, ¿qué rutas fáciles nos recomiendas?
¿Cómo hago un sumatorio condicional en Google Sheets?
Mi perro tiene miedo a los petardos, ¿cómo lo tranquilizo en Nochevieja?
Redacta una descripción para vender mi bicicleta de montaña en Wallapop.
¿Qué es la deuda técnica y cómo se lo explico a un cliente?
Traduce al inglés: "Le confirmamos la reserva para dos personas el sábado a las 21:00."
¿Cómo se vota en las elecciones generales desde el extranjero? Es para un artículo.
Dame una receta de naranjas sanguinas con chocolate para el postre.
Mi portátil se calienta mucho jugando, ¿sirve una base refrigeradora?
¿Qué libro de historia de la Guerra Civil me recomiendas para empezar?
Escribe un mensaje de Slack para recordar al equipo la reunión de las 10.
¿Cómo mato un proceso que se queda colgado en Linux?
Ayúdame a preparar una entrevista para un puesto de enfermería: ¿qué preguntas suelen hacer?
¿Conviene más alquilar o comprar un coche para un viaje de diez días por Andalucía?
Corrige la ortografía de este párrafo: "Haber si mañana quedamos para ir a la playa."
¿Cuáles son los síntomas de una planta con exceso de riego?
Necesito un regalo para mi abuela que le gusta coser, unos 30 euros.
En el juego de mesa, ¿quién gana si dos jugadores quedan empatados a puntos?
¿Cómo funciona el sistema de salud pública en Alemania? Voy a hacer un Erasmus allí.
Escribe una función en JavaScript que sume los precios de un carrito.
Mi bizcocho se hunde en el centro al sacarlo del horno, ¿por qué?
Explica qué es un sindicato de forma sencilla para mi hijo de diez años.
¿Qué ruta en bici hay entre Valencia y la Albufera?
Ayúdame con la tabla de multiplicar del 7 para mi sobrina, algún truco.
Resume: "Estimados vecinos, el ascensor estará fuera de servicio del 3 al 5 por mantenimiento."
¿Qué diferencia hay entre una hipoteca fija y una variable, en general?
Mi gata maúlla de noche sin parar, ¿es normal en gatos jóvenes?
Hazme una lista de la compra para una paella para seis.
¿Cómo configuro el correo del trabajo en el móvil Android?
Escribe un poema corto para la jubilación de un compañero de oficina.
Mi consulta SQL va lentísima con un JOIN de tres tablas, ¿cómo la optimizo?
¿Qué ejercicios de calentamiento hacemos antes del partido de fútbol sala?
Quiero aprender a tocar la guitarra, ¿por dónde empiezo?""",
    "de": """Wie baue ich in Spring Boot einen Health-Check-Endpunkt, der die Datenbank prüft?
Schreib eine kurze Mail an die Hausverwaltung: Die Heizung im Treppenhaus ist kalt.
Was ist der Unterschied zwischen Brutto und Netto bei einer Rechnung? Mit Beispiel bitte.
Ich habe Kartoffeln, Lauch und Speck. Was koche ich heute Abend?
Mein Python-Skript wirft "IndexError: list index out of range", woran liegt das?
Fass diese Nachricht zusammen: "Liebe Eltern, am Freitag ist Wandertag, bitte festes Schuhwerk mitgeben."
Wie berechne ich die Mehrwertsteuer aus einem Bruttobetrag von 119 Euro?
Wir fahren im Juli mit dem Zug nach Wien, was sollten wir unbedingt sehen?
Wie kille ich einen hängenden Prozess unter Windows?
Unser Hund zieht an der Leine, welche Übungen helfen?
Schreib eine Produktbeschreibung für einen Holzspielzeug-Bauernhof.
Was bedeutet "technische Schulden" in der Softwareentwicklung?
Übersetze ins Englische: "Vielen Dank für Ihre schnelle Antwort, wir melden uns nächste Woche."
Wie funktioniert die Bundestagswahl mit Erst- und Zweitstimme? Für ein Referat.
Rezept für einen Blutorangen-Kuchen ohne Ei?
Mein Laptop-Akku hält nur noch zwei Stunden, lohnt sich ein neuer Akku?
Welche Bücher über die Weimarer Republik sind gut für Einsteiger?
Formuliere eine Teams-Nachricht, dass das Standup heute ausfällt.
Wie lese ich eine Gehaltsabrechnung allgemein, welche Posten gibt es?
Bereite mich auf ein Vorstellungsgespräch als Pflegefachkraft vor: typische Fragen?
Lohnt sich ein Mietwagen für eine Woche auf Mallorca?
Korrigier bitte die Kommasetzung: "Ich glaube dass wir morgen früher anfangen sollten."
Warum werden die Blätter meiner Monstera braun an den Rändern?
Geschenkidee für meinen Opa, der gern Kreuzworträtsel löst, bis 25 Euro.
Bei Siedler von Catan: Darf man im ersten Zug schon tauschen?
Wie funktioniert die Krankenversicherung in Deutschland für Austauschstudenten, allgemein?
Schreib eine TypeScript-Funktion, die die Summe aller Bestellpositionen berechnet.
Warum fällt mein Hefezopf beim Backen zusammen?
Erklär einem Zehnjährigen, was eine Gewerkschaft macht.
Welche Radtour um den Bodensee ist für Familien geeignet?
Wie kann ich meiner Tochter das Einmaleins mit Spielen beibringen?
Fass zusammen: "Sehr geehrte Mieter, am 12. wird das Wasser von 8 bis 12 Uhr abgestellt."
Was ist der Unterschied zwischen einem ETF und einem aktiv gemanagten Fonds, allgemein?
Unsere Katze kratzt am Sofa, was hilft dagegen?
Einkaufsliste für ein Raclette mit sechs Leuten, bitte.
Wie richte ich eine VPN-Verbindung unter Ubuntu ein?
Schreib ein kurzes Gedicht zum Abschied einer Kollegin in Rente.
Meine Postgres-Abfrage mit drei JOINs ist sehr langsam, wie optimiere ich sie?
Welche Aufwärmübungen vor dem Volleyballtraining sind sinnvoll?
Ich will Klavier lernen mit 40, wie fange ich an?""",
    "fr": """Comment ajouter une route /health dans mon API Flask qui vérifie la base de données ?
Écris un mail à mon responsable pour poser un jour de congé vendredi.
Quelle différence entre une SARL et une SAS ? C'est pour un devoir.
J'ai des courgettes, des œufs et du fromage de chèvre, une idée de dîner ?
Mon script Python plante avec "ModuleNotFoundError: No module named 'requests'", que faire ?
Résume ce message : "Bonjour à tous, la réunion de copropriété est reportée au 14 mars, salle des fêtes."
Combien fait la TVA à 20 % sur une facture de 600 euros HT ?
On part en Bretagne en août avec les enfants, quelles plages nous conseilles-tu ?
Comment tuer un processus qui bloque le port 8080 sous Linux ?
Mon chien aboie quand on sonne à la porte, comment le calmer ?
Rédige une annonce pour vendre une poussette sur Leboncoin.
C'est quoi la dette technique et comment la mesurer ?
Traduis en anglais : "Nous vous remercions pour votre commande, elle sera expédiée sous 48 heures."
Comment fonctionne le second tour de l'élection présidentielle ? C'est pour un exposé.
Une recette de tarte aux oranges sanguines ?
Mon ordinateur portable chauffe beaucoup, est-ce que je dois changer la pâte thermique ?
Quels livres sur la Révolution française pour un lycéen ?
Écris un message Teams pour annuler le point d'équipe de demain.
Comment lire une fiche de paie en général, quelles lignes compter ?
Prépare-moi à un entretien d'embauche d'aide-soignante : questions classiques ?
Vaut-il mieux louer une voiture ou prendre le train pour visiter la Provence ?
Corrige les fautes : "Je les est vu hier au marché, ils avait l'air content."
Pourquoi les feuilles de mon basilic deviennent noires ?
Idée de cadeau pour ma grand-mère qui aime le jardinage, 30 euros maximum.
Au Scrabble, a-t-on le droit de poser un mot au pluriel ?
Comment marche la Sécurité sociale pour un étudiant étranger, en gros ?
Écris une fonction Rust qui additionne les montants d'un panier.
Pourquoi mon gâteau au yaourt retombe-t-il à la sortie du four ?
Explique à un enfant de dix ans à quoi sert un syndicat.
Quel itinéraire à vélo le long de la Loire pour trois jours ?
Aide-moi à faire réviser les tables de multiplication à mon neveu.
Résume : "Chers voisins, l'ascenseur sera en maintenance du 3 au 5, merci de votre compréhension."
Différence entre un prêt à taux fixe et à taux variable, en général ?
Mon chat renverse sa gamelle d'eau tous les matins, pourquoi ?
Liste de courses pour une raclette à huit personnes.
Comment configurer ma boîte mail pro sur un iPhone ?
Écris un petit poème pour le pot de départ d'un collègue.
Ma requête MySQL avec GROUP BY renvoie une erreur 1055, comment corriger ?
Quels échauffements avant un match de handball ?
Je veux me mettre au violon à 35 ans, par où commencer ?""",
}

H, F, L, S, R, P, U, E, B, D = ("HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION",
                                "ETHNICITY", "BIOMETRIC", "PRIVATE_DOCUMENT")

PRIVATE = {
    "en": [
        ([H], "I've been coughing up green stuff for two weeks and now I get out of breath on the stairs"),
        ([H], "my husband had a seizure at dinner last night, the first one ever, and the ER sent us home"),
        ([H], "Context about the user: takes lithium for bipolar disorder, recently hospitalised."),
        ([H], "Priya hasn't eaten properly in months and she faints at school, her mum thinks it's an eating disorder"),
        ([H], "since the miscarriage in March I can't stop crying at work"),
        ([H], "I'm on methadone and my new GP wants to cut the dose, how fast is safe?"),
        ([F], "I owe 14k across three payday lenders and they call my work every day"),
        ([F], "customer notes: behind on mortgage 4 months, foreclosure notice received"),
        ([F], "my dad lost his pension savings in a crypto scam and won't tell my mum"),
        ([F], "I got a letter saying my wages will be garnished from next month"),
        ([L], "my son was arrested for shoplifting and has a hearing on Tuesday, do we need a lawyer?"),
        ([L], "I did 18 months for burglary ten years ago, do I have to tell a new employer?"),
        ([L], "applicant's visa was refused and she has 28 days to leave the country"),
        ([S], "I'm a trans woman and haven't told my parents yet, how do I start?"),
        ([S], "my girlfriend found out I've been seeing a man on the side"),
        ([S], "tested positive for chlamydia, do I have to tell everyone I slept with?"),
        ([R], "I converted to Islam last year and my family still doesn't know"),
        ([R], "Mark left the Jehovah's Witnesses and now his parents won't speak to him"),
        ([P], "I'm a member of the Green party and my boss keeps mocking it in meetings"),
        ([P], "my brother joined a far-right group online and posts their stuff"),
        ([U], "I signed up with the union last week and now my manager is cutting my shifts"),
        ([E], "I'm half Roma and the landlord hung up once he heard my surname"),
        ([B], "the app stored a scan of my face and my fingerprints when I opened the account"),
        ([D, H], "Discharge summary\nPatient: J. Novak\nDiagnosis: acute pancreatitis\nPlan: no alcohol, follow-up in 2 weeks"),
    ],
    "es": [
        ([H], "llevo tres semanas con mareos y se me duerme el brazo izquierdo"),
        ([H], "a mi madre le han encontrado un tumor en el páncreas y empieza quimio el lunes"),
        ([H], "mi hija se corta los brazos y lo esconde con manga larga"),
        ([H], "Tomo sertralina desde hace un año y quiero dejarla, ¿cómo lo hago?"),
        ([H], "el usuario tiene diabetes tipo 1 y se pone insulina cuatro veces al día"),
        ([H], "desde el accidente no duermo y tengo pesadillas todas las noches"),
        ([F], "debo cuatro meses de alquiler y el casero me amenaza con el desahucio"),
        ([F], "mi pareja tiene deudas de juego que no me contó y ahora nos embargan la cuenta"),
        ([F], "Hacienda me reclama 6.000 euros de la declaración de 2022"),
        ([F], "cobro 1.100 euros al mes y tengo tres préstamos personales, ya no llego"),
        ([L], "a mi hermano lo detuvieron anoche por pelearse en un bar"),
        ([L], "tengo antecedentes penales por tráfico de hace años, ¿me afectan para la nacionalidad?"),
        ([L], "mi ex me ha denunciado por impago de la pensión de los niños"),
        ([S], "soy lesbiana y en mi pueblo nadie lo sabe"),
        ([S], "mi marido me fue infiel con una compañera y no sé si perdonarle"),
        ([S], "se me rompió el preservativo el sábado, ¿dónde consigo la pastilla?"),
        ([R], "dejé de ser testigo de Jehová y mi familia me ha cortado el contacto"),
        ([R], "Ahmed reza cinco veces al día y en el trabajo le ponen pegas"),
        ([P], "estoy afiliado a Podemos y temo que en la empresa se enteren"),
        ([U], "me afilié a Comisiones Obreras y ahora no me renuevan el contrato"),
        ([E], "soy gitana y en las entrevistas me rechazan al ver mi apellido"),
        ([E], "a Moussa lo paran siempre en el metro para pedirle los papeles por ser negro"),
        ([B], "en el gimnasio me pidieron la huella dactilar y un escaneo del iris para entrar"),
        ([D, F], "Extracto de cuenta\n01/03 Nómina 1.420,00\n03/03 Cuota préstamo -380,00\n05/03 Devolución recibo -52,10"),
    ],
    "de": [
        ([H], "ich habe seit Tagen Brustschmerzen und meine linke Hand kribbelt"),
        ([H], "mein Vater hat Parkinson und zittert jetzt so stark, dass er nicht mehr essen kann"),
        ([H], "Ich nehme seit drei Jahren Antidepressiva und will schwanger werden"),
        ([H], "meine Kollegin Sabine ist alkoholabhängig und kommt oft betrunken ins Büro"),
        ([H], "der Nutzer ist HIV-positiv und nimmt täglich Medikamente"),
        ([H], "seit der Geburt habe ich Panikattacken, sobald ich allein mit dem Baby bin"),
        ([F], "ich habe 23.000 Euro Schulden und überlege, Privatinsolvenz anzumelden"),
        ([F], "die Bank hat meinen Kredit gekündigt und will alles bis Monatsende"),
        ([F], "mein Bruder hat Spielschulden bei Freunden und leiht sich jetzt Geld von meiner Oma"),
        ([F], "Kunde hat drei Mahnungen erhalten, Inkasso eingeschaltet, Schufa-Eintrag negativ"),
        ([L], "ich wurde beim Schwarzfahren erwischt und habe jetzt eine Anzeige wegen Erschleichen"),
        ([L], "mein Sohn sitzt in U-Haft wegen Drogenhandel, wie besuchen wir ihn?"),
        ([L], "Ich bin vorbestraft wegen Körperverletzung, steht das im Führungszeugnis?"),
        ([S], "ich bin schwul und mein Vater hat es gestern herausgefunden"),
        ([S], "meine Frau und ich haben seit zwei Jahren keinen Sex mehr"),
        ([S], "Jonas hat Syphilis und weiß nicht, wie er es seiner Freundin sagen soll"),
        ([R], "ich bin aus der katholischen Kirche ausgetreten und meine Mutter weint seitdem"),
        ([R], "meine Nachbarin trägt seit kurzem Kopftuch und ist zum Islam konvertiert"),
        ([P], "ich bin AfD-Mitglied und habe Angst, dass es meine Kollegen erfahren"),
        ([U], "ich bin bei Verdi und organisiere gerade einen Streik in unserer Filiale"),
        ([E], "ich bin Sinto und der Vermieter wollte plötzlich keine Besichtigung mehr"),
        ([B], "die Firma speichert unsere Fingerabdrücke und Gesichtsscans für die Zeiterfassung"),
        ([L], "meine Aufenthaltserlaubnis läuft ab und die Ausländerbehörde droht mit Abschiebung"),
        ([D, H], "Laborbefund\nHbA1c: 9,2 %\nNüchternglukose: 187 mg/dl\nKreatinin: 1,6 mg/dl"),
    ],
    "fr": [
        ([H], "je saigne des gencives depuis un mois et j'ai des bleus partout sans raison"),
        ([H], "ma femme a fait un AVC la semaine dernière et elle ne parle plus bien"),
        ([H], "je suis sous traitement pour une dépression et je n'arrive plus à travailler"),
        ([H], "mon fils de 15 ans fume du cannabis tous les jours et ne va plus en cours"),
        ([H], "l'utilisateur souffre d'épilepsie et a fait une crise la semaine dernière"),
        ([H], "depuis mon opération de la hanche je boite et j'ai mal la nuit"),
        ([F], "j'ai 18 000 euros de crédits à la consommation et je ne peux plus rembourser"),
        ([F], "ma banque m'a inscrit au fichier de la Banque de France pour incident de paiement"),
        ([F], "mon père est surendetté et a déposé un dossier à la commission"),
        ([F], "les impôts me réclament 4 200 euros de redressement sur mes revenus de 2021"),
        ([L], "mon frère a été placé en garde à vue hier soir pour conduite en état d'ivresse"),
        ([L], "j'ai un casier judiciaire pour vol, est-ce que je peux devenir chauffeur VTC ?"),
        ([L], "mon voisin m'a assigné au tribunal pour un mur mitoyen"),
        ([S], "je suis bisexuelle et mon copain ne le sait pas"),
        ([S], "Julien trompe sa femme depuis deux ans avec une collègue"),
        ([S], "j'ai attrapé l'herpès génital et j'ai honte d'en parler à mon médecin"),
        ([R], "je suis devenu bouddhiste et ma famille catholique ne l'accepte pas"),
        ([R], "ma fille veut porter le voile au lycée et le proviseur refuse"),
        ([P], "je milite à La France insoumise et mon employeur l'a découvert"),
        ([U], "je suis délégué CGT et la direction veut me licencier"),
        ([E], "je suis d'origine algérienne et on me refuse les appartements au téléphone"),
        ([B], "la banque a enregistré ma voix et mon empreinte pour valider les virements"),
        ([L], "ma demande d'asile a été rejetée et j'ai reçu une OQTF"),
        ([D, L], "TRIBUNAL JUDICIAIRE DE LYON\nConvocation\nM. Karim Benali est convoqué le 12 avril pour violences conjugales"),
    ],
}


def main():
    write("topics_everyday_r5.jsonl", everyday_docs(EVERYDAY, 40))
    write("topics_private_r5.jsonl", private_docs(PRIVATE, 24))


if __name__ == "__main__":
    main()
