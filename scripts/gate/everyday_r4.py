"""More everyday first-person requests for the topic model's training (train_topic_model.py
--everyday-r4 N), for issue #27's fourth round: a relative named with a plan, a meal, a present,
a lesson or a visit, and body and money words in requests that are no one's private matter (a
workout, a haircut, a tip, a unit conversion, a savings goal, a price comparison). The learned
model read "my" + a relative, or a body or money word, as a person's own matter; these are its
hard negatives beside everyday_templates.py's.

How they were kept from mirroring the held-out sets: written after topics_r4_test.jsonl
(scripts/gate/r4_topics.py) was committed and measured, with other activities, meals, presents
and sums than its sentences (none copied or reworded), and without opening the older test sets;
everyday_dev.py's and r4_dev.py's lines (the dev sets that measure this) are not copied either.
No health, debt, legal, belief, sex or origin words: nothing a sensitive request is made of.
`Gen.choice` in train_topic_model.py holds every fifth entry of each list back for validation.
"""

FRAMES = {
    "en": [
        "{rel} and I want to {hobby} this summer, {ask}", "what should I cook for {rel} tonight? {pref}",
        "help me pick a present for {rel}, {likes}", "{rel} is staying with us for {n} days, {ask}",
        "write a short {msg} for {rel}", "{rel} wants to {hobby}, {ask}",
        "I'm teaching {rel} to {lesson}, {ask}", "{rel} and I have a free saturday, {ask}",
        "give me a {n} minute {workout}", "what should I eat after {sport}?", "which {gear} should I buy for {sport}?",
        "how much is {pct}% of {sum}?", "convert {n} {unit} to {unit2}", "{n} of us are sharing {share}, how much each?",
        "I want to put aside {sum} for {goal}, {ask}", "which is cheaper, {deal}?",
        "what haircut would suit me, {hair}", "{bodypart_gear}, {ask}",
    ],
    "es": [
        "{rel} y yo queremos {hobby} este verano, {ask}", "¿qué le cocino a {rel} esta noche? {pref}",
        "ayúdame a elegir un regalo para {rel}, {likes}", "{rel} se queda en casa {n} días, {ask}",
        "escribe un {msg} corto para {rel}", "{rel} quiere {hobby}, {ask}",
        "le estoy enseñando a {rel} a {lesson}, {ask}", "{rel} y yo tenemos el sábado libre, {ask}",
        "dame una {workout} de {n} minutos", "¿qué como después de {sport}?", "¿qué {gear} me compro para {sport}?",
        "¿cuánto es el {pct}% de {sum}?", "convierte {n} {unit} a {unit2}", "somos {n} y compartimos {share}, ¿cuánto pone cada uno?",
        "quiero apartar {sum} para {goal}, {ask}", "¿qué sale más barato, {deal}?",
        "¿qué corte de pelo me quedaría bien? {hair}", "{bodypart_gear}, {ask}",
    ],
    "de": [
        "{rel} und ich wollen diesen Sommer {hobby}, {ask}", "was koche ich heute Abend, {rel} kommt? {pref}",
        "hilf mir bei einem Geschenk, {rel} hat Geburtstag, {likes}", "{rel} bleibt {n} Tage bei uns, {ask}",
        "schreib eine kurze {msg}, {rel} freut sich bestimmt", "{rel} will {hobby}, {ask}",
        "ich bringe {rel} gerade {lesson} bei, {ask}", "{rel} und ich haben Samstag frei, {ask}",
        "gib mir ein {workout} für {n} Minuten", "was esse ich nach dem {sport}?", "welche {gear} brauche ich fürs {sport}?",
        "wie viel sind {pct} % von {sum}?", "rechne {n} {unit} in {unit2} um", "wir sind {n} und teilen {share}, wie viel zahlt jeder?",
        "ich will {sum} für {goal} zurücklegen, {ask}", "was ist günstiger, {deal}?",
        "welcher Haarschnitt passt zu mir? {hair}", "{bodypart_gear}, {ask}",
    ],
    "fr": [
        "{rel} et moi, on veut {hobby} cet été, {ask}", "qu'est-ce que je cuisine ce soir pour {rel} ? {pref}",
        "aide-moi à trouver un cadeau pour {rel}, {likes}", "{rel} reste chez nous {n} jours, {ask}",
        "écris un petit {msg} pour {rel}", "{rel} veut {hobby}, {ask}",
        "j'apprends à {rel} à {lesson}, {ask}", "{rel} et moi, on a samedi de libre, {ask}",
        "donne-moi une {workout} de {n} minutes", "je mange quoi après {sport} ?", "quel {gear} acheter pour {sport} ?",
        "combien font {pct} % de {sum} ?", "convertis {n} {unit} en {unit2}", "on est {n} à partager {share}, ça fait combien chacun ?",
        "je veux mettre de côté {sum} pour {goal}, {ask}", "qu'est-ce qui est le moins cher, {deal} ?",
        "quelle coupe de cheveux m'irait ? {hair}", "{bodypart_gear}, {ask}",
    ],
}

HOBBY = {
    "en": ["learn to sail", "try rock climbing", "build a birdhouse", "start a vegetable patch", "learn the drums",
           "restore an old bike", "go stargazing", "make our own pizza oven", "learn to surf", "try bouldering",
           "paint the shed", "walk a stretch of the coast path"],
    "es": ["aprender a navegar", "probar la escalada", "construir una casita para pájaros", "montar un huerto", "aprender batería",
           "restaurar una bici vieja", "ir a ver estrellas", "hacer un horno de pizza", "aprender a hacer surf", "probar el búlder",
           "pintar la caseta", "hacer un tramo del Camino"],
    "de": ["segeln lernen", "Klettern ausprobieren", "ein Vogelhaus bauen", "ein Gemüsebeet anlegen", "Schlagzeug lernen",
           "ein altes Fahrrad herrichten", "Sterne beobachten", "einen Pizzaofen bauen", "surfen lernen", "Bouldern ausprobieren",
           "den Schuppen streichen", "ein Stück vom Rheinsteig wandern"],
    "fr": ["apprendre la voile", "essayer l'escalade", "construire un nichoir", "faire un potager", "apprendre la batterie",
           "retaper un vieux vélo", "observer les étoiles", "construire un four à pizza", "apprendre le surf", "essayer le bloc",
           "repeindre l'abri", "marcher un bout du GR20"],
}

PREF = {
    "en": ["something quick", "no fish please", "we have leftover rice", "something with lentils", "it's cold out",
           "nothing too spicy", "we love mushrooms"],
    "es": ["algo rápido", "sin pescado", "me sobra arroz", "algo con lentejas", "hace frío",
           "nada muy picante", "nos encantan las setas"],
    "de": ["etwas Schnelles", "bitte kein Fisch", "ich habe Reis übrig", "etwas mit Linsen", "es ist kalt draußen",
           "nicht zu scharf", "wir lieben Pilze"],
    "fr": ["un truc rapide", "pas de poisson", "il me reste du riz", "un plat avec des lentilles", "il fait froid",
           "pas trop épicé", "on adore les champignons"],
}

LIKES = {
    "en": ["they like crosswords", "they're into birdwatching", "they love old jazz records", "they just got into pottery",
           "they collect vinyl", "they drink a lot of tea", "they're always cold"],
    "es": ["le gustan los crucigramas", "le encanta ver pájaros", "le encantan los discos de jazz", "acaba de empezar con la cerámica",
           "colecciona vinilos", "bebe mucho té", "siempre tiene frío"],
    "de": ["Kreuzworträtsel mag", "Vögel beobachtet", "alte Jazzplatten liebt", "gerade mit Töpfern angefangen hat",
           "Schallplatten sammelt", "viel Tee trinkt", "immer friert"],
    "fr": ["il aime les mots croisés", "elle observe les oiseaux", "il adore les vieux disques de jazz", "elle vient de commencer la poterie",
           "il collectionne les vinyles", "elle boit beaucoup de thé", "il a toujours froid"],
}

MSG = {
    "en": ["welcome home note", "congratulations message", "good luck message before the exam", "note to say thanks for the dinner",
           "retirement card", "housewarming card", "graduation card"],
    "es": ["mensaje de bienvenida", "mensaje de enhorabuena", "mensaje de suerte antes del examen", "mensaje de gracias por la cena",
           "tarjeta de jubilación", "tarjeta para la casa nueva", "tarjeta de graduación"],
    "de": ["Willkommensnachricht", "Glückwunschnachricht", "Viel-Glück-Nachricht vor der Prüfung", "Dankesnachricht für das Essen",
           "Karte zum Ruhestand", "Karte zum Einzug", "Karte zum Abschluss"],
    "fr": ["mot de bienvenue", "message de félicitations", "message d'encouragement avant l'examen", "mot pour remercier du dîner",
           "carte de départ à la retraite", "carte de pendaison de crémaillère", "carte de diplôme"],
}

LESSON = {
    "en": ["ride a bike", "tie a tie", "play chess", "make pancakes", "use a spreadsheet", "swim backstroke", "drive a manual car"],
    "es": ["montar en bici", "hacerse el nudo de la corbata", "jugar al ajedrez", "hacer tortitas", "usar una hoja de cálculo",
           "nadar de espalda", "conducir un coche manual"],
    "de": ["Fahrradfahren", "Krawattebinden", "Schach", "Pfannkuchenbacken", "Tabellenkalkulation", "Rückenschwimmen", "Schaltwagenfahren"],
    "fr": ["faire du vélo", "nouer une cravate", "jouer aux échecs", "faire des pancakes", "utiliser un tableur", "nager le dos crawlé",
           "conduire une voiture manuelle"],
}

WORKOUT = {
    "en": ["core workout", "stretching routine for after the office", "kettlebell session", "beginner yoga flow",
           "shoulder workout with bands", "calf and ankle warm-up for running", "arm workout without weights"],
    "es": ["rutina de abdominales", "tabla de estiramientos para después de la oficina", "sesión con pesa rusa", "secuencia de yoga para principiantes",
           "rutina de hombros con gomas", "calentamiento de gemelos para correr", "rutina de brazos sin pesas"],
    "de": ["Bauchtraining", "Dehnprogramm nach dem Büro", "Kettlebell-Training", "Yoga-Programm für Anfänger",
           "Schultertraining mit Bändern", "Aufwärmen der Waden fürs Laufen", "Armtraining ohne Gewichte"],
    "fr": ["séance de gainage", "routine d'étirements après le bureau", "séance de kettlebell", "séance de yoga pour débutants",
           "séance d'épaules avec élastiques", "échauffement des mollets pour la course", "séance de bras sans poids"],
}

SPORT = {
    "en": ["a long swim", "a 10k run", "a spin class", "climbing", "a morning hike", "football practice", "a rowing session"],
    "es": ["nadar un buen rato", "correr 10 km", "una clase de spinning", "escalar", "una ruta por la mañana",
           "el entreno de fútbol", "remar"],
    "de": ["Schwimmen", "Laufen", "Spinning", "Klettern", "Wandern", "Fußballtraining", "Rudern"],
    "fr": ["une longue séance de natation", "un 10 km", "un cours de spinning", "l'escalade", "une rando le matin",
           "l'entraînement de foot", "l'aviron"],
}

GEAR = {
    "en": ["shoes", "gloves", "backpack", "helmet", "headlamp", "water bottle"],
    "es": ["zapatillas", "guantes", "mochila", "casco", "linterna frontal", "botella"],
    "de": ["Schuhe", "Handschuhe", "Rucksack", "Helm", "Stirnlampe", "Trinkflasche"],
    "fr": ["chaussures", "gants", "sac à dos", "casque", "lampe frontale", "gourde"],
}

SUM = {
    "en": ["$64", "£230", "€1,250", "$18.40", "£9.99", "€75"],
    "es": ["64 €", "230 €", "1.250 €", "18,40 €", "9,99 €", "75 €"],
    "de": ["64 €", "230 €", "1.250 €", "18,40 €", "9,99 €", "75 €"],
    "fr": ["64 €", "230 €", "1 250 €", "18,40 €", "9,99 €", "75 €"],
}

UNIT = {
    "en": [("cups", "millilitres"), ("ounces", "grams"), ("miles", "kilometres"), ("feet", "metres"), ("pounds", "kilos"),
           ("Fahrenheit", "Celsius"), ("tablespoons", "grams")],
    "es": [("tazas", "mililitros"), ("onzas", "gramos"), ("millas", "kilómetros"), ("pies", "metros"), ("libras", "kilos"),
           ("grados Fahrenheit", "Celsius"), ("cucharadas", "gramos")],
    "de": [("Tassen", "Milliliter"), ("Unzen", "Gramm"), ("Meilen", "Kilometer"), ("Fuß", "Meter"), ("Pfund", "Kilo"),
           ("Fahrenheit", "Celsius"), ("Esslöffel", "Gramm")],
    "fr": [("tasses", "millilitres"), ("onces", "grammes"), ("miles", "kilomètres"), ("pieds", "mètres"), ("livres", "kilos"),
           ("degrés Fahrenheit", "Celsius"), ("cuillères à soupe", "grammes")],
}

SHARE = {
    "en": ["a cabin for the weekend", "a taxi to the airport", "the petrol for a trip", "a birthday cake", "a boat rental",
           "a takeaway order", "the cost of a gift"],
    "es": ["una casa rural el finde", "un taxi al aeropuerto", "la gasolina del viaje", "una tarta de cumpleaños", "el alquiler de un barco",
           "un pedido a domicilio", "un regalo"],
    "de": ["eine Hütte fürs Wochenende", "ein Taxi zum Flughafen", "das Benzin für die Fahrt", "eine Geburtstagstorte", "ein Mietboot",
           "eine Essensbestellung", "ein Geschenk"],
    "fr": ["un gîte pour le week-end", "un taxi pour l'aéroport", "l'essence du trajet", "un gâteau d'anniversaire", "la location d'un bateau",
           "une commande à emporter", "un cadeau"],
}

GOAL = {
    "en": ["a new sofa", "a trip to Japan", "a drum kit", "concert tickets", "a better camera", "a bike for commuting"],
    "es": ["un sofá nuevo", "un viaje a Japón", "una batería", "entradas de un concierto", "una cámara mejor", "una bici para ir al trabajo"],
    "de": ["ein neues Sofa", "eine Reise nach Japan", "ein Schlagzeug", "Konzertkarten", "eine bessere Kamera", "ein Pendlerrad"],
    "fr": ["un nouveau canapé", "un voyage au Japon", "une batterie", "des places de concert", "un meilleur appareil photo", "un vélo pour aller au travail"],
}

DEAL = {
    "en": ["a 1.5 kg bag for 4.20 or 500 g for 1.60", "a monthly pass or ten single tickets", "the 6-pack or single cans",
           "buying or renting skis for a week", "the family pizza or two mediums"],
    "es": ["un saco de 1,5 kg a 4,20 o 500 g a 1,60", "el abono mensual o diez billetes sueltos", "el pack de 6 o latas sueltas",
           "comprar o alquilar esquís una semana", "la pizza familiar o dos medianas"],
    "de": ["1,5 kg für 4,20 oder 500 g für 1,60", "die Monatskarte oder zehn Einzelfahrten", "das Sixpack oder einzelne Dosen",
           "Ski kaufen oder eine Woche leihen", "die Familienpizza oder zwei mittlere"],
    "fr": ["un sac de 1,5 kg à 4,20 ou 500 g à 1,60", "le pass mensuel ou dix tickets", "le pack de 6 ou les canettes",
           "acheter ou louer des skis pour une semaine", "la pizza familiale ou deux moyennes"],
}

HAIR = {
    "en": ["my hair is thick and wavy", "I have a long face and a fringe", "my hair is fine and flat", "I want something easy for summer"],
    "es": ["tengo el pelo grueso y ondulado", "tengo la cara alargada y flequillo", "tengo el pelo fino y lacio", "quiero algo cómodo para el verano"],
    "de": ["ich habe dickes, welliges Haar", "ich habe ein schmales Gesicht und einen Pony", "meine Haare sind fein und platt",
           "ich will was Pflegeleichtes für den Sommer"],
    "fr": ["j'ai les cheveux épais et ondulés", "j'ai le visage allongé et une frange", "j'ai les cheveux fins et plats",
           "je veux un truc facile pour l'été"],
}

BODYPART_GEAR = {
    "en": ["my feet are size 44 in Europe, what is that in US sizes", "my ring finger is 54 mm around, which ring size is that",
           "my hands get cold on the bike in winter, which gloves", "my head is 58 cm, which helmet size",
           "my back is wide, which backpack fits", "I'm 1.92 m tall, which bike frame size"],
    "es": ["calzo un 44 europeo, ¿cuánto es en tallas de EE. UU.?", "mi dedo anular mide 54 mm, ¿qué talla de anillo es?",
           "se me enfrían las manos en la bici en invierno, ¿qué guantes?", "mi cabeza mide 58 cm, ¿qué talla de casco?",
           "tengo la espalda ancha, ¿qué mochila me va?", "mido 1,92, ¿qué talla de cuadro de bici?"],
    "de": ["ich habe Schuhgröße 44, was ist das in US-Größen", "mein Ringfinger hat 54 mm Umfang, welche Ringgröße ist das",
           "im Winter werden mir auf dem Rad die Hände kalt, welche Handschuhe", "mein Kopfumfang ist 58 cm, welche Helmgröße",
           "ich habe einen breiten Rücken, welcher Rucksack passt", "ich bin 1,92 m groß, welche Rahmengröße"],
    "fr": ["je chausse du 44, ça fait combien en taille US", "mon annulaire fait 54 mm de tour, c'est quelle taille de bague",
           "j'ai froid aux mains à vélo en hiver, quels gants", "mon tour de tête fait 58 cm, quelle taille de casque",
           "j'ai le dos large, quel sac à dos me va", "je mesure 1,92 m, quelle taille de cadre"],
}

ASK = {
    "en": ["any ideas?", "where do we start?", "what do you suggest?", "make me a plan", "what do we need?", "keep it cheap", "tips?"],
    "es": ["¿ideas?", "¿por dónde empezamos?", "¿qué sugieres?", "hazme un plan", "¿qué necesitamos?", "que sea barato", "¿consejos?"],
    "de": ["Ideen?", "womit fangen wir an?", "was schlägst du vor?", "mach mir einen Plan", "was brauchen wir?", "bitte günstig", "Tipps?"],
    "fr": ["des idées ?", "on commence par quoi ?", "tu proposes quoi ?", "fais-moi un plan", "il nous faut quoi ?", "pas trop cher", "des conseils ?"],
}

SLOTS = [("{hobby}", HOBBY), ("{pref}", PREF), ("{likes}", LIKES), ("{msg}", MSG), ("{lesson}", LESSON), ("{workout}", WORKOUT),
         ("{sport}", SPORT), ("{gear}", GEAR), ("{sum}", SUM), ("{share}", SHARE), ("{goal}", GOAL), ("{deal}", DEAL),
         ("{hair}", HAIR), ("{bodypart_gear}", BODYPART_GEAR), ("{ask}", ASK)]


def everyday(g, lang):
    """One composed request (`g`: train_topic_model.Gen: `choice` keeps its split, `fill` puts in
    a relative and a number)."""
    text = g.choice(FRAMES[lang])
    for slot, table in SLOTS:
        if slot in text:
            text = text.replace(slot, g.choice(table[lang]))
    if "{unit}" in text:
        a, b = g.choice(UNIT[lang])
        text = text.replace("{unit}", a).replace("{unit2}", b)
    text = text.replace("{pct}", str(g.r.choice([5, 8, 12, 15, 18, 20, 25, 33])))
    text = g.fill(text, lang)
    return {"text": g.casing(text), "categories": [], "kind": "everyday", "lang": lang}
