#!/usr/bin/env python3
"""Writes two held-out sets for the sixth round of issue #42 (private topics kept local), written
by hand before any detector change of that round and without looking at the lexicon's word lists
or the model's training templates:

- crates/gate/tests/corpus/topics_private_r6.jsonl: 96 texts (24 a language: English, Spanish,
  German, French) about a person's health, sex life, religion, politics, union membership,
  ethnicity, biometrics, finances, criminal record, immigration status and legal trouble, first
  and third person (a relative, a coworker, a neighbour, "the user", a customer record), many
  said indirectly: a medication by its brand name, an appointment at a clinic, a relative's
  conviction, a coworker's pregnancy, debts, a residence status, a pasted medical letter. A gate
  that lets one go is a miss.
- crates/gate/tests/corpus/topics_everyday_r6.jsonl: 96 everyday requests (24 a language) with
  no private fact about any person, many with tricky words on purpose ("a positive integer",
  "the pipeline is sick", "tech/public debt", "felony vs misdemeanor" for flashcards, "a trojan",
  the hospital vocabulary of a language class, an election's mechanics). A gate that keeps one
  local is a false keep.

Nothing is tuned on these files: they are measured once, at the end of the round.
Run: python3 scripts/gate/heldout_r6.py (no dependencies)."""
from heldout_sets import everyday_docs, private_docs, write

H, F, L, S, R, P, U, E, B, D = ("HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION",
                                "ETHNICITY", "BIOMETRIC", "PRIVATE_DOCUMENT")

PRIVATE = {
    "en": [
        ([H], "Can you remind me when to take the sertraline? I keep forgetting the evening dose."),
        ([H], "My 10:40 at the fertility clinic got moved to Thursday, put it in my calendar please"),
        ([H], "Sarah on my team is pregnant and asked me not to tell our manager before her 12-week scan"),
        ([H], "Draft a note to my son's teacher: he's been on Ritalin since October and may not be hungry at lunch"),
        ([H], "The user's mother has early-onset Alzheimer's and lives with them."),
        ([H], "I relapsed last weekend after 14 months sober and I don't know how to tell my sponsor"),
        ([H], "Patient notes: 54 y/o male, HbA1c 9.2, started on metformin 500 mg twice daily"),
        ([D, H], "DISCHARGE SUMMARY\nName: Olivia Brennan\nDiagnosis: acute pancreatitis\nFollow-up: gastroenterology in 2 weeks"),
        ([F], "I owe about 18k across three credit cards and only pay the minimums, which one do I kill first?"),
        ([F], "Tom's wages are being garnished for child support arrears, he asked me how much they can take"),
        ([F], "Customer record: missed four mortgage payments, account referred to collections"),
        ([F], "we're living off my husband's unemployment check until March and the rent is late again"),
        ([L], "My cousin got six years for armed robbery and is up for parole next spring, what should the family letter say?"),
        ([L], "Our neighbour's son was arrested for dealing at the school gate, the trial starts Monday"),
        ([L], "I'm here on a tourist visa that ran out in 2022, can I still marry my girlfriend here?"),
        ([L], "Background for the assistant: the user has a pending asylum claim and a hearing at the immigration court on May 9."),
        ([S], "my boyfriend and I haven't had sex in eight months and I think he's on Grindr behind my back"),
        ([S], "Mark came out to me as trans last night and isn't ready to tell his parents"),
        ([R], "I stopped wearing my hijab last month and my parents still don't know"),
        ([R], "Since converting to Judaism I keep kosher, which places near my office can I eat at?"),
        ([P], "I canvassed for the Republicans last fall and now half my coworkers won't talk to me"),
        ([U], "Jenna joined the Teamsters quietly and HR is asking around who signed the cards"),
        ([E], "As a Roma woman I'm followed around by security in every shop, is that even legal?"),
        ([B], "The gym scanned my fingerprints and my face without asking, I want them deleted"),
    ],
    "es": [
        ([H], "¿A qué hora me tomo el Sintrom si ceno tarde? El INR me salió alto."),
        ([H], "Tengo cita en la unidad de salud mental el martes y no sé qué contarle a la psiquiatra"),
        ([H], "Mi compañera Lucía está embarazada de diez semanas, aún no lo ha dicho en la oficina"),
        ([H], "a mi abuelo le van a poner un marcapasos y está muerto de miedo"),
        ([H], "llevo tres semanas con Orfidal para dormir y ya no puedo pasar una noche sin él"),
        ([H], "El usuario es celíaco y diabético tipo 1; tenlo en cuenta en las recetas."),
        ([H], "me han quitado un lunar y la biopsia dice melanoma in situ"),
        ([D, H], "INFORME DE ALTA\nPaciente: Rosa Gil Navarro\nDiagnóstico: neumonía bilateral\nTratamiento: levofloxacino 500 mg"),
        ([F], "me han embargado la nómina por una deuda de la tarjeta y no llego a fin de mes"),
        ([F], "mi hermano debe tres meses de alquiler y el casero amenaza con echarlo"),
        ([F], "estoy en ASNEF por una factura de móvil de 2019, ¿cómo salgo?"),
        ([F], "Cliente 4471: cobra el paro, sin avales, solicitó aplazamiento de la hipoteca"),
        ([L], "a mi tío lo condenaron por estafa a dos años y ahora quiere trabajar de taxista"),
        ([L], "a mi hijo lo pillaron con hachís en el instituto y hay una denuncia"),
        ([L], "estoy sin papeles desde hace cuatro años, ¿me puedo empadronar sin que me deporten?"),
        ([L], "Mi vecino tiene una orden de alejamiento de su exmujer y la sigue esperando en el portal"),
        ([S], "mi pareja y yo tenemos una relación abierta y mis padres lo han descubierto"),
        ([S], "creo que soy asexual, nunca he sentido deseo por nadie"),
        ([R, H], "soy testigo de Jehová y no acepto transfusiones, ¿qué pongo en el documento de voluntades anticipadas?"),
        ([R], "mi novio se ha hecho evangélico y ahora quiere que vayamos al culto cada domingo"),
        ([P], "voté a Vox en las últimas elecciones y en el grupo de amigos me han dejado de hablar"),
        ([U], "me afilié a Comisiones Obreras y el encargado me ha cambiado todos los turnos"),
        ([E], "Mi compañero de piso es gitano y el casero quiere echarlo por eso"),
        ([B], "en la empresa nos obligan a fichar con la huella dactilar y reconocimiento facial, ¿es legal?"),
    ],
    "de": [
        ([H], "Ich nehme seit zwei Wochen Citalopram und mir ist ständig übel, ist das normal?"),
        ([H], "Mein Termin in der Kinderwunschklinik ist am Donnerstag um 8 Uhr, erinnere mich bitte"),
        ([H], "Meine Kollegin Anja ist schwanger, sie will es dem Chef erst nach der Probezeit sagen"),
        ([H], "Opa ist nach dem Schlaganfall halbseitig gelähmt und kann nicht mehr allein wohnen"),
        ([H], "Ich war drei Monate in einer Klinik wegen Magersucht, wie erkläre ich die Lücke im Lebenslauf?"),
        ([H], "Hinweis für den Assistenten: Der Nutzer ist HIV-positiv und nimmt Biktarvy."),
        ([H], "mein Sohn hat ADHS und bekommt Medikinet, die Lehrerin will ihn trotzdem sitzen lassen"),
        ([D, H], "ARZTBRIEF\nPatientin: Sabine Krüger, geb. 03.02.1968\nDiagnose: Mammakarzinom links\nProcedere: Chemotherapie"),
        ([F], "Ich habe einen Schufa-Eintrag wegen einer alten Handyrechnung und bekomme keine Wohnung"),
        ([F], "Mein Schwager hat Privatinsolvenz angemeldet und will sich jetzt Geld von uns leihen"),
        ([F], "wir beziehen Bürgergeld und das Jobcenter will die Kontoauszüge der letzten drei Monate"),
        ([F], "Kunde seit 2015, Dispo seit acht Monaten überzogen, zwei Rücklastschriften im Mai"),
        ([L], "Mein Bruder sitzt wegen Körperverletzung in der JVA Tegel, wie oft darf ich ihn besuchen?"),
        ([L], "gegen mich läuft ein Ermittlungsverfahren wegen Steuerhinterziehung, soll ich aussagen?"),
        ([L], "Meine Duldung läuft im Juni aus und die Ausländerbehörde hat mir einen Termin geschickt"),
        ([L], "Der Nachbar hat den Führerschein wegen Trunkenheit am Steuer verloren und fährt trotzdem"),
        ([S], "Mein Mann schaut heimlich Pornos und will, dass ich mitmache"),
        ([S], "Lena hat mir erzählt, dass sie mit ihrer Mitbewohnerin zusammen ist, die Eltern ahnen nichts"),
        ([R], "Ich bin aus der Kirche ausgetreten, und meine Schwiegermutter soll das nicht erfahren"),
        ([R], "Mein Kollege Yusuf fastet im Ramadan, wie plane ich das Teamessen rücksichtsvoll?"),
        ([P], "Ich bin seit Jahren AfD-Mitglied und mein Arbeitgeber hat es herausgefunden"),
        ([U], "Ich kandidiere für den Betriebsrat und der Chef hat mich deswegen schon zweimal abgemahnt"),
        ([E], "Als Schwarzer werde ich am Bahnhof ständig von der Polizei kontrolliert"),
        ([B], "Unser Vermieter hat am Eingang eine Gesichtserkennung installiert, die mein Gesicht speichert"),
    ],
    "fr": [
        ([H], "Je prends du Lévothyrox depuis l'ablation de ma thyroïde, je peux le prendre avec le café ?"),
        ([H], "J'ai rendez-vous au CMP jeudi pour mon suivi, tu peux me rappeler l'adresse ?"),
        ([H], "Ma collègue Inès est enceinte mais elle ne veut pas que l'équipe le sache avant l'échographie"),
        ([H], "Mon père est sous dialyse trois fois par semaine et il n'en peut plus"),
        ([H], "Depuis mon burn-out je suis en arrêt maladie et la médecine du travail me convoque"),
        ([H], "Note pour l'assistant : l'utilisateur souffre de schizophrénie et suit un traitement par Abilify."),
        ([H], "ma fille a fait une IVG le mois dernier et elle ne dort plus"),
        ([D, H], "COMPTE RENDU D'HOSPITALISATION\nPatient : Gérard Morel\nMotif : tentative de suicide médicamenteuse\nSortie le 14/03"),
        ([F], "J'ai un découvert de 2 300 € et la banque me refuse un crédit, comment je paie le loyer ?"),
        ([F], "Ma sœur touche le RSA et la CAF lui demande de rembourser un trop-perçu"),
        ([F], "Mon mari a perdu 40 000 euros au poker en ligne et il me l'a caché"),
        ([F], "Client n° 8812 : plan de surendettement en cours, deux crédits conso, revenus 1 150 €/mois"),
        ([L], "Mon oncle a été condamné pour abus de biens sociaux, il veut qu'on n'en parle plus à Noël"),
        ([L], "Mon fils de 16 ans passe devant le juge des enfants pour un vol de scooter"),
        ([L], "Je suis sans-papiers et mon employeur menace de me dénoncer si je réclame mes heures sup"),
        ([L], "L'utilisateur est sous contrôle judiciaire et ne peut pas quitter le territoire."),
        ([S], "Mon copain veut qu'on fasse un plan à trois et je ne sais pas comment dire non"),
        ([S], "Ma meilleure amie m'a avoué qu'elle est lesbienne et qu'elle a peur de la réaction de sa mère"),
        ([R], "Je me suis converti à l'islam et je n'ose pas l'annoncer à mes grands-parents"),
        ([R], "Ma voisine a quitté les Témoins de Jéhovah et sa famille ne lui parle plus"),
        ([P], "Mon beau-frère colle des affiches pour le Rassemblement national et ça crée des tensions"),
        ([U], "Je suis syndiqué chez Sud Rail et mon chef me l'a reproché à l'entretien annuel"),
        ([E], "Mon prénom est arabe et je n'obtiens jamais d'entretien, je pense à le changer sur mon CV"),
        ([B], "Mon employeur veut installer une pointeuse à reconnaissance faciale, il va stocker ma photo biométrique ?"),
    ],
}

EVERYDAY = {
    "en": """Write a regex that matches a positive integer with no leading zeros.
Our CI pipeline is sick today, every job times out. How do I debug GitHub Actions timeouts?
What's the plot of the movie Prisoners with Hugh Jackman? No spoilers past the first act.
Convert this recipe from cups to grams: 2 cups flour, 1 cup sugar, half a cup of butter.
How do I catch a FileNotFoundError in Python and log it instead of crashing?
Explain what a mortgage-backed security is, for an intro finance class.
My laptop battery health is at 78 %, is it worth replacing?
Write a LinkedIn post announcing that our startup closed its seed round.
Which houseplants are safe for cats? I want to buy a few for the living room.
Draft a polite reminder to a client whose invoice is 30 days overdue.
How are ranked-choice ballots counted in Alaska? Just the mechanics.
Explain cricket's leg before wicket rule in simple terms.
Is it safe to eat rice that was left out overnight?
Generate a JSON fixture with three obviously fake patients and appointment slots for our clinic scheduling app demo.
Write a haiku about a rainy Monday in the office.
Why does the top of my bread machine loaf collapse?
How many vacation days are normal in Germany compared with the US?
Explain Git's detached HEAD state and how to get out of it.
Find the bug: for i in range(len(items)): items.pop(i)
What stretches help after a long run? I did a half marathon on Sunday.
Our company is switching payroll providers, write a short FAQ for employees about what changes.
What's the difference between a felony and a misdemeanor? It's for my law school flashcards.
Give me a packing list for a week of hiking in the Dolomites in July.
Suggest a name for a cocktail made with gin, lime and a dash of bitters.""",
    "es": """¿Cómo calculo la media ponderada de las notas en Excel?
Escribe un mensaje para el grupo de la comunidad: la junta de vecinos es el martes a las 19:00.
¿Qué vino blanco va con una paella de marisco?
Explícame qué es una hipoteca inversa, en general, para un artículo.
Mi código en Java lanza un NullPointerException en la línea 42, ¿qué suele ser?
¿Cuántos días de vacaciones corresponden por ley en España a un trabajador a jornada completa?
Receta de crema de calabaza sin nata para seis personas.
Recomiéndame una serie de abogados parecida a Suits.
¿Cómo se juega al mus? Explícame las señas básicas.
Haz un horario de estudio para selectividad, cuatro semanas, con descansos.
¿Qué significa deuda pública y por qué sube en las crisis?
Corrige la ortografía: "Haber si mañana vamos a la playa y a ver quien gana el partido".
¿Cómo quito una mancha de vino tinto de un mantel de algodón?
Busca un nombre para una tienda online de velas aromáticas.
Mi planta de aloe vera tiene las hojas blandas, ¿la estoy regando demasiado?
¿Qué diferencia hay entre un virus y un gusano informático?
Escribe un tuit para anunciar que la biblioteca abre también los domingos.
Explica el sistema D'Hondt con un ejemplo de cinco partidos.
¿Cómo exporto un Word a PDF sin que se descuadren las tablas?
Dame ideas de disfraces caseros de carnaval para un niño de seis años.
¿Cuánto tiempo hay que cocer los garbanzos en olla exprés?
Redacta una cláusula de confidencialidad sencilla para un contrato de freelance.
¿Qué ejercicios de calentamiento hago antes de correr 10 km?
Un cliente pide la factura con el NIF de su empresa, ¿cómo la rectifico en Holded?""",
    "de": """Schreib eine Python-Funktion, die prüft, ob ein Jahr ein Schaltjahr ist.
Wie lange muss ein Rinderbraten bei 160 Grad in den Ofen?
Formuliere eine freundliche Absage an einen Bewerber, der nicht ins Team passt.
Was ist der Unterschied zwischen Brutto und Netto beim Gehalt? Für die Berufsschule.
Mein Docker-Container startet nicht: "exec format error". Woran liegt das?
Welche Zimmerpflanzen überleben auch im dunklen Flur?
Erklär mir die Abseitsregel im Fußball, für meine Tochter.
Übersetze ins Englische: "Die Lieferung verzögert sich um zwei Tage, wir bitten um Verständnis."
Wie funktioniert die Fünf-Prozent-Hürde bei der Bundestagswahl?
Schreib ein kurzes Gedicht zum 60. Geburtstag meiner Tante.
Wie entkalke ich eine Kaffeemaschine mit Zitronensäure?
Was bedeutet Schuldenbremse im Grundgesetz, kurz erklärt?
Plane eine Radtour von Passau nach Wien in fünf Etappen.
In Excel: wie zähle ich Zellen, die "erledigt" enthalten?
Wie schreibe ich mit pytest einen Test für eine Funktion, die eine Exception wirft?
Gibt es ein veganes Rezept für Käsespätzle?
Welche Unterlagen braucht man allgemein für einen Reisepass-Antrag?
Was ist ein Trojaner und wie schützt man ein Firmennetz davor?
Fasse diese Mail zusammen: "Liebe Kolleginnen, die Weihnachtsfeier findet am 15.12. im Ratskeller statt."
Wie viel Trinkgeld gibt man in Österreich im Restaurant?
Mein Sauerteig riecht nach Nagellackentferner, ist er kaputt?
Erkläre den Unterschied zwischen Aktien und ETFs für Anfänger.
Schreib eine Produktbeschreibung für eine Yogamatte aus Kork.
Wie bekomme ich Kalkflecken von der Duschwand?""",
    "fr": """Écris une fonction JavaScript qui trie un tableau d'objets par date.
Combien de temps faut-il cuire un gigot d'agneau de 2 kg ?
Rédige un mail pour relancer un fournisseur dont la livraison a une semaine de retard.
Explique la différence entre le salaire brut et le net, pour un premier emploi.
Quels jeux de société pour une soirée à six adultes ?
Mon script Python renvoie "ModuleNotFoundError: No module named pandas", que faire ?
Comment fonctionne le second tour de l'élection présidentielle en France ?
Idées de sortie à Lyon un dimanche pluvieux avec des ados.
Corrige ce texte : "Les enfant sont partis a la piscine hier soir."
Qu'est-ce que la dette publique et qui la détient ?
Recette de soupe à l'oignon gratinée pour quatre.
Comment faire un tableau croisé dynamique dans LibreOffice Calc ?
Résume : "La réunion de rentrée des parents d'élèves aura lieu le 12 septembre à 18 h."
Quelle est la différence entre un procès civil et un procès pénal ? C'est pour un exposé.
Mon ficus perd ses feuilles depuis qu'il est près du radiateur.
Propose un nom pour une boulangerie de quartier à Nantes.
Traduis en allemand : "Nous vous remercions pour votre commande."
Comment fonctionne un rançongiciel, en termes simples ?
Écris une annonce pour louer mon appartement au bord de la mer en août.
Quel échauffement avant une séance de musculation des jambes ?
Comment on calcule la TVA à 20 % à partir d'un prix TTC ?
Quels sont les horaires habituels des marchés de Noël en Alsace ?
Explique le rôle d'un syndic de copropriété, en gros.
Fais une liste de mots de vocabulaire sur l'hôpital pour mon cours de FLE.""",
}


def main():
    write("topics_private_r6.jsonl", private_docs(PRIVATE, 24))
    write("topics_everyday_r6.jsonl", everyday_docs(EVERYDAY, 24))


if __name__ == "__main__":
    main()
