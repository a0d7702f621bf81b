//! The topic lexicon's tests (src/topics.rs).

use super::*;

fn found(text: &str) -> Vec<&'static str> {
    let spans = crate::Detector::new().detect(text);
    Topics::shipped().classify(text, &spans).into_iter().map(|t| t.kind.name()).collect()
}

#[test]
fn the_issues_examples() {
    assert!(found("Summarize my bloodwork results from last week").contains(&"HEALTH"));
    assert!(found("My HIV test came back positive, what should I do?").contains(&"HEALTH"));
    let bank = found("Here is my bank statement: balance 12,430 EUR, account ending 4471");
    assert!(bank.contains(&"FINANCE") && bank.contains(&"PRIVATE_DOCUMENT"), "{bank:?}");
    assert!(found("how does insulin work?").is_empty());
    assert!(found("What is the penalty for tax fraud in Germany?").is_empty());
    assert!(found("Write a story where the detective has cancer and a secret bank loan.").is_empty());
}

#[test]
fn four_languages() {
    assert_eq!(found("Me diagnosticaron diabetes el mes pasado, ¿qué debo comer?"), ["HEALTH"]);
    assert_eq!(found("Meine Blutwerte sind schlecht, was bedeutet ein hoher Cholesterinwert?"), ["HEALTH"]);
    assert_eq!(found("J'ai été arrêté par la police hier soir, que dois-je faire ?"), ["LEGAL"]);
    assert!(found("Wie funktioniert Insulin im Körper?").is_empty());
    assert!(found("¿Cuáles son los síntomas de la diabetes?").is_empty());
    assert!(found("Qu'est-ce qu'un relevé bancaire ?").is_empty());
}

#[test]
fn pasted_layouts() {
    // A chat log with time stamps, a statement's rows, a letter's heading: no "here is my".
    let chat = "[10:02] Sam: did you tell anyone?\n[10:03] Me: no, only my sister\n\
                [10:03] Sam: please don't, I could lose my job\n[10:05] Me: ok I promise";
    assert!(found(chat).contains(&"PRIVATE_DOCUMENT"), "{:?}", found(chat));
    let rows = "Datum  Buchungstext  Betrag\n01.03. Miete  -980,00\n02.03. Gehalt  +2.640,00\n04.03. REWE  -63,12";
    let r = found(rows);
    assert!(r.contains(&"FINANCE") && r.contains(&"PRIVATE_DOCUMENT"), "{r:?}");
    let letter =
        "NOTICE TO APPEAR\nYou are summoned to appear before the court on 14 May.\nWhat happens if I don't go?";
    assert!(found(letter).contains(&"PRIVATE_DOCUMENT"), "{:?}", found(letter));
    // Lines of a recipe are values too, but hold no sensitive subject.
    assert!(found("Pancakes\n200 g flour\n2 eggs\n300 ml milk\nHow long do I rest the batter?").is_empty());
}

#[test]
fn cues_that_generalise() {
    // A phrase that starts with an anchor keeps it ("me duele").
    assert_eq!(found("Me duele mucho el pecho al respirar desde ayer"), ["HEALTH"]);
    // A drug's name as German writes it.
    assert_eq!(found("Ich nehme seit Wochen Sertralin und bin müde."), ["HEALTH"]);
    // Two weak subjects together.
    assert!(!found("My sister is Nigerian and gets stopped by the police every week.").is_empty());
    // A named person's matter, the name after a particle or with a possessive 's.
    assert_eq!(found("Der Gentest von Dieter Hoffmann zeigt ein Risiko."), ["BIOMETRIC"]);
    assert_eq!(found("Noah O'Connor's genetic test showed a risk."), ["BIOMETRIC"]);
    // First person, general or everyday: a professional's question, a word inside another.
    assert!(found("I'm a nurse and need a simple way to explain insulin to patients").is_empty());
    assert!(found("Help me write an email to my landlord about the broken heater.").is_empty());
    assert!(found("Gib mir ein Rezept für Käsespätzle").is_empty());
}

#[test]
fn symptoms_without_a_diagnosis() {
    for text in [
        "keep coughing up green stuff and my chest rattles",
        "my wife's hands go numb at night",
        "tengo hormigueo en la mano izquierda desde ayer",
        "ich habe seit gestern Durchfall und Bauchkrämpfe",
        "meine Knie sind geschwollen und steif",
        "j'ai des fourmillements dans les jambes",
    ] {
        assert_eq!(found(text), ["HEALTH"], "{text:?}");
    }
    // Words that are other words too: handing over ("übergeben"), a blurry photo, a
    // scatterbrain ("étourdi"), a number (not "numb" + "er"), a printer that is a headache.
    for text in [
        "Ich habe die Unterlagen gestern übergeben.",
        "Mein Foto ist verschwommen, wie mache ich es schärfer?",
        "Je suis étourdi, j'ai encore oublié mes clés.",
        "What is my number on the waiting list?",
        "My printer is a headache, it jams every day.",
        "tengo dos perros y un gato",
    ] {
        assert!(found(text).is_empty(), "{text:?}: {:?}", found(text));
    }
}

#[test]
fn asking_for_help_and_writing_cues_do_not_bind() {
    // "me ayudas", "tu m'aides", "hilfst du mir": the asker's "me", not the subject's; and a
    // text with a writing cue is left to the lexicon (the model does not see the cue).
    for text in [
        "Mi trabajo de clase trata de las hipotecas, ¿me ayudas con el esquema?",
        "mon exposé porte sur l'alcoolisme, tu m'aides pour le plan ?",
        "Mein Referat ist über Rassismus, hilfst du mir mit der Gliederung?",
    ] {
        assert!(found(text).is_empty(), "{text:?}: {:?}", found(text));
    }
    assert_eq!(found("Hilf mir bitte, ich habe 9.000 Euro Schulden und die Bank droht."), ["FINANCE"]);
}

#[test]
fn a_plain_word_is_not_an_inflected_one() {
    let mut w = Words::default();
    let roles = |t: &Topics, text: &str, w: &mut Words| {
        words(text, |_| false, w);
        t.at(w, 0).map(|(_, r)| r.to_vec())
    };
    let without = Topics::parse("[META]\nessay\n").unwrap();
    assert_eq!(roles(&without, "essayer", &mut w), Some(vec![Role::Meta]));
    let with = Topics::parse("[META]\nessay\n[PLAIN]\nessayer\n").unwrap();
    assert_eq!(roles(&with, "essayer", &mut w), Some(vec![Role::Plain]));
    assert_eq!(roles(&with, "essays", &mut w), Some(vec![Role::Meta]));
}

#[test]
fn evidence_points_at_the_words() {
    let text = "Summarize my bloodwork results";
    let t = Topics::shipped().classify(text, &[]);
    let e = t[0].evidence[0];
    assert_eq!(&text[e.start..e.end], "bloodwork");
}

#[test]
fn letter_words_count_as_split_whitespace_does() {
    let alphabet = ["a", "B", "1", " ", "\t", "\u{0b}", "é", "\u{a0}", "\u{2003}", "-", "٣", "ß"];
    let mut rng = crate::test_rng::TestRng(0x2545_F491_4F6C_DD1D);
    for _ in 0..20_000 {
        let line: String = (0..rng.below(24)).map(|_| alphabet[rng.below(alphabet.len())]).collect();
        let n = line.split_whitespace().filter(|w| w.chars().any(char::is_alphabetic)).count();
        for max in [0, 1, 2, 6] {
            assert_eq!(letter_words_at_most(&line, max), n <= max, "{line:?} {max}");
        }
    }
}

#[test]
fn phrases_stems_endings_and_inflections_are_found() {
    let t = Topics::parse("[HEALTH 1]\nblood_test blut* *itis sertraline deuda panic_attack_at_night\n").unwrap();
    let mut w = Words::default();
    let cases = [
        ("my blood test", 1, Some(2)),
        ("blutwerte", 0, Some(1)),
        ("gastritis", 0, Some(1)),
        ("itis", 0, None),
        ("sertralin", 0, Some(1)),
        ("sertralina", 0, Some(1)),
        ("deudas", 0, Some(1)),
        ("a panic attack at night", 1, Some(4)),
        ("a panic attack", 1, None),
        ("blood", 0, None),
    ];
    for (text, i, want) in cases {
        words(text, |_| false, &mut w);
        assert_eq!(t.at(&w, i).map(|(len, _)| len), want, "{text:?}");
    }
}

#[test]
fn lexicon_errors_name_the_line() {
    assert!(Topics::parse("[HEALTH 1]\nflu\n[WEALTH 1]\nmoney\n").unwrap_err().starts_with("line 3:"));
    assert!(Topics::parse("flu\n").unwrap_err().starts_with("line 1:"));
    assert!(Topics::parse("[HEALTH 2]\nflu\n").unwrap_err().contains("from 0 to 1"));
    assert!(Topics::parse("[HEALTH 1]\nblood_te*\n").unwrap_err().contains("one word"));
}

#[test]
fn facts_about_a_person_in_the_third_person() {
    // Role nouns bind as "my" does, in the four languages (issue #42).
    assert_eq!(found("The user has stage 3 breast cancer and is in chemotherapy."), ["HEALTH"]);
    assert!(
        found("Memory: the user is going through a divorce and filed for Chapter 13 bankruptcy.").contains(&"FINANCE")
    );
    assert!(found("Contexto sobre el usuario: tiene cáncer de mama y está en quimioterapia.").contains(&"HEALTH"));
    assert!(found("Kontext zum Nutzer: Er hat Parkinson und bekommt eine tiefe Hirnstimulation.").contains(&"HEALTH"));
    assert!(found("Contexte sur l'utilisateur : il est séropositif et suit une trithérapie.").contains(&"HEALTH"));
    // Without a person, general knowledge stays nothing.
    assert!(found("How does chemotherapy work against breast cancer?").is_empty());
    assert!(found("Users of the app can export a table of customers.").is_empty());
}

#[test]
fn a_text_about_someone_binds_its_words_at_the_floor() {
    let t = Topics::default();
    let tool = "asylum application denied; removal proceedings scheduled";
    assert!(t.assess_bound(tool, &[], 0.0).topics.is_empty(), "no subject, no floor: nothing");
    let bound = t.assess_bound(tool, &[], 0.6).topics;
    assert_eq!(bound.iter().map(|c| c.kind.name()).collect::<Vec<_>>(), ["LEGAL"], "{bound:?}");
    assert!(t.assess_bound("sunny, 21 degrees, light wind", &[], 0.6).topics.is_empty());
}

#[test]
fn a_pet_between_the_owner_and_the_symptom_unbinds_them() {
    for text in ["My cat vomits a hairball about once a week.", "Meine Katze erbricht einmal pro Woche Haarballen."] {
        assert!(Topics::with_mode(Mode::Lexicon).classify(text, &[]).is_empty(), "{text}");
    }
    assert_eq!(found("I vomit every morning and feel dizzy."), ["HEALTH"]);
    assert!(found("¿Cómo puedo sumar una columna en Excel?").is_empty(), "sumar: to add");
}

#[test]
fn an_everyday_object_or_a_pet_is_not_flagged_by_the_model_alone() {
    // The learned model alone flags each of these on its first-person phrasing (issue #42, fifth
    // round); the lexicon knows what they are about: an everyday object, a pet.
    let model = Topics::with_mode(Mode::Model);
    for text in [
        "my kitten keeps sneezing, is that normal?",
        "Tengo patatas, cebolla y huevos, ¿qué cocino esta noche?",
        "Ich habe Kartoffeln, Zwiebeln und Eier, was koche ich heute?",
        "J'ai des pommes de terre, des oignons et des oeufs, je cuisine quoi ce soir ?",
        "my brother and I want to build a treehouse this summer",
    ] {
        assert!(!model.classify(text, &[]).is_empty(), "the model alone: {text}");
        assert!(found(text).is_empty(), "{text}");
        // Still in the judge's band by the model's score.
        assert!(Topics::shipped().assess(text, &[]).unsure(), "{text}");
    }
    // A word of loss keeps the model's say; a category word keeps the lexicon's.
    assert_eq!(found("since my dog died I stopped eating and I cry all day"), ["HEALTH"]);
    assert!(found("I have chicken and rice but my Crohn's flares up after dinner").contains(&"HEALTH"));
}

#[test]
fn words_that_are_other_words_first() {
    assert!(found("How do I kill a child process in Node when the parent exits?").is_empty());
    assert!(found("Our technical debt is piling up; my team wants a refactoring sprint.").is_empty());
    // (The lexicon's: the learned model reads "ich glaube" as faith too.)
    assert!(Topics::with_mode(Mode::Lexicon).classify("Ich glaube, dass mein Zug um 10 fährt.", &[]).is_empty());
    assert_eq!(found("ich glaube an Gott und gehe jeden Sonntag in die Kirche"), ["RELIGION"]);
    assert!(found("Plan a birthday dinner for my wife, budget around 120 dollars").is_empty());
    assert!(found("I owe $4,000 on my credit card and can't pay it").contains(&"FINANCE"));
    assert!(found("Wie lese ich eine Gehaltsabrechnung allgemein?").is_empty());
    assert!(found("Meine Gehaltsabrechnung ist falsch, was tun?").contains(&"FINANCE"));
    assert_eq!(found("nos van a desahuciar el lunes"), ["LEGAL"]);
}

#[test]
fn a_lost_appetite_keeps_the_models_say_beside_an_everyday_word() {
    // "cuisine" is an everyday word, but "ne mange plus" is a symptom's (weak) word.
    let text = "depuis que mon mari est parti je ne cuisine plus et je ne mange plus";
    assert!(!found(text).is_empty(), "{text}");
    assert_eq!(found("I have chicken pox and I itch everywhere"), ["HEALTH"]);
}

#[test]
fn an_everyday_word_in_a_long_text_does_not_silence_the_model() {
    // Past `EVERYDAY_WORDS` words (an agent's system prompt, a tool's result), the rule is off.
    let short = "my brother and I want to build a treehouse this summer";
    assert!(found(short).is_empty());
    let filler = " Reply in a friendly tone and keep answers short.".repeat(8);
    let long = format!("{short}.{filler}");
    let t = Topics::shipped();
    let mut s = Scratch::default();
    t.classify_in(&long, &[], 0.0, &mut s.words);
    assert!(s.words.list.len() > EVERYDAY_WORDS && !s.words.everyday);
    t.classify_in(short, &[], 0.0, &mut s.words);
    assert!(s.words.everyday);
}

fn lexicon(text: &str) -> Vec<&'static str> {
    let spans = crate::Detector::new().detect(text);
    Topics::with_mode(Mode::Lexicon).classify(text, &spans).into_iter().map(|t| t.kind.name()).collect()
}

#[test]
fn a_first_name_alone_binds_as_a_named_person() {
    // A first name the name detector leaves (no surname, no cue) is a person's.
    assert_eq!(lexicon("Olivier a fait une tentative de suicide le mois dernier"), ["HEALTH"]);
    assert_eq!(lexicon("Beatriz tiene diabetes tipo 2 desde el verano"), ["HEALTH"]);
    // Not a place after a preposition or an article, not a word a first name also is.
    assert!(lexicon("Comment fonctionne le surendettement en France ?").is_empty());
    assert!(lexicon("Will the new tax rules change how a mortgage is taxed?").is_empty());
}

#[test]
fn a_message_without_its_subject_is_the_writers() {
    assert_eq!(lexicon("got arrested last night, the court date is in March"), ["LEGAL"]);
    assert_eq!(lexicon("been feeling really low since the move"), ["HEALTH"]);
    // Only where the verb starts the sentence, and no question or order starts so.
    assert!(lexicon("The kids got the flu vaccine info sheet; what does it say in general?").is_empty());
    assert!(lexicon("Did Beethoven have syphilis?").is_empty());
}

#[test]
fn an_anchor_in_the_next_sentence_binds_at_half() {
    // Two category words and the writer in the sentence after.
    assert_eq!(lexicon("Biopsy and MRI next week. Should I be worried?"), ["HEALTH"]);
    // One word alone is not enough.
    assert!(lexicon("The hospital is near the station. Can I park there?").is_empty());
}

#[test]
fn ligatures_read_as_their_letters() {
    let mut w = Words::default();
    words("cœur Œil sæt", |_| false, &mut w);
    let folded: Vec<&str> = (0..w.list.len()).map(|i| std::str::from_utf8(w.text(i)).unwrap()).collect();
    assert_eq!(folded, ["coeur", "oeil", "saet"]);
}

#[test]
fn sixth_round_words_said_otherwise_are_not_flagged() {
    for text in [
        "Si je ne me trompe pas, la réunion est à 10 h, tu peux confirmer ?",
        "Je vous prie d'agréer mes salutations distinguées, finis la lettre ainsi.",
        "Mon casier au vestiaire est bloqué, comment l'ouvrir ?",
        "I pulled over to check the map and the engine stalled.",
        "Mon PC ne reconnaît plus ma clé USB, que faire ?",
        "No puedo mover el archivo a otra carpeta.",
        "Tenemos relaciones comerciales con una empresa china, redacta un correo.",
        "I volunteer for a food bank on Saturdays, write an invitation.",
        "Mi bebé llora cuando le cambio el pañal, ¿es normal?",
        "Use sed to replace every tab with a comma, the legal team needs the file.",
        "Mi apellido está mal escrito en el formulario del colegio, ¿cómo pido que lo cambien?",
    ] {
        assert!(lexicon(text).is_empty(), "{text}: {:?}", lexicon(text));
    }
}

#[test]
fn persons_named_by_a_role() {
    // Issue #42, seventh round: a relative, a neighbour or a coworker named by role, no "my".
    assert_eq!(found("Opa hat seit dem Sturz eine Hüftfraktur und liegt im Krankenhaus"), ["HEALTH"]);
    assert_eq!(found("la vecina del quinto está en quimioterapia"), ["HEALTH"]);
    assert_eq!(found("Le collègue d'en face est en arrêt maladie pour dépression"), ["HEALTH"]);
    assert_eq!(found("The neighbour got arrested for assault last night"), ["LEGAL"]);
    // Anyone's role, a pair, what a role may do: general.
    assert!(found("If a neighbour is sued over a fallen tree, who pays?").is_empty());
    assert!(found("Is breast cancer passed from mother to daughter?").is_empty());
    assert!(found("¿La diabetes se hereda de padre a hijo?").is_empty());
    assert!(found("Darf der Vermieter die Kaution einbehalten?").is_empty());
    assert!(found("Write a story where grandpa has cancer and the family goes to the sea.").is_empty());
    assert!(found("Le cousin est avocat, il cherche un stage pour sa fille.").is_empty());
    // An everyday request about one.
    assert!(found("Grandma's lemon cake recipe needs 3 eggs, can I use 2?").is_empty());
    assert!(found("Der Nachbar mäht sonntags den Rasen, was kann ich tun?").is_empty());
}

#[test]
fn german_compounds() {
    // The head of a compound: a listed word or stem at its end.
    assert_eq!(found("Ich habe Wettschulden bei meinem Schwager"), ["FINANCE"]);
    assert_eq!(found("Mein Vater ist tablettenabhängig"), ["HEALTH"]);
    // Not a Spanish word that ends in one ("felicitación" is not a "citación").
    assert!(found("escríbeme una felicitación para mi madre que cumple 70").is_empty());
}

#[test]
fn eighth_round_families_by_their_endings() {
    // A drug by its nonproprietary name's stem, a procedure or a tumour by its ending: names that
    // no list of the lexicon holds.
    assert_eq!(lexicon("I've been taking hydrocodone every day since March"), ["HEALTH"]);
    assert_eq!(lexicon("Mein Vater nimmt seit dem Herbst Rivaroxaban"), ["HEALTH"]);
    assert_eq!(lexicon("a mi tía le hicieron una mastectomía en mayo"), ["HEALTH"]);
    assert_eq!(lexicon("ma mère doit passer une cystoscopie la semaine prochaine"), ["HEALTH"]);
    assert_eq!(lexicon("my brother was told he has a neuroblastoma"), ["HEALTH"]);
    // Words of the common list that end so are themselves; a general question stays general.
    assert!(lexicon("I'm full of nostalgia for the 90s, make me a playlist").is_empty());
    assert!(lexicon("What is a colonoscopy and how long does it take?").is_empty());
    assert!(lexicon("L'héroïne du film est géniale, qui est l'actrice ?").is_empty());
}

#[test]
fn eighth_round_third_persons_and_news() {
    // A third person by a generic noun or a job with "the": bound as a role is.
    assert_eq!(lexicon("The cashier got arrested for theft last night"), ["LEGAL"]);
    assert_eq!(lexicon("el repartidor está enganchado a la cocaína"), ["HEALTH"]);
    assert_eq!(lexicon("Der Praktikant ist psychotisch und liegt in der Klinik"), ["HEALTH"]);
    // Anyone ("a guy"), or what one may do: general.
    assert!(lexicon("A guy at the gym asked me how heroin addiction starts").is_empty());
    assert!(lexicon("Can the boss fire someone for joining a union?").is_empty());
    // Learning that something is so is news about a person; learning how is general.
    assert_eq!(lexicon("Papa vient d'apprendre qu'il a du diabète"), ["HEALTH"]);
    assert!(lexicon("Je veux apprendre comment fonctionne l'insuline").is_empty());
}

#[test]
fn an_origin_said_with_a_copula_is_the_persons() {
    // Issue #42, eighth round: "ich bin Kurde", "soy marroquí", "je suis antillais".
    assert_eq!(lexicon("Ich bin Kurde und der Vermieter will mir die Wohnung nicht geben"), ["ETHNICITY"]);
    assert_eq!(lexicon("soy marroquí y nadie me alquila un piso"), ["ETHNICITY"]);
    assert_eq!(lexicon("weil ich Kurdin bin, bekomme ich keine Wohnung"), ["ETHNICITY"]);
    // An origin of a thing, or a possessive's "'s", is not.
    assert!(lexicon("Grandma's Turkish coffee recipe: how fine should the grind be?").is_empty());
    assert!(lexicon("The restaurant is Moroccan, what should I order?").is_empty());
    // Issue #42, ninth round: an origin as the name someone is called.
    assert_eq!(lexicon("they call my son the Chinese kid at school"), ["ETHNICITY"]);
    assert_eq!(lexicon("sie nennen meinen Sohn den Türken"), ["ETHNICITY"]);
    assert!(lexicon("my grandma calls it Turkish delight").is_empty());
}

#[test]
fn a_third_person_by_a_pronoun() {
    // Issue #42, eighth round: someone in particular, named by a subject pronoun.
    assert_eq!(lexicon("she is on chemo and has lost her hair"), ["HEALTH"]);
    assert_eq!(lexicon("er hat Krebs und liegt im Krankenhaus"), ["HEALTH"]);
    assert_eq!(lexicon("il a été arrêté pour vol la semaine dernière"), ["LEGAL"]);
    // After "if", in a question's inversion, or French impersonal "il": anyone.
    assert!(lexicon("if she is pregnant, can she take ibuprofen?").is_empty());
    assert!(lexicon("Qu'est-ce qu'une garde à vue et combien de temps dure-t-elle ?").is_empty());
    assert!(lexicon("Il y a un cancer dans la famille de Napoléon ?").is_empty());
}

#[test]
fn eighth_round_money_and_drug_use_as_said() {
    assert_eq!(lexicon("tengo que empeñar el anillo de mi abuela para pagar el alquiler"), ["FINANCE"]);
    assert_eq!(lexicon("bin gestern total bekifft zur Arbeit gekommen"), ["HEALTH"]);
    assert!(lexicon("my laptop broke and I need a new one, budget 500 dollars").is_empty());
}

#[test]
fn a_duration_up_to_now_is_someones() {
    // Issue #42, eighth round: a message with no subject that says how long something has lasted.
    assert_eq!(lexicon("Blut im Stuhl seit drei Tagen, keine Schmerzen, was kann das sein"), ["HEALTH"]);
    assert_eq!(lexicon("insomnio desde hace dos semanas, ¿qué puedo tomar?"), ["HEALTH"]);
    // A plan or a general question with a duration has no category word bound.
    assert!(lexicon("Plan a trip to Japan for two weeks in April").is_empty());
    assert!(lexicon("How long does chemotherapy last, usually for months?").is_empty());
}

#[test]
fn a_clinical_notes_header_makes_it_its_patients() {
    // Issue #42, tenth round: a note that starts with a patient's age and sex.
    assert_eq!(lexicon("Pt 66M, COPD, on inhalers, review in a month"), ["HEALTH"]);
    assert_eq!(lexicon("Pat. 80 J., Diabetes, Insulin erhöht"), ["HEALTH"]);
    assert_eq!(lexicon("Pac. 70a, cáncer de colon operado, control"), ["HEALTH"]);
    assert_eq!(lexicon("Pte 75 ans, BPCO, oxygène à domicile"), ["HEALTH"]);
    // A general question, or an amount where an age would be, is no patient's.
    assert!(lexicon("What is COPD and how is it treated?").is_empty());
    assert!(lexicon("summary: 12M, downloads up, cancer awareness app launch").is_empty());
    assert!(lexicon("Patient 3 in the fixture: John, 40, appointment at 10").is_empty());
}

#[test]
fn a_long_number_heading_a_line_is_no_age() {
    // (and does not overflow the age's parse)
    assert!(lexicon("99999999999999999999M, HTN guidelines explained").is_empty());
}
