#!/usr/bin/env python3
"""Writes two held-out sets for the seventh round of issue #42 (private topics kept local), written
by hand before any detector change of that round and without looking at the lexicon's word lists
or the model's training templates:

- crates/gate/tests/corpus/topics_private_r7.jsonl: 96 texts (24 a language: English, Spanish,
  German, French) about a person's health, sex life, religion, politics, union membership,
  ethnicity, biometrics, finances, criminal record, immigration status and legal trouble, first
  and third person, many of the third persons named by a role with no possessive ("Grandpa",
  "the neighbour", "Opa", "der Nachbar", "la vecina", "el abuelo", "le collègue", "Mamie"), and
  many said indirectly (a treatment, an appointment, a benefit, a hearing). A gate that lets one
  go is a miss.
- crates/gate/tests/corpus/topics_everyday_r7.jsonl: 96 everyday requests (24 a language) with no
  private fact about any person, many with tricky words on purpose (the neighbour's hedge, Grandma's
  recipe, a "sick" beat, a "positive" review, a "record" of a game, a "court" for tennis, a
  union of two sets, a "church" to visit). A gate that keeps one local is a false keep.

Nothing is tuned on these files: they are measured once, at the end of the round.
Run: python3 scripts/gate/heldout_r7.py (no dependencies)."""
from heldout_sets import everyday_docs, private_docs, write

H, F, L, S, R, P, U, E, B, D = ("HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION",
                                "ETHNICITY", "BIOMETRIC", "PRIVATE_DOCUMENT")

PRIVATE = {
    "en": [
        ([H], "Grandpa was diagnosed with Parkinson's in March and keeps falling at night"),
        ([H], "The neighbour's wife had a miscarriage last week, what do I write in the card?"),
        ([H], "I've been on lithium for two years and my thyroid numbers are off now"),
        ([H], "The guy from accounting is in rehab for cocaine, everyone thinks he's on vacation"),
        ([H], "Mom starts radiation on Monday for the lump they found in her breast"),
        ([H], "can't stop bingeing and purging after dinner, it's been like this since college"),
        ([H], "Auntie is on the waiting list for a kidney transplant and needs dialysis twice a week"),
        ([F], "Dad filed for bankruptcy in May and the bank froze the joint account"),
        ([F], "I'm three payments behind on the car loan and the repo guy left a note"),
        ([F], "The tenant downstairs is on food stamps and asked me to lend him rent money"),
        ([F], "I gamble away most of my paycheck on sports bets and hide it from my wife"),
        ([L], "The coworker who sits next to me has an ankle monitor, he's on house arrest for DUI"),
        ([L], "Grandma got a deportation order even though she's lived here 30 years"),
        ([L], "I was charged with shoplifting at Target and the court date is on the 12th"),
        ([L], "My ex filed a restraining order against me, can I still go to our kid's recital?"),
        ([S], "The babysitter told us she's gay and her parents kicked her out"),
        ([S], "I caught chlamydia from my boyfriend and now he says I gave it to him"),
        ([S], "I've been having an affair with a married coworker for six months"),
        ([R], "Brother-in-law left the Mormon church and the whole family shuns him now"),
        ([R], "I secretly became Catholic and my Muslim family would disown me if they knew"),
        ([P], "I volunteer for the Green Party campaign and my boss is a big donor to the other side"),
        ([U], "The night-shift nurse is organizing a union drive and management is watching her"),
        ([E], "The landlord refused to rent to my friend once he heard he's Somali"),
        ([B], "the bank app stores a voiceprint of me and a scan of my iris, how do I get them deleted?"),
    ],
    "es": [
        ([H], "El abuelo tiene alzhéimer y ya no reconoce a nadie de la familia"),
        ([H], "La vecina del tercero está con quimioterapia por un cáncer de colon"),
        ([H], "Estoy tomando Prozac desde el divorcio y ahora me cuesta dormir"),
        ([H], "mi novia tuvo un aborto espontáneo en la semana once y no quiere hablar de ello"),
        ([H], "El compañero de mesa ha vuelto a beber, lo vi con una petaca en el baño"),
        ([H], "me han diagnosticado esclerosis múltiple y no sé cómo decirlo en el trabajo"),
        ([H], "La tía lleva un mes ingresada en psiquiatría por un brote psicótico"),
        ([F], "Mi padre ha pedido un microcrédito para pagar otro microcrédito y ya debe seis mil euros"),
        ([F], "Cobro el ingreso mínimo vital y la Seguridad Social me pide devolver una parte"),
        ([F], "El cuñado perdió la casa en una subasta por no pagar la hipoteca"),
        ([F], "tengo la tarjeta revolving al límite y me llaman del recobro todos los días"),
        ([L], "El primo está en libertad condicional por un robo con violencia"),
        ([L], "Me han quitado el carnet por dar positivo en el control de alcoholemia"),
        ([L], "La señora de la limpieza no tiene permiso de residencia, ¿puedo contratarla?"),
        ([L], "a mi hermana la denunció su exmarido por impago de la pensión de los niños"),
        ([S], "El hijo de la vecina es gay y el padre no le habla desde que se enteró"),
        ([S], "mi marido tiene disfunción eréctil y ya no nos acostamos"),
        ([S], "Me he hecho la prueba del VPH después de estar con varias parejas este verano"),
        ([R], "La abuela se ha hecho mormona y quiere bautizar a los nietos"),
        ([R], "Dejé de ir a misa y de creer en Dios, pero en casa no lo saben"),
        ([P], "Soy concejal de Podemos en mi pueblo y me insultan en el bar"),
        ([U], "El jefe de obra se enteró de que soy delegado de UGT y me quiere despedir"),
        ([E], "Al compañero marroquí lo paran siempre en el aeropuerto por su apellido"),
        ([B], "El gimnasio guarda mi huella y una foto de mi cara para entrar, ¿puedo pedir que la borren?"),
    ],
    "de": [
        ([H], "Oma hat Demenz und erkennt uns kaum noch, ein Heimplatz ist viel zu teuer"),
        ([H], "Der Kollege aus dem Vertrieb ist seit März wegen Depressionen krankgeschrieben"),
        ([H], "Ich habe Brustkrebs im Frühstadium und beginne nächste Woche mit der Bestrahlung"),
        ([H], "Die Nachbarin hatte eine Fehlgeburt, wie kann ich ihr beistehen?"),
        ([H], "Papa ist alkoholabhängig und trinkt schon morgens vor der Arbeit"),
        ([H], "ich muss wegen meiner Epilepsie Lamotrigin nehmen und darf nicht Auto fahren"),
        ([H], "Der Schwiegervater hatte einen Herzinfarkt und liegt auf der Intensivstation"),
        ([F], "Ich habe Spielschulden bei Freunden und die Bank gibt mir keinen Kredit mehr"),
        ([F], "Onkel Peter steht vor der Zwangsversteigerung seines Hauses"),
        ([F], "Die Mieterin im Erdgeschoss zahlt seit vier Monaten keine Miete, sie hat ihren Job verloren"),
        ([F], "Der Gerichtsvollzieher kommt am Montag wegen meiner offenen Rechnungen"),
        ([L], "Der Onkel wurde wegen Betrugs zu einer Bewährungsstrafe verurteilt"),
        ([L], "Mein Asylantrag wurde abgelehnt und ich habe nur noch zwei Wochen für die Klage"),
        ([L], "Gegen den Hausmeister läuft ein Strafverfahren wegen Diebstahls im Keller"),
        ([L], "Ich wurde beim Schwarzfahren erwischt, zum dritten Mal, und jetzt kam eine Anzeige"),
        ([S], "Die Tochter der Nachbarn ist lesbisch und traut sich nicht, es den Eltern zu sagen"),
        ([S], "Ich habe mich mit Tripper angesteckt und weiß nicht, wie ich es meinem Freund sage"),
        ([S], "Mein Mann hat eine Affäre mit seiner Sekretärin"),
        ([R], "Der Opa ist Zeuge Jehovas und lehnt jede Bluttransfusion ab"),
        ([R], "Ich bin zum Buddhismus konvertiert und meine Eltern sind streng katholisch"),
        ([P], "Ich bin bei den Grünen aktiv und mein Vermieter hat deswegen die Wohnung nicht verlängert"),
        ([U], "Die Kollegin ist in die IG Metall eingetreten und seitdem bekommt sie nur noch Spätschichten"),
        ([E], "Der Azubi ist Sinto und wird im Betrieb deswegen gemobbt"),
        ([B], "Die Firma speichert meinen Fingerabdruck für die Zeiterfassung, darf sie das?"),
    ],
    "fr": [
        ([H], "Papi a fait un AVC et il ne peut plus parler correctement"),
        ([H], "La voisine du dessus sort d'une cure de désintoxication pour l'alcool"),
        ([H], "Je suis sous antidépresseurs depuis un an et j'ai pris quinze kilos"),
        ([H], "Le collègue de bureau a un cancer du pancréas, il ne reviendra sans doute pas"),
        ([H], "Maman vient d'apprendre qu'elle a la maladie de Crohn"),
        ([H], "j'ai fait une fausse couche à trois mois et je dois retourner au travail lundi"),
        ([H], "Le petit-fils de la voisine est autiste et ne va plus à l'école"),
        ([F], "Je suis fiché à la Banque de France et je ne peux plus ouvrir de compte"),
        ([F], "Tonton doit 12 000 € aux impôts et l'huissier est passé hier"),
        ([F], "La colocataire ne paie plus sa part du loyer depuis qu'elle est au chômage"),
        ([F], "J'ai contracté six crédits renouvelables et je ne m'en sors plus"),
        ([L], "Le beau-père a été placé en garde à vue pour violences conjugales"),
        ([L], "Je suis convoqué au tribunal correctionnel pour conduite sans permis"),
        ([L], "La nounou n'a pas de titre de séjour et risque une OQTF"),
        ([L], "Le cousin sort de prison en juin après quatre ans pour trafic de stupéfiants"),
        ([S], "Le collègue m'a confié qu'il est bisexuel et que sa femme l'ignore"),
        ([S], "J'ai attrapé de l'herpès génital et j'ai peur de le dire à mon partenaire"),
        ([S], "Ma femme me trompe avec le voisin depuis l'été dernier"),
        ([R], "Mamie est devenue très pratiquante et veut que les enfants aillent au catéchisme"),
        ([R], "Je porte la kippa au travail et mon responsable m'a demandé de l'enlever"),
        ([P], "Je suis encarté à La France insoumise et mon patron l'a découvert sur Facebook"),
        ([U], "La caissière a été licenciée juste après avoir adhéré à la CGT"),
        ([E], "Le stagiaire est d'origine malienne et le client a refusé d'être servi par lui"),
        ([B], "La cantine de l'école veut enregistrer les empreintes de la main de mon fils"),
    ],
}

EVERYDAY = {
    "en": """Grandma's apple pie recipe calls for 6 apples, can I scale it to 9 inches?
The neighbour's hedge grows over our fence, how tall can a hedge legally be in the UK?
Give me a 30-minute beginner yoga routine for mornings.
What's a good name for a tennis club's new indoor court?
Write a positive review for the Thai place downtown, five stars, mention the curry.
How do I compute the union of two sets in Python?
That beat is sick, what BPM is typical for drum and bass?
Explain how a criminal trial works in the US, for a civics worksheet.
My coworker's birthday is Friday, suggest a card message from the whole team.
What's the world record for the 100 m sprint?
Plan a three-day trip to Lisbon with a visit to the cathedral and the castle.
How long should I boil an egg for a runny yolk?
Write a SQL query that lists customers with more than three orders.
Which vaccines does a puppy need in its first year?
Summarize the plot of Breaking Bad season one without spoilers after episode 4.
Dad wants a new drill for his birthday, cordless, under 150 dollars.
How do I fix a git merge conflict in package-lock.json?
The babysitter asked what time bedtime is, draft a note with the kids' routine.
What muscles does a deadlift train?
Translate "the bank is closed on Sundays" into Italian.
Explain the difference between a loan and a lease for a car, generally.
My uncle is visiting next week, what board games work for five adults?
What's the history of the trade union movement in Britain, in a paragraph?
Write a Bash loop that kills every process named node older than an hour.""",
    "es": """La receta de croquetas de la abuela lleva bechamel, ¿cuánta harina por litro de leche?
¿Cómo se calcula el área de un círculo? Es para los deberes de mi hijo.
El vecino quiere pintar la fachada, ¿qué color queda bien con ladrillo rojo?
Escribe un correo para pedir presupuesto de una reforma de cocina.
¿Qué horario tiene el Museo del Prado los domingos?
Recomiéndame una serie policíaca española en Netflix.
¿Cómo hago un bucle for en JavaScript que recorra un array al revés?
El abuelo cumple 80 años, ¿ideas para la fiesta en el pueblo?
Explica qué es la prima de riesgo, de forma sencilla.
¿Qué vino pega con un cordero asado?
Traduce al inglés: "la reunión se ha cambiado al jueves".
Necesito un plan para correr mi primera media maratón en doce semanas.
¿Cuál es la diferencia entre un juicio civil y uno penal? Es para clase.
La compañera de piso y yo queremos repartir las tareas, hazme una tabla semanal.
¿Cómo quito una mancha de vino tinto de un sofá de tela?
Escribe un poema corto sobre el mar para el cumpleaños de la tía.
¿Qué es un sindicato de inicialización en programación? Creo que lo confundo con otra cosa.
Hazme una lista de la compra para una paella de seis personas.
¿Cómo funciona el voto por correo en España?
Ideas para decorar la catedral de cartón que está haciendo mi sobrino.
Resume este artículo sobre el cambio climático en tres frases.
¿Qué ejercicios van bien para la espalda si trabajo sentado?
El jefe quiere un informe de ventas por trimestre, ¿cómo hago una tabla dinámica en Excel?
¿Cuánto tiempo se hornea un bizcocho de yogur?""",
    "de": """Omas Rezept für Apfelstrudel: wie dünn muss der Teig sein?
Der Nachbar mäht sonntags Rasen, welche Ruhezeiten gelten in Bayern allgemein?
Schreib eine kurze Einladung zum Sommerfest unserer Abteilung.
Wie berechne ich die Mehrwertsteuer aus einem Bruttobetrag?
Welche Zimmerpflanzen brauchen wenig Licht?
Opa wünscht sich ein Hörbuch zum Geburtstag, was ist spannend und nicht zu lang?
Wie funktioniert eine Bundestagswahl mit Erst- und Zweitstimme? Für den Unterricht.
Erklär mir den Unterschied zwischen Rust und Go in drei Sätzen.
Wie lange muss ein Rinderbraten bei 160 Grad in den Ofen?
Ich brauche einen Trainingsplan für 5 km in 25 Minuten.
Die Kollegin geht in Rente, hilf mir mit einem Text für die Abschiedskarte.
Welche Sehenswürdigkeiten gibt es in Köln außer dem Dom?
Wie repariere ich einen platten Fahrradreifen?
Schreib eine Python-Funktion, die prüft, ob eine Zahl eine Primzahl ist.
Was bedeutet "Rekord" im Kontext von Datenbanken, also ein Datensatz?
Wie kündige ich meinen Handyvertrag fristgerecht? Gib mir eine Vorlage.
Erklär die Regeln von Skat für Anfänger.
Der Azubi fragt, wie man eine Excel-Tabelle nach zwei Spalten sortiert.
Welche Zutaten brauche ich für Käsespätzle für vier Personen?
Fasse die Handlung von Faust I in fünf Sätzen zusammen.
Wie entferne ich Kalk aus dem Wasserkocher?
Wann ist die beste Reisezeit für Norwegen?
Was ist der Unterschied zwischen Zivilrecht und Strafrecht, ganz allgemein?
Schlag mir ein Geschenk für den Schwiegervater vor, er angelt gern.""",
    "fr": """La recette du gâteau de Mamie demande 200 g de beurre, je peux le remplacer par de l'huile ?
Le voisin a un chien qui aboie la nuit, comment rédiger un petit mot poli ?
Propose un itinéraire de trois jours en Provence avec la visite d'une abbaye.
Comment on calcule un pourcentage d'augmentation ?
Écris un message pour le pot de départ d'un collègue qui part à Lyon.
Quelle est la différence entre une SARL et une SAS, en gros ?
Donne-moi un programme de musculation pour débutant, trois séances par semaine.
Comment fonctionne l'élection présidentielle en France, les deux tours ?
Papi veut apprendre à utiliser WhatsApp, tu peux écrire un guide très simple ?
Comment faire une mayonnaise qui ne tourne pas ?
Traduis en espagnol : « le train a vingt minutes de retard ».
Quels films de Jacques Tati conseiller à des ados ?
Écris une fonction Python qui inverse une chaîne de caractères.
Comment nettoyer un four très sale sans produit chimique ?
Explique le rôle d'un juge d'instruction, pour un exposé de troisième.
La nounou demande la liste des allergènes de la cantine, fais-moi un tableau.
Quelles plantes mettre sur un balcon plein sud ?
Résume la bataille de Verdun en cinq lignes.
Le collègue veut organiser un tournoi de pétanque, propose un règlement simple.
Comment désinstaller complètement une application sur macOS ?
Quel vin servir avec une raclette ?
Combien de temps faut-il pour cuire des lentilles vertes ?
Explique ce qu'est une union de types en TypeScript.
Idées de jeux pour l'anniversaire de ma nièce de 7 ans.""",
}


def main():
    write("topics_private_r7.jsonl", private_docs(PRIVATE, 24))
    write("topics_everyday_r7.jsonl", everyday_docs(EVERYDAY, 24))


if __name__ == "__main__":
    main()
