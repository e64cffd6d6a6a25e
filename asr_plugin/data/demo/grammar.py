"""The sentences of the synthetic mini corpus: a small English grammar over ~400 words.

Large enough that a 128-piece BPE model cannot hold whole words (the model must spell words from pieces in
combinations it has not heard), small enough that a tiny transducer learns it on a CPU in minutes. Templates
draw subjects, verbs, objects, places and times independently, so dev/test sentences are new combinations
of words heard in training.
"""

from __future__ import annotations

import random

NAMES = (
    "ANNA",
    "BEN",
    "CARL",
    "DIANA",
    "EMMA",
    "FRANK",
    "GRACE",
    "HENRY",
    "ISAAC",
    "JULIA",
    "KEVIN",
    "LAURA",
    "MARTIN",
    "NORA",
    "OLIVER",
    "PETER",
    "RACHEL",
    "SIMON",
    "THOMAS",
    "VICTOR",
    "WENDY",
    "ALBERT",
    "BELLA",
    "CHARLES",
    "DANIEL",
    "ELLEN",
    "GEORGE",
    "HELEN",
    "JAMES",
    "LUCY",
    "MAX",
    "SOPHIE",
)
PRONOUNS = ("I", "WE", "THEY", "SHE", "HE", "YOU")
POSSESSIVES = ("MY", "HIS", "HER", "OUR", "THEIR", "YOUR")
# (base, past) of verbs that take an object
TRANSITIVE = (
    ("SEE", "SAW"),
    ("FIND", "FOUND"),
    ("TAKE", "TOOK"),
    ("BRING", "BROUGHT"),
    ("BUY", "BOUGHT"),
    ("SELL", "SOLD"),
    ("OPEN", "OPENED"),
    ("CLOSE", "CLOSED"),
    ("CLEAN", "CLEANED"),
    ("PAINT", "PAINTED"),
    ("FIX", "FIXED"),
    ("BREAK", "BROKE"),
    ("CARRY", "CARRIED"),
    ("WASH", "WASHED"),
    ("MOVE", "MOVED"),
    ("HIDE", "HID"),
    ("DROP", "DROPPED"),
    ("HOLD", "HELD"),
    ("WANT", "WANTED"),
    ("NEED", "NEEDED"),
    ("LIKE", "LIKED"),
    ("KEEP", "KEPT"),
    ("LOSE", "LOST"),
    ("MAKE", "MADE"),
    ("COOK", "COOKED"),
    ("WRITE", "WROTE"),
    ("DRAW", "DREW"),
    ("CATCH", "CAUGHT"),
    ("THROW", "THREW"),
    ("BORROW", "BORROWED"),
    ("FOLLOW", "FOLLOWED"),
    ("WATCH", "WATCHED"),
    ("CHECK", "CHECKED"),
    ("SEND", "SENT"),
    ("PUSH", "PUSHED"),
    ("PULL", "PULLED"),
)
# (base, past) of verbs of motion, followed by "TO THE <place>"
MOTION = (
    ("WALK", "WALKED"),
    ("RUN", "RAN"),
    ("DRIVE", "DROVE"),
    ("GO", "WENT"),
    ("COME", "CAME"),
    ("HURRY", "HURRIED"),
    ("RETURN", "RETURNED"),
    ("TRAVEL", "TRAVELLED"),
    ("FLY", "FLEW"),
    ("SWIM", "SWAM"),
    ("RIDE", "RODE"),
    ("CYCLE", "CYCLED"),
)
# singular -> plural
NOUNS = {
    "BOOK": "BOOKS",
    "LAMP": "LAMPS",
    "CHAIR": "CHAIRS",
    "TABLE": "TABLES",
    "WINDOW": "WINDOWS",
    "DOOR": "DOORS",
    "LETTER": "LETTERS",
    "PENCIL": "PENCILS",
    "BOTTLE": "BOTTLES",
    "BASKET": "BASKETS",
    "BLANKET": "BLANKETS",
    "CANDLE": "CANDLES",
    "CLOCK": "CLOCKS",
    "COAT": "COATS",
    "HAT": "HATS",
    "SHOE": "SHOES",
    "KEY": "KEYS",
    "RING": "RINGS",
    "PHONE": "PHONES",
    "CAMERA": "CAMERAS",
    "GUITAR": "GUITARS",
    "PIANO": "PIANOS",
    "BICYCLE": "BICYCLES",
    "BOAT": "BOATS",
    "TRUCK": "TRUCKS",
    "HORSE": "HORSES",
    "RABBIT": "RABBITS",
    "TIGER": "TIGERS",
    "MONKEY": "MONKEYS",
    "PARROT": "PARROTS",
    "TURTLE": "TURTLES",
    "APPLE": "APPLES",
    "LEMON": "LEMONS",
    "BANANA": "BANANAS",
    "CARROT": "CARROTS",
    "POTATO": "POTATOES",
    "TOMATO": "TOMATOES",
    "SANDWICH": "SANDWICHES",
    "CAKE": "CAKES",
    "COOKIE": "COOKIES",
    "BOX": "BOXES",
    "BAG": "BAGS",
    "CUP": "CUPS",
    "PLATE": "PLATES",
    "SPOON": "SPOONS",
    "KNIFE": "KNIVES",
    "MIRROR": "MIRRORS",
    "PICTURE": "PICTURES",
    "FLOWER": "FLOWERS",
    "STONE": "STONES",
    "FEATHER": "FEATHERS",
    "RIBBON": "RIBBONS",
    "TICKET": "TICKETS",
    "WALLET": "WALLETS",
    "UMBRELLA": "UMBRELLAS",
    "JACKET": "JACKETS",
    "PILLOW": "PILLOWS",
    "BUCKET": "BUCKETS",
    "HAMMER": "HAMMERS",
    "BRUSH": "BRUSHES",
    "GLASS": "GLASSES",
    "DOLL": "DOLLS",
    "MAP": "MAPS",
    "PUPPY": "PUPPIES",
    "KITTEN": "KITTENS",
    "CHICKEN": "CHICKENS",
    "DUCK": "DUCKS",
    "SHEEP": "SHEEP",
}
ADJECTIVES = (
    "OLD",
    "NEW",
    "BIG",
    "SMALL",
    "RED",
    "BLUE",
    "GREEN",
    "YELLOW",
    "BLACK",
    "WHITE",
    "BROWN",
    "PURPLE",
    "HEAVY",
    "LIGHT",
    "CLEAN",
    "DIRTY",
    "BROKEN",
    "EMPTY",
    "FULL",
    "WARM",
    "COLD",
    "SOFT",
    "HARD",
    "SHINY",
    "DUSTY",
    "TINY",
    "HUGE",
    "STRANGE",
    "FAMOUS",
    "CHEAP",
    "EXPENSIVE",
    "WOODEN",
    "SILVER",
    "GOLDEN",
    "FRESH",
    "QUIET",
    "LOUD",
    "LUCKY",
    "SLEEPY",
    "HUNGRY",
    "PRETTY",
    "UGLY",
)
PLACES = (
    "KITCHEN",
    "GARDEN",
    "OFFICE",
    "MARKET",
    "STATION",
    "LIBRARY",
    "SCHOOL",
    "BEACH",
    "FOREST",
    "RIVER",
    "BRIDGE",
    "CHURCH",
    "HOSPITAL",
    "MUSEUM",
    "PARK",
    "HARBOUR",
    "VILLAGE",
    "CASTLE",
    "FARM",
    "SHOP",
    "HOTEL",
    "THEATRE",
    "BAKERY",
    "GARAGE",
    "CELLAR",
    "ATTIC",
    "AIRPORT",
    "ISLAND",
)
PREPOSITIONS = ("IN", "ON", "UNDER", "BEHIND", "NEAR", "BESIDE", "INSIDE", "ABOVE", "BELOW")
DAYS = ("MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY")
TIMES = (
    "YESTERDAY",
    "TODAY",
    "TOMORROW",
    "LAST NIGHT",
    "THIS MORNING",
    "AFTER LUNCH",
    "BEFORE DINNER",
    "EVERY DAY",
    "AT NOON",
    "IN THE EVENING",
    "LAST WEEK",
    "NEXT YEAR",
    "AT MIDNIGHT",
    "SOON",
    "AGAIN",
)
NUMBERS = (
    "TWO",
    "THREE",
    "FOUR",
    "FIVE",
    "SIX",
    "SEVEN",
    "EIGHT",
    "NINE",
    "TEN",
    "ELEVEN",
    "TWELVE",
    "TWENTY",
    "FIFTY",
    "HUNDRED",
)
ADVERBS = ("VERY", "QUITE", "REALLY", "RATHER", "TOO")
# words only the templates below use
FUNCTION_WORDS = (
    "THE",
    "A",
    "AN",
    "AND",
    "BUT",
    "WAS",
    "WILL",
    "DID",
    "PLEASE",
    "TO",
    "THERE",
    "ARE",
    "WITH",
    "NEVER",
    "ALWAYS",
    "OFTEN",
)


def _article(word: str) -> str:
    return "AN" if word[0] in "AEIOU" else "A"


def _noun_phrase(rng: random.Random) -> list[str]:
    """'THE [adj] noun', 'A(N) [adj] noun', 'POSSESSIVE [adj] noun' or 'NUMBER [adj] nouns'."""
    noun = rng.choice(list(NOUNS))
    adjective = [rng.choice(ADJECTIVES)] if rng.random() < 0.5 else []
    kind = rng.randrange(4)
    if kind == 3:
        return [rng.choice(NUMBERS)] + adjective + [NOUNS[noun]]
    head = (adjective + [noun])[0]
    determiner = ("THE", _article(head), rng.choice(POSSESSIVES))[kind]
    return [determiner] + adjective + [noun]


def _subject(rng: random.Random) -> list[str]:
    return [rng.choice(NAMES)] if rng.random() < 0.5 else [rng.choice(PRONOUNS)]


def _time(rng: random.Random) -> list[str]:
    if rng.random() < 0.25:
        return ["ON", rng.choice(DAYS)]
    return rng.choice(TIMES).split()


def _place(rng: random.Random) -> list[str]:
    return [rng.choice(PREPOSITIONS), "THE", rng.choice(PLACES)]


def random_sentence(rng: random.Random) -> str:
    """One sentence of 3-12 words, e.g. "JULIA FOUND THE OLD LAMP IN THE KITCHEN YESTERDAY"."""
    template = rng.randrange(8)
    verb_base, verb_past = rng.choice(TRANSITIVE)
    if template == 0:
        words = _subject(rng) + [verb_past] + _noun_phrase(rng) + (_place(rng) if rng.random() < 0.5 else [])
    elif template == 1:
        words = _subject(rng) + ["WILL", verb_base] + _noun_phrase(rng) + _time(rng)
    elif template == 2:
        motion_base, motion_past = rng.choice(MOTION)
        verb = [motion_past] if rng.random() < 0.5 else ["WILL", motion_base]
        words = [rng.choice(NAMES), "AND", rng.choice(NAMES)] + verb + ["TO", "THE", rng.choice(PLACES)]
        words += _time(rng) if rng.random() < 0.6 else []
    elif template == 3:
        noun = rng.choice(list(NOUNS))
        words = [
            "THE",
            noun,
            "WAS",
            rng.choice(ADVERBS),
            rng.choice(ADJECTIVES),
            "BUT",
            "THE",
            rng.choice(list(NOUNS)),
            "WAS",
            rng.choice(ADJECTIVES),
        ]
    elif template == 4:
        words = ["PLEASE", verb_base] + _noun_phrase(rng) + _place(rng)
    elif template == 5:
        words = ["DID", rng.choice(PRONOUNS), verb_base] + _noun_phrase(rng) + _time(rng)
    elif template == 6:
        noun = rng.choice(list(NOUNS))
        words = ["THERE", "ARE", rng.choice(NUMBERS), NOUNS[noun]] + _place(rng)
    else:
        # a plural or first/second-person subject, so the base form agrees
        subject = (
            [rng.choice(("I", "WE", "THEY", "YOU"))]
            if rng.random() < 0.5
            else [rng.choice(NAMES), "AND", rng.choice(NAMES)]
        )
        words = subject + [
            rng.choice(("NEVER", "ALWAYS", "OFTEN")),
            verb_base,
            "THE",
            rng.choice(list(NOUNS)),
            "WITH",
            rng.choice(POSSESSIVES),
            rng.choice(list(NOUNS)),
        ]
    return " ".join(words)


def vocabulary() -> list[str]:
    """Every word the grammar can produce (sorted)."""
    words = set(NAMES) | set(PRONOUNS) | set(POSSESSIVES) | set(ADJECTIVES) | set(PLACES) | set(PREPOSITIONS)
    words |= set(DAYS) | set(NUMBERS) | set(ADVERBS) | set(FUNCTION_WORDS) | set(NOUNS) | set(NOUNS.values())
    words |= {word for pair in TRANSITIVE + MOTION for word in pair}
    words |= {word for phrase in TIMES for word in phrase.split()}
    return sorted(words)
