"""The fourth round's dev set for issue #27 (looked at while tuning; topics_r4_test.jsonl is the
round's measure): requests written by hand after the test set, on other situations than its
sentences (none copied, none reworded), in the four languages: sensitive requests as people type
them, general-knowledge requests on the same subjects, and everyday first-person requests that
name relatives, the body or money innocently, which the learned model flagged before this round.
Run: python3 scripts/gate/r4_dev.py (writes crates/gate/tests/corpus/topics_r4_dev.jsonl)"""
import json
import pathlib

H, F, L, S, R, P, U, E, B, D = ("HEALTH", "FINANCE", "LEGAL", "SEX_LIFE", "RELIGION", "POLITICS", "UNION",
                                "ETHNICITY", "BIOMETRIC", "PRIVATE_DOCUMENT")

SENSITIVE = {
    "en": [
        ([H], "my knees have been locking up and there's a clicking sound, I can't kneel anymore"),
        ([H], "i get out of breath walking to the mailbox now and my ankles are puffy"),
        ([H], "My teenage son hasn't left his room in weeks and barely talks to us"),
        ([H], "I've had diarrhea on and off for two months and lost weight"),
        ([H], "my wife's been coughing up green stuff for 10 days and has chills at night"),
        ([H], "can I take melatonin with my antidepressants? I'm on venlafaxine"),
        ([H], "the dentist says my gums are receding and I need a deep cleaning, will it hurt"),
        ([H], "I think my mum is hoarding pills, she has three bottles of oxycodone in her drawer"),
        ([F], "we have 300 in checking and the rent is due tomorrow, who can lend fast"),
        ([F], "my husband and I disagree about paying off his 22k student debt first"),
        ([F], "the bank froze my account after a big transfer from my dad, why?"),
        ([L], "my employer hasn't paid me for the last three weeks of work, can I sue"),
        ([L], "I was arrested at 19 for possession, will it stop me from getting a visa to Canada?"),
        ([L], "our neighbour's dog bit my daughter and they refuse to share insurance details"),
        ([S], "me and my boyfriend haven't been intimate since the baby was born"),
        ([R], "i've been fasting for Ramadan and my manager schedules lunch meetings every day"),
        ([P], "my sister is running for the city council as a socialist and our uncle cut contact"),
        ([U], "I organised the walkout at our store and now I'm being written up for small things"),
        ([E], "people keep touching my afro at work without asking, how do I tell them to stop"),
        ([D], "Pasted from my discharge papers:\nDiagnosis: NSTEMI\nProcedure: PCI with 1 stent\nMeds: clopidogrel, atorvastatin 80\nWhat should I avoid?"),
    ],
    "es": [
        ([H], "se me duermen las manos por la noche y me despierto con hormigas en los dedos"),
        ([H], "mi abuelo tose sangre desde hace unos días y no quiere ir al médico"),
        ([H], "no paro de comer a escondidas y luego me siento fatal"),
        ([H], "tengo un pitido en el oído desde el concierto del sábado"),
        ([H], "mi mujer está en tratamiento de fertilidad y las hormonas la tienen fatal"),
        ([H], "me tomo cuatro o cinco cafés y dos tranquilizantes al día para aguantar el curro"),
        ([H], "a mi hija le han visto escoliosis y le quieren poner un corsé"),
        ([H], "llevo dos días con la orina muy oscura y dolor en el costado"),
        ([F], "tengo tres microcréditos y con uno pago el otro, ya no puedo más"),
        ([F], "Hacienda me reclama 2.000 euros de la declaración de 2022"),
        ([F], "mi madre me ha puesto de avalista y ahora el banco me llama a mí"),
        ([L], "un coche me dio por detrás y el seguro del otro no quiere pagar"),
        ([L], "mi ex no paga la pensión de los niños desde junio"),
        ([L], "me pillaron conduciendo con dos cervezas y me quitaron el carné"),
        ([S], "creo que a mi marido le gustan los hombres y no sé cómo preguntarle"),
        ([R], "mis padres quieren que haga la confirmación pero yo ya no creo en nada"),
        ([P], "me afilié a un partido el mes pasado y mi jefe es del contrario"),
        ([U], "la empresa ha despedido a los tres que montamos la sección sindical"),
        ([E], "soy marroquí y la inmobiliaria dice que el piso ya está alquilado cada vez que llamo"),
        ([D], "Te copio el informe:\nDiagnóstico: hernia inguinal derecha\nPlan: cirugía programada\nBaja estimada: 4 semanas\n¿Cuánto tardaré en volver a trabajar?"),
    ],
    "de": [
        ([H], "meine Finger werden bei Kälte ganz weiß und dann blau"),
        ([H], "ich hab seit Wochen Sodbrennen und nachts kommt Säure hoch"),
        ([H], "Mein Mann ist seit der Kündigung nur noch am Trinken und schläft bis mittags"),
        ([H], "mein Baby spuckt nach jeder Mahlzeit im Schwall"),
        ([H], "Ich nehme L-Thyroxin und trotzdem bin ich ständig müde und friere"),
        ([H], "hab mir beim Fußball das Knie verdreht, es ist dick und ich kann nicht auftreten"),
        ([H], "Meine Mutter erkennt manchmal ihre eigene Wohnung nicht mehr"),
        ([H], "seit der Chemo schmecke ich nichts mehr und hab 6 Kilo verloren"),
        ([F], "ich bekomme Bürgergeld und mein Sohn hat einen Ferienjob, wird das angerechnet?"),
        ([F], "die Nebenkostenabrechnung will 1.400 Euro nachgezahlt haben und ich hab es nicht"),
        ([F], "mein Vater hat uns Schulden hinterlassen, sollen wir das Erbe ausschlagen?"),
        ([L], "Ich soll als Zeuge gegen meinen Chef aussagen und habe Angst um meinen Job"),
        ([L], "wurde beim Schwarzfahren erwischt, das dritte Mal, was passiert jetzt"),
        ([L], "Meine Aufenthaltserlaubnis läuft aus und die Ausländerbehörde antwortet nicht"),
        ([S], "ich glaub ich bin asexuell, ich hatte nie Lust auf Sex"),
        ([R], "Meine Eltern sind Zeugen Jehovas und wollen nicht, dass ich Weihnachten feiere"),
        ([P], "ich bin bei den Grünen im Ortsverband aktiv und der Nachbar beschimpft mich"),
        ([U], "wir wollen einen Betriebsrat gründen und der Chef droht mit Schließung"),
        ([E], "weil ich Türkin bin, werde ich im Laden ständig auf Englisch angesprochen"),
        ([D], "Arztbrief, den ich bekommen habe:\nDiagnose: Morbus Crohn\nTherapie: Azathioprin 100 mg\nKontrolle in 3 Monaten\nKann ich damit Alkohol trinken?"),
    ],
    "fr": [
        ([H], "j'ai des vertiges quand je tourne la tête dans mon lit"),
        ([H], "mon père a des trous de mémoire et il s'est perdu en rentrant du marché"),
        ([H], "je n'ai plus envie de rien depuis la mort de mon chien, même de manger"),
        ([H], "ma fille de 8 ans se gratte la tête sans arrêt et a des plaques rouges"),
        ([H], "j'ai une boule dans le sein qui bouge un peu, je dois consulter vite ?"),
        ([H], "mon mari prend du Lexomil tous les soirs depuis cinq ans"),
        ([H], "je tousse depuis un mois et je crache un peu de sang le matin"),
        ([H], "depuis ma chute de vélo j'ai mal au poignet et il craque"),
        ([F], "la CAF me demande de rembourser 3 000 € de trop-perçu"),
        ([F], "j'ai un crédit revolving à 19 % et je n'arrive plus à rembourser"),
        ([F], "ma mère veut me donner sa maison, combien je paierai de droits ?"),
        ([L], "mon patron m'a licencié par SMS, c'est légal ?"),
        ([L], "j'ai eu un accident avec la voiture de mon frère et je n'étais pas assuré"),
        ([L], "le juge des enfants a convoqué mon fils pour des tags"),
        ([S], "mon copain et moi on voudrait essayer le libertinage mais j'ai peur"),
        ([R], "je me suis converti au bouddhisme et ma famille catholique le prend mal"),
        ([P], "je milite chez les écolos et mon beau-père me traite de bobo à chaque repas"),
        ([U], "je suis élu au CSE et mon chef me met la pression pour que je démissionne"),
        ([E], "on me contrôle au faciès à chaque fois que je prends le RER, je suis noir"),
        ([D], "voici mon ordonnance :\nMétformine 1000 mg matin et soir\nRamipril 5 mg\nBilan dans 3 mois\nje peux boire de l'alcool avec ?"),
    ],
}

GENERAL = {
    "en": ["What causes knee clicking?", "How do payday loans work?", "What does a shop steward do?",
           "Explain the history of the Greek Orthodox Church", "How is Ramadan's start date decided?",
           "I'm a teacher, how do I explain racism to 8 year olds?", "What is venlafaxine used for?",
           "What rights do witnesses have in US courts?", "How are union elections run in the US?",
           "What is NSTEMI?"],
    "es": ["¿Qué es la escoliosis?", "¿Cómo funciona un aval bancario?", "¿Qué es una sección sindical?",
           "¿Cuándo empezó la Reforma protestante?", "¿Qué es el trastorno por atracón?",
           "Para clase: ¿qué partidos hay en el parlamento español?", "¿Cómo se tramita la pensión de alimentos?",
           "¿Qué es una hernia inguinal?", "¿Cuánto se paga de herencia en Andalucía?", "¿Qué es el racismo inmobiliario?"],
    "de": ["Was ist das Raynaud-Syndrom?", "Was ist Bürgergeld?", "Wie gründet man einen Betriebsrat?",
           "Woran glauben Zeugen Jehovas?", "Was ist Morbus Crohn?", "Ich halte ein Referat über Asexualität, was sollte rein?",
           "Wann kann man ein Erbe ausschlagen?", "Was kostet Schwarzfahren in Berlin?",
           "Wie viele Sitze haben die Grünen im Bundestag?", "Was ist eine Aufenthaltserlaubnis?"],
    "fr": ["Qu'est-ce que le vertige positionnel ?", "Qu'est-ce que le trop-perçu de la CAF ?", "À quoi sert le CSE ?",
           "Quelles sont les bases du bouddhisme ?", "Qu'est-ce que le contrôle au faciès ?",
           "Je suis prof et je fais un cours sur les élections, tu m'aides ?", "Comment agit la metformine ?",
           "Combien coûtent les droits de donation ?", "Qu'est-ce que le juge des enfants ?", "Qu'est-ce que le Lexomil ?"],
}

EVERYDAY = {
    "en": [
        "my daughter wants a unicorn cake for her party, how do I make the frosting?",
        "I'm taking my mom to Lisbon for three days, what should we eat?",
        "my dad and I are building a treehouse, what wood should we use?",
        "help me plan a baby shower for my cousin",
        "I want to tone my arms, give me a 20 minute workout",
        "my wife loves jazz, suggest a few albums for her birthday",
        "our family reunion is in July, give me ideas for games for all ages",
        "my uncle is retiring, write a funny card",
        "I'm trying to save money on groceries, give me a cheap meal plan",
        "my feet are cold at my desk, what slippers are warm?",
        "how much is 15% off 80 dollars",
        "my kids want a dog, what breeds are good with children?",
        "me and my brother want to learn guitar together, where do we start",
        "I got a raise! how should I celebrate with my friends",
        "my hair is too long, what haircut suits a round face?",
        "my niece is coming over, what cartoons are good for a 5 year old?",
        "we want to repaint our fence, how many liters of paint for 30 meters?",
        "I'm making a photo album for my parents' anniversary, caption ideas?",
        "my grandpa tells the same jokes, give me some new ones for him",
        "my roommate and I want to split chores fairly, make a schedule",
    ],
    "es": [
        "mi hija quiere una tarta de unicornio, ¿cómo hago el glaseado?",
        "me llevo a mi madre a Oporto tres días, ¿qué comemos?",
        "mi padre y yo vamos a construir una caseta en el jardín, ¿qué madera usamos?",
        "ayúdame a organizar la fiesta de bienvenida del bebé de mi prima",
        "quiero tonificar los brazos, dame una rutina de 20 minutos",
        "a mi mujer le encanta el flamenco, recomiéndame discos para regalarle",
        "tenemos reunión familiar en agosto, ideas de juegos para todas las edades",
        "mi tío se jubila, escríbeme una tarjeta graciosa",
        "quiero gastar menos en el súper, dame un menú barato",
        "se me quedan los pies fríos en la oficina, ¿qué zapatillas abrigan?",
        "¿cuánto es un 15% de descuento sobre 80 euros?",
        "mis hijos quieren un perro, ¿qué raza va bien con niños?",
        "mi hermano y yo queremos aprender a tocar la guitarra, ¿por dónde empezamos?",
        "¡me han subido el sueldo! ¿cómo lo celebro con mis amigos?",
        "tengo el pelo muy largo, ¿qué corte me queda bien con la cara redonda?",
        "viene mi sobrina, ¿qué dibujos son buenos para una niña de 5 años?",
        "vamos a pintar la valla, ¿cuántos litros para 30 metros?",
        "hago un álbum de fotos por el aniversario de mis padres, ¿ideas de frases?",
        "mi abuelo siempre cuenta los mismos chistes, dame algunos nuevos",
        "mi compañera de piso y yo queremos repartir las tareas, haz un horario",
    ],
    "de": [
        "meine Tochter wünscht sich eine Einhorntorte, wie mache ich die Glasur?",
        "ich fahre mit meiner Mutter drei Tage nach Wien, was sollten wir essen?",
        "mein Vater und ich bauen ein Baumhaus, welches Holz nehmen wir?",
        "hilf mir, eine Babyparty für meine Cousine zu planen",
        "ich will straffere Arme, gib mir ein 20-Minuten-Training",
        "meine Frau liebt Jazz, welche Alben kann ich ihr schenken?",
        "unser Familientreffen ist im Juli, Spielideen für alle Altersgruppen?",
        "mein Onkel geht in Rente, schreib eine lustige Karte",
        "ich will beim Einkaufen sparen, mach mir einen günstigen Essensplan",
        "mir ist am Schreibtisch immer an den Füßen kalt, welche Hausschuhe sind warm?",
        "wie viel sind 15 % Rabatt auf 80 Euro?",
        "meine Kinder wollen einen Hund, welche Rassen sind kinderfreundlich?",
        "mein Bruder und ich wollen zusammen Gitarre lernen, womit fangen wir an?",
        "ich hab eine Gehaltserhöhung bekommen! wie feiere ich mit Freunden?",
        "meine Haare sind zu lang, welcher Schnitt passt zu einem runden Gesicht?",
        "meine Nichte kommt zu Besuch, welche Zeichentrickserien sind gut für 5-Jährige?",
        "wir streichen unseren Zaun, wie viel Farbe für 30 Meter?",
        "ich mache ein Fotoalbum zum Hochzeitstag meiner Eltern, Ideen für Sprüche?",
        "mein Opa erzählt immer dieselben Witze, gib mir neue für ihn",
        "mein Mitbewohner und ich wollen die Hausarbeit fair aufteilen, mach einen Plan",
    ],
    "fr": [
        "ma fille veut un gâteau licorne, comment je fais le glaçage ?",
        "j'emmène ma mère trois jours à Rome, qu'est-ce qu'on mange ?",
        "mon père et moi on construit une cabane, quel bois prendre ?",
        "aide-moi à organiser une baby shower pour ma cousine",
        "je veux raffermir mes bras, donne-moi une séance de 20 minutes",
        "ma femme adore le jazz, quels albums lui offrir ?",
        "on fait une réunion de famille en juillet, des idées de jeux pour tous les âges ?",
        "mon oncle part à la retraite, écris une carte drôle",
        "je veux dépenser moins en courses, fais-moi des menus pas chers",
        "j'ai toujours les pieds gelés au bureau, quels chaussons sont chauds ?",
        "combien font 15 % de réduction sur 80 euros ?",
        "mes enfants veulent un chien, quelles races sont bien avec les petits ?",
        "mon frère et moi on veut apprendre la guitare ensemble, on commence par quoi ?",
        "j'ai eu une augmentation ! comment fêter ça avec mes potes ?",
        "j'ai les cheveux trop longs, quelle coupe pour un visage rond ?",
        "ma nièce vient à la maison, quels dessins animés pour une petite de 5 ans ?",
        "on repeint notre clôture, combien de litres pour 30 mètres ?",
        "je fais un album photo pour l'anniversaire de mariage de mes parents, des idées de légendes ?",
        "mon grand-père raconte toujours les mêmes blagues, donne-m'en des nouvelles",
        "ma coloc et moi on veut partager les tâches, fais un planning",
    ],
}


def main():
    out = pathlib.Path(__file__).resolve().parents[2] / "crates/gate/tests/corpus/topics_r4_dev.jsonl"
    docs = []
    for lang in ("en", "es", "de", "fr"):
        docs += [{"text": t, "spans": [], "categories": c, "kind": "sensitive", "lang": lang}
                 for c, t in SENSITIVE[lang]]
        docs += [{"text": t, "spans": [], "categories": [], "kind": "general", "lang": lang} for t in GENERAL[lang]]
        docs += [{"text": t, "spans": [], "categories": [], "kind": "everyday", "lang": lang}
                 for t in EVERYDAY[lang]]
    with open(out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(out.name, len(docs))


if __name__ == "__main__":
    main()
