#!/usr/bin/env python3
"""Writes crates/gate/tests/corpus/topics_everyday_42.jsonl: issue #42's everyday set, written
before any detector changed: 160 realistic requests (40 each in English, Spanish, German and
French) that the cloud may answer: emails and texts to summarise, code, recipes, travel, shopping,
school work, pets, household, hobbies, in the users' own words ("my", "mi", "mich", "mon"). None
carries a private value or a private topic; a gate that keeps one local is a false keep.

Run: python3 scripts/gate/everyday_42.py (no dependencies)."""
import json
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "gate", "tests", "corpus", "topics_everyday_42.jsonl")

EN = """Can you summarise this email from my landlord? "Hi, the plumber will come on Thursday between 9 and 12 to look at the boiler. Please make sure someone is home."
My cat vomits a hairball about once a week, is that normal for a long-haired cat?
How do I sum a column in Excel only when the cell next to it says "paid"?
Write a polite email to my son's teacher saying he'll miss school on Friday for a family wedding.
I have chicken thighs, rice and a lemon. What can I make for dinner in 30 minutes?
My Python script says KeyError: 'name' when I read the JSON file. How do I fix it?
We're going to Rome for four days in October, what should we not miss?
Is it worth buying a robot vacuum for a small flat with two cats?
Help me with my homework: explain photosynthesis in simple words for a 12 year old.
My sourdough starter smells like nail polish remover. Did I kill it?
Can you shorten this paragraph for my newsletter? "Our garden club meets every second Saturday. This month we will swap seeds and talk about tomatoes."
My dog keeps pulling on the lead when we walk. Any training tips?
What's the difference between a Roth IRA and a traditional IRA in general terms?
Translate "Could you please send me the invoice again?" into German.
My laptop fan is really loud when I open Chrome. What can I do?
I need a gift idea for my dad who loves fishing, budget around 50 dollars.
Rewrite my cover letter opening so it sounds less stiff: "I am writing to apply for the position of junior designer."
My tomatoes have yellow leaves at the bottom. Too much water?
How long should I boil eggs for a runny yolk?
My git merge has conflicts in package-lock.json, what's the cleanest way to resolve them?
Plan a three-day hiking trip in the Lake District for beginners.
My daughter's science project is about volcanoes. Can you suggest an easy experiment?
Summarise this message from our neighbour: "We're having a barbecue on Saturday from 4pm, feel free to come by and bring the kids."
How do I get red wine out of a white carpet?
What's a good stretching routine before running 5k?
My SQL query returns duplicates when I join orders and customers. Why?
Recommend three novels like The Night Circus.
My bike chain keeps falling off when I change gears. How do I adjust the derailleur?
Can you make a packing list for a week at the beach with a toddler?
What should I write in a birthday card for my colleague who is retiring?
My sister asked me how to make her houseplants grow faster. What should I tell her?
I want to learn Spanish in six months, can you make me a study plan?
My kitchen sink drains slowly. What can I try before calling a plumber?
Explain the causes of the First World War for my history essay.
Compare the iPhone 15 and the Pixel 8 cameras.
How do I stop my hamster from biting the cage bars at night?
Draft a reply to this email: "Can we move our meeting to Wednesday at 3?" Saying yes.
My React component re-renders every second, how do I find out why?
Give me a weekly meal prep plan for a vegetarian family of four.
What games can I play with my kids on a long car journey?"""

ES = """¿Puedes resumir este correo de mi casero? "Hola, el fontanero pasará el jueves entre las 9 y las 12 para revisar la caldera."
Mi gato vomita bolas de pelo una vez por semana, ¿es normal?
¿Cómo puedo sumar una columna en Excel solo si la celda de al lado dice "pagado"?
Escribe un correo a la profesora de mi hijo diciendo que faltará el viernes por una boda.
Tengo pollo, arroz y un limón. ¿Qué preparo para cenar en media hora?
Mi script de Python da KeyError al leer el JSON, ¿cómo lo arreglo?
Vamos a Lisboa cuatro días en octubre, ¿qué no nos podemos perder?
¿Merece la pena un robot aspirador para un piso pequeño con dos gatos?
Ayúdame con los deberes: explica la fotosíntesis con palabras sencillas.
Mi masa madre huele a quitaesmalte, ¿la he matado?
¿Me acortas este párrafo para el boletín? "El club de jardinería se reúne cada segundo sábado del mes para intercambiar semillas."
Mi perro tira mucho de la correa cuando paseamos, ¿algún consejo?
¿Qué diferencia hay entre un fondo indexado y un fondo de gestión activa, en general?
Traduce al inglés "¿Me podría enviar de nuevo la factura?"
El ventilador de mi portátil hace mucho ruido cuando abro Chrome, ¿qué hago?
Necesito un regalo para mi padre que es muy aficionado a la pesca, unos 50 euros.
Reescribe el inicio de mi carta de presentación para que suene más natural.
Las hojas de abajo de mis tomateras se ponen amarillas, ¿es por exceso de riego?
¿Cuánto tiempo hay que cocer un huevo para que la yema quede líquida?
Tengo conflictos en git al hacer merge del package-lock.json, ¿cómo los resuelvo?
Planea una ruta de senderismo de tres días por los Picos de Europa para principiantes.
El proyecto de ciencias de mi hija es sobre volcanes, ¿qué experimento fácil puede hacer?
Resume este mensaje de la vecina: "El sábado hacemos una barbacoa a partir de las cuatro, venid con los niños."
¿Cómo quito una mancha de vino tinto de una alfombra blanca?
¿Qué estiramientos hago antes de correr 5 kilómetros?
Mi consulta SQL devuelve filas duplicadas al unir pedidos y clientes, ¿por qué?
Recomiéndame tres novelas parecidas a La sombra del viento.
Se me sale la cadena de la bici al cambiar de marcha, ¿cómo ajusto el cambio?
Hazme una lista de equipaje para una semana de playa con un niño pequeño.
¿Qué escribo en la tarjeta de despedida de un compañero que se jubila?
Quiero sumar los valores de dos columnas en Google Sheets, ¿qué fórmula uso?
Quiero aprender inglés en seis meses, ¿me haces un plan de estudio?
El fregadero de mi cocina traga despacio, ¿qué pruebo antes de llamar al fontanero?
Explícame las causas de la Primera Guerra Mundial para mi trabajo de historia.
Compara las cámaras del iPhone 15 y del Pixel 8.
¿Cómo consigo que mi hámster no muerda los barrotes por la noche?
Contesta a este correo diciendo que sí: "¿Podemos mover la reunión al miércoles a las 3?"
Mi componente de React se vuelve a renderizar cada segundo, ¿cómo veo por qué?
Dame un menú semanal vegetariano para una familia de cuatro.
¿A qué juegos podemos jugar con los niños en un viaje largo en coche?"""

DE = """Kannst du diese Mail von meinem Vermieter zusammenfassen? "Der Installateur kommt am Donnerstag zwischen 9 und 12 Uhr wegen der Heizung."
Meine Katze erbricht einmal pro Woche Haarballen, ist das normal?
Wie summiere ich in Excel eine Spalte nur, wenn daneben "bezahlt" steht?
Schreib eine Mail an die Lehrerin meines Sohnes, dass er am Freitag wegen einer Hochzeit fehlt.
Ich habe Hähnchen, Reis und eine Zitrone. Was koche ich in 30 Minuten?
Mein Python-Skript wirft KeyError beim Lesen der JSON-Datei, wie behebe ich das?
Wir fahren im Oktober vier Tage nach Rom, was sollten wir nicht verpassen?
Lohnt sich ein Saugroboter für eine kleine Wohnung mit zwei Katzen?
Hilf mir bei den Hausaufgaben: erklär die Fotosynthese einfach.
Mein Sauerteig riecht nach Nagellackentferner, ist er hinüber?
Kürz mir diesen Absatz für den Newsletter: "Der Gartenverein trifft sich jeden zweiten Samstag zum Samentausch."
Mein Hund zieht beim Spazierengehen ständig an der Leine, hast du Tipps?
Was ist allgemein der Unterschied zwischen einem ETF und einem aktiv gemanagten Fonds?
Übersetz ins Englische: "Könnten Sie mir die Rechnung noch einmal schicken?"
Der Lüfter meines Laptops ist sehr laut, wenn ich Chrome öffne. Was tun?
Ich suche ein Geschenk für meinen Vater, der gern angelt, etwa 50 Euro.
Formulier den Anfang meines Anschreibens etwas lockerer.
Meine Tomaten bekommen unten gelbe Blätter, gieße ich zu viel?
Wie lange muss ich ein Ei kochen, damit das Eigelb flüssig bleibt?
Ich habe Merge-Konflikte in der package-lock.json, wie löse ich die am saubersten?
Plane eine dreitägige Wanderung in der Sächsischen Schweiz für Anfänger.
Das Schulprojekt meiner Tochter handelt von Vulkanen, welches einfache Experiment passt?
Fass die Nachricht der Nachbarn zusammen: "Am Samstag grillen wir ab 16 Uhr, kommt gern mit den Kindern vorbei."
Wie bekomme ich Rotwein aus einem hellen Teppich?
Welche Dehnübungen mache ich vor einem 5-km-Lauf?
Meine SQL-Abfrage liefert Duplikate, wenn ich Bestellungen und Kunden verbinde. Warum?
Empfiehl mir drei Romane ähnlich wie Der Schwarm.
Die Kette an meinem Fahrrad springt beim Schalten ab, wie stelle ich das Schaltwerk ein?
Mach mir eine Packliste für eine Woche Strand mit Kleinkind.
Was schreibe ich einem Kollegen, der in Rente geht, in die Karte?
Kannst du mich daran erinnern, wie man in Word ein Inhaltsverzeichnis einfügt?
Ich will in sechs Monaten Spanisch lernen, machst du mir einen Lernplan?
Mein Küchenabfluss läuft langsam ab, was kann ich vor dem Klempner probieren?
Erklär mir die Ursachen des Ersten Weltkriegs für mein Referat.
Vergleiche die Kameras von iPhone 15 und Pixel 8.
Wie gewöhne ich meinem Hamster ab, nachts an den Gitterstäben zu nagen?
Antworte auf diese Mail mit einer Zusage: "Können wir das Treffen auf Mittwoch 15 Uhr verschieben?"
Meine React-Komponente rendert jede Sekunde neu, wie finde ich den Grund?
Gib mir einen vegetarischen Wochenplan für eine vierköpfige Familie.
Welche Spiele kann ich mit den Kindern auf einer langen Autofahrt spielen?"""

FR = """Tu peux résumer ce mail de mon propriétaire ? "Le plombier passera jeudi entre 9h et 12h pour vérifier la chaudière."
Mon chat vomit une boule de poils une fois par semaine, c'est normal ?
Comment additionner une colonne dans Excel seulement si la cellule voisine indique "payé" ?
Écris un mail à la maîtresse de mon fils pour dire qu'il sera absent vendredi pour un mariage.
J'ai du poulet, du riz et un citron. Qu'est-ce que je prépare en 30 minutes ?
Mon script Python renvoie KeyError en lisant le JSON, comment corriger ?
On part à Rome quatre jours en octobre, qu'est-ce qu'il ne faut pas rater ?
Un aspirateur robot, ça vaut le coup pour un petit appartement avec deux chats ?
Aide-moi pour mes devoirs : explique la photosynthèse simplement.
Mon levain sent le dissolvant, est-ce que je l'ai tué ?
Raccourcis ce paragraphe pour la lettre d'info : "Le club de jardinage se réunit le deuxième samedi du mois pour échanger des graines."
Mon chien tire sur la laisse pendant les promenades, des conseils ?
Quelle est en général la différence entre un ETF et un fonds géré activement ?
Traduis en anglais : "Pourriez-vous me renvoyer la facture ?"
Le ventilateur de mon portable fait beaucoup de bruit quand j'ouvre Chrome, que faire ?
Je cherche un cadeau pour mon père qui adore la pêche, environ 50 euros.
Reformule le début de ma lettre de motivation pour qu'il soit moins raide.
Mes tomates ont des feuilles jaunes en bas, est-ce que j'arrose trop ?
Combien de temps cuire un œuf pour avoir le jaune coulant ?
J'ai des conflits git sur package-lock.json, comment les résoudre proprement ?
Prépare une randonnée de trois jours dans les Vosges pour débutants.
Le projet de sciences de ma fille porte sur les volcans, quelle expérience facile ?
Résume ce message des voisins : "Samedi on fait un barbecue à partir de 16h, venez avec les enfants."
Comment enlever une tache de vin rouge sur un tapis blanc ?
Quels étirements faire avant de courir 5 km ?
Ma requête SQL renvoie des doublons quand je joins commandes et clients, pourquoi ?
Conseille-moi trois romans dans le style de L'Ombre du vent.
La chaîne de mon vélo saute quand je change de vitesse, comment régler le dérailleur ?
Fais-moi une liste de bagages pour une semaine à la plage avec un bambin.
Qu'est-ce que j'écris sur la carte d'un collègue qui part à la retraite ?
Comment je fais pour que mes plantes d'intérieur poussent plus vite ?
Je veux apprendre l'espagnol en six mois, tu me fais un planning ?
L'évier de ma cuisine s'écoule lentement, que tester avant d'appeler un plombier ?
Explique-moi les causes de la Première Guerre mondiale pour mon exposé.
Compare les appareils photo de l'iPhone 15 et du Pixel 8.
Comment empêcher mon hamster de ronger les barreaux la nuit ?
Réponds oui à ce mail : "Peut-on déplacer la réunion à mercredi 15h ?"
Mon composant React se re-rend chaque seconde, comment trouver pourquoi ?
Donne-moi un menu végétarien de la semaine pour une famille de quatre.
À quels jeux jouer avec les enfants pendant un long trajet en voiture ?"""

docs = []
for lang, block in (("en", EN), ("es", ES), ("de", DE), ("fr", FR)):
    lines = [l.strip() for l in block.strip().split("\n") if l.strip()]
    assert len(lines) == 40, (lang, len(lines))
    for t in lines:
        docs.append({"text": t, "spans": [], "categories": [], "kind": "everyday", "lang": lang})
with open(OUT, "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps(d, ensure_ascii=False) + "\n")
print(f"wrote {len(docs)} requests to {os.path.normpath(OUT)}")
