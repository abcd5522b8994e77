"""The arithmetic world's words: names, topics, sentence templates, intros and questions.

Kept apart from ``arith.py`` (the problem structure, rendering and verifier) because it is data: more
names or sentence templates make the problems more varied without touching any logic.
"""

from __future__ import annotations

HE_NAMES = ("Tom Sam Ben Leo Max Omar Raj Ivan Noah Liam Carlos Ken Hugo Felix Diego "
            "Arjun Malik").split()
SHE_NAMES = ("Anna Mia Lily Sara Emma Zoe Priya Aisha Nina Rosa Maya Chloe Grace Hana "
             "Julia Fatima Elena").split()
RELATIVES = "sister brother friend neighbor cousin mom dad aunt".split()

# Per topic: items, a place, verbs that increase / decrease the count, and one add and one
# sub sentence of its own, so sentence *structure* (not only nouns) varies between topics.
TOPICS: dict[str, dict] = {
    "fruit": dict(items=["apples", "oranges", "pears", "plums"], place="basket",
                  gain=["buys", "picks"], lose=["eats", "sells"],
                  add="At the market, {sub} picks up another {n} {item}.",
                  sub="{n} of the {item} go bad, so {sub} throws them out."),
    "money": dict(items=["dollars", "coins", "tokens"], place="piggy bank",
                  gain=["earns", "saves"], lose=["spends", "loses"],
                  add="{Pos} aunt gives {obj} {n} {item} as a gift.",
                  sub="{Sub} pays {n} {item} for a snack."),
    "books": dict(items=["books", "comics", "magazines", "novels"], place="shelf",
                  gain=["buys", "borrows"], lose=["donates", "lends out"],
                  add="For {pos} birthday, {sub} receives {n} {item}.",
                  sub="{Sub} donates {n} {item} to the school library."),
    "animals": dict(items=["chickens", "ducks", "rabbits", "goats"], place="farm",
                    gain=["buys", "adopts"], lose=["sells", "gives away"],
                    add="Then {n} new {item} are born on the {place}.",
                    sub="{n} of the {item} wander off and never come back."),
    "school": dict(items=["pencils", "stickers", "notebooks", "erasers"], place="backpack",
                   gain=["buys", "gets"], lose=["loses", "lends out"],
                   add="{Pos} teacher hands {obj} {n} more {item}.",
                   sub="{Sub} gives {n} {item} to classmates."),
    "baking": dict(items=["cookies", "cupcakes", "muffins", "rolls"], place="kitchen",
                   gain=["bakes", "makes"], lose=["eats", "sells"],
                   add="{Sub} takes another tray of {n} {item} out of the oven.",
                   sub="{Pos} family eats {n} of the {item} after dinner."),
    "toys": dict(items=["marbles", "toy cars", "blocks", "dolls"], place="toy box",
                 gain=["buys", "wins"], lose=["loses", "trades away"],
                 add="At a fair, {sub} wins {n} {item}.",
                 sub="{n} of the {item} break, and {sub} throws them away."),
    "garden": dict(items=["flowers", "tomatoes", "carrots", "plants"], place="garden",
                   gain=["plants", "grows"], lose=["picks", "gives away"],
                   add="After the rain, {n} new {item} appear in the {place}.",
                   sub="Rabbits eat {n} of the {item}."),
    "sports": dict(items=["balls", "rackets", "jerseys", "cones"], place="locker",
                   gain=["buys", "orders"], lose=["loses", "lends out"],
                   add="The coach brings {obj} {n} more {item}.",
                   sub="{n} of the {item} get lost at practice."),
    "crafts": dict(items=["beads", "buttons", "ribbons", "stickers"], place="craft box",
                   gain=["buys", "collects"], lose=["uses", "gives away"],
                   add="A friend mails {obj} {n} {item}.",
                   sub="{Sub} sews {n} {item} onto a jacket."),
}

# Generic templates per op kind; add/sub get the topic's own sentence appended as index 4.
OP_TEMPLATES = {
    "add": ["Then {sub} {gain} {n} more {item}.", "{name} {gain} another {n} {item}.",
            "Later, {pos} {rel} gives {obj} {n} {item}.",
            "After that, {n} more {item} are added to {pos} {place}."],
    "sub": ["Then {sub} {lose} {n} {item}.", "{name} gives {n} {item} to {pos} {rel}.",
            "Next, {n} of the {item} are taken out of {pos} {place}.",
            "Later, {sub} {lose} {n} of {pos} {item}."],
    "mul": ["Then {name} ends up with {n} times as many {item} as before.",
            "A month later, the number of {item} has grown to {n} times what it was.",
            "Next, the number of {item} is multiplied by {n}.",
            "Then {sub} {word} the number of {item}."],
    "div": ["Then {sub} splits the {item} into {n} equal groups and keeps only one group.",
            "Later, {sub} gives away half of {pos} {item}.",
            "Next, the number of {item} is divided by {n}.",
            "{name} puts the {item} into {n} equal boxes and keeps just one box."],
}
# Templates whose operand is implied by a word; question_numbers() maps the word back.
IMPLICIT = {("mul", 3): {2: "doubles", 3: "triples"}, ("div", 1): {2: "half"}}
IMPLICIT_WORDS = {"double": 2, "doubles": 2, "doubled": 2, "twice": 2, "half": 2,
                  "triple": 3, "triples": 3, "tripled": 3, "dozen": 12}

INTROS = ["{name} has {start} {item}.", "There are {start} {item} in {name}'s {place}.",
          "{name} starts with {start} {item} in {pos} {place}.",
          "At first, {name} owns {start} {item}.",
          "{name} counts {start} {item} in {pos} {place}."]
QUESTIONS = ["How many {item} does {name} have now?",
             "How many {item} does {name} have in the end?",
             "How many {item} are in {name}'s {place} at the end?",
             "After all this, how many {item} does {name} have?",
             "What is the final number of {item} that {name} has?"]

PRONOUNS = {"he": ("he", "his", "him"), "she": ("she", "her", "her")}
