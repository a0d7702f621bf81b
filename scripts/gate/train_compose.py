"""Composed training text for the topic model (train_topic_model.py --composed N), issue #42's
eighth round: a subject (a third person named by a role with no possessive, by a first name, or an
agent's or a tool's note about a person) and a situation of one category, built from frames and
long filler lists of each category's vocabulary in the four languages (conditions, drugs,
procedures, addictions, debts and benefits, arrests, courts and sentences, residence papers,
beliefs, orientations, parties, unions, origins, biometrics), so that the model learns the families
and the subject's shape rather than single sentences. Beside them their hard negatives: the same
fillers in general-knowledge frames (train_templates.GEN_FRAMES) and the same subjects with
everyday tasks.

Written from the round's dev data (the seventh round's held-out misses and the older dev sets)
and general knowledge of each category, not from the eighth round's held-out set: its rarer names
(its drugs, procedures, files and parties) are not in these lists. `Gen.choice` holds every fifth
entry back for validation.

Measured and not adopted (the committed models are trained without it, `--composed 0`): with
`--composed 6000` the thresholds that `pick` finds rise (0.62 -> 0.69 beside the lexicon) and
recall on the older sets falls; at the old threshold (0.62) the seventh round's private set gains
4 of 96 but the everyday sets flag more (everyday_r5 3 -> 5 of 160, everyday_42 1 -> 2, general
text of the fresh test set 0 -> 2 of 56): the model's everyday precision does not hold with them.
Kept for a later round (a larger model, or these with many more negatives).
"""

SUBJ = {
    "en": ["the guy from accounting", "the new girl on reception", "the cashier", "the delivery driver", "our intern", "the trainee",
           "the lady next door", "the bloke upstairs", "the night nurse", "the cleaner", "the receptionist", "the head chef",
           "the kid's football coach", "a friend of mine", "my mate", "my buddy", "the woman I carpool with", "the apprentice",
           "the tenant in flat 2", "our bookkeeper", "the student I tutor", "the foreman", "the guy I share a desk with", "{first}",
           "{first}", "{first}", "the team lead", "the barista at my café", "the security guard", "the teaching assistant"],
    "es": ["el de contabilidad", "la chica nueva de recepción", "la cajera", "el repartidor", "el becario", "la becaria",
           "la señora de al lado", "el del quinto", "la enfermera del turno de noche", "la limpiadora", "el recepcionista", "el cocinero",
           "el entrenador del niño", "un amigo mío", "mi colega", "un colega", "la mujer con la que comparto coche", "el aprendiz",
           "el inquilino del segundo", "la contable", "el alumno al que doy clases", "el encargado", "el chico que se sienta a mi lado",
           "{first}", "{first}", "{first}", "la jefa de equipo", "el panadero de la esquina", "el vigilante", "la profe de yoga"],
    "de": ["der Typ aus der Buchhaltung", "die Neue am Empfang", "die Kassiererin", "der Paketbote", "der Praktikant", "die Praktikantin",
           "die Frau von nebenan", "der Typ von oben", "die Nachtschwester", "die Putzfrau", "der Empfangsmitarbeiter", "der Koch",
           "der Fahrlehrer", "ein Freund von mir", "mein Kumpel", "ein Kumpel", "die Frau aus meiner Fahrgemeinschaft",
           "der Lehrling", "der Mieter im zweiten Stock", "die Buchhalterin", "der Schüler, dem ich Nachhilfe gebe", "der Vorarbeiter",
           "der Typ, mit dem ich mir den Schreibtisch teile", "{first}", "{first}", "{first}", "die Teamleiterin", "der Barista",
           "der Wachmann", "die Erzieherin"],
    "fr": ["le gars de la compta", "la nouvelle à l'accueil", "la caissière", "le livreur", "le stagiaire", "la stagiaire",
           "la dame d'à côté", "le type du dessus", "l'infirmière de nuit", "l'agent d'entretien", "le réceptionniste", "le cuisinier",
           "l'entraîneur du petit", "un ami à moi", "mon pote", "un pote", "la femme avec qui je fais du covoiturage", "l'apprenti",
           "le locataire du deuxième", "la comptable", "l'élève à qui je donne des cours", "le chef d'équipe", "le mec qui partage mon bureau",
           "{first}", "{first}", "{first}", "la cheffe de projet", "le serveur de mon café", "le vigile", "l'animatrice"],
}

# An agent's or a tool's note about a person: what follows is that person's.
NOTE = {
    "en": ["customer notes:", "case notes:", "ticket:", "user profile:", "intake form:", "caller says", "CRM:", "memory:", "context about the user:",
           "applicant file:", "support chat summary:", "HR note:"],
    "es": ["notas del cliente:", "notas del caso:", "ticket:", "perfil del usuario:", "ficha de ingreso:", "el llamante dice", "CRM:",
           "memoria:", "contexto del usuario:", "expediente:", "resumen del chat:", "nota de RR. HH.:"],
    "de": ["Kundennotiz:", "Fallnotiz:", "Ticket:", "Nutzerprofil:", "Aufnahmebogen:", "Anrufer sagt", "CRM:", "Gedächtnis:",
           "Kontext zum Nutzer:", "Antragsakte:", "Chat-Zusammenfassung:", "Personalnotiz:"],
    "fr": ["notes client :", "notes du dossier :", "ticket :", "profil utilisateur :", "fiche d'accueil :", "l'appelant dit", "CRM :",
           "mémoire :", "contexte utilisateur :", "dossier du demandeur :", "résumé du chat :", "note RH :"],
}

# Per category: frames ({s} the subject; {x} a filler of the category's list) and the fillers.
# The frames are third person; the notes take the fillers bare.
CAT = {
    "HEALTH": {
        "en": (["{s} has {x}", "{s} was just diagnosed with {x}", "{s} has been off work with {x} since spring", "{s} is being treated for {x}",
                "{s} told me in confidence about the {x}", "{s} is on {d} and it makes him sleepy", "{s} takes {d} every morning",
                "{s} is having {p} on Thursday", "{s} is back from {p} and can't lift anything", "{s} is {a}", "{s} has been {a} since the divorce"],
               ["lupus", "Crohn's disease", "multiple sclerosis", "COPD", "sleep apnea", "psoriasis", "hepatitis C", "glaucoma", "fibromyalgia",
                "bipolar disorder", "OCD", "PTSD", "a stomach ulcer", "gallstones", "kidney stones", "shingles", "a hernia", "angina",
                "heart failure", "atrial fibrillation", "a brain tumour", "leukaemia", "ovarian cancer", "testicular cancer", "psychosis",
                "long covid", "early dementia", "epilepsy", "coeliac disease", "IBS", "tinnitus", "postnatal depression", "a bad back",
                "a slipped disc", "liver cirrhosis", "an eating disorder", "panic attacks", "chronic pain", "endometritis", "a thyroid problem"]),
        "es": (["{s} tiene {x}", "a {s} le acaban de diagnosticar {x}", "{s} está de baja por {x} desde la primavera", "{s} está en tratamiento por {x}",
                "{s} me contó en confianza lo de {x}", "{s} toma {d} y va como dormido", "{s} se toma {d} cada mañana",
                "a {s} le hacen {p} el jueves", "{s} viene de {p} y no puede coger peso", "{s} {a}", "{s} {a} desde el divorcio"],
               ["lupus", "la enfermedad de Crohn", "esclerosis múltiple", "EPOC", "apnea del sueño", "psoriasis", "hepatitis C", "glaucoma",
                "fibromialgia", "trastorno bipolar", "TOC", "estrés postraumático", "una úlcera de estómago", "piedras en la vesícula",
                "cálculos en el riñón", "herpes zóster", "una hernia", "angina de pecho", "insuficiencia cardiaca", "fibrilación auricular",
                "un tumor cerebral", "leucemia", "cáncer de ovario", "cáncer de testículo", "un brote psicótico", "covid persistente",
                "demencia", "epilepsia", "celiaquía", "colon irritable", "acúfenos", "depresión posparto", "una hernia discal", "cirrosis",
                "un trastorno alimentario", "ataques de ansiedad", "dolor crónico", "hipotiroidismo"]),
        "de": (["{s} hat {x}", "bei {s} wurde gerade {x} festgestellt", "{s} ist seit dem Frühjahr wegen {x} krankgeschrieben",
                "{s} wird wegen {x} behandelt", "{s} hat mir im Vertrauen von der {x} erzählt", "{s} nimmt {d} und ist ständig müde",
                "{s} nimmt jeden Morgen {d}", "{s} bekommt am Donnerstag {p}", "{s} kommt gerade aus {p} und darf nichts heben", "{s} {a}",
                "{s} {a}, seit der Scheidung"],
               ["Lupus", "Morbus Crohn", "Multiple Sklerose", "COPD", "Schlafapnoe", "Schuppenflechte", "Hepatitis C", "Grünen Star",
                "Fibromyalgie", "eine bipolare Störung", "eine Zwangsstörung", "eine PTBS", "ein Magengeschwür", "Gallensteine",
                "Nierensteine", "Gürtelrose", "einen Leistenbruch", "Herzschwäche", "Vorhofflimmern", "einen Hirntumor", "Leukämie",
                "Eierstockkrebs", "Hodenkrebs", "eine Psychose", "Long Covid", "beginnende Demenz", "Epilepsie", "Zöliakie", "Reizdarm",
                "Tinnitus", "eine Wochenbettdepression", "einen Bandscheibenvorfall", "Leberzirrhose", "eine Essstörung", "Panikattacken",
                "chronische Schmerzen", "eine Schilddrüsenunterfunktion"]),
        "fr": (["{s} a {x}", "on vient de diagnostiquer {x} à {s}", "{s} est en arrêt pour {x} depuis le printemps", "{s} est soigné pour {x}",
                "{s} m'a parlé en confiance de {x}", "{s} prend {d} et dort debout", "{s} prend {d} tous les matins",
                "{s} passe {p} jeudi", "{s} sort de {p} et ne peut rien porter", "{s} {a}", "{s} {a} depuis le divorce"],
               ["un lupus", "la maladie de Crohn", "une sclérose en plaques", "une BPCO", "des apnées du sommeil", "du psoriasis",
                "une hépatite C", "un glaucome", "une fibromyalgie", "un trouble bipolaire", "des TOC", "un stress post-traumatique",
                "un ulcère à l'estomac", "des calculs biliaires", "des calculs rénaux", "un zona", "une hernie", "une angine de poitrine",
                "une insuffisance cardiaque", "une fibrillation auriculaire", "une tumeur au cerveau", "une leucémie", "un cancer de l'ovaire",
                "un cancer du testicule", "une bouffée délirante", "un covid long", "un début de démence", "de l'épilepsie", "la maladie cœliaque",
                "le côlon irritable", "des acouphènes", "une dépression post-partum", "une hernie discale", "une cirrhose",
                "un trouble alimentaire", "des crises d'angoisse", "des douleurs chroniques", "une hypothyroïdie"]),
    },
    "FINANCE": {
        "en": (["{s} is {x}", "{s} has been {x} since the layoff", "{s} told me they are {x}", "{s} keeps borrowing because they are {x}"],
               ["behind on the rent again", "drowning in payday loans", "on universal credit", "using the food bank", "in a debt management plan",
                "declaring bankruptcy", "two months behind on the mortgage", "getting letters from debt collectors", "having wages docked for arrears",
                "in their overdraft every month", "hiding gambling debts", "on benefits since the accident", "facing repossession of the car",
                "on a county court judgment", "living on credit cards", "selling the furniture to pay the gas", "unable to pay the tax bill",
                "sofa-surfing after the eviction", "on a payment plan with the energy company", "refused every loan because of bad credit"]),
        "es": (["{s} {x}", "{s} {x} desde el ERE", "{s} me contó que {x}", "{s} pide prestado porque {x}"],
               ["debe otra vez el alquiler", "está ahogado en minicréditos", "cobra el subsidio", "va al banco de alimentos", "ha pedido una reunificación de deudas",
                "se ha declarado en concurso", "lleva dos meses sin pagar la hipoteca", "recibe cartas de una empresa de recobro", "tiene la nómina embargada",
                "está en números rojos cada mes", "esconde deudas de juego", "vive de una ayuda desde el accidente", "está a punto de perder el coche por impago",
                "tiene una deuda con Hacienda que no puede pagar", "vive de las tarjetas", "vende los muebles para pagar el gas",
                "duerme en casa de amigos desde el desahucio", "no consigue ningún préstamo por su historial", "ha pedido un aplazamiento de la deuda"]),
        "de": (["{s} {x}", "{s} {x}, seit der Kündigung", "{s} hat mir erzählt, dass er {x}", "{s} leiht sich Geld, weil er {x}"],
               ["ist wieder mit der Miete im Rückstand", "steckt in Kurzzeitkrediten fest", "lebt von Bürgergeld", "ist auf Lebensmittelspenden angewiesen",
                "ist in der Schuldnerberatung", "hat Insolvenz angemeldet", "zahlt seit zwei Monaten die Hausrate nicht",
                "bekommt Briefe vom Inkassobüro", "hat eine Lohnpfändung", "ist jeden Monat im Dispo", "verheimlicht Spielschulden",
                "lebt seit dem Unfall von Sozialleistungen", "soll das Auto wegen der Raten abgeben", "hat Steuerschulden, die er nicht zahlen kann",
                "lebt von Kreditkarten", "verkauft Möbel, um das Gas zu zahlen", "schläft bei Freunden seit der Räumung",
                "bekommt wegen der Schufa keinen Kredit mehr", "hat eine Stundung beantragt"]),
        "fr": (["{s} {x}", "{s} {x} depuis le licenciement", "{s} m'a dit qu'il {x}", "{s} emprunte parce qu'il {x}"],
               ["a encore du retard de loyer", "croule sous les crédits rapides", "touche les minima sociaux", "va aux Restos du cœur",
                "a un dossier à la Banque de France", "est en faillite personnelle", "ne paie plus son prêt immobilier depuis deux mois",
                "reçoit des lettres d'une société de recouvrement", "a une saisie sur salaire", "est à découvert tous les mois",
                "cache des dettes de jeu", "vit des aides depuis l'accident", "va se faire saisir la voiture", "doit de l'argent au fisc",
                "vit à crédit", "vend ses meubles pour payer le gaz", "dort chez des amis depuis l'expulsion",
                "se fait refuser tous les prêts", "a demandé un étalement de sa dette"]),
    },
    "LEGAL": {
        "en": (["{s} {x}", "{s} {x} last year", "{s} told me they {x}", "I just found out {s} {x}"],
               ["was arrested for assault", "is on probation", "is awaiting trial for fraud", "got a suspended sentence", "has a criminal record",
                "was deported last spring", "has no papers", "is in immigration detention", "lost her asylum appeal", "is on parole",
                "has a court date for drink driving", "is under investigation for tax fraud", "was charged with possession", "did time for robbery",
                "has a restraining order against him", "is on the sex offenders register", "got community service for vandalism",
                "is being sued by his ex-employer", "was caught stealing at work", "has a warrant out"]),
        "es": (["{s} {x}", "{s} {x} el año pasado", "{s} me contó que {x}", "me acabo de enterar de que {s} {x}"],
               ["fue detenido por agresión", "está en libertad vigilada", "espera juicio por estafa", "tiene una condena suspendida",
                "tiene antecedentes", "fue deportado", "está sin papeles", "está en un CIE", "perdió el recurso de asilo", "está en tercer grado",
                "tiene juicio por alcoholemia", "está investigado por fraude fiscal", "fue imputado por tenencia", "estuvo preso por robo",
                "tiene una orden de alejamiento", "tiene que hacer trabajos comunitarios", "está demandado por su antigua empresa",
                "lo pillaron robando en el trabajo", "tiene una orden de busca y captura"]),
        "de": (["{s} {x}", "{s} {x}, letztes Jahr", "{s} hat mir erzählt, dass er {x}", "ich hab gerade erfahren, dass {s} {x}"],
               ["wurde wegen Körperverletzung festgenommen", "steht unter Bewährung", "wartet auf den Prozess wegen Betrugs",
                "hat eine Bewährungsstrafe", "ist vorbestraft", "wurde abgeschoben", "hat keine Papiere", "sitzt in Abschiebehaft",
                "hat die Asylklage verloren", "ist auf Bewährung draußen", "hat einen Gerichtstermin wegen Trunkenheit am Steuer",
                "wird wegen Steuerbetrugs ermittelt", "wurde wegen Drogenbesitzes angeklagt", "saß wegen Raubes", "hat ein Kontaktverbot",
                "muss Sozialstunden leisten", "wird vom alten Arbeitgeber verklagt", "wurde beim Klauen auf der Arbeit erwischt",
                "wird per Haftbefehl gesucht"]),
        "fr": (["{s} {x}", "{s} {x} l'an dernier", "{s} m'a dit qu'il {x}", "je viens d'apprendre que {s} {x}"],
               ["a été arrêté pour violences", "est en sursis probatoire", "attend son procès pour escroquerie", "a pris du sursis",
                "a un casier", "a été expulsé du territoire", "est sans papiers", "est en centre de rétention", "a perdu son recours à la CNDA",
                "est en liberté conditionnelle", "passe au tribunal pour alcool au volant", "fait l'objet d'une enquête pour fraude fiscale",
                "a été mis en examen pour détention de stupéfiants", "a fait de la prison pour vol", "a une interdiction d'approcher son ex",
                "doit faire des travaux d'intérêt général", "est poursuivi par son ancien employeur", "s'est fait prendre à voler au travail",
                "est sous le coup d'un mandat d'arrêt"]),
    },
    "SEX_LIFE": {
        "en": (["{s} {x}", "{s} told me they {x}", "turns out {s} {x}"],
               ["is gay but not out at work", "is bisexual and married", "is seeing someone behind her husband's back", "has herpes",
                "caught gonorrhoea", "is trans and transitioning", "hooks up with strangers from apps", "is in a polyamorous relationship",
                "is a sex worker", "had an abortion", "is asexual", "sleeps with his boss", "has erectile problems", "is a lesbian"]),
        "es": (["{s} {x}", "{s} me contó que {x}", "resulta que {s} {x}"],
               ["es gay pero no ha salido del armario en el trabajo", "es bisexual y está casada", "le pone los cuernos a su marido",
                "tiene herpes", "pilló gonorrea", "es trans y está en transición", "queda con desconocidos de aplicaciones",
                "tiene una relación poliamorosa", "ejerce la prostitución", "abortó", "es asexual", "se acuesta con su jefe",
                "tiene problemas de erección", "es lesbiana"]),
        "de": (["{s} {x}", "{s} hat mir erzählt, dass er {x}", "es stellt sich raus, {s} {x}"],
               ["ist schwul, aber auf der Arbeit nicht geoutet", "ist bisexuell und verheiratet", "betrügt ihren Mann", "hat Herpes",
                "hat sich Gonorrhö geholt", "ist trans und in Transition", "trifft Fremde über Apps", "lebt polyamor",
                "arbeitet als Sexarbeiterin", "hat abgetrieben", "ist asexuell", "schläft mit seiner Chefin", "hat Erektionsprobleme",
                "ist lesbisch"]),
        "fr": (["{s} {x}", "{s} m'a dit qu'il {x}", "en fait {s} {x}"],
               ["est gay mais pas out au travail", "est bi et mariée", "trompe son mari", "a de l'herpès", "a chopé une gonorrhée",
                "est trans et en transition", "voit des inconnus rencontrés sur des applis", "vit une relation polyamoureuse",
                "se prostitue", "a avorté", "est asexuel", "couche avec sa patronne", "a des problèmes d'érection", "est lesbienne"]),
    },
    "RELIGION": {
        "en": (["{s} {x}", "{s} told me they {x}", "{s} {x} and the family doesn't know"],
               ["became a Jehovah's Witness", "converted to Islam", "left the church", "is an atheist in a very religious family",
                "fasts for Ramadan", "wears a headscarf now", "joined an evangelical church", "became a Buddhist", "is Orthodox Jewish",
                "prays five times a day", "gave up her faith", "is a Scientologist", "goes to a Pentecostal church every Sunday"]),
        "es": (["{s} {x}", "{s} me contó que {x}", "{s} {x} y la familia no lo sabe"],
               ["se hizo testigo de Jehová", "se convirtió al islam", "dejó la Iglesia", "es ateo en una familia muy religiosa",
                "hace el ramadán", "ahora lleva velo", "se metió en una iglesia pentecostal", "se hizo budista", "es judía ortodoxa",
                "reza cinco veces al día", "perdió la fe", "es de la cienciología", "va al culto cada domingo"]),
        "de": (["{s} {x}", "{s} hat mir erzählt, dass er {x}", "{s} {x}, und die Familie weiß es nicht"],
               ["ist Zeuge Jehovas geworden", "ist zum Islam übergetreten", "ist aus der Kirche ausgetreten", "ist Atheist in einer frommen Familie",
                "fastet im Ramadan", "trägt jetzt Kopftuch", "ist in eine Freikirche eingetreten", "ist Buddhist geworden", "ist orthodoxe Jüdin",
                "betet fünfmal am Tag", "hat den Glauben verloren", "ist bei Scientology", "geht jeden Sonntag in eine Pfingstgemeinde"]),
        "fr": (["{s} {x}", "{s} m'a dit qu'il {x}", "{s} {x} et la famille ne le sait pas"],
               ["est devenu témoin de Jéhovah", "s'est converti à l'islam", "a quitté l'Église", "est athée dans une famille très croyante",
                "jeûne pendant le ramadan", "porte le voile maintenant", "est entré dans une église évangélique", "est devenu bouddhiste",
                "est juive orthodoxe", "prie cinq fois par jour", "a perdu la foi", "est scientologue", "va au culte tous les dimanches"]),
    },
    "POLITICS": {
        "en": (["{s} {x}", "{s} {x} and is scared the boss finds out"],
               ["is a member of the Communist Party", "campaigns for the far right", "stood as a Labour candidate", "goes to every climate protest",
                "was arrested at a protest", "donates to the Tories", "is a party activist", "votes for the nationalists"]),
        "es": (["{s} {x}", "{s} {x} y teme que el jefe se entere"],
               ["está afiliado al Partido Comunista", "hace campaña para la extrema derecha", "fue en las listas del PSOE",
                "va a todas las manifestaciones", "lo detuvieron en una protesta", "dona dinero al PP", "es militante de un partido",
                "vota a los independentistas"]),
        "de": (["{s} {x}", "{s} {x} und hat Angst, dass der Chef es erfährt"],
               ["ist Mitglied der Linken", "macht Wahlkampf für die Rechten", "hat für die SPD kandidiert", "geht auf jede Klimademo",
                "wurde auf einer Demo festgenommen", "spendet an die CDU", "ist Parteimitglied", "wählt die Nationalisten"]),
        "fr": (["{s} {x}", "{s} {x} et a peur que le patron l'apprenne"],
               ["est encarté au Parti communiste", "milite pour l'extrême droite", "était candidat pour le PS", "va à toutes les manifs pour le climat",
                "a été interpellé en manif", "donne aux Républicains", "est militant d'un parti", "vote pour les nationalistes"]),
    },
    "UNION": {
        "en": (["{s} {x}", "{s} {x} and management found out"],
               ["joined the union", "is the shop steward", "is organising a strike", "signed a union card", "is a union rep",
                "is trying to unionise the store", "got fired for union activity"]),
        "es": (["{s} {x}", "{s} {x} y la empresa se ha enterado"],
               ["se afilió al sindicato", "es delegado sindical", "organiza una huelga", "firmó la afiliación", "es del comité de empresa",
                "intenta sindicalizar la tienda", "fue despedido por actividad sindical"]),
        "de": (["{s} {x}", "{s} {x}, und die Geschäftsleitung weiß es"],
               ["ist in die Gewerkschaft eingetreten", "ist Vertrauensmann", "organisiert einen Streik", "hat den Mitgliedsantrag unterschrieben",
                "sitzt im Betriebsrat", "will den Laden gewerkschaftlich organisieren", "wurde wegen Gewerkschaftsarbeit gekündigt"]),
        "fr": (["{s} {x}", "{s} {x} et la direction l'a appris"],
               ["a adhéré au syndicat", "est délégué syndical", "organise une grève", "a pris sa carte syndicale", "est élu au CSE",
                "essaie de syndiquer le magasin", "a été licencié pour activité syndicale"]),
    },
    "ETHNICITY": {
        "en": (["{s} {x}", "{s} {x}, and it happens all the time"],
               ["gets called slurs because he's Pakistani", "is Black and keeps getting passed over for promotion",
                "was refused a flat because she's Roma", "gets stopped by police because he's Arab", "is mocked for her Nigerian accent",
                "hides that he's half Turkish", "was told to go back to Poland", "is Aboriginal and gets followed in shops"]),
        "es": (["{s} {x}", "{s} {x}, y le pasa siempre"],
               ["recibe insultos por ser paquistaní", "es negra y nunca la ascienden", "no consiguió piso por ser gitana",
                "lo para la policía por ser árabe", "se burlan de su acento ecuatoriano", "esconde que es medio marroquí",
                "le dijeron que se volviera a Rumanía", "es indígena y lo siguen en las tiendas"]),
        "de": (["{s} {x}", "{s} {x}, und das passiert ständig"],
               ["wird beschimpft, weil er Pakistaner ist", "ist Schwarz und wird bei jeder Beförderung übergangen",
                "hat keine Wohnung bekommen, weil sie Romni ist", "wird von der Polizei kontrolliert, weil er Araber ist",
                "wird wegen ihres polnischen Akzents verspottet", "verheimlicht, dass er halb Kurde ist", "sollte zurück nach Rumänien gehen",
                "wird als Afrikaner im Laden verfolgt"]),
        "fr": (["{s} {x}", "{s} {x}, et ça arrive tout le temps"],
               ["se fait insulter parce qu'il est pakistanais", "est noire et n'a jamais de promotion",
                "s'est vu refuser un appart parce qu'elle est rom", "se fait contrôler parce qu'il est arabe", "se fait moquer pour son accent portugais",
                "cache qu'il est à moitié kabyle", "s'est entendu dire de rentrer en Roumanie", "est antillais et se fait suivre dans les magasins"]),
    },
    "BIOMETRIC": {
        "en": (["{s} {x}", "the company {x}"],
               ["had to give a fingerprint to clock in", "has a face scan stored by the landlord's door system", "gave a DNA sample to an ancestry site",
                "had an iris scan at the airport kiosk", "has a voice print on the bank's hotline", "uses a retina scan to unlock the lab"]),
        "es": (["{s} {x}", "la empresa {x}"],
               ["tuvo que dar la huella para fichar", "tiene la cara guardada en el sistema del portal", "mandó una muestra de ADN a una web de genealogía",
                "se escaneó el iris en el aeropuerto", "tiene la voz registrada en el banco", "usa un escáner de retina en el laboratorio"]),
        "de": (["{s} {x}", "die Firma {x}"],
               ["musste einen Fingerabdruck zum Stempeln abgeben", "hat sein Gesicht im Türsystem gespeichert", "hat eine DNA-Probe an eine Ahnenseite geschickt",
                "hat am Flughafen die Iris scannen lassen", "hat ein Stimmprofil bei der Bank", "öffnet das Labor mit einem Netzhautscan"]),
        "fr": (["{s} {x}", "l'entreprise {x}"],
               ["a dû donner son empreinte pour pointer", "a son visage enregistré dans l'interphone", "a envoyé son ADN à un site de généalogie",
                "s'est fait scanner l'iris à l'aéroport", "a une empreinte vocale à la banque", "ouvre le labo avec un scan de la rétine"]),
    },
}

# HEALTH's other slots: drugs, procedures and places, and states of addiction or mind (a verb
# phrase of the third person).
DRUG = {
    "en": ["methadone", "naltrexone", "lithium", "olanzapine", "risperidone", "venlafaxine", "mirtazapine", "pregabalin", "tramadol", "oxycodone",
           "insulin", "prednisone", "tamoxifen", "clozapine", "zolpidem", "morphine patches", "HIV meds", "Humira", "methotrexate", "beta blockers"],
    "es": ["metadona", "naltrexona", "litio", "olanzapina", "risperidona", "venlafaxina", "mirtazapina", "pregabalina", "tramadol", "oxicodona",
           "insulina", "prednisona", "tamoxifeno", "clozapina", "zolpidem", "parches de morfina", "antirretrovirales", "Humira", "metotrexato", "betabloqueantes"],
    "de": ["Methadon", "Naltrexon", "Lithium", "Olanzapin", "Risperidon", "Venlafaxin", "Mirtazapin", "Pregabalin", "Tramadol", "Oxycodon",
           "Insulin", "Prednison", "Tamoxifen", "Clozapin", "Zolpidem", "Morphiumpflaster", "HIV-Medikamente", "Humira", "Methotrexat", "Betablocker"],
    "fr": ["de la méthadone", "de la naltrexone", "du lithium", "de l'olanzapine", "de la rispéridone", "de la venlafaxine", "de la mirtazapine",
           "de la prégabaline", "du tramadol", "de l'oxycodone", "de l'insuline", "de la prednisone", "du tamoxifène", "de la clozapine",
           "du zolpidem", "des patchs de morphine", "une trithérapie", "de l'Humira", "du méthotrexate", "des bêtabloquants"],
}
PROC = {
    "en": ["a hysterectomy", "a colonoscopy", "dialysis", "chemo", "a bone marrow biopsy", "a brain MRI", "IVF", "a vasectomy", "a lumbar puncture",
           "a heart bypass", "ECT", "rehab", "detox", "the psych ward", "a day clinic", "an endoscopy", "a gastric band operation"],
    "es": ["una histerectomía", "una colonoscopia", "diálisis", "quimio", "una biopsia de médula", "una resonancia del cerebro", "una FIV",
           "una vasectomía", "una punción lumbar", "un bypass", "electroshock", "desintoxicación", "la planta de psiquiatría", "un hospital de día",
           "una endoscopia", "una reducción de estómago", "un cateterismo"],
    "de": ["eine Gebärmutterentfernung", "eine Darmspiegelung", "die Dialyse", "Chemo", "eine Knochenmarkpunktion", "ein MRT vom Kopf",
           "eine künstliche Befruchtung", "eine Vasektomie", "eine Lumbalpunktion", "eine Bypass-OP", "eine Elektrokrampftherapie", "den Entzug",
           "die Entgiftung", "der Psychiatrie", "eine Magenspiegelung", "eine Magenverkleinerung", "einen Herzkatheter"],
    "fr": ["une hystérectomie", "une coloscopie", "une dialyse", "une chimio", "une biopsie de moelle", "une IRM cérébrale", "une FIV",
           "une vasectomie", "une ponction lombaire", "un pontage", "des électrochocs", "une cure de sevrage", "l'hôpital psychiatrique",
           "un hôpital de jour", "une fibroscopie", "une sleeve", "une coronarographie"],
}
ADDICT = {
    "en": ["using heroin again", "drinking a bottle of vodka a day", "hooked on painkillers", "smoking crack", "back in rehab", "relapsing every few weeks",
           "high most days", "addicted to sleeping pills", "self-harming", "not eating at all", "suicidal"],
    "es": ["vuelve a la heroína", "se bebe una botella de vodka al día", "está enganchado a los calmantes", "fuma crack", "ha vuelto a desintoxicación",
           "recae cada pocas semanas", "va colocado casi siempre", "depende de las pastillas para dormir", "se autolesiona",
           "no come nada", "habla de quitarse la vida"],
    "de": ["ist wieder auf Heroin", "trinkt eine Flasche Wodka am Tag", "ist abhängig von Schmerzmitteln", "raucht Crack", "ist wieder im Entzug",
           "wird alle paar Wochen rückfällig", "ist fast jeden Tag high", "kommt nicht von den Schlaftabletten los", "verletzt sich selbst", "isst gar nichts mehr", "hat Suizidgedanken"],
    "fr": ["a replongé dans l'héroïne", "boit une bouteille de vodka par jour", "est accro aux antidouleurs", "fume du crack", "est retourné en cure",
           "rechute toutes les deux semaines", "est défoncé presque tous les jours", "ne peut plus se passer de somnifères", "se mutile", "ne mange plus rien", "a des idées suicidaires"],
}

# The hard negatives: the same subjects with everyday tasks.
EVERYDAY = {
    "en": ["{s} asked me for a lasagne recipe", "{s} needs a new laptop for under 600 dollars", "{s} wants ideas for a birthday party",
           "{s} is moving flats on Saturday, what should we pack first?", "{s} asked how to set up a VPN on her phone",
           "{s} is learning Spanish, suggest a podcast", "{s} wants to run a half marathon, make a plan", "{s} sent me this spreadsheet, how do I sum a column?",
           "{s} is retiring next month, write a card", "{s} loves hiking, suggest a present", "{s} needs a cover letter for a barista job",
           "{s} asked what wine goes with lamb"],
    "es": ["{s} me pidió una receta de lasaña", "{s} necesita un portátil de menos de 600 euros", "{s} quiere ideas para una fiesta de cumpleaños",
           "{s} se muda el sábado, ¿qué empaquetamos primero?", "{s} preguntó cómo configurar una VPN en el móvil",
           "{s} está aprendiendo inglés, recomiéndale un pódcast", "{s} quiere correr una media maratón, hazle un plan",
           "{s} me mandó una hoja de cálculo, ¿cómo sumo una columna?", "{s} se jubila el mes que viene, escribe una tarjeta",
           "a {s} le encanta el senderismo, sugiere un regalo", "{s} necesita una carta de presentación para un trabajo de camarero",
           "{s} preguntó qué vino va con el cordero"],
    "de": ["{s} wollte ein Rezept für Lasagne", "{s} braucht einen Laptop unter 600 Euro", "{s} will Ideen für eine Geburtstagsfeier",
           "{s} zieht am Samstag um, was packen wir zuerst?", "{s} hat gefragt, wie man ein VPN am Handy einrichtet",
           "{s} lernt Spanisch, schlag einen Podcast vor", "{s} will einen Halbmarathon laufen, mach einen Plan",
           "{s} hat mir eine Tabelle geschickt, wie summiere ich eine Spalte?", "{s} geht nächsten Monat in Rente, schreib eine Karte",
           "{s} wandert gern, schlag ein Geschenk vor", "{s} braucht ein Anschreiben für einen Job als Barista", "{s} hat gefragt, welcher Wein zu Lamm passt"],
    "fr": ["{s} m'a demandé une recette de lasagnes", "{s} cherche un ordinateur à moins de 600 euros", "{s} veut des idées pour une fête d'anniversaire",
           "{s} déménage samedi, on emballe quoi en premier ?", "{s} a demandé comment installer un VPN sur son téléphone",
           "{s} apprend l'anglais, propose un podcast", "{s} veut courir un semi-marathon, fais un plan",
           "{s} m'a envoyé un tableur, comment additionner une colonne ?", "{s} part à la retraite le mois prochain, écris une carte",
           "{s} adore la randonnée, propose un cadeau", "{s} a besoin d'une lettre de motivation pour un poste de serveur",
           "{s} a demandé quel vin servir avec de l'agneau"],
}

# Nouns of the other categories that general-knowledge frames take ("what is a union?").
GENERAL = {
    "en": ["a union", "a strike", "collective bargaining", "bankruptcy", "a payday loan", "probation", "parole", "asylum", "a deportation order",
           "a criminal record", "Ramadan", "the Reformation", "Jehovah's Witnesses", "secularism", "coming out", "gender identity", "racism",
           "the far right", "a general election", "facial recognition", "fingerprint scanners", "a debt spiral", "inflation", "a mortgage"],
    "es": ["un sindicato", "una huelga", "la negociación colectiva", "la quiebra", "un minicrédito", "la libertad condicional", "el asilo",
           "una orden de expulsión", "los antecedentes penales", "el ramadán", "la Reforma protestante", "los testigos de Jehová", "el laicismo",
           "salir del armario", "la identidad de género", "el racismo", "la extrema derecha", "unas elecciones generales",
           "el reconocimiento facial", "los lectores de huella", "la inflación", "una hipoteca"],
    "de": ["eine Gewerkschaft", "ein Streik", "Tarifverhandlungen", "eine Insolvenz", "ein Kurzzeitkredit", "Bewährung", "Asyl",
           "eine Abschiebung", "ein Führungszeugnis", "der Ramadan", "die Reformation", "die Zeugen Jehovas", "Laizismus", "ein Coming-out",
           "Geschlechtsidentität", "Rassismus", "die extreme Rechte", "eine Bundestagswahl", "Gesichtserkennung", "Fingerabdruckscanner",
           "die Inflation", "eine Hypothek"],
    "fr": ["un syndicat", "une grève", "la négociation collective", "la faillite", "un crédit renouvelable", "la liberté conditionnelle",
           "le droit d'asile", "une OQTF", "le casier judiciaire", "le ramadan", "la Réforme", "les témoins de Jéhovah", "la laïcité",
           "le coming out", "l'identité de genre", "le racisme", "l'extrême droite", "une présidentielle", "la reconnaissance faciale",
           "les lecteurs d'empreintes", "l'inflation", "un prêt immobilier"],
}

# Everyday messages to summarise, translate or correct: the quoted text is nobody's matter.
QUOTED = {
    "en": (["Summarise this message: \"{q}\"", "Translate into Spanish: \"{q}\"", "Fix the grammar: \"{q}\"", "Reply politely to: \"{q}\""],
           ["Hi all, the team meeting moves to Thursday, please bring your laptops", "The invoice for March is attached, let me know if anything is missing",
            "Reminder: the office is closed on Monday for the bank holiday", "Could you send me the slides before lunch?",
            "The school trip to the zoo is on Friday, kids need a packed lunch", "Our landlord says the boiler will be serviced next week",
            "I think we should start the meeting earlier tomorrow", "The parcel was left with the neighbour at number 12"]),
    "es": (["Resume este mensaje: \"{q}\"", "Traduce al inglés: \"{q}\"", "Corrige la ortografía: \"{q}\"", "Contesta con educación a: \"{q}\""],
           ["Hola a todos, la reunión del equipo pasa al jueves, traed los portátiles", "Os adjunto la factura de marzo, decidme si falta algo",
            "Recordad que el lunes la oficina está cerrada por festivo", "¿Me mandas las diapositivas antes de comer?",
            "La excursión al zoo es el viernes, los niños tienen que llevar bocadillo", "El casero dice que la caldera la revisan la semana que viene",
            "Creo que mañana deberíamos empezar antes la reunión", "Dejaron el paquete con la vecina del cuarto"]),
    "de": (["Fass diese Nachricht zusammen: \"{q}\"", "Übersetze ins Englische: \"{q}\"", "Korrigier die Kommas: \"{q}\"", "Antworte höflich auf: \"{q}\""],
           ["Hallo zusammen, das Teammeeting ist auf Donnerstag verschoben, bitte Laptops mitbringen", "Anbei die Rechnung für März, sagt Bescheid, wenn etwas fehlt",
            "Erinnerung: am Montag ist das Büro wegen des Feiertags zu", "Kannst du mir die Folien vor dem Mittag schicken?",
            "Der Schulausflug in den Zoo ist am Freitag, die Kinder brauchen ein Pausenbrot", "Der Vermieter sagt, die Heizung wird nächste Woche gewartet",
            "Ich glaube, dass der Termin am Freitag besser passt", "Das Paket wurde beim Nachbarn in Nummer 12 abgegeben"]),
    "fr": (["Résume ce message : « {q} »", "Traduis en anglais : « {q} »", "Corrige l'orthographe : « {q} »", "Réponds poliment à : « {q} »"],
           ["Bonjour à tous, la réunion d'équipe est décalée à jeudi, pensez à vos ordinateurs", "Vous trouverez la facture de mars en pièce jointe",
            "Rappel : le bureau est fermé lundi pour le jour férié", "Tu peux m'envoyer les diapos avant midi ?",
            "La sortie au zoo a lieu vendredi, prévoir un pique-nique", "Le syndic dit que la chaudière sera révisée la semaine prochaine",
            "Je pense qu'on devrait commencer la réunion plus tôt demain", "Le colis a été déposé chez la voisine du 12"]),
}

FIRST = {
    "en": ["Kevin", "Priya", "Tom", "Jess", "Marcus", "Leah"],
    "es": ["Javi", "Lucía", "Andrés", "Marta", "Iker", "Nerea"],
    "de": ["Jonas", "Mia", "Lukas", "Hanna", "Timo", "Lea"],
    "fr": ["Julien", "Manon", "Hugo", "Chloé", "Théo", "Inès"],
}

NOUN_CATS = ("HEALTH",)  # whose fillers are nouns that general-knowledge frames can take


def subject(g, lang):
    s = g.choice(SUBJ[lang])
    return s.replace("{first}", g.r.choice(FIRST[lang]))


def sensitive(g, lang, cat):
    """A third person's matter of `cat`, or an agent's note of it."""
    frames, fillers = CAT[cat][lang]
    x = g.choice(fillers)
    if g.r.random() < 0.25:
        extra = g.choice(DRUG[lang]) if cat == "HEALTH" and g.r.random() < 0.5 else ""
        text = f"{g.choice(NOTE[lang])} {x}" + (f", {extra}" if extra else "")
    else:
        f = g.choice(frames)
        text = (f.replace("{s}", subject(g, lang)).replace("{x}", x).replace("{d}", g.choice(DRUG[lang]))
                .replace("{p}", g.choice(PROC[lang])).replace("{a}", g.choice(ADDICT[lang])))
    return {"text": g.casing(text[0].upper() + text[1:]), "categories": [cat], "kind": "sensitive", "lang": lang}


def negative(g, lang, gen_frames):
    """The same subjects with an everyday task, or the same vocabulary asked about in general."""
    x = g.r.random()
    if x < 0.4:
        text = g.choice(EVERYDAY[lang]).replace("{s}", subject(g, lang))
        return {"text": g.casing(text[0].upper() + text[1:]), "categories": [], "kind": "everyday", "lang": lang}
    if x < 0.55:
        frames, quotes = QUOTED[lang]
        text = g.choice(frames).replace("{q}", g.choice(quotes))
        return {"text": text, "categories": [], "kind": "everyday", "lang": lang}
    pool = CAT["HEALTH"][lang][1] + PROC[lang] + DRUG[lang] + GENERAL[lang] * 2
    text = g.choice(gen_frames[lang]).replace("{x}", g.choice(pool))
    return {"text": g.casing(text), "categories": [], "kind": "general", "lang": lang}


def docs(g, n, langs, gen_frames):
    """`n` documents: about half sensitive (every category, HEALTH, FINANCE and LEGAL the most),
    half their hard negatives."""
    cats = ["HEALTH"] * 4 + ["FINANCE"] * 3 + ["LEGAL"] * 3 + ["SEX_LIFE", "RELIGION", "POLITICS", "UNION", "ETHNICITY", "BIOMETRIC"]
    out = []
    for _ in range(n):
        lang = g.r.choice(langs)
        out.append(sensitive(g, lang, g.r.choice(cats)) if g.r.random() < 0.5 else negative(g, lang, gen_frames))
    return out
