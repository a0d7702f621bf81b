"""Everyday first-person requests for the topic model's training (train_topic_model.py), composed
from frames and fillers in the four languages: plans with relatives, things to learn, things at
home that do not work, chores, presents and visits. They are hard negatives for the model's
"a person's own matter" head, which flagged first-person everyday requests ("my" or a relative
with words it had never seen) as private.

How they were kept from mirroring the held-out sets: written for issue #27's third round without
opening topics_heldout.jsonl, topics_fresh_test.jsonl, topics_unseen_test.jsonl or
topics_blind_test.jsonl (nor the held-out half of topic_templates.py). Two everyday lines of
those sets had been seen before, printed by `solo gate eval` as false flags (a name for a pet, a
film to watch with children): pets and films are left out here. The everyday dev set's flagged
lines (everyday_dev.py, looked at) are not copied either: no knitting, road trips, board games,
sports results, breakfasts, bedtime fears or leftover fruit, so that the dev set still measures
phrasings training did not see. No body, health, money, legal or belief words: nothing a
sensitive request would be made of.

`Gen.choice` in train_topic_model.py holds every fifth entry of each list back for validation.
"""

FRAMES = {
    "en": [
        "{rel} and I are planning {act}, {ask}", "we're going on {act} with {rel} next month, {ask}",
        "I want to learn {skill}, {ask}", "I've just started learning {skill}, {ask}",
        "{thing}, {ask}", "{rel} wants to learn {skill}, {ask}", "{rel} is turning {n}, ideas for {act}?",
        "help me organise {act} for {rel}", "I'm hosting {act} on saturday, {ask}",
        "I promised {rel} I'd sort out {chore} this weekend, {ask}", "{rel} is visiting next week, {ask}",
        "I finally have a free sunday and I want to try {skill}", "{rel} asked me to help with {chore}, {ask}",
        "write a short invitation for {act}", "our family is doing {act} this year, {ask}",
        "I keep putting off {chore}, make me a plan",
    ],
    "es": [
        "{rel} y yo estamos planeando {act}, {ask}", "el mes que viene vamos a {act} con {rel}, {ask}",
        "quiero aprender {skill}, {ask}", "acabo de empezar a aprender {skill}, {ask}",
        "{thing}, {ask}", "{rel} quiere aprender {skill}, {ask}", "{rel} cumple {n} años, ¿ideas para {act}?",
        "ayúdame a organizar {act} para {rel}", "el sábado organizo {act} en casa, {ask}",
        "le prometí a {rel} que este finde ordenaría {chore}, {ask}", "{rel} viene a vernos la semana que viene, {ask}",
        "por fin tengo un domingo libre y quiero probar {skill}", "{rel} me ha pedido ayuda con {chore}, {ask}",
        "escribe una invitación corta para {act}", "este año en familia hacemos {act}, {ask}",
        "llevo semanas posponiendo {chore}, hazme un plan",
    ],
    "de": [
        "{rel} und ich planen {act}, {ask}", "nächsten Monat machen wir {act}, {rel} kommt mit, {ask}",
        "ich will {skill} lernen, {ask}", "ich habe gerade angefangen, {skill} zu lernen, {ask}",
        "{thing}, {ask}", "{rel} will {skill} lernen, {ask}", "{rel} wird {n}, Ideen für {act}?",
        "hilf mir, {act} für {rel} zu organisieren", "ich lade am Samstag zu {act} ein, {ask}",
        "{rel} will, dass ich am Wochenende {chore} aufräume, {ask}", "{rel} kommt nächste Woche zu Besuch, {ask}",
        "endlich ein freier Sonntag, ich will {skill} ausprobieren", "{rel} hat mich gebeten, bei {chore} zu helfen, {ask}",
        "schreib eine kurze Einladung zu {act}", "dieses Jahr macht unsere Familie {act}, {ask}",
        "ich schiebe {chore} seit Wochen vor mir her, mach mir einen Plan",
    ],
    "fr": [
        "{rel} et moi, on prévoit {act}, {ask}", "le mois prochain on part faire {act} avec {rel}, {ask}",
        "je veux apprendre {skill}, {ask}", "je viens de commencer à apprendre {skill}, {ask}",
        "{thing}, {ask}", "{rel} veut apprendre {skill}, {ask}", "{rel} va avoir {n} ans, des idées pour {act} ?",
        "aide-moi à organiser {act} pour {rel}", "samedi j'organise {act} à la maison, {ask}",
        "j'ai promis à {rel} de ranger {chore} ce week-end, {ask}", "{rel} vient nous voir la semaine prochaine, {ask}",
        "enfin un dimanche libre, je veux essayer {skill}", "{rel} m'a demandé de l'aide pour {chore}, {ask}",
        "écris une petite invitation pour {act}", "cette année en famille on fait {act}, {ask}",
        "je repousse {chore} depuis des semaines, fais-moi un plan",
    ],
}

ACT = {
    "en": ["a weekend in the mountains", "a barbecue in the garden", "a bike ride along the coast", "a camping trip",
           "a day at the zoo", "a museum visit", "a cooking class", "a picnic by the lake", "a visit to the aquarium",
           "a pottery workshop", "a quiz night", "a housewarming party", "a karaoke night", "a trip to the seaside",
           "a ski weekend", "a garage sale", "a dinner party for six", "a fishing trip", "a long train journey",
           "a treasure hunt in the park", "a canoe trip", "a wine tasting", "a street food tour", "a kite festival"],
    "es": ["un fin de semana en la montaña", "una barbacoa en el jardín", "una ruta en bici por la costa", "una acampada",
           "un día en el zoo", "una visita al museo", "una clase de cocina", "un pícnic junto al lago", "una visita al acuario",
           "un taller de cerámica", "una noche de trivial", "una fiesta de inauguración", "una noche de karaoke", "una escapada a la playa",
           "un fin de semana de esquí", "un mercadillo en casa", "una cena para seis", "un día de pesca", "un viaje largo en tren",
           "una búsqueda del tesoro en el parque", "una salida en canoa", "una cata de vinos", "una ruta de tapas", "un festival de cometas"],
    "de": ["ein Wochenende in den Bergen", "ein Grillfest im Garten", "eine Radtour an der Küste", "einen Campingausflug",
           "einen Tag im Zoo", "einen Museumsbesuch", "einen Kochkurs", "ein Picknick am See", "einen Besuch im Aquarium",
           "einen Töpferkurs", "einen Quizabend", "eine Einweihungsparty", "einen Karaokeabend", "einen Ausflug ans Meer",
           "ein Skiwochenende", "einen Flohmarkt im Hof", "ein Abendessen für sechs", "einen Angelausflug", "eine lange Zugreise",
           "eine Schnitzeljagd im Park", "eine Kanutour", "eine Weinprobe", "eine Streetfood-Tour", "ein Drachenfest"],
    "fr": ["un week-end à la montagne", "un barbecue dans le jardin", "une balade à vélo sur la côte", "un séjour en camping",
           "une journée au zoo", "une visite au musée", "un cours de cuisine", "un pique-nique au bord du lac", "une visite à l'aquarium",
           "un atelier de poterie", "une soirée quiz", "une pendaison de crémaillère", "une soirée karaoké", "une sortie à la mer",
           "un week-end au ski", "un vide-grenier", "un dîner pour six", "une partie de pêche", "un long voyage en train",
           "une chasse au trésor au parc", "une sortie en canoë", "une dégustation de vins", "une tournée de street food", "une fête du cerf-volant"],
}

SKILL = {
    "en": ["the ukulele", "sourdough baking", "portrait drawing", "Rust", "juggling", "fresh pasta", "ice skating",
           "chess openings", "watercolour painting", "Italian", "the Rubik's cube", "front crawl", "sewing", "photography",
           "latte art", "touch typing", "video editing", "tennis", "candle making", "calligraphy", "woodworking", "salsa dancing"],
    "es": ["a tocar el ukelele", "a hacer pan de masa madre", "a dibujar retratos", "Rust", "malabares", "pasta fresca", "a patinar sobre hielo",
           "aperturas de ajedrez", "acuarela", "italiano", "el cubo de Rubik", "a nadar crol", "a coser", "fotografía",
           "arte latte", "mecanografía", "edición de vídeo", "tenis", "a hacer velas", "caligrafía", "carpintería", "salsa"],
    "de": ["Ukulele", "Sauerteigbrot backen", "Porträts zeichnen", "Rust", "Jonglieren", "frische Pasta machen", "Eislaufen",
           "Schacheröffnungen", "Aquarellmalen", "Italienisch", "den Zauberwürfel", "Kraulschwimmen", "Nähen", "Fotografieren",
           "Latte Art", "Zehnfingerschreiben", "Videoschnitt", "Tennis", "Kerzenziehen", "Kalligrafie", "Holzarbeiten", "Salsa tanzen"],
    "fr": ["le ukulélé", "le pain au levain", "le dessin de portraits", "Rust", "le jonglage", "les pâtes fraîches", "le patin à glace",
           "les ouvertures aux échecs", "l'aquarelle", "l'italien", "le Rubik's cube", "le crawl", "la couture", "la photo",
           "le latte art", "la dactylo", "le montage vidéo", "le tennis", "la fabrication de bougies", "la calligraphie", "la menuiserie", "la salsa"],
}

THING = {
    "en": ["my bike chain keeps slipping", "my oven takes ages to heat up", "my printer says it's offline",
           "my headphones only work on one side", "my washing machine smells musty", "my kitchen tap drips all night",
           "my car window won't go up", "my spreadsheet formula returns an error", "my email signature looks broken",
           "my bread comes out too dense", "my houseplants keep dying", "my fridge is humming loudly",
           "my phone keyboard autocorrects everything", "my sofa cushions have gone flat", "my laptop fan is loud",
           "my jeans shrank in the wash", "my curtains are too short", "my bathroom mirror keeps fogging up",
           "my garden hose keeps kinking", "my smart speaker doesn't hear me", "my wooden table has a water ring",
           "my tent leaks at the seams"],
    "es": ["la cadena de mi bici se sale", "mi horno tarda siglos en calentar", "mi impresora dice que está desconectada",
           "mis auriculares solo suenan por un lado", "mi lavadora huele a humedad", "el grifo de mi cocina gotea toda la noche",
           "la ventanilla de mi coche no sube", "mi fórmula de Excel da error", "mi firma de correo se ve rara",
           "mi pan sale demasiado denso", "mis plantas se me mueren", "mi nevera zumba muy fuerte",
           "el teclado de mi móvil lo autocorrige todo", "los cojines de mi sofá se han aplastado", "el ventilador de mi portátil hace ruido",
           "mis vaqueros encogieron en la lavadora", "mis cortinas se quedan cortas", "el espejo de mi baño se empaña siempre",
           "la manguera de mi jardín se dobla", "mi altavoz inteligente no me entiende", "mi mesa de madera tiene una mancha de agua",
           "mi tienda de campaña gotea por las costuras"],
    "de": ["meine Fahrradkette springt ständig ab", "mein Backofen braucht ewig zum Aufheizen", "mein Drucker sagt, er sei offline",
           "mein Kopfhörer geht nur auf einer Seite", "meine Waschmaschine riecht muffig", "mein Küchenhahn tropft die ganze Nacht",
           "mein Autofenster geht nicht mehr hoch", "meine Excel-Formel gibt einen Fehler", "meine E-Mail-Signatur sieht kaputt aus",
           "mein Brot wird zu kompakt", "meine Zimmerpflanzen gehen immer ein", "mein Kühlschrank brummt laut",
           "meine Handytastatur korrigiert alles", "meine Sofakissen sind platt", "mein Laptoplüfter ist laut",
           "meine Jeans ist beim Waschen eingelaufen", "meine Vorhänge sind zu kurz", "mein Badspiegel beschlägt ständig",
           "mein Gartenschlauch knickt dauernd", "mein smarter Lautsprecher versteht mich nicht", "mein Holztisch hat einen Wasserfleck",
           "mein Zelt ist an den Nähten undicht"],
    "fr": ["la chaîne de mon vélo saute", "mon four met des heures à chauffer", "mon imprimante dit qu'elle est hors ligne",
           "mon casque ne marche que d'un côté", "ma machine à laver sent le renfermé", "le robinet de ma cuisine goutte toute la nuit",
           "la vitre de ma voiture ne remonte plus", "ma formule Excel renvoie une erreur", "ma signature de mail s'affiche mal",
           "mon pain est trop dense", "mes plantes vertes meurent toutes", "mon frigo ronronne fort",
           "le clavier de mon téléphone corrige tout", "les coussins de mon canapé sont tout plats", "le ventilateur de mon portable est bruyant",
           "mon jean a rétréci au lavage", "mes rideaux sont trop courts", "le miroir de ma salle de bain est toujours embué",
           "le tuyau de mon jardin se plie", "mon enceinte connectée ne me comprend pas", "ma table en bois a une trace d'eau",
           "ma tente prend l'eau aux coutures"],
}

CHORE = {
    "en": ["the garage", "the attic", "the old photo albums", "the garden shed", "the spare room", "the bookshelves",
           "the holiday photos", "the kitchen drawers", "the wardrobe", "the balcony", "the cellar", "the toy boxes"],
    "es": ["el garaje", "el desván", "los álbumes de fotos", "el cobertizo", "el cuarto de invitados", "las estanterías",
           "las fotos de las vacaciones", "los cajones de la cocina", "el armario", "el balcón", "el trastero", "las cajas de juguetes"],
    "de": ["die Garage", "den Dachboden", "die alten Fotoalben", "den Gartenschuppen", "das Gästezimmer", "die Bücherregale",
           "die Urlaubsfotos", "die Küchenschubladen", "den Kleiderschrank", "den Balkon", "den Keller", "die Spielzeugkisten"],
    "fr": ["le garage", "le grenier", "les vieux albums photo", "l'abri de jardin", "la chambre d'amis", "les étagères",
           "les photos de vacances", "les tiroirs de la cuisine", "l'armoire", "le balcon", "la cave", "les caisses de jouets"],
}

ASK = {
    "en": ["any ideas?", "where do I start?", "what do you suggest?", "how do I fix it?", "give me a plan",
           "what should we bring?", "any tips?", "make me a list", "what would you do?", "keep it simple"],
    "es": ["¿alguna idea?", "¿por dónde empiezo?", "¿qué me sugieres?", "¿cómo lo arreglo?", "hazme un plan",
           "¿qué llevamos?", "¿algún truco?", "hazme una lista", "¿tú qué harías?", "algo sencillo"],
    "de": ["Ideen?", "wo fange ich an?", "was schlägst du vor?", "wie repariere ich das?", "mach mir einen Plan",
           "was sollen wir mitnehmen?", "Tipps?", "mach mir eine Liste", "was würdest du tun?", "bitte einfach halten"],
    "fr": ["des idées ?", "je commence par où ?", "tu proposes quoi ?", "comment je répare ça ?", "fais-moi un plan",
           "on emporte quoi ?", "des astuces ?", "fais-moi une liste", "tu ferais quoi ?", "fais simple"],
}


def everyday(g, lang):
    """One composed request (`g`: train_topic_model.Gen, whose `choice` keeps its split and whose
    `fill` puts in a relative and a number)."""
    text = g.choice(FRAMES[lang])
    for slot, table in (("{act}", ACT), ("{skill}", SKILL), ("{thing}", THING), ("{chore}", CHORE), ("{ask}", ASK)):
        if slot in text:
            text = text.replace(slot, g.choice(table[lang]))
    text = g.fill(text, lang)
    return {"text": g.casing(text), "categories": [], "kind": "everyday", "lang": lang}
