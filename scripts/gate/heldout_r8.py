#!/usr/bin/env python3
"""Writes two held-out sets for the eighth round of issue #42 (private topics kept local), written
by hand before any detector change of that round and without looking at the lexicon's word lists
or the model's training templates, with vocabulary chosen to differ from the fifth to seventh
rounds' sets:

- crates/gate/tests/corpus/topics_private_r8.jsonl: 96 texts (24 a language: English, Spanish,
  German, French) about a person's health, sex life, religion, politics, union membership,
  ethnicity, biometrics, finances, criminal record, immigration status and legal trouble, first
  and third person, many said by euphemism or slang ("the big C", "doing lines", "perd la boule",
  "se mete rayas"), by a drug, a condition or a procedure's own name (quetiapine, PSA, Subutex,
  ALD, MPU, arraigo, composition pénale, FICP, P-Konto), and some written as an agent's or a
  tool's notes ("ticket notes: …", "notas del cliente: …", "Kundennotiz: …", "note CRM : …").
  A gate that lets one go is a miss.
- crates/gate/tests/corpus/topics_everyday_r8.jsonl: 96 everyday requests (24 a language) with no
  private fact about any person, many with tricky words on purpose (a charcoal face mask, a bear
  market, a prison-break board game, a bar mitzvah present, a virus on a laptop, a Pride float's
  playlist, "deuda técnica", Semana Santa, Konfirmation, Schuldenbremse, a baptism speech, a
  nurse's-aide cover letter, and customer or tool notes with nothing private in them). A gate
  that keeps one local is a false keep.

Nothing is tuned on these files: they are measured once before the round's changes and once at
the end. Run: python3 scripts/gate/heldout_r8.py (no dependencies)."""
from heldout_sets import everyday_docs, private_docs, write

H, F, L, S, R, P, U, E, B, D = ("HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION",
                                "ETHNICITY", "BIOMETRIC", "PRIVATE_DOCUMENT")

PRIVATE = {
    "en": [
        ([H], "ticket notes: caller says she's been off her quetiapine for two weeks and is hearing voices again"),
        ([H], "my uncle's got the big C, stage four, they've given him a few months"),
        ([H], "been doing lines every weekend and now I can't get through a Monday without a bump"),
        ([H], "hubby's PSA came back at 14 and the urologist wants a biopsy"),
        ([H], "the nursery says our little one might be on the spectrum and we should get him assessed"),
        ([H], "found razor blades and bloody tissues in my teenager's bin this morning"),
        ([H], "I pee like ten times a night and my feet have gone numb, the doc wants an A1C"),
        ([F], "we're in an IVA and the insolvency practitioner wants six months of bank statements again"),
        ([F], "CRM entry 8812: client in arrears, payment plan broken twice, hardship flag set"),
        ([F], "I maxed out Klarna and Afterpay buying groceries and it's all due this week"),
        ([F], "Uncle Ray has been sleeping in his car since they changed the locks on him"),
        ([L], "my brother-in-law is out on bail and has to sign in at the station every Friday"),
        ([L], "she overstayed her student visa and is scared to even see a doctor"),
        ([L], "the nanny's green card interview is next week and her attorney expects a denial"),
        ([L], "our 14-year-old got caught sexting and the school called the police"),
        ([S], "My wife and I are swingers and a couple from our church recognised us at a club"),
        ([S], "pretty sure I'm ace and my boyfriend takes it personally"),
        ([S], "tool output: user profile, orientation bisexual, HIV status undetectable, on PrEP since 2021"),
        ([R], "I'm an ex-Muslim and I eat in secret during Ramadan so my coworkers won't tell my family"),
        ([R], "my son converted to Hinduism for his wife and wants the grandkids raised in it"),
        ([P], "I marched at the pro-Palestine rally on Saturday and now my manager wants a word"),
        ([U], "a few of us at the warehouse have been talking to the Amazon Labor Union on Signal"),
        ([E], "the hiring manager called my locs unprofessional, I'm the only Black guy in the office"),
        ([B], "my employer wants palm-vein scans for clocking in and I don't want to hand mine over"),
    ],
    "es": [
        ([H], "a mi cuñado le han puesto un stent y ya vuelve a fumar como un carretero"),
        ([H], "notas del cliente: toma Trankimazin y Lexatin, de baja por ansiedad desde enero"),
        ([H], "mi viejo anda raro, se le olvida apagar el fuego y se pierde volviendo del mercado"),
        ([H], "tengo ladillas, ¿se quitan solas o tengo que ir al médico?"),
        ([H], "a la jefa le quitaron un pecho en verano y ahora va con peluca"),
        ([H], "mi chaval se mete rayas los findes, le encontré los billetes enrollados"),
        ([H], "me baja la regla cada dos semanas y la gine quiere hacerme una eco transvaginal"),
        ([F], "estoy en la lista de morosos por un préstamo rápido y no me dan ni un móvil a plazos"),
        ([F], "mi madre vive de una pensión no contributiva y le han cortado la luz"),
        ([F], "me he acogido a la ley de segunda oportunidad, ¿me pueden quitar el coche?"),
        ([F], "el camarero me pidió adelantarle el sueldo, tiene a los de la financiera detrás"),
        ([L], "a mi primo le han puesto una pulsera telemática por violencia de género"),
        ([L], "estoy tramitando el arraigo social y me piden un contrato que no tengo"),
        ([L], "mi suegro tiene un juicio rápido por conducir sin puntos"),
        ([S], "la monitora de mi hija es trans y unos padres quieren que la echen"),
        ([S], "mi mujer y yo hacemos intercambio de parejas y ahora un amigo lo sabe"),
        ([S], "salgo con un chico que conocí en Grindr y mis padres creen que es mi compañero de piso"),
        ([R], "mi hijo se ha metido en una iglesia evangélica y les da el diezmo de su sueldo"),
        ([R], "la vecina se convirtió al islam y la familia ya no la invita en Navidad"),
        ([P], "hago campaña por Sumar en el barrio y mi casero es de Vox, temo que me eche"),
        ([U], "estamos montando una sección sindical en el almacén y el encargado nos ha amenazado"),
        ([E], "el portero de la discoteca no dejó entrar a mi amigo por ser gitano"),
        ([E], "en el cole llaman 'el chino' a mi hijo adoptado y la tutora no hace nada"),
        ([B], "el banco me hizo un selfi con el DNI y una prueba de vida, ¿guardan mi cara?"),
    ],
    "de": [
        ([H], "bei Onkel Heinz haben sie einen Schatten auf der Lunge gesehen, nächste Woche ist die Bronchoskopie"),
        ([H], "Ticketnotiz: Anrufer ist im Substitutionsprogramm (Polamidon) und braucht ein neues Rezept"),
        ([H], "der Sohn vom Hausmeister kifft seit der achten Klasse jeden Tag und hat jetzt Psychosen"),
        ([H], "seit der Geburt verliere ich beim Husten Urin und traue mich nicht mehr joggen"),
        ([H], "meine Frau ist seit dem Burnout in der Tagesklinik, die Kinder fragen ständig warum"),
        ([H], "ich schlucke jeden Abend Tavor, sonst krieg ich kein Auge zu"),
        ([H], "der Azubi ist Diabetiker und spritzt sich heimlich auf der Toilette"),
        ([F], "seit der Scheidung lebe ich vom Dispo und die Sparkasse hat ihn jetzt gestrichen"),
        ([F], "Kundennotiz: Ratenpause beantragt, Einkommen weggebrochen, P-Konto eingerichtet"),
        ([F], "Papa hat die Vermögensauskunft abgeben müssen und schämt sich vor uns"),
        ([F], "die Nachbarin geht zur Tafel, seit ihr Mann weg ist, und will nicht, dass es jemand weiß"),
        ([L], "mein Schwager muss ins Gefängnis, die Ladung zum Strafantritt kam gestern"),
        ([L], "der Kollege muss zur MPU und darf bis dahin nicht fahren"),
        ([L], "meine Mutter lebt seit 2019 ohne Papiere hier, kann sie trotzdem zum Arzt?"),
        ([L], "gegen den Trainer meines Sohnes wird wegen Kinderpornografie ermittelt"),
        ([S], "mein Freund will unbedingt einen Dreier und ich weiß nicht, wie ich nein sagen soll"),
        ([S], "der Nachbarsjunge hat sich als nicht-binär geoutet und sein Vater redet nicht mehr mit ihm"),
        ([S], "ich habe Feigwarzen und schäme mich, damit zum Hautarzt zu gehen"),
        ([R], "ich bin neuapostolisch aufgewachsen und ausgestiegen, jetzt meidet mich die ganze Gemeinde"),
        ([R], "die Kollegin betet in der Pause im Lagerraum und der Chef findet das unmöglich"),
        ([P], "ich war auf der Demo gegen rechts und jetzt kursiert ein Foto von mir im Betrieb"),
        ([U], "wir gründen gerade einen Betriebsrat bei unserem Lieferdienst und die Schichtleiter machen Druck"),
        ([E], "der Vermieter hat abgesagt, als er meinen türkischen Nachnamen gehört hat"),
        ([B], "die Firma will für die Zutrittskontrolle einen Scan meiner Iris, wo wird der gespeichert?"),
    ],
    "fr": [
        ([H], "ma belle-mère perd la boule, elle a rangé ses clés dans le frigo trois fois cette semaine"),
        ([H], "notes du dossier : patient sous Subutex, rechute en février, suivi au CSAPA"),
        ([H], "mon mec prend de la kétamine tous les week-ends et il est devenu méconnaissable"),
        ([H], "j'ai de l'endométriose et je rate deux jours de boulot par mois à cause des douleurs"),
        ([H], "le voisin a fait une tentative, il est aux urgences psy depuis hier soir"),
        ([H], "je suis en ALD pour mon diabète et la mutuelle me demande le protocole de soins"),
        ([H], "la petite du deuxième a des TCA et ne mange plus que des pommes"),
        ([F], "on est fichés FICP depuis le crédit de la voiture et aucune banque ne veut nous prêter"),
        ([F], "je touche le RSA et la CAF me réclame un indu de 3 000 €"),
        ([F], "ma sœur joue tout son salaire au PMU et emprunte à Mamie pour payer le loyer"),
        ([F], "note CRM : client en impayés, commandement de payer reçu, échéancier refusé"),
        ([L], "mon fils est convoqué pour une composition pénale après une bagarre à la sortie du lycée"),
        ([L], "la femme de ménage attend son récépissé de la préfecture depuis six mois et ne peut plus travailler"),
        ([L], "le beau-frère porte un bracelet électronique jusqu'en septembre"),
        ([L], "je suis sous contrôle judiciaire et je dois pointer au commissariat chaque lundi"),
        ([S], "je crois que mon copain est sur des applis de rencontre gay, j'ai vu les notifs"),
        ([S], "ma fille de 17 ans prend la pilule en cachette et je viens de le découvrir"),
        ([S], "mon coloc est travailleur du sexe et il a peur que le proprio l'apprenne"),
        ([R], "le petit-fils fait le ramadan en cachette, ses parents sont athées"),
        ([R], "mon mari veut faire circoncire nos fils pour des raisons religieuses et moi je suis contre"),
        ([P], "j'étais gilet jaune sur les ronds-points et mon chef vient de l'apprendre"),
        ([U], "on monte une section Sud dans l'entrepôt et la direction nous a à l'œil"),
        ([E], "le videur a refoulé mon pote parce qu'il est rebeu"),
        ([B], "l'appli de la mutuelle veut une reconnaissance faciale et l'empreinte de ma voix, elle garde quoi ?"),
    ],
}

EVERYDAY = {
    "en": """Write a product description for a charcoal face mask, vegan and cruelty-free.
My cast iron pan has gone rusty, how do I bring it back?
Explain a bear market versus a recession for my econ homework.
Give me a gin cocktail that isn't too sweet for a summer barbecue.
Summarize the plot of Trainspotting in three sentences for a film club flyer.
Suggest funny names for our office fantasy football league.
Write a limerick about a tax auditor who loves cats.
What's the difference between a will and a trust, in general terms?
Set up a cron job that backs up /var/www every night at 2am.
Recommend a cooperative board game with a prison break theme for four players.
My sourdough starter smells like nail polish remover, is it dead?
Roughly how many calories does thirty minutes of swimming burn?
Our budgeting app launches Monday, write a tagline around "debt-free by design".
Why does Marbury v. Madison matter? Two paragraphs for a history quiz.
Draft a Slack message: staging crashed again, postmortem at 3pm, no blame.
What's a good bar mitzvah gift for a colleague's son, around fifty dollars?
Translate "the patient cat waited by the door all night" into French.
What stretches help people who sit at a desk all day?
How do I get a virus off my laptop without wiping it?
Plan a pub quiz for the student union, eight rounds including a music round.
Make a playlist for a Pride parade float, upbeat 2000s pop.
Explain how vaccines train the immune system, for a ten-year-old.
Customer notes: wants the blue sofa delivered after 5pm, prefers texts over calls.
Tool result: 3 open tickets: printer jam, VPN drops, password reset for the intern.""",
    "es": """¿Cómo se hace un cóctel sin alcohol para una comunión?
Escribe una reseña positiva de un bar de tapas de Triana.
Explica qué es la prima de riesgo para un trabajo de bachillerato.
¿Qué diferencia hay entre un juicio civil y uno penal, en general?
Mi gato se come las plantas, ¿cuáles son tóxicas para los gatos?
Receta de pulpo a la gallega para seis personas.
Hazme un plan para correr mi primera media maratón en 12 semanas.
¿Cómo elimino un virus del móvil Android sin perder las fotos?
Redacta un aviso para la comunidad de vecinos sobre la limpieza del portal.
¿Qué significa "deuda técnica" y cómo se lo explico a mi jefe?
Ideas de disfraces para una fiesta temática de policías y presos.
¿Cuál es la mejor época para ver la Semana Santa en Sevilla?
Escribe una función en JavaScript que devuelva la moda de un array.
Necesito un nombre para el grupo de WhatsApp de los padres del cole.
¿Cómo se quita una mancha de vino tinto de un mantel?
Resume "Crónica de una muerte anunciada" en cinco líneas.
Notas del cliente: quiere la cocina en blanco mate y la entrega antes de julio.
¿Cuántas calorías tiene una ración de paella?
Explícame el derecho de huelga en España, en general, para un examen.
Dame ideas para la despedida de soltera de mi prima, algo tranquilo.
Traduce al inglés: "la enfermera llegó tarde porque había huelga de metro".
¿Qué es un fondo indexado y qué comisiones son normales?
¿Cómo funciona el sistema inmunitario en las alergias? Para clase de biología.
Dame un guion para un vídeo de TikTok sobre cómo ahorrar en la compra.""",
    "de": """Wie entkalke ich eine Siebträgermaschine richtig?
Schreib einen Glückwunsch zur Konfirmation meines Patenkinds.
Was ist der Unterschied zwischen Insolvenz und Konkurs, allgemein erklärt?
Erklär mir Zinseszins an einem einfachen Beispiel.
Welche Brettspiele mit Gefängnis-Thema gibt es außer Monopoly?
Wie lange hält sich selbstgemachter Glühwein im Kühlschrank?
Rezept für vegane Maultaschen, bitte mit Einkaufsliste.
Schreib ein Bash-Skript, das Logdateien löscht, die älter als 30 Tage sind.
Wie pflege ich eine Lederjacke, die im Regen nass geworden ist?
Was ist ein Bandscheibenvorfall? Für ein Referat in Bio.
Formuliere eine Stellenanzeige für eine Pflegekraft in unserem Seniorenheim.
Welche Wanderwege im Harz sind für Kinder geeignet?
Kundennotiz: wünscht Rückruf wegen Lieferung der Waschmaschine, am besten vormittags.
Wie funktioniert die Briefwahl bei der Landtagswahl?
Tipps gegen Lampenfieber vor einer Präsentation?
Übersetze ins Englische: "Die Gewerkschaften verhandeln jedes Jahr über die Tariflöhne."
Erkläre den Begriff Schuldenbremse für die Schülerzeitung.
Wie bekomme ich Rotweinflecken aus dem Teppich?
Schlag mir einen lustigen Namen für unseren Kegelclub vor.
Was kostet ungefähr ein Flug nach Lissabon im Mai?
Wie viel sollte man beim Sport pro Stunde trinken?
Schreib eine freundliche Absage für eine Einladung zum Grillen.
Warum heißt der Karfreitag so? Kurz für Kinder erklärt.
Tool-Ergebnis: 4 offene Aufgaben: Backup prüfen, Drucker tauschen, Urlaubsplan, Zugang für die Praktikantin.""",
    "fr": """Comment faire une pâte brisée sans beurre ?
Écris un petit discours pour le baptême de mon filleul.
Explique la différence entre une action et une obligation en bourse.
Quels jeux de société pour une soirée entre collègues, ambiance enquête policière ?
Résume « Les Misérables » en dix lignes pour un exposé.
Comment détartrer une bouilloire avec du vinaigre ?
Propose un programme de course à pied pour un 10 km en deux mois.
Écris un script Python qui renomme des photos selon leur date.
Quelle est la différence entre un avocat et un notaire, en général ?
Comment fonctionne la sécurité sociale en France pour un étudiant étranger ?
Donne-moi des idées de cocktails sans alcool pour un pot de départ.
Rédige une annonce pour vendre mon vélo de course, taille 56.
Traduis : « la grève des contrôleurs a retardé tous les trains ».
Comment nettoyer des baskets blanches ?
Quels sont les symptômes d'une plante qui manque d'eau ?
Note client : souhaite la livraison du canapé après 18 h, préfère les SMS.
Explique la dette publique française simplement.
Organise une chasse au trésor pour l'anniversaire de mon neveu.
Comment on cuisine une blanquette de veau ?
Quel est le record du monde du marathon ?
Comment supprimer un virus sur un vieux PC Windows ?
Écris une lettre de motivation pour un poste d'aide-soignante.
Quels sont les horaires de visite du Mont-Saint-Michel ?
Fais-moi une liste de courses pour une semaine végétarienne.""",
}


def main():
    write("topics_private_r8.jsonl", private_docs(PRIVATE, 24))
    write("topics_everyday_r8.jsonl", everyday_docs(EVERYDAY, 24))


if __name__ == "__main__":
    main()
