"""Deterministic generator of the embedded `demo` corpus: English-like source, French-like target.

A small generative grammar over real English and French words draws one tree per sentence and realises
it twice, so the French side is a deterministic function of the English side (BLEU can get high). The
French realisation needs context that position-wise copying cannot supply: gender and number agreement
of determiners, adjectives, verbs and participles; most adjectives after the noun; object pronouns
before the verb; "the minister's car" as "la voiture du ministre"; "ne ... pas" around the verb;
elision (l', d', qu', n') and contractions (du, au, des, aux). Relative clauses, prepositional
phrases, reported speech and clause coordination spread source lengths over about 4-64 tokens.

Corpora whose name contains "news", and dev/test corpora (name contains "dev" or "test"), are
in-domain: news-topic words are frequent. The others form the general pool, a mix of parliament, web
and science sentences with a minority of news ones, so that a cross-entropy-difference selection has
something to find. Sentences are written as raw text; the token lists the realisers build are the
Moses tokenization of that text (checked in the tests), and the report's statistics count them.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import random
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Union

from rnnmt.errors import UserError
from rnnmt.fileio import write_json, write_lines

log = logging.getLogger(__name__)

DEFAULT_SIZES = {"demo-news": 4000, "demo-general": 20000, "demo-dev": 500, "demo-test": 1000}
SHORTLIST = 800  # the demo vocabulary size the report measures rare-word coverage against
MAX_TOKENS = 64  # longer draws are discarded so that no sentence runs away
MIN_TOKENS = 4

# --- lexicon ------------------------------------------------------------------------------------
# Entries are in rough frequency order: draws follow a Zipf law over list position, so the tail of
# each list is rare and falls outside a small shortlist.

# "english french tag": tag m/f is the French gender, upper case (M/F) an animate noun, a trailing
# "u" an uncountable one (never plural, never "a").
_NOUNS = {
    "general": """
man homme M, woman femme F, child enfant M, friend ami M, family famille f, house maison f,
city ville f, country pays m, day jour m, year année f, week semaine f, month mois m, life vie f,
world monde m, person personne F, student étudiant M, teacher professeur M, doctor médecin M,
worker ouvrier M, neighbour voisin M, brother frère M, sister sœur F, mother mère F, father père M,
son fils M, daughter fille F, boy garçon M, dog chien M, cat chat M, horse cheval M, bird oiseau M,
car voiture f, train train m, road route f, street rue f, door porte f, window fenêtre f,
table table f, chair chaise f, room pièce f, kitchen cuisine f, garden jardin m, tree arbre m,
flower fleur f, river rivière f, sea mer f, mountain montagne f, village village m, book livre m,
letter lettre f, newspaper journal m, picture image f, film film m, song chanson f, game jeu m,
ball ballon m, water eau fu, bread pain mu, wine vin m, coffee café m, meal repas m,
restaurant restaurant m, hotel hôtel m, hospital hôpital m, school école f, church église f,
shop magasin m, bank banque f, office bureau m, job emploi m, money argent mu, price prix m,
problem problème m, question question f, answer réponse f, idea idée f, story histoire f,
word mot m, name nom m, language langue f, music musique fu, night nuit f, morning matin m,
evening soir m, summer été m, winter hiver m, island île f, beach plage f, forest forêt f,
field champ m, farm ferme f, farmer agriculteur M, king roi M, queen reine F, soldier soldat M,
artist artiste M, writer écrivain M, singer chanteur M, actor acteur M, driver conducteur M,
pilot pilote M, nurse infirmière F, lawyer avocat M, judge juge M, guest invité M,
visitor visiteur M, tourist touriste M, key clé f, bag sac m, box boîte f, phone téléphone m,
computer ordinateur m, clock horloge f, bed lit m, floor sol m, wall mur m, roof toit m,
bridge pont m, boat bateau m, plane avion m, ship navire m, station gare f, airport aéroport m,
museum musée m, library bibliothèque f, theatre théâtre m, park parc m, square place f,
market marché m, dinner dîner m
""",
    "news": """
government gouvernement m, president président M, minister ministre M, election élection f,
vote vote m, party parti m, crisis crise f, war guerre f, army armée f, attack attaque f,
victim victime F, witness témoin M, suspect suspect M, murder meurtre m, prison prison f,
court tribunal m, trial procès m, company entreprise f, economy économie f, growth croissance fu,
unemployment chômage mu, tax impôt m, budget budget m, debt dette f, investor investisseur M,
share action f, profit bénéfice m, loss perte f, strike grève f, protest manifestation f,
demonstrator manifestant M, leader dirigeant M, mayor maire M, governor gouverneur M,
senator sénateur M, candidate candidat M, campaign campagne f, poll sondage m, voter électeur M,
citizen citoyen M, journalist journaliste M, interview entretien m, statement déclaration f,
announcement annonce f, decision décision f, agreement accord m, negotiation négociation f,
summit sommet m, embassy ambassade f, ambassador ambassadeur M, border frontière f,
refugee réfugié M, immigrant immigré M, weapon arme f, bomb bombe f, explosion explosion f,
accident accident m, flood inondation f, storm tempête f, earthquake séisme m,
firefighter pompier M, player joueur M, coach entraîneur M, match match m,
championship championnat m, goal but m, season saison f, stadium stade m, victory victoire f
""",
    "parliament": """
commission commission f, council conseil m, member membre M, state État m, directive directive f,
regulation règlement m, amendment amendement m, proposal proposition f, report rapport m,
rapporteur rapporteur M, committee comité m, debate débat m, resolution résolution f,
policy politique f, treaty traité m, presidency présidence f, institution institution f,
procedure procédure f, framework cadre m, programme programme m, fund fonds m, subsidy subvention f,
objective objectif m, priority priorité f, strategy stratégie f, principle principe m,
right droit m, freedom liberté f, democracy démocratie f, cooperation coopération fu,
integration intégration fu, enlargement élargissement mu, competition concurrence fu,
agriculture agriculture fu, fishery pêche f, transport transport mu, environment environnement m,
legislation législation fu, measure mesure f, instrument instrument m, area domaine m,
sector secteur m, majority majorité f, minority minorité f
""",
    "web": """
customer client M, product produit m, order commande f, delivery livraison f, website site m,
page page f, account compte m, user utilisateur M, service service m, offer offre f,
discount remise f, payment paiement m, basket panier m, item article m, model modèle m,
brand marque f, seller vendeur M, buyer acheteur M, supplier fournisseur M, store boutique f,
catalogue catalogue m, stock stock m, warranty garantie f, refund remboursement m,
review commentaire m, rating note f, download téléchargement m, software logiciel mu,
application application f, version version f, device appareil m, screen écran m, battery batterie f,
cable câble m, printer imprimante f, keyboard clavier m, file fichier m, folder dossier m,
link lien m, message message m, subscription abonnement m, profile profil m, photo photo f,
video vidéo f
""",
    "science": """
cell cellule f, protein protéine f, gene gène m, molecule molécule f, atom atome m,
particle particule f, energy énergie fu, experiment expérience f, sample échantillon m,
result résultat m, theory théorie f, researcher chercheur M, scientist scientifique M,
laboratory laboratoire m, study étude f, analysis analyse f, method méthode f, measurement mesure f,
temperature température f, pressure pression f, surface surface f, structure structure f,
process processus m, reaction réaction f, effect effet m, cause cause f, disease maladie f,
patient patient M, treatment traitement m, virus virus m, infection infection f, brain cerveau m,
blood sang mu, plant plante f, root racine f, leaf feuille f, seed graine f, soil sol m,
climate climat m, planet planète f, galaxy galaxie f, universe univers m, orbit orbite f,
telescope télescope m, observation observation f, signal signal m, wave onde f, force force f,
mass masse f, speed vitesse f, distance distance f, volume volume m, density densité f,
solution solution f, acid acide m, metal métal m, crystal cristal m, carbon carbone mu
""",
}

# "english french": a leading "+" places the French adjective before the noun; "masc/fem" gives an
# irregular feminine.
_ADJECTIVES = {
    "general": """
big +grand, small +petit, new +nouveau, old +vieux, good +bon, bad +mauvais, beautiful +beau,
young +jeune, long +long/longue, high +haut, pretty +joli, great +grand, first +premier,
last +dernier, other +autre, former +ancien, fat +gros/grosse, red rouge, blue bleu, green vert,
black noir, white blanc/blanche, yellow jaune, grey gris, brown brun, dark sombre, bright lumineux,
happy heureux, sad triste, hot chaud, cold froid, wet mouillé, rich riche,
poor pauvre, strong fort, weak faible, fast rapide, slow lent, easy facile, difficult difficile,
hard dur, soft doux/douce, heavy lourd, empty vide, full plein, clean propre, dirty sale,
quiet calme, noisy bruyant, famous célèbre, strange étrange, dangerous dangereux,
important important, interesting intéressant, expensive cher, free gratuit, busy occupé,
tired fatigué, ill malade, ugly laid, short court, wide large, narrow étroit, deep profond,
round rond
""",
    "news": """
national national, international international, social social, economic économique,
political politique, military militaire, financial financier, official officiel, violent violent,
peaceful pacifique, criminal criminel, legal légal, illegal illégal, democratic démocratique,
federal fédéral, regional régional, global mondial, nuclear nucléaire, presidential présidentiel,
electoral électoral, judicial judiciaire, fiscal fiscal, monetary monétaire, European européen,
American américain, French français
""",
    "parliament": """
legislative législatif, institutional institutionnel, administrative administratif,
sustainable durable, environmental environnemental, agricultural agricole, structural structurel,
fundamental fondamental, transparent transparent, effective efficace, urgent urgent,
relevant pertinent, appropriate approprié, specific spécifique
""",
    "web": """
digital numérique, available disponible, secure sécurisé, portable portable, mobile mobile,
original original, compatible compatible, unique unique, popular populaire, electronic électronique,
automatic automatique, professional professionnel
""",
    "science": """
chemical chimique, physical physique, biological biologique, genetic génétique,
molecular moléculaire, cellular cellulaire, thermal thermique, magnetic magnétique,
electric électrique, solar solaire, clinical clinique, medical médical, experimental expérimental,
theoretical théorique, statistical statistique, significant significatif, positive positif,
negative négatif, active actif, stable stable, toxic toxique, organic organique
""",
}

# "english[/past][+prep] french[+prep] [flags]": an English or French preposition makes the verb
# prepositional in that language; flags: e = passé composé with être, x = any subject (otherwise an
# animate one), l = the object may be a city.
_VERBS = {
    "general": {
        "tr": """
see/saw voir, find/found trouver, love aimer, like aimer, hate détester, know/knew connaître,
meet/met rencontrer, visit visiter l, help aider, call appeler, follow suivre, choose/chose choisir,
buy/bought acheter, sell/sold vendre, build/built construire, destroy détruire x, open ouvrir,
close fermer, break/broke casser, repair réparer, clean nettoyer, prepare préparer, cook cuisiner,
eat/ate manger, drink/drank boire, write/wrote écrire, draw/drew dessiner, paint peindre,
carry porter, bring/brought apporter, take/took prendre, give/gave donner, send/sent envoyer,
receive recevoir, lose/lost perdre, win/won gagner, keep/kept garder, hold/held tenir,
leave/left quitter l, use utiliser, show montrer, change changer x, affect affecter x,
threaten menacer x, look+at regarder, wait+for attendre, look+for chercher, listen+to écouter,
ask+for demander, pay/paid+for payer, talk+about parler+de, think/thought+about penser+à,
depend+on dépendre+de x, go/went+to aller+à el, come/came+from venir+de el, live+in vivre+dans l,
return+to retourner+à el, answer répondre+à, enter entrer+dans e, belong+to appartenir+à x,
resemble ressembler+à x, lack manquer+de x
""",
        "in": """
sleep/slept dormir, work travailler, depart partir e, arrive arriver e, fall/fell tomber ex,
die mourir e, stay rester e, travel/travelled voyager, swim/swam nager, run/ran courir,
smile sourire, laugh rire, cry pleurer, sing/sang chanter, disappear disparaître x,
grow/grew grandir x, fail échouer x, continue continuer x, begin/began commencer x
""",
        "cp": """
say/said dire, think/thought penser, believe croire, hope espérer, explain expliquer
""",
    },
    "news": {
        "tr": """
elect élire, appoint nommer, arrest arrêter, kill tuer, injure blesser, attack attaquer,
defend défendre, accuse accuser, criticize critiquer, support soutenir, condemn condamner,
replace remplacer, lead/led diriger, manage gérer, control/controlled contrôler, organize organiser,
finance financer, sign signer, reject rejeter, approve approuver, vote+for voter+pour,
vote+against voter+contre, fight/fought+against lutter+contre, invest+in investir+dans,
react+to réagir+à
""",
        "in": """
resign démissionner, protest manifester, rise/rose augmenter x, decline baisser x
""",
        "cp": """
announce annoncer, claim affirmer, confirm confirmer, declare déclarer
""",
    },
    "parliament": {
        "tr": """
adopt adopter, propose proposer, examine examiner, amend modifier, simplify simplifier,
strengthen renforcer, implement appliquer, present présenter, publish publier, guarantee garantir,
ensure assurer, respect respecter, improve améliorer x, increase augmenter x, discuss discuter+de,
comply+with respecter, contribute+to contribuer+à
""",
        "cp": """
argue soutenir, stress souligner
""",
    },
    "web": {
        "tr": """
order commander, deliver livrer, download télécharger, install installer, test tester,
compare comparer, recommend recommander, offer offrir, check vérifier, print imprimer,
share partager, click+on cliquer+sur, search+for rechercher, reply+to répondre+à
""",
        "in": """
restart redémarrer x
""",
    },
    "science": {
        "tr": """
measure mesurer, observe observer, analyse analyser, study étudier, detect détecter,
identify identifier, produce produire x, cause causer x, treat traiter, prevent empêcher x,
predict prédire, discover découvrir, develop développer, design concevoir, require exiger x,
contain contenir x, absorb absorber x, react+with réagir+avec x, consist+of consister+en x,
interact+with interagir+avec x
""",
        "in": """
evolve évoluer x, vibrate vibrer x, melt fondre x, freeze/froze geler x
""",
        "cp": """
estimate estimer, conclude conclure, note noter
""",
    },
}

# French verbs outside the regular -er, -ir (finir) and -dre (vendre) patterns: 3sg, 3pl, participle.
_FR_IRREGULAR_VERBS = {
    infinitive: (third_singular, third_plural, participle)
    for infinitive, third_singular, third_plural, participle in (
        line.split()
        for line in """
voir voit voient vu
connaître connaît connaissent connu
disparaître disparaît disparaissent disparu
suivre suit suivent suivi
vivre vit vivent vécu
construire construit construisent construit
détruire détruit détruisent détruit
produire produit produisent produit
ouvrir ouvre ouvrent ouvert
offrir offre offrent offert
découvrir découvre découvrent découvert
boire boit boivent bu
écrire écrit écrivent écrit
dire dit disent dit
prédire prédit prédisent prédit
élire élit élisent élu
peindre peint peignent peint
prendre prend prennent pris
recevoir reçoit reçoivent reçu
concevoir conçoit conçoivent conçu
tenir tient tiennent tenu
soutenir soutient soutiennent soutenu
contenir contient contiennent contenu
appartenir appartient appartiennent appartenu
venir vient viennent venu
aller va vont allé
dormir dort dorment dormi
partir part partent parti
mourir meurt meurent mort
courir court courent couru
sourire sourit sourient souri
rire rit rient ri
croire croit croient cru
conclure conclut concluent conclu
appeler appelle appellent appelé
rejeter rejette rejettent rejeté
""".strip().splitlines()
    )
}

# m.sg, f.sg, m.pl, f.pl, m.sg before a vowel
_FR_IRREGULAR_ADJECTIVES = {
    "nouveau": ("nouveau", "nouvelle", "nouveaux", "nouvelles", "nouvel"),
    "vieux": ("vieux", "vieille", "vieux", "vieilles", "vieil"),
    "beau": ("beau", "belle", "beaux", "belles", "bel"),
}

_EN_IRREGULAR_PLURALS = {
    "man": "men", "woman": "women", "child": "children", "person": "people", "crisis": "crises",
    "analysis": "analyses", "life": "lives", "leaf": "leaves",
}

# Words starting with an aspirated h (or "huit"): no elision, no vowel forms, before them.
_ASPIRATED_H = frozenset("haut haute hauts hautes huit héros hasard honte hausse hall".split())

_FIRST_NAMES = {
    "m": """James John Robert Michael David William Richard Thomas Charles Daniel Paul George Peter Louis Pierre
Jean Marc Luc Henri Olivier Nicolas Antoine Hans Carlos Pablo Ahmed Omar Ivan Igor Kenji Hiroshi Wei
Ali Samuel Adam Oscar""",
    "f": """Mary Anna Sarah Emma Julia Laura Claire Sophie Marie Alice Helen Susan Linda Karen Lisa Nancy Elena
Maria Carmen Isabel Fatima Aisha Yuki Mei Olga Irina""",
}
_LAST_NAMES = """Smith Johnson Wilson Moore Clark Lewis Walker Wright Adams Nelson Mitchell Roberts Phillips Campbell
Parker Evans Edwards Collins Stewart Morris Murphy Rogers Morgan Cooper Peterson Reed Bailey Kelly
Howard Richardson Watson Brooks Bennett Hughes Sanders Myers Ross Foster Bernard Dubois Durand
Lefebvre Leroy Moreau Laurent Garcia Fournier Girard Bonnet Dupont Lambert Fontaine Rousseau Vincent
Muller Schmidt Schneider Fischer Weber Meyer Wagner Becker Hoffmann Rossi Russo Ferrari Esposito
Bianchi Romano""".split()

# "english french" (French may carry its article: "le Caire" gives "au Caire", "du Caire").
_CITIES = """
Paris Paris, London Londres, Brussels Bruxelles, Berlin Berlin, Rome Rome, Madrid Madrid,
Washington Washington, Geneva Genève, Moscow Moscou, Beijing Pékin, Tokyo Tokyo, Vienna Vienne,
Lisbon Lisbonne, Athens Athènes, Warsaw Varsovie, Prague Prague, Montreal Montréal, Quebec Québec,
Toronto Toronto, Chicago Chicago, Boston Boston, Cairo le Caire, Algiers Alger, Tunis Tunis,
Dakar Dakar, Marseille Marseille, Lyon Lyon, Strasbourg Strasbourg, Bordeaux Bordeaux, Lille Lille,
Toulouse Toulouse, Barcelona Barcelone, Munich Munich, Milan Milan, Venice Venise, Naples Naples,
Edinburgh Édimbourg, Dublin Dublin, Amsterdam Amsterdam, Copenhagen Copenhague, Stockholm Stockholm,
Oslo Oslo, Helsinki Helsinki, Budapest Budapest, Bucharest Bucarest, Istanbul Istanbul,
Jerusalem Jérusalem
"""

_NUMBER_WORDS = (
    ("two", "deux"), ("three", "trois"), ("four", "quatre"), ("five", "cinq"), ("six", "six"),
    ("seven", "sept"), ("eight", "huit"), ("nine", "neuf"), ("ten", "dix"), ("twelve", "douze"),
    ("twenty", "vingt"),
)
_DAYS = (
    ("Monday", "lundi"), ("Tuesday", "mardi"), ("Wednesday", "mercredi"), ("Thursday", "jeudi"),
    ("Friday", "vendredi"), ("Saturday", "samedi"), ("Sunday", "dimanche"),
)
_MONTHS = (
    ("January", "janvier"), ("February", "février"), ("March", "mars"), ("April", "avril"),
    ("May", "mai"), ("June", "juin"), ("July", "juillet"), ("August", "août"),
    ("September", "septembre"), ("October", "octobre"), ("November", "novembre"),
    ("December", "décembre"),
)
_AGO_UNITS = (("days", "jours"), ("weeks", "semaines"), ("months", "mois"), ("years", "ans"))

# --- morphology ---------------------------------------------------------------------------------


def _en_plural(word: str) -> str:
    """English plural of a noun."""
    if word in _EN_IRREGULAR_PLURALS:
        return _EN_IRREGULAR_PLURALS[word]
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _en_third_person(verb: str) -> str:
    """English present third person singular."""
    if verb.endswith(("s", "x", "z", "ch", "sh", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _en_past(verb: str) -> str:
    """English simple past of a regular verb (doubling and irregular pasts are listed in the lexicon)."""
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _fr_plural(word: str) -> str:
    """French plural of a noun."""
    if word.endswith(("s", "x", "z")):
        return word
    if word.endswith("al"):
        return word[:-2] + "aux"
    if word.endswith(("au", "eu")):
        return word + "x"
    return word + "s"


def _fr_feminine(adj: str) -> str:
    """French feminine singular of a regular adjective."""
    for masc, fem in (("eux", "euse"), ("if", "ive"), ("el", "elle"), ("en", "enne"), ("on", "onne"), ("er", "ère")):
        if adj.endswith(masc):
            return adj[: -len(masc)] + fem
    return adj if adj.endswith("e") else adj + "e"


def _fr_masculine_plural(adj: str) -> str:
    """French masculine plural of a regular adjective."""
    if adj.endswith(("s", "x")):
        return adj
    if adj.endswith("al"):
        return adj[:-2] + "aux"
    return adj + "s"


def _fr_agree(word: str, gender: str, plural: bool) -> str:
    """Inflect a past participle for gender and number."""
    if gender == "f":
        word += "e"
    if plural and not word.endswith(("s", "x")):
        word += "s"
    return word


def _fr_conjugate(infinitive: str) -> tuple[str, str, str]:
    """French present 3sg, present 3pl and past participle."""
    if infinitive in _FR_IRREGULAR_VERBS:
        return _FR_IRREGULAR_VERBS[infinitive]
    stem = infinitive[:-2]
    if infinitive.endswith("er"):
        return _fr_first_group(stem)
    if infinitive.endswith("ir"):
        return stem + "it", stem + "issent", stem + "i"
    if infinitive.endswith("dre"):
        return infinitive[:-2], infinitive[:-2] + "ent", infinitive[:-2] + "u"
    raise ValueError(f"no conjugation for French verb {infinitive!r}")


def _fr_first_group(stem: str) -> tuple[str, str, str]:
    """Conjugate an -er verb, with the è of préfère/achète and the i of envoie before a silent ending."""
    mute = stem
    if stem.endswith("y"):
        mute = stem[:-1] + "i"
    elif m := re.search(r"(é|e(?=[^aeiouyéèêâîôûh]$))([^aeiouyéèêâîôûh]+)$", stem):
        mute = stem[: m.start()] + "è" + m.group(2)
    return mute + "e", mute + "ent", stem + "é"


def _elides_before(word: str) -> bool:
    """Whether French elision (l', d', qu', n') and vowel forms apply before `word`."""
    first = word[:1]
    if first.lower() in "aeiouàâéèêëîïôœû":
        return True
    return first == "h" and word not in _ASPIRATED_H


def _takes_an(word: str) -> bool:
    """Whether the English article before `word` is "an"."""
    low = word.lower()
    if low.startswith(("hour", "honest", "honour")):
        return True
    return low[:1] in "aeiou" and not low.startswith(("uni", "use", "usu", "eu", "one"))


# --- lexical entries ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str
    animate: bool
    mass: bool
    topic: str


@dataclass(frozen=True)
class Adjective:
    en: str
    forms: tuple[str, str, str, str, str]  # m.sg, f.sg, m.pl, f.pl, m.sg before a vowel
    before: bool  # placed before the noun in French
    topic: str

    def fr(self, gender: str, plural: bool, next_word: str = "") -> str:
        """The French form agreeing with a noun; `next_word` selects bel/nouvel/vieil."""
        if gender == "m" and not plural and next_word and _elides_before(next_word):
            return self.forms[4]
        return self.forms[(2 if plural else 0) + (gender == "f")]


@dataclass(frozen=True)
class Verb:
    en: str
    en_3sg: str
    en_past: str
    en_prep: str
    fr_inf: str
    fr_3sg: str
    fr_3pl: str
    fr_pp: str
    fr_prep: str
    kind: str  # tr: direct object in both languages; pv: object after a preposition; in: none; cp: that-clause
    etre: bool
    any_subject: bool
    locative: bool
    topic: str

    @property
    def key(self) -> str:
        return f"{self.en} {self.en_prep}".strip()


@dataclass(frozen=True)
class Phrase:
    """A fixed pair of token sequences (time expression, connective, adverb)."""

    en: tuple[str, ...]
    fr: tuple[str, ...]


@dataclass(frozen=True)
class Modal:
    en: tuple[str, str, str]  # present singular, present plural, past
    fr: tuple[str, str, str, str]  # present 3sg, 3pl, imperfect 3sg, 3pl


NEVER = Phrase(("never",), ("jamais",))
_ADVERBS = (
    Phrase(("often",), ("souvent",)), Phrase(("always",), ("toujours",)), Phrase(("sometimes",), ("parfois",)),
    Phrase(("rarely",), ("rarement",)), Phrase(("also",), ("aussi",)), Phrase(("already",), ("déjà",)), NEVER,
)
_MODALS = (
    Modal(("can", "can", "could"), ("peut", "peuvent", "pouvait", "pouvaient")),
    Modal(("must", "must", "had to"), ("doit", "doivent", "devait", "devaient")),
    Modal(("wants to", "want to", "wanted to"), ("veut", "veulent", "voulait", "voulaient")),
)
_LINKS = (
    Phrase((",", "and"), (",", "et")), Phrase((",", "but"), (",", "mais")), Phrase(("because",), ("parce", "que")),
    Phrase(("when",), ("quand",)), Phrase(("while",), ("tandis", "que")), Phrase((",", "so"), (",", "donc")),
    Phrase(("if",), ("si",)),
)
_TIMES = {
    "past": (
        Phrase(("yesterday",), ("hier",)), Phrase(("last", "night"), ("hier", "soir")),
        Phrase(("last", "week"), ("la", "semaine", "dernière")), Phrase(("last", "month"), ("le", "mois", "dernier")),
        Phrase(("last", "year"), ("la", "année", "dernière")),
    ),
    "pres": (
        Phrase(("today",), ("aujourd'", "hui")), Phrase(("now",), ("maintenant",)),
        Phrase(("every", "day"), ("chaque", "jour")), Phrase(("every", "year"), ("chaque", "année")),
        Phrase(("at", "the", "moment"), ("en", "ce", "moment")), Phrase(("tonight",), ("ce", "soir")),
        Phrase(("this", "week"), ("cette", "semaine")),
    ),
}


def _entries(block: str) -> list[list[str]]:
    """Split a comma-separated lexicon block into entries of whitespace-separated fields."""
    return [entry.split() for entry in block.split(",") if entry.strip()]


def _parse_nouns(topic: str, block: str) -> list[Noun]:
    return [
        Noun(en, _en_plural(en), fr, _fr_plural(fr), tag[0].lower(), tag[0].isupper(), tag.endswith("u"), topic)
        for en, fr, tag in _entries(block)
    ]


def _parse_adjectives(topic: str, block: str) -> list[Adjective]:
    adjectives = []
    for en, fr in _entries(block):
        masc, _, fem = fr.lstrip("+").partition("/")
        fem = fem or _fr_feminine(masc)
        forms = _FR_IRREGULAR_ADJECTIVES.get(masc, (masc, fem, _fr_masculine_plural(masc), fem + "s", masc))
        adjectives.append(Adjective(en, forms, fr.startswith("+"), topic))
    return adjectives


def _parse_verbs(topic: str, section: str, block: str) -> list[Verb]:
    verbs = []
    for fields in _entries(block):
        en, fr, flags = fields[0], fields[1], "".join(fields[2:])
        en_forms, _, en_prep = en.partition("+")
        lemma, _, past = en_forms.partition("/")
        infinitive, _, fr_prep = fr.partition("+")
        kind = section if section != "tr" else ("pv" if en_prep or fr_prep else "tr")
        verbs.append(
            Verb(
                lemma, _en_third_person(lemma), past or _en_past(lemma), en_prep,
                infinitive, *_fr_conjugate(infinitive), fr_prep,
                kind, "e" in flags, "x" in flags, "l" in flags, topic,
            )
        )
    return verbs


@dataclass(frozen=True)
class Lexicon:
    """All lexical entries, keyed by English lemma (verbs: lemma plus preposition, "look at")."""

    nouns: dict[str, Noun]
    adjectives: dict[str, Adjective]
    verbs: dict[str, Verb]


def _build_lexicon() -> Lexicon:
    nouns = [n for topic, block in _NOUNS.items() for n in _parse_nouns(topic, block)]
    adjectives = [a for topic, block in _ADJECTIVES.items() for a in _parse_adjectives(topic, block)]
    verbs = [
        verb
        for topic, sections in _VERBS.items()
        for section, block in sections.items()
        for verb in _parse_verbs(topic, section, block)
    ]
    return Lexicon({n.en: n for n in nouns}, {a.en: a for a in adjectives}, {v.key: v for v in verbs})


LEXICON = _build_lexicon()

# --- sentence trees and their realisation -------------------------------------------------------
# Each node realises itself as English tokens (`en`) and French tokens (`fr`); French elision and
# contractions are applied once to the whole sentence (`_fr_surface`).

# key: English, number (True plural only, False singular only, None either), French m.sg, f.sg, m.pl, f.pl
_DETERMINERS = {
    "the": ("the", None, "le", "la", "les", "les"),
    "a": ("a", False, "un", "une", "", ""),
    "some": ("some", True, "", "", "des", "des"),
    "bare": ("", True, "", "", "des", "des"),
    "this": ("this", False, "ce", "cette", "", ""),
    "these": ("these", True, "", "", "ces", "ces"),
    "his": ("his", None, "son", "sa", "ses", "ses"),
    "her": ("her", None, "son", "sa", "ses", "ses"),
    "their": ("their", None, "leur", "leur", "leurs", "leurs"),
    "our": ("our", None, "notre", "notre", "nos", "nos"),
    "my": ("my", None, "mon", "ma", "mes", "mes"),
    "every": ("every", False, "chaque", "chaque", "", ""),
    "all": ("all the", True, "", "", "tous les", "toutes les"),
    "many": ("many", True, "", "", "beaucoup de", "beaucoup de"),
    "several": ("several", True, "", "", "plusieurs", "plusieurs"),
}
# English preposition: French preposition
_PREPOSITIONS = {
    "of": "de", "in": "dans", "on": "sur", "with": "avec", "for": "pour", "from": "de",
    "near": "près de", "about": "sur", "without": "sans", "after": "après", "before": "avant",
    "during": "pendant", "against": "contre", "under": "sous", "behind": "derrière",
    "towards": "vers", "despite": "malgré", "according to": "selon",
}
_LOCATIVE_FR = frozenset({"dans", "à", "en"})  # become "à" before a city name


@dataclass(frozen=True)
class Pronoun:
    en_subj: str
    en_obj: str
    fr_subj: str
    fr_obj: str
    gender: str
    plural: bool
    animate = True

    def en(self) -> list[str]:
        return [self.en_subj]

    def fr(self, subject: bool = False) -> list[str]:
        return [self.fr_subj]


HE = Pronoun("he", "him", "il", "le", "m", False)
SHE = Pronoun("she", "her", "elle", "la", "f", False)
THEY = Pronoun("they", "them", "ils", "les", "m", True)


@dataclass(frozen=True)
class City:
    en_name: str
    fr_name: tuple[str, ...]
    gender = "m"
    plural = False
    animate = False

    def en(self) -> list[str]:
        return [self.en_name]

    def fr(self, subject: bool = False) -> list[str]:
        return list(self.fr_name)


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    gender: str
    rel: Relative | None = None  # only non-restrictive: "John Smith, who ..., said"
    plural = False
    animate = True

    def en(self) -> list[str]:
        return [self.first, self.last] + (self.rel.en(self) if self.rel else [])

    def fr(self, subject: bool = False) -> list[str]:
        return [self.first, self.last] + (self.rel.fr(self) if self.rel else [])


@dataclass(frozen=True)
class NounPhrase:
    noun: Noun
    det: str  # a key of _DETERMINERS, or "num" for `number`
    plural: bool
    adjs: tuple[Adjective, ...] = ()
    pp: PP | None = None
    rel: Relative | None = None
    possessor: NounPhrase | Person | None = None  # "the minister's car": `det` is then unused
    number: tuple[str, str] | None = None  # English and French cardinal for det "num"

    @property
    def gender(self) -> str:
        return self.noun.gender

    @property
    def animate(self) -> bool:
        return self.noun.animate

    def en(self) -> list[str]:
        words = [a.en for a in self.adjs] + [self.noun.en_pl if self.plural else self.noun.en]
        if self.possessor is not None:
            det = self.possessor.en() + ["'s"]
        elif self.det == "num":
            det = [self.number[0]]
        else:
            det = _DETERMINERS[self.det][0].split()
            if det == ["a"] and _takes_an(words[0]):
                det = ["an"]
        tail = (self.pp.en() if self.pp else []) + (self.rel.en(self) if self.rel else [])
        return det + words + tail

    def fr(self, subject: bool = False, negated: bool = False) -> list[str]:
        """French tokens; `negated` marks the direct object of a negated verb ("pas de voitures")."""
        head = self._fr_head()
        pre_adjective = head[0] != (self.noun.fr_pl if self.plural else self.noun.fr)
        out = self._fr_determiner(subject, negated, head[0], pre_adjective) + head
        if self.possessor is not None:
            out += ["de"] + self.possessor.fr()
        if self.pp:
            out += self.pp.fr()
        if self.rel:
            out += self.rel.fr(self)
        return out

    def _fr_head(self) -> list[str]:
        """Noun with its adjectives: the few pre-nominal ones before, the rest after in mirror order."""
        noun = self.noun.fr_pl if self.plural else self.noun.fr
        before: list[str] = []
        next_word = noun
        for adj in reversed([a for a in self.adjs if a.before]):
            next_word = adj.fr(self.gender, self.plural, next_word)
            before.insert(0, next_word)
        after = [a.fr(self.gender, self.plural) for a in reversed(self.adjs) if not a.before]
        return before + [noun] + after

    def _fr_determiner(self, subject: bool, negated: bool, next_word: str, pre_adjective: bool) -> list[str]:
        if self.possessor is not None:
            return ["les" if self.plural else ("la" if self.gender == "f" else "le")]
        if self.det == "num":
            return [self.number[1]]
        if negated and self.det in ("a", "some", "bare"):
            return ["de"]
        if self.det == "bare" and subject:
            return ["les"]  # generic plural subject: "Cars are fast" -> "Les voitures sont rapides"
        forms = _DETERMINERS[self.det][2:]
        word = forms[(2 if self.plural else 0) + (self.gender == "f")]
        if word == "des" and pre_adjective:
            word = "de"
        elif word == "ce" and _elides_before(next_word):
            word = "cet"
        elif word in ("ma", "sa") and _elides_before(next_word):
            word = {"ma": "mon", "sa": "son"}[word]  # "son amie", not "sa amie"
        return word.split()


@dataclass(frozen=True)
class Coordination:
    """Two simple subjects or objects joined by "and": plural, masculine unless both are feminine."""

    left: NounPhrase | Person
    right: NounPhrase | Person
    plural = True

    @property
    def gender(self) -> str:
        return "f" if self.left.gender == self.right.gender == "f" else "m"

    @property
    def animate(self) -> bool:
        return self.left.animate and self.right.animate

    def en(self) -> list[str]:
        return self.left.en() + ["and"] + self.right.en()

    def fr(self, subject: bool = False) -> list[str]:
        return self.left.fr(subject) + ["et"] + self.right.fr(subject)


@dataclass(frozen=True)
class PP:
    prep: str  # a key of _PREPOSITIONS
    np: NounPhrase | Person | City

    def en(self) -> list[str]:
        return self.prep.split() + self.np.en()

    def fr(self) -> list[str]:
        return _fr_preposition(_PREPOSITIONS[self.prep], self.np) + self.np.fr()


def _fr_preposition(prep: str, np: Obj) -> list[str]:
    """French preposition before `np`: "dans la ville" but "à Paris"."""
    if isinstance(np, City) and prep in _LOCATIVE_FR:
        return ["à"]
    return prep.split()


@dataclass(frozen=True)
class Relative:
    gap: str  # "subj" (who/that + verb) or "obj" (that + subject + verb)
    clause: Clause
    pronoun: str  # English who / that / which
    commas: bool = False  # non-restrictive

    def en(self, antecedent: Agreeing) -> list[str]:
        comma = [","] if self.commas else []
        return comma + [self.pronoun] + self.clause.en(antecedent) + comma

    def fr(self, antecedent: Agreeing) -> list[str]:
        comma = [","] if self.commas else []
        return comma + ["qui" if self.gap == "subj" else "que"] + self.clause.fr(antecedent) + comma


Subject = Union[NounPhrase, Person, Pronoun, Coordination]
Obj = Union[NounPhrase, Person, Pronoun, Coordination, City]
Agreeing = Union[NounPhrase, Person, Pronoun, Coordination, City]

_EN_BE = {("pres", False): "is", ("pres", True): "are", ("past", False): "was", ("past", True): "were"}
_FR_BE = {("pres", False): "est", ("pres", True): "sont", ("past", False): "était", ("past", True): "étaient"}
_FR_HAVE = {False: "a", True: "ont"}
_FR_BE_AUX = {False: "est", True: "sont"}


@dataclass(frozen=True)
class Clause:
    """One clause; `subj` None is the gap of a subject relative, `obj` None with a "tr" verb the gap of
    an object relative. `verb` None makes a copula with adjectives `pred`. A clause with a modal takes
    neither negation nor adverb (the sampler never combines them)."""

    subj: Subject | None
    verb: Verb | None
    tense: str  # "pres" | "past"
    obj: Obj | None = None
    pred: tuple[Adjective, ...] = ()
    neg: bool = False
    adverb: Phrase | None = None  # "never" is the negative adverb ("ne ... jamais")
    modal: Modal | None = None
    pp: PP | None = None
    time: Phrase | None = None
    comp: Clause | None = None  # "said that ..."

    def en(self, antecedent: Agreeing | None = None) -> list[str]:
        agreement = self.subj if self.subj is not None else antecedent
        out = self.subj.en() if self.subj is not None else []
        out += self._en_verb_group(agreement.plural)
        if self.verb is not None:
            out += self.verb.en_prep.split()
        if isinstance(self.obj, Pronoun):
            out.append(self.obj.en_obj)
        elif self.obj is not None:
            out += self.obj.en()
        return out + self._tail("en")

    def fr(self, antecedent: Agreeing | None = None) -> list[str]:
        agreement = self.subj if self.subj is not None else antecedent
        out = self.subj.fr(subject=True) if self.subj is not None else []
        out += self._fr_verb_group(agreement, antecedent)
        if isinstance(self.obj, NounPhrase) and self.negated and not self.verb.fr_prep:
            out += self.obj.fr(negated=True)
        elif self.obj is not None and not isinstance(self.obj, Pronoun):
            out += _fr_preposition(self.verb.fr_prep, self.obj) + self.obj.fr()
        return out + self._tail("fr")

    @property
    def negated(self) -> bool:
        return self.neg or self.adverb == NEVER

    def _tail(self, lang: str) -> list[str]:
        """VP-level prepositional phrase, time expression and that-clause, in this order in both languages."""
        out: list[str] = []
        if self.pp:
            out += getattr(self.pp, lang)()
        if self.time:
            out += getattr(self.time, lang)
        if self.comp:
            out += ["that" if lang == "en" else "que"] + getattr(self.comp, lang)()
        return out

    def _en_verb_group(self, plural: bool) -> list[str]:
        past = self.tense == "past"
        adverb = list(self.adverb.en) if self.adverb else []
        if self.verb is None:
            pred = _join_and([[a.en] for a in self.pred], "and")
            return [_EN_BE[self.tense, plural]] + (["not"] if self.neg else []) + adverb + pred
        if self.modal is not None:
            return self.modal.en[2 if past else int(plural)].split() + [self.verb.en]
        if self.neg:
            return ["did" if past else ("do" if plural else "does"), "not", self.verb.en]
        return adverb + [self.verb.en_past if past else (self.verb.en if plural else self.verb.en_3sg)]

    def _fr_verb_group(self, agreement: Agreeing, antecedent: Agreeing | None) -> list[str]:
        plural, past = agreement.plural, self.tense == "past"
        neg_word = "jamais" if self.adverb == NEVER else ("pas" if self.neg else "")
        adverb = list(self.adverb.fr) if self.adverb and self.adverb != NEVER else []
        clitic = [self.obj.fr_obj] if isinstance(self.obj, Pronoun) else []
        if self.verb is None:
            pred = _join_and([[a.fr(agreement.gender, plural)] for a in self.pred], "et")
            return _negate([_FR_BE[self.tense, plural]], neg_word) + adverb + pred
        if self.modal is not None:
            return [self.modal.fr[2 * past + plural]] + clitic + [self.verb.fr_inf]
        if not past:
            return _negate(clitic + [self.verb.fr_3pl if plural else self.verb.fr_3sg], neg_word) + adverb
        aux = (_FR_BE_AUX if self.verb.etre else _FR_HAVE)[plural]
        return _negate(clitic + [aux], neg_word) + adverb + [self._fr_participle(agreement, antecedent)]

    def _fr_participle(self, agreement: Agreeing, antecedent: Agreeing | None) -> str:
        """Past participle agreeing with the subject (être) or with a direct object placed before it."""
        if self.verb.etre:
            target = agreement
        elif isinstance(self.obj, Pronoun):
            target = self.obj
        elif self.obj is None and self.verb.kind == "tr" and self.subj is not None:
            target = antecedent  # object relative: "la lettre que le ministre a écrite"
        else:
            return self.verb.fr_pp
        return _fr_agree(self.verb.fr_pp, target.gender, target.plural)


def _negate(words: list[str], neg_word: str) -> list[str]:
    return ["ne"] + words + [neg_word] if neg_word else words


def _join_and(parts: list[list[str]], conjunction: str) -> list[str]:
    out: list[str] = []
    for i, part in enumerate(parts):
        out += ([conjunction] if i else []) + part
    return out


@dataclass(frozen=True)
class Sentence:
    clauses: tuple[Clause, ...]
    links: tuple[Phrase, ...] = ()  # connectives between consecutive clauses
    front: Phrase | PP | None = None  # fronted time expression or place / "according to" phrase

    def en(self) -> list[str]:
        return self._join("en")

    def fr(self) -> list[str]:
        return self._join("fr")

    def _join(self, lang: str) -> list[str]:
        out: list[str] = []
        if isinstance(self.front, PP):
            out += getattr(self.front, lang)() + [","]
        elif self.front is not None:
            out += list(getattr(self.front, lang)) + [","]
        for i, clause in enumerate(self.clauses):
            if i:
                out += list(getattr(self.links[i - 1], lang))
            out += getattr(clause, lang)()
        return out + ["."]


def _fr_surface(tokens: list[str]) -> list[str]:
    """Apply French contractions (du, au, des, aux, sans + indefinite) and elision (l', d', qu', n', s'il)."""
    contracted: list[str] = []
    i = 0
    while i < len(tokens):
        tok, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else ""
        after = tokens[i + 2] if i + 2 < len(tokens) else ""
        if tok in ("de", "à") and nxt == "les":
            contracted.append("des" if tok == "de" else "aux")
            i += 2
        elif tok in ("de", "à") and nxt == "le" and not _elides_before(after):
            contracted.append("du" if tok == "de" else "au")
            i += 2
        elif tok == "de" and nxt in ("des", "de"):
            contracted.append("de")  # "de des amis" -> "d'amis", "de de grandes villes" -> "de grandes villes"
            i += 2
        elif tok == "sans" and nxt in ("un", "une", "des"):
            contracted.append("sans")  # "without a car" -> "sans voiture"
            i += 2
        else:
            contracted.append(tok)
            i += 1
    return [_elide(tok, contracted[i + 1] if i + 1 < len(contracted) else "") for i, tok in enumerate(contracted)]


def _elide(tok: str, nxt: str) -> str:
    if tok in ("le", "la", "de", "que", "ne") and nxt and _elides_before(nxt):
        return tok[:-1] + "'"
    if tok == "si" and nxt in ("il", "ils"):
        return "s'"
    return tok


def _capitalise(tokens: list[str]) -> list[str]:
    return [tokens[0][:1].upper() + tokens[0][1:]] + tokens[1:] if tokens else tokens


def realise(sentence: Sentence) -> tuple[list[str], list[str]]:
    """English and French token lists (Moses tokenization of the raw sentences, before escaping)."""
    return _capitalise(sentence.en()), _capitalise(_fr_surface(sentence.fr()))


def detokenize(tokens: list[str]) -> str:
    """Raw text: punctuation and "'s" attached to the word before, elided French words to the word after."""
    text = ""
    for tok in tokens:
        glue = not text or tok in (",", ".", "'s") or text.endswith("'")
        text += tok if glue else " " + tok
    return text


# --- sampling -----------------------------------------------------------------------------------

# Zipf exponents per category, steeper than in natural text because the demo shortlist is tiny: with
# the default sizes about 40-50% of test sentences hold a word outside the 800 most frequent training
# words. Verbs have three forms each, so they are the steepest; adjectives add little rare mass and stay
# flatter so that "big" does not fill every sentence; names (copied through) are the flattest.
ZIPF_EXPONENTS = {"noun": 2.1, "adj": 1.8, "verb": 2.3, "name": 1.6}
ZIPF_OFFSET = 3  # Zipf-Mandelbrot shift: keeps the first word of a list from dominating every sentence
TOPIC_SHARE = 0.4  # share of content words drawn from the sentence's topic rather than everyday words
MAX_DEPTH = 3  # phrases nested deeper than this get no prepositional phrase or relative clause


class _Zipf:
    """Draws list items with probability proportional to 1 / (rank + ZIPF_OFFSET) ** exponent."""

    def __init__(self, items: list, exponent: float) -> None:
        self.items = tuple(items)
        self.cumulative = list(itertools.accumulate((rank + ZIPF_OFFSET) ** -exponent for rank in range(len(items))))

    def draw(self, rng: random.Random) -> Any:
        return self.items[bisect.bisect_right(self.cumulative, rng.random() * self.cumulative[-1])]


def _build_pools() -> dict[tuple[str, str], _Zipf]:
    """Zipf samplers keyed by (topic, category): noun, noun+animate, adj, and each verb kind (+any)."""
    groups: dict[tuple[str, str], list] = {}
    for noun in LEXICON.nouns.values():
        groups.setdefault((noun.topic, "noun"), []).append(noun)
        if noun.animate:
            groups.setdefault((noun.topic, "noun+animate"), []).append(noun)
    for adj in LEXICON.adjectives.values():
        groups.setdefault((adj.topic, "adj"), []).append(adj)
    for verb in LEXICON.verbs.values():
        groups.setdefault((verb.topic, verb.kind), []).append(verb)
        if verb.any_subject:
            groups.setdefault((verb.topic, verb.kind + "+any"), []).append(verb)
    groups[("names", "m")] = _FIRST_NAMES["m"].split()
    groups[("names", "f")] = _FIRST_NAMES["f"].split()
    groups[("names", "last")] = _LAST_NAMES
    groups[("names", "city")] = [City(e[0], tuple(e[1:])) for e in _entries(_CITIES)]
    return {key: _Zipf(items, ZIPF_EXPONENTS[_category(key)]) for key, items in groups.items()}


def _category(key: tuple[str, str]) -> str:
    """Which exponent of ZIPF_EXPONENTS a pool key uses."""
    topic, kind = key
    if topic == "names":
        return "name"
    return kind.split("+")[0] if kind.startswith(("noun", "adj")) else "verb"


_POOLS = _build_pools()


@dataclass(frozen=True)
class _Style:
    """How a domain writes: topic mix and how often it reports speech or names people."""

    topics: tuple[tuple[str, float], ...]
    report: float  # main clause is "X said that ..."
    person: float  # a subject is a named person
    according: float  # "According to X, ..."
    place: float  # "In Paris, ..."


_STYLES = {
    "news": _Style((("news", 1.0),), report=0.3, person=0.15, according=0.06, place=0.05),
    "pool": _Style(
        (("parliament", 0.3), ("web", 0.3), ("science", 0.2), ("news", 0.2)),
        report=0.1, person=0.06, according=0.02, place=0.02,
    ),
}
_DET_WEIGHTS = (
    ("the", 45), ("a", 14), ("bare", 6), ("some", 3), ("this", 3), ("these", 2), ("his", 4), ("her", 3),
    ("their", 4), ("our", 2), ("my", 2), ("every", 2), ("all", 2), ("many", 2), ("several", 2), ("num", 5),
)
_MASS_DETS = ("the", "the", "the", "this", "his", "her", "their", "our")
_NP_PREPS = (
    ("of", 50), ("in", 12), ("with", 10), ("for", 8), ("on", 6), ("from", 5), ("about", 4), ("near", 3), ("without", 2),
)
_VP_PREPS = (
    ("in", 30), ("with", 15), ("for", 10), ("near", 7), ("after", 8), ("before", 6), ("during", 6),
    ("despite", 4), ("against", 4), ("under", 3), ("behind", 3), ("towards", 2), ("from", 2),
)
_VERB_KINDS = (("cop", 14), ("tr", 46), ("pv", 16), ("in", 20), ("cp", 4))


class _Sampler:
    """Draws sentence trees for one domain from a seeded random generator."""

    def __init__(self, rng: random.Random, domain: str) -> None:
        self.rng = rng
        self.style = _STYLES[domain]
        self.topic = "general"
        self.size = 0.0  # per sentence, in [0, 1): scales how often phrases are elaborated

    # -- primitives

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def weighted(self, options: tuple[tuple[str, float], ...]) -> str:
        total = sum(w for _, w in options)
        x = self.rng.random() * total
        for value, weight in options:
            x -= weight
            if x < 0:
                return value
        return options[-1][0]

    def draw(self, category: str) -> Any:
        """A lexical entry of `category`, from the sentence topic's list or the everyday one."""
        pool = _POOLS.get((self.topic, category))
        if pool is None or self.topic == "general" or not self.chance(TOPIC_SHARE):
            pool = _POOLS.get(("general", category), pool)
        return pool.draw(self.rng)

    def tense(self, previous: str | None = None) -> str:
        if previous is not None and self.chance(0.7):
            return previous
        return "past" if self.chance(0.5) else "pres"

    # -- sentences and clauses

    def sentence(self) -> Sentence:
        self.topic = self.weighted(self.style.topics)
        self.size = self.rng.random() ** 0.6
        tense = self.tense()
        clauses = [self.clause(tense, 0, main=True, report=self.chance(self.style.report))]
        for _ in range(self.chance(0.15 + 0.55 * self.size) + self.chance(0.5 * self.size**2)):
            clauses.append(self.clause(self.tense(tense), 0, main=True))
        links = tuple(self.rng.choice(_LINKS) for _ in clauses[1:])
        return Sentence(tuple(clauses), links, self.front(clauses[0]))

    def front(self, first: Clause) -> Phrase | PP | None:
        """"According to X,", "In Paris," or a time expression before the first clause, or nothing."""
        x = self.rng.random() - self.style.according
        if x < 0:
            return PP("according to", self.person() if self.chance(0.5) else self.np(MAX_DEPTH, animate=True))
        x -= self.style.place
        if x < 0:
            return PP("in", self.city())
        if x < 0.12 and first.time is None:
            return self.time(first.tense)
        return None

    def clause(
        self, tense: str, depth: int, *, main: bool = False, report: bool = False,
        gap: Agreeing | None = None, object_gap: bool = False,
    ) -> Clause:
        """A clause; `gap` makes it a subject relative about `gap`, `object_gap` an object relative."""
        if object_gap:
            verb = self.draw("tr")
            subj = self.simple_subject(animate=not verb.any_subject)
            return Clause(subj, verb, tense, None, **self.modifiers(verb, tense, depth, in_relative=True))
        kind = "cp" if report else self.verb_kind(gap, depth)
        verb = None if kind == "cop" else self.draw(kind + ("+any" if gap is not None and not gap.animate else ""))
        subj = None if gap is not None else self.subject(verb, depth, main)
        obj = self.object(verb, depth) if verb is not None and verb.kind in ("tr", "pv") else None
        comp = self.clause(self.tense(tense), depth + 1) if kind == "cp" else None
        pred = self.predicate() if verb is None else ()
        return Clause(subj, verb, tense, obj, pred, comp=comp, **self.modifiers(verb, tense, depth, gap is not None))

    def verb_kind(self, gap: Agreeing | None, depth: int) -> str:
        if gap is not None and not gap.animate:
            return self.weighted(_VERB_KINDS[:4])  # inanimate subjects do not say or think
        kind = self.weighted(_VERB_KINDS)
        return "tr" if kind == "cp" and depth >= 2 else kind

    def modifiers(self, verb: Verb | None, tense: str, depth: int, in_relative: bool) -> dict:
        """Negation, adverb, modal, verb-level prepositional phrase and time expression of a clause."""
        out: dict = {}
        x = self.rng.random()
        if verb is None or verb.kind != "cp":  # no "does not say that": French would need a subjunctive
            if x < 0.12:
                out["neg"] = True
            elif x < 0.24:
                out["adverb"] = self.rng.choice(_ADVERBS)
            elif x < 0.32 and verb is not None:
                out["modal"] = self.rng.choice(_MODALS)
        if verb is not None and depth < MAX_DEPTH and self.chance(0.08 + 0.3 * self.size):
            out["pp"] = self.pp(depth + 1, _VP_PREPS)
        if self.chance(0.05 if in_relative else 0.15):
            out["time"] = self.time(tense)
        return out

    def predicate(self) -> tuple[Adjective, ...]:
        first = self.draw("adj")
        second = self.draw("adj") if self.chance(0.25) else first
        return (first,) if second == first else (first, second)

    # -- noun phrases

    def subject(self, verb: Verb | None, depth: int, main: bool) -> Subject:
        animate = verb is not None and not verb.any_subject
        x = self.rng.random()
        if x < 0.1:
            return self.rng.choice((HE, SHE, THEY))
        if x < 0.1 + self.style.person:
            return self.person(relative=main and self.chance(0.1 + 0.2 * self.size), depth=depth)
        if main and x < 0.15 + self.style.person:
            return Coordination(self.simple_np(animate), self.simple_np(animate))
        return self.np(depth + 1, animate=animate, commas=main)

    def simple_subject(self, animate: bool) -> Subject:
        x = self.rng.random()
        if x < 0.25:
            return self.rng.choice((HE, SHE, THEY))
        if x < 0.25 + self.style.person:
            return self.person()
        return self.simple_np(animate)

    def object(self, verb: Verb, depth: int) -> Obj:
        x = self.rng.random()
        if verb.kind == "tr" and x < 0.07:
            return self.rng.choice((HE, SHE, THEY))
        if verb.locative and x < 0.4:
            return self.city()
        if depth == 0 and x < 0.12:
            return Coordination(self.simple_np(False), self.simple_np(False))
        if x < 0.17:
            return self.person()
        return self.np(depth + 1)

    def np(self, depth: int, *, animate: bool = False, commas: bool = False) -> NounPhrase:
        """A noun phrase, possibly with one prepositional phrase or one relative clause (`commas`: it
        may be non-restrictive); `animate` False means any noun."""
        core = self.simple_np(animate, possessor=True)
        if depth >= MAX_DEPTH:
            return core
        # "X's car of Y" would have two "de" phrases in French, in no obvious order: no PP after a possessor
        if core.possessor is None and self.chance(0.06 + 0.4 * self.size):
            return replace(core, pp=self.pp(depth + 1, _NP_PREPS))
        if self.chance(0.04 + 0.36 * self.size):
            return replace(core, rel=self.relative(core, depth + 1, commas and self.chance(0.35)))
        return core

    def simple_np(self, animate: bool, possessor: bool = False) -> NounPhrase:
        """Determiner, adjectives and noun (and, with `possessor`, maybe "the minister's")."""
        noun = self.draw("noun+animate" if animate else "noun")
        det, plural, number = self.determiner(noun)
        owner = self.possessor() if possessor and det == "the" and self.chance(0.06) else None
        return NounPhrase(noun, det, plural, self.adjectives(), possessor=owner, number=number)

    def possessor(self) -> NounPhrase | Person:
        """A singular owner ("the minister's", "Anna Smith's"): a plural one would need "the ministers'"."""
        if self.chance(0.5):
            return self.person()
        return NounPhrase(self.draw("noun+animate"), "the", False)

    def determiner(self, noun: Noun) -> tuple[str, bool, tuple[str, str] | None]:
        if noun.mass:
            return self.rng.choice(_MASS_DETS), False, None
        det = self.weighted(_DET_WEIGHTS)
        if det == "num":
            return det, True, self.number()
        number_constraint = _DETERMINERS[det][1]
        return det, self.chance(0.3) if number_constraint is None else number_constraint, None

    def number(self) -> tuple[str, str]:
        if self.chance(0.92):
            return self.rng.choice(_NUMBER_WORDS)
        digits = str(self.rng.randint(11, 60))
        return digits, digits

    def adjectives(self) -> tuple[Adjective, ...]:
        if not self.chance(0.18 + 0.22 * self.size):
            return ()
        first = self.draw("adj")
        second = self.draw("adj") if self.chance(0.1 + 0.15 * self.size) else first
        return (first,) if second == first else (first, second)

    def relative(self, head: NounPhrase | Person, depth: int, commas: bool) -> Relative:
        if self.chance(0.65):
            clause = self.clause(self.tense(), depth, gap=head)
            gap = "subj"
        else:
            clause = self.clause(self.tense(), depth, object_gap=True)
            gap = "obj"
        if commas:
            pronoun = "who" if head.animate else "which"
        elif head.animate:
            pronoun = "who" if gap == "subj" and self.chance(0.7) else "that"
        else:
            pronoun = self.rng.choice(("that", "which"))
        return Relative(gap, clause, pronoun, commas)

    def pp(self, depth: int, preps: tuple[tuple[str, float], ...]) -> PP:
        prep = self.weighted(preps)
        if prep in ("in", "from", "near") and self.chance(0.2):
            return PP(prep, self.city())
        return PP(prep, self.np(depth))

    def person(self, relative: bool = False, depth: int = 0) -> Person:
        gender = "f" if self.chance(0.5) else "m"
        person = Person(_POOLS["names", gender].draw(self.rng), _POOLS["names", "last"].draw(self.rng), gender)
        if relative and depth < MAX_DEPTH:
            return Person(person.first, person.last, gender, self.relative(person, depth + 1, commas=True))
        return person

    def city(self) -> City:
        return _POOLS["names", "city"].draw(self.rng)

    def time(self, tense: str) -> Phrase:
        """A time expression that fits `tense` ("in 2012" and "three days ago" only in the past)."""
        x = self.rng.random()
        if x < 0.2:
            en, fr = self.rng.choice(_DAYS)
            return Phrase(("on", en), (fr,))
        if x < 0.35:
            en, fr = self.rng.choice(_MONTHS)
            return Phrase(("in", en), ("en", fr))
        if tense == "past" and x < 0.5:
            year = str(self.rng.randint(2004, 2013))
            return Phrase(("in", year), ("en", year))
        if tense == "past" and x < 0.6:
            (n_en, n_fr), (unit_en, unit_fr) = self.rng.choice(_NUMBER_WORDS[:9]), self.rng.choice(_AGO_UNITS)
            return Phrase((n_en, unit_en, "ago"), ("il", "y", "a", n_fr, unit_fr))
        return self.rng.choice(_TIMES[tense])


def draw_sentence(rng: random.Random, domain: str = "news") -> Sentence:
    """One sentence tree of `domain` ("news" or "pool")."""
    return _Sampler(rng, domain).sentence()


# --- corpora and report -------------------------------------------------------------------------

_CORPUS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _role(name: str) -> str:
    """'eval' for dev/test corpora, 'train' for the others."""
    return "eval" if "dev" in name or "test" in name else "train"


def _domain(name: str) -> str:
    """Dev and test are news, like WMT newstest; other corpora are news only if their name says so."""
    return "news" if "news" in name or _role(name) == "eval" else "pool"


@dataclass
class _Corpus:
    name: str
    src: list[str]
    tgt: list[str]
    src_tokens: list[list[str]]
    tgt_tokens: list[list[str]]
    topics: Counter

    @property
    def role(self) -> str:
        return _role(self.name)


def _draw_corpus(name: str, size: int, seed: int, taken: set[str]) -> _Corpus:
    """`size` distinct pairs whose source sentences are not in `taken`."""
    sampler = _Sampler(random.Random(f"{seed}:{name}"), _domain(name))
    corpus = _Corpus(name, [], [], [], [], Counter())
    seen: set[str] = set()
    for _ in range(20 * size + 1000):
        if len(corpus.src) == size:
            break
        en, fr = realise(sampler.sentence())
        src = detokenize(en)
        if not MIN_TOKENS <= len(en) <= MAX_TOKENS or src in seen or src in taken:
            continue
        seen.add(src)
        corpus.src.append(src)
        corpus.tgt.append(detokenize(fr))
        corpus.src_tokens.append(en)
        corpus.tgt_tokens.append(fr)
        corpus.topics[sampler.topic] += 1
    if len(corpus.src) < size:
        raise UserError(f"could not generate {size} distinct sentence pairs for corpus {name!r}; ask for fewer.")
    return corpus


def _length_stats(lengths: list[int]) -> dict:
    return {
        "min": min(lengths, default=0),
        "mean": round(sum(lengths) / len(lengths), 2) if lengths else 0.0,
        "max": max(lengths, default=0),
        "over_30": sum(n > 30 for n in lengths),
        "over_50": sum(n > 50 for n in lengths),
    }


def _top_words(sentences: list[list[str]], n: int) -> set[str]:
    """The n most frequent tokens (ties broken alphabetically, so the set does not depend on order)."""
    counts = Counter(tok for sent in sentences for tok in sent)
    return {tok for tok, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]}


def _share_with_rare_words(sentences: list[list[str]], shortlist: set[str]) -> float:
    """Fraction of sentences with at least one token outside `shortlist`."""
    rare = sum(any(tok not in shortlist for tok in sent) for sent in sentences)
    return round(rare / len(sentences), 4) if sentences else 0.0


def _report(corpora: list[_Corpus], seed: int) -> dict:
    train = [c for c in corpora if c.role == "train"]
    shortlist = _top_words([s for c in train for s in c.src_tokens], SHORTLIST)
    train_src = {s for c in train for s in c.src}
    entries = {}
    for c in corpora:
        entry = {
            "role": c.role,
            "domain": _domain(c.name),
            "pairs": len(c.src),
            "src_tokens": _length_stats([len(t) for t in c.src_tokens]),
            "tgt_tokens": _length_stats([len(t) for t in c.tgt_tokens]),
            "src_types": len({tok for sent in c.src_tokens for tok in sent}),
            "tgt_types": len({tok for sent in c.tgt_tokens for tok in sent}),
            f"outside_top{SHORTLIST}": _share_with_rare_words(c.src_tokens, shortlist),
            "topics": dict(sorted(c.topics.items())),
        }
        if c.role == "eval":  # source sentences shared with training or with another dev/test corpus
            others = train_src.union(*(o.src for o in corpora if o.role == "eval" and o is not c))
            entry["overlap"] = sum(s in others for s in c.src)
        entries[c.name] = entry
    return {
        "seed": seed,
        "src_lang": "en",
        "tgt_lang": "fr",
        "shortlist": SHORTLIST,
        "tokens": "sacremoses MosesTokenizer(lang) tokens of the raw lines",
        "corpora": entries,
        "overlap": sum(e.get("overlap", 0) for e in entries.values()),
        "src_types": len({tok for c in corpora for sent in c.src_tokens for tok in sent}),
        "tgt_types": len({tok for c in corpora for sent in c.tgt_tokens for tok in sent}),
    }


def _check_arguments(seed: int, sizes: dict[str, int] | None, src_lang: str, tgt_lang: str) -> dict[str, int]:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(f"the demo corpus seed must be an integer, not {seed!r}.")
    if (src_lang, tgt_lang) != ("en", "fr"):
        raise UserError(f"the demo corpus is English→French only, not {src_lang}→{tgt_lang}.")
    sizes = dict(DEFAULT_SIZES if sizes is None else sizes)
    if not sizes:
        raise UserError("the demo corpus needs at least one corpus name and size.")
    for name, size in sizes.items():
        if not isinstance(name, str) or not _CORPUS_NAME.fullmatch(name):
            raise UserError(f"corpus name {name!r} must be a plain file name (letters, digits, '.', '_', '-').")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise UserError(f"size of corpus {name!r} must be a non-negative integer, not {size!r}.")
    return sizes


def generate_demo_corpus(
    out_dir: Path,
    *,
    seed: int = 1234,
    sizes: dict[str, int] | None = None,
    src_lang: str = "en",
    tgt_lang: str = "fr",
) -> dict:
    """Write `{corpus}.en`, `{corpus}.fr` (raw text) and `report.json` under `out_dir`; return the report.

    Each corpus draws from its own generator seeded by (seed, name), so a corpus does not change when
    another one is resized; dev/test sentences are redrawn until none occurs in training or in each other.
    """
    sizes = _check_arguments(seed, sizes, src_lang, tgt_lang)
    out_dir = Path(out_dir)
    corpora: list[_Corpus] = []
    taken: set[str] = set()
    for name in sorted(sizes, key=lambda n: (_role(n) == "eval", n)):
        corpus = _draw_corpus(name, sizes[name], seed, taken if _role(name) == "eval" else set())
        corpora.append(corpus)
        taken.update(corpus.src)
    for c in corpora:
        write_lines(out_dir / f"{c.name}.{src_lang}", c.src)
        write_lines(out_dir / f"{c.name}.{tgt_lang}", c.tgt)
    report = _report(corpora, seed)
    write_json(out_dir / "report.json", report)
    log.info("demo corpus: %d pairs in %d corpora under %s", sum(len(c.src) for c in corpora), len(corpora), out_dir)
    return report
