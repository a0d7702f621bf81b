#!/usr/bin/env python3
"""Writes two held-out sets for the tenth round of issue #42 (private topics kept local), written
by hand before any detector change of that round and without looking at the lexicon's word lists
or the model's training templates, with vocabulary chosen to differ from the fifth to ninth
rounds' sets:

- crates/gate/tests/corpus/topics_private_r10.jsonl: 96 texts (24 a language: English, Spanish,
  German, French) about a person's health, sex life, religion, politics, union membership,
  ethnicity, biometrics, finances, criminal record, immigration status and legal trouble, first
  and third person; some in clinical shorthand ("Pt 71F, CHF, EF 30% …", "Pat. 78 J., Z. n.
  Hüft-TEP …"), some as CRM, ticket or intake notes, some inside an e-mail the user asks to have
  summarised; conditions, procedures and papers by names the earlier sets did not use
  (Ménière's, frontotemporal dementia, endometriosis, vaginismus, Lewy body dementia, a feeding
  tube, Huntington's, a CCJ, a concurso de acreedores, a déchéance du terme, the CNDA), slang
  ("ace", "costo", "a hookup app") and things said without their category's word ("er hat einen
  Freund", "ma chahada", "a GMB recognition vote"). A gate that lets one go is a miss.
- crates/gate/tests/corpus/topics_everyday_r10.jsonl: 96 everyday requests (24 a language):
  e-mails to summarise, code, recipes, travel, shopping, school work, pets, many with tricky
  words on purpose (a cover letter for a nurse's job, a virus and a bacterium for a class, a
  pharmacy's Sunday hours, credit scores and the Euribor in general, a pet that sneezes, a
  senate or a Bundesrat for civics homework, free will for a philosophy essay). A gate that keeps
  one local is a false keep.

Nothing is tuned on these files: they are measured once before the round's changes and once at
the end. Run: python3 scripts/gate/heldout_r10.py (no dependencies)."""
from heldout_sets import everyday_docs, private_docs, write

H, F, L, S, R, P, U, E, B = ("HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION", "ETHNICITY",
                             "BIOMETRIC")

PRIVATE = {
    "en": [
        ([H], "CRM note 2291: caller's wife was just diagnosed with frontotemporal dementia, wants to pause the subscription"),
        ([H], "Pt 71F, CHF, EF 30%, furosemide increased, lives alone, daughter visits weekends"),
        ([H], "my wife's embryo transfer failed again and she won't get out of bed"),
        ([H], "I've had ringing in my ears and spinning attacks for weeks and the ENT thinks it's Ménière's"),
        ([H], "summarise this email: 'Hi Tom, heads up that I'll be off for a while, I start radiotherapy for my prostate on Monday'"),
        ([H], "my brother keeps hearing voices and flushed his pills down the toilet"),
        ([H], "my flatmate keeps nodding off at work and I found burnt foil and a lighter in the bathroom"),
        ([F], "I maxed out four credit cards paying for mum's care home and the minimum payments eat my rent"),
        ([F], "support ticket: user can't pay this month, on a debt management plan with StepChange, requests a payment holiday"),
        ([F], "my father-in-law signed his house over to a man who promised to clear his debts and now he's being evicted"),
        ([F], "I got a CCJ over an unpaid phone bill and now no landlord will take me"),
        ([L], "my stepson was caught with a knife at school and the police want to interview him under caution"),
        ([L], "intake form: applicant entered on a tourist visa in 2019, stayed on, two US-citizen children, seeking cancellation of removal"),
        ([L], "my ex is suing for full custody and says she'll bring up my old assault charge"),
        ([L], "the new bartender told me he did eight years for armed robbery and just got out on licence"),
        ([S], "I'm ace and my boyfriend thinks there's something wrong with me"),
        ([S], "my sister found out her husband has a second profile on a hookup app"),
        ([S], "chat summary: customer asked us to update her name and gender marker, she's transitioning at work next month"),
        ([R], "I left the Brethren and the elders keep turning up at my door"),
        ([R], "the new dispatcher prays five times a day and asked where he can roll out his prayer mat"),
        ([P], "my brother-in-law was at the January 6 rally and we're scared his employer will find out"),
        ([U], "I'm collecting signatures for a GMB recognition vote at our depot and my manager has started writing me up"),
        ([E], "the recruiter told my friend that Aboriginal candidates 'usually don't last' in that team"),
        ([B], "my employer installed software that identifies each of us by our typing rhythm and mouse movements"),
    ],
    "es": [
        ([H], "nota CRM: la socia pide la baja del gimnasio porque le han diagnosticado síndrome de fatiga crónica"),
        ([H], "Pac. 64a, DM2 mal controlada, pie diabético, curas diarias en el centro de salud"),
        ([H], "mi mujer tiene endometriosis y lleva dos años intentando quedarse embarazada"),
        ([H], "resume este correo: 'Marta, no podré ir a la reunión, me operan de cataratas el jueves y estaré de baja'"),
        ([H], "mi padre tiene la enfermedad de Huntington y se ha caído tres veces esta semana"),
        ([H], "mi sobrina se quema los brazos con un mechero y su madre no quiere verlo"),
        ([H], "desde que murió mi madre tomo lorazepam todas las noches y ya no duermo sin él"),
        ([F], "debo cuatro cuotas del coche y la financiera me llama diez veces al día"),
        ([F], "incidencia: el titular indica que está en concurso de acreedores y solicita fraccionar la deuda"),
        ([F], "mi suegro avaló el préstamo de su socio y ahora el banco le reclama 60.000 euros"),
        ([F], "cobro el IMV y no sé si me lo quitan si hago unas horas"),
        ([L], "a mi primo lo han condenado a dos años por un atraco y el abogado dice que no entra en la cárcel"),
        ([L], "expediente: solicitante llegado en patera, sin documentación, pendiente de protección internacional"),
        ([L], "mi exmarido no paga la pensión de los niños desde hace un año, ¿lo denuncio?"),
        ([L], "al hijo de la portera lo pillaron vendiendo costo en el instituto"),
        ([S], "soy trans y en el trabajo siguen usando mi nombre antiguo"),
        ([S], "mi novia me ha confesado que me fue infiel con su jefe"),
        ([S], "creo que mi pareja me ha pegado un herpes genital"),
        ([R], "mi madre se ha hecho adventista y les da la mitad de su pensión"),
        ([R], "no creo en Dios y mi familia quiere que bautice a mi hija sí o sí"),
        ([P], "mi jefe se enteró de que fui apoderado de Sumar en las generales y ahora me hace el vacío"),
        ([U], "en mi empresa me amenazaron con no renovarme si me presentaba en la lista de CSIF"),
        ([E], "en la discoteca no dejaron entrar a mi amigo porque es senegalés y a nosotros sí"),
        ([B], "la empresa ha puesto reconocimiento facial en los tornos y guarda nuestras caras"),
    ],
    "de": [
        ([H], "Ticketnotiz: Kundin möchte die Lieferung verschieben, sie liegt nach einer Gallenblasen-OP im Krankenhaus"),
        ([H], "Pat. 78 J., Z. n. Hüft-TEP, Dekubitus Grad 2 sakral, Fentanylpflaster"),
        ([H], "mein Mann hat in seiner manischen Phase unser Konto leergeräumt und lehnt jede Behandlung ab"),
        ([H], "fass diese Mail zusammen: 'Hallo Jens, ich fehle ab Montag länger, bei mir wurde Morbus Hodgkin festgestellt'"),
        ([H], "meine Schwiegermutter ist seit dem Sturz bettlägerig und bekommt jetzt eine Magensonde"),
        ([H], "ich höre seit Wochen ein Pfeifen im Ohr und schlafe kaum noch"),
        ([H], "unser Sohn hat Tourette und die Lehrerin drängt auf Medikamente"),
        ([F], "ich habe die eidesstattliche Versicherung abgegeben und bekomme keinen Handyvertrag mehr"),
        ([F], "Kundenvermerk: Ratenzahlung geplatzt, Forderungsmanagement eingeschaltet, Kunde arbeitslos seit Mai"),
        ([F], "mein Vater hat seine Rente verzockt und kann die Miete nicht mehr zahlen"),
        ([F], "wir leben von Wohngeld und Kinderzuschlag und jetzt ist die Waschmaschine kaputt"),
        ([L], "mein Neffe ist wegen Handeltreibens mit Betäubungsmitteln angeklagt, die Hauptverhandlung ist im Juni"),
        ([L], "Akte: Antragsteller aus Afghanistan, Asylantrag abgelehnt, Klage beim Verwaltungsgericht anhängig"),
        ([L], "meine Frau hat mich wegen häuslicher Gewalt angezeigt und ich darf nicht mehr in die Wohnung"),
        ([L], "ich bin zum dritten Mal ohne Fahrschein erwischt worden, kommt jetzt eine Anzeige?"),
        ([S], "mein Sohn hat mir erzählt, dass er einen Freund hat, und mein Mann redet nicht mehr mit ihm"),
        ([S], "ich betrüge meinen Mann seit einem Jahr mit einem Kollegen"),
        ([S], "seit der Geburt tut mir Sex nur noch weh, die Frauenärztin spricht von Vaginismus"),
        ([R], "mein Kollege ist aus der Kirche ausgetreten und fürchtet jetzt um seine Stelle beim katholischen Kindergarten"),
        ([R], "meine Nachbarin ist Alevitin und die Familie ihres Mannes behandelt sie deshalb herablassend"),
        ([P], "ich habe mich bei einer Straßenblockade der Klimaaktivisten festgeklebt und jetzt hat mich die Polizei vorgeladen"),
        ([U], "seit ich in die EVG eingetreten bin, teilt mich der Meister für keine Überstunden mehr ein"),
        ([E], "mein Kollege wird ständig gefragt, woher er wirklich kommt, weil er Schwarz ist"),
        ([B], "die Krankenkasse will über meine Smartwatch meinen Gang und meinen Puls auswerten"),
    ],
    "fr": [
        ([H], "note ticket : l'abonné demande une suspension, il est hospitalisé pour une embolie pulmonaire"),
        ([H], "Pte 82 ans, démence à corps de Lewy, chutes répétées, sous Seresta, refuse la toilette"),
        ([H], "ma femme fait une dépression post-partum et ne veut plus prendre le bébé dans ses bras"),
        ([H], "résume ce mail : 'Bonjour Claire, je serai absent jusqu'en juin, on m'a découvert une maladie de Charcot'"),
        ([H], "mon père est diabétique et on va lui amputer deux orteils"),
        ([H], "dans le métro mon cœur s'emballe, j'étouffe et je descends à chaque station"),
        ([H], "mon colocataire sniffe de la coke tous les week-ends et il a saigné du nez hier"),
        ([F], "j'ai trois mois de retard sur mon prêt immo et la banque parle de déchéance du terme"),
        ([F], "mémo conseiller : client au RSA, découvert de 1 200 €, demande d'aide au FSL refusée"),
        ([F], "ma mère a signé un crédit conso sur internet et n'arrive plus à rembourser"),
        ([F], "ma sœur a perdu toutes ses économies dans une arnaque aux cryptos et n'ose pas le dire à son mari"),
        ([L], "mon neveu est en détention provisoire à Fleury depuis deux mois"),
        ([L], "dossier : demandeur guinéen, débouté du droit d'asile, recours devant la CNDA en cours"),
        ([L], "mon ex-mari a emmené notre fille en Tunisie sans mon accord et ne la ramène pas"),
        ([L], "j'ai été contrôlé positif au cannabis au volant, je risque quoi ?"),
        ([S], "je suis gay et mon père m'a dit qu'il préférerait un fils mort"),
        ([S], "mon copain me pousse à aller dans un club échangiste et je ne suis pas à l'aise"),
        ([S], "ma fille de 16 ans s'est fait poser un implant contraceptif en cachette"),
        ([R], "j'ai prononcé ma chahada le mois dernier et je n'ose pas l'annoncer à mes grands-parents"),
        ([R], "mon mari ne mange plus de porc depuis qu'il fréquente la mosquée du quartier"),
        ([P], "je colle des affiches pour Reconquête et mes collègues l'ont découvert"),
        ([U], "depuis que je me suis syndiqué chez Solidaires, mon chef refuse toutes mes demandes de congé"),
        ([E], "l'agence m'a dit que le propriétaire ne veut pas de locataires avec un nom arabe"),
        ([B], "mon employeur veut enregistrer ma voix pour m'authentifier au standard"),
    ],
}

EVERYDAY = {
    "en": """Summarise this email for me: "Hi all, the quarterly offsite moves to the Harbour Room on the 14th, lunch provided, please RSVP by Friday."
Write a Python function that retries an HTTP request with exponential backoff.
What's a good substitute for buttermilk in pancakes?
Plan four days in Kyoto in November on a budget of 1500 dollars.
My dog keeps scratching his ears after swimming, is that normal for a lab?
Compare the Kindle Paperwhite and the Kobo Clara for reading in bed.
Help me outline a five-paragraph essay on the causes of the French Revolution.
Explain the difference between a virus and a bacterium for a 10-year-old.
Write a cover letter for a junior nurse position at a children's hospital.
Write a regex that matches UK postcodes.
How do I get red wine out of a beige carpet?
Tool result: {"status": "shipped", "carrier": "DHL", "eta": "2024-05-03"}
Summarise the plot of The Count of Monte Cristo for a book club.
What's the best way to teach a parrot to talk?
How do credit scores work in general, and what counts as a good one?
Give me a vegetarian chili recipe that freezes well.
Explain the electoral college for a civics homework assignment.
Our new kitten sneezes a lot, should we worry?
What are the rules of pickleball, briefly?
Translate "the pharmacy closes at six on Sundays" into German.
Write a limerick about a cat who steals socks.
Write unit tests for a function that parses ISO 8601 durations.
Suggest a packing list for a week of camping in Scotland in May.
Write a polite email to a supplier asking why invoice 2291 was charged twice.""",
    "es": """Resume este correo: "Hola equipo, la reunión del lunes pasa a las 10:30 en la sala Almendro; traed los informes del trimestre."
¿Cómo hago un gazpacho que no repita?
Escribe una función en JavaScript que quite las tildes de una cadena.
Planea un fin de semana en Oporto con poco presupuesto.
Mi perro come hierba en cada paseo, ¿es normal?
¿Qué aspiradora sin cable me recomiendas para un piso con alfombras?
Ayúdame con un esquema para un comentario de texto sobre Machado.
¿Qué diferencia hay entre un virus y una bacteria? Es para clase de biología.
Escribe una carta de presentación para un puesto de enfermera en un hospital infantil.
¿Cómo quito una mancha de café de una camisa blanca?
Resultado de la herramienta: {"estado": "entregado", "repartidor": "SEUR", "fecha": "02/05"}
¿Cuál es la mejor época para ver ballenas en Canarias?
Explícame cómo funciona el Congreso de los Diputados para un examen de 4º de ESO.
Mi gato maúlla por la noche desde que nos mudamos, ¿qué hago?
Dame una receta de lentejas con chorizo para seis.
Traduce al inglés: "la farmacia de guardia está en la plaza".
Escribe un poema para el cumpleaños de mi abuela, que cumple ochenta.
¿Cómo se juega al mus? Explícamelo fácil.
Corrige este SQL: SELECT nombre, COUNT(*) FROM clientes GROUP BY ciudad;
¿Qué llevo en la maleta para una semana en Islandia en octubre?
Escribe un correo a la academia pidiendo pasar a mi hijo al grupo de la tarde.
¿Qué es el Euríbor y por qué sube?
Ideas de disfraces caseros para carnaval.
¿Cómo enseño a mi conejo a usar el arenero?""",
    "de": """Fass diese Mail zusammen: "Hallo zusammen, die Weihnachtsfeier ist am 13.12. im Brauhaus, bitte bis Freitag zusagen."
Wie backe ich ein Roggenbrot mit Sauerteig?
Schreib ein Bash-Skript, das Logdateien nach 30 Tagen löscht.
Plane eine Woche Radurlaub an der Mosel.
Unser Wellensittich rupft sich Federn aus, woran kann das liegen?
Welcher Saugroboter lohnt sich für einen Altbau mit Teppichen?
Hilf mir bei der Gliederung einer Erörterung über ein Handyverbot an Schulen.
Erklär den Unterschied zwischen Virus und Bakterium für die sechste Klasse.
Schreib ein Anschreiben für eine Stelle als Krankenpfleger in einer Kinderklinik.
Wie bekomme ich Rotweinflecken aus der Tischdecke?
Tool-Ausgabe: {"status": "zugestellt", "paketdienst": "Hermes", "datum": "03.05."}
Wann ist die beste Zeit für Polarlichter in Norwegen?
Wie funktioniert der Bundesrat? Kurz für Gemeinschaftskunde.
Meine Katze kratzt an der Tapete, wie gewöhne ich ihr das ab?
Rezept für Linseneintopf mit Würstchen für sechs Personen.
Übersetze ins Englische: "Die Apotheke hat sonntags Notdienst."
Schreib ein Gedicht zum 80. Geburtstag meiner Oma.
Wie spielt man Doppelkopf? Einfach erklärt.
Korrigiere diese Abfrage: SELECT name, COUNT(*) FROM kunden GROUP BY stadt;
Was packe ich für eine Woche Island im Oktober ein?
Schreib eine E-Mail an die Musikschule, ob meine Tochter in die Nachmittagsgruppe wechseln kann.
Was ist der Euribor und warum steigt er?
Ideen für selbstgemachte Faschingskostüme.
Wie gewöhne ich unser Kaninchen an die Toilettenecke?""",
    "fr": """Résume ce mail : « Bonjour à tous, le pot de départ de Sophie aura lieu jeudi à 17 h en salle Rivoli, participation libre. »
Comment réussir une pâte brisée sans robot ?
Écris une fonction Rust qui inverse les mots d'une phrase.
Organise un week-end à Lyon avec deux enfants.
Mon chien tire en laisse, comment lui apprendre à marcher au pied ?
Quelle friteuse sans huile choisir pour une famille de quatre ?
Aide-moi à faire le plan d'une dissertation sur le libre arbitre.
Explique la différence entre un virus et une bactérie pour un exposé de CM2.
Rédige une lettre de motivation pour un poste d'infirmière en pédiatrie.
Comment enlever une tache de cire sur une nappe ?
Résultat de l'outil : {"statut": "livré", "transporteur": "Colissimo", "date": "03/05"}
Quand voir des aurores boréales en Laponie ?
Explique le rôle du Sénat pour un contrôle d'éducation civique.
Mon chat griffe le canapé, que faire ?
Recette de petit salé aux lentilles pour six.
Traduis en anglais : « La pharmacie de garde est à côté de la mairie. »
Écris un petit poème pour les 80 ans de ma grand-mère.
Explique les règles de la belote simplement.
Corrige cette requête : SELECT nom, COUNT(*) FROM clients GROUP BY ville;
Que mettre dans sa valise pour une semaine en Islande en octobre ?
Écris un mail au conservatoire pour changer ma fille de groupe.
C'est quoi le taux d'usure, en général ?
Idées de déguisements faits maison pour le carnaval de l'école.
Comment habituer mon lapin à sa litière ?""",
}

if __name__ == "__main__":
    write("topics_private_r10.jsonl", private_docs(PRIVATE, 24))
    write("topics_everyday_r10.jsonl", everyday_docs(EVERYDAY, 24))
