"""Why an evolved instruction is rejected: the cheap, rule-based elimination of Evol-Instruct.

An evolution that fails is not silently dropped: the engine (:mod:`rleif_kit.evolve.stage`) keeps it
aside with the reason returned here, and the instruction keeps its parent for the next round.
So every rule must be *explainable* (one named reason) and *conservative*: a wrongly eliminated
evolution costs a round of progress, while a wrongly accepted one is still seen later by dedup
and by the instruction reward model (IRM).

Reasons, checked in this order (the first that applies wins)::

    unparseable         truncated (finish_reason "length"), dangling end, garbage, unbalanced ```
    garbled             a replacement character U+FFFD (bytes that did not decode) or a control character
                        (other than tab, newline, carriage return) in otherwise readable text
    empty               nothing but punctuation and stop words after cleaning
    leaked_template     evolution-template wording left inside the text (LEAK_PHRASES)
    refusal             a short text that refuses ("I'm sorry, but I can't rewrite this")
    no_new_information  the same text as the parent up to case/whitespace/punctuation, or
                        only a few stop words differ (lexically_same)

The evolved *response* (the answer the evolver writes to a kept instruction) has rules of its own
(:func:`answer_elimination_reason`), the original method's: a refusal, too short, or nothing but
punctuation and stop words, or garbled as above. A reply cut at ``max_tokens`` is not eliminated: it is a failure,
retried.

Pure standard library; an optional LLM equality judge lives in the engine, not here.
"""
from __future__ import annotations

import re
import unicodedata

REASONS = ("empty", "leaked_template", "refusal", "no_new_information", "unparseable", "garbled")
ANSWER_REASONS = ("answer_empty", "answer_refusal", "answer_too_short", "answer_garbled")
MIN_ANSWER_WORDS = 3  # "The answer is: 7" is four; "7." alone is no worked answer

# Wording of the evolution prompts (WizardLM / WizardMath templates) that a model sometimes
# copies into its answer. Matched case-insensitively anywhere in the *cleaned* text; a leading
# label such as "#Rewritten Prompt#:" is cleaning, not a leak, so it is stripped first.
LEAK_PHRASES = (
    "#rewritten prompt#", "#given prompt#", "#created prompt#", "#instruction#",
    "#method list#", "#plan#", "#finally rewritten instruction#",
    "given prompt", "rewritten prompt", "created prompt", "the above prompt",
    "the original prompt", "rewritten instruction", "given instruction",
)
# Notes to the reader real evolvers leave AFTER the problem (gpt-3.5's "In this modified version, ..." in
# evol-codealpaca; chat sign-offs): a leak there, after the last question mark or blank line, not inside a story
# ("In this modified version of chess, ...", a character saying "I hope this helps").
NOTE_PHRASES = ("in this modified version", "this rewritten version", "in this version", "i hope this helps",
                "let me know if you need", "this adds ", "this version ")
# Any other "#Some Label#" marker inside the text is template syntax too ("C# and F#" is not:
# the label must start with a letter right after the '#').
_HASH_LABEL = re.compile(r"#[A-Za-z][A-Za-z ]{1,40}#")

STOP_WORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being both
but by can could did do does doing down during each few for from further had has have having
he her here hers him his how i if in into is it its itself just me more most much my no nor not
now of off on once only or other our out over own same she should so some such than that the
their them then there these they this those through to too under until up very was we were what
when where which while who whom why will with would yet you your several many ok okay please
""".split())

# Refusals: an opener at the very start, or a first-person refusal aimed at the task.
_REFUSAL_START = re.compile(
    r"^(?:sorry\b|i'?m sorry|i am sorry|i apologi[sz]e|unfortunately,? i\b|i cannot\b|"
    r"i can'?t\b|i can not\b|i am unable|i'?m unable|i won'?t\b|as an ai\b)")
_REFUSAL_ANYWHERE = re.compile(
    r"\bas an ai\b|\b(?:i'?m sorry|i am sorry|i cannot|i can'?t|i can not|i am unable|"
    r"i'?m unable|i won'?t)\b[^.?!]*\b(?:rewrit\w*|help|assist|comply|fulfil\w*|provide|create|"
    r"generate|complete|modify|evolve|this (?:request|prompt|task|problem|question))\b")
REFUSAL_MAX_WORDS = 80  # a long problem whose story says "sorry" is a problem, not a refusal

MIN_TEXT_CHAR_RATIO = 0.4  # below this share of letters/digits/spaces the text is garbage
# Words an English sentence cannot end with: a text ending in one was cut off mid-sentence.
_DANGLING_WORDS = frozenset("the a an and or but of than their your my its".split())

_LABEL = re.compile(
    r"^[*_\s]*(?:(?:sure|okay|ok|certainly)[!,.]?\s+)?(?:"
    r"#\s*[A-Za-z][A-Za-z ]{0,40}#\s*:?"  # "#Rewritten Prompt#:", "#Instruction#"
    r"|(?:here\s+is\s+|here's\s+)(?:the\s+|an?\s+)(?:[\w-]+\s+){0,3}"
    r"(?:prompt|instruction|question|problem|version|task)\s*:"  # "Here's a more challenging version:", code's "task"
    r"|(?:the\s+|my\s+|an?\s+)?"
    r"(?:(?:rewritten|new|evolved|created|revised|harder|simpler|modified|final)\s+)?"
    r"(?:prompt|instruction|question|problem|task)\s*:"  # "Rewritten prompt:", "New instruction:"
    r")[*_]*\s*", re.I)
_FENCED = re.compile(r"^```[\w+-]*[ \t]*\n?(.*?)\n?```$", re.S)
_QUOTES = {'"': '"', "\u201c": "\u201d", "'": "'", "\u2018": "\u2019", "\u00ab": "\u00bb"}
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+(?:'[^\W\d_]+)?")


def _strip_once(text: str) -> str:
    """One layer of wrapper noise: whitespace, a whole-text code fence, a label, quotes."""
    text = text.strip()
    m = _FENCED.match(text)
    if m and text.count("```") == 2:
        return m.group(1)
    m = _LABEL.match(text)
    if m and m.end() > 0:
        return text[m.end():]
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] == _QUOTES[text[0]]:
        inner = text[1:-1]
        if text[0] in "'\u2018" or text[-1] not in inner:  # '"a" and "b"' is not one quote
            return inner
    return text


def clean_evolved_text(raw: str) -> str:
    """Strip the wrapper noise a model puts around its answer, layer by layer.

    Why: "#Rewritten Prompt#: ..." or a quoted / fenced answer is a formatting habit of the
    evolver, not a defect of the instruction, so it is removed before any rule looks at it.
    Only *leading* labels are removed; a label left inside the text is a leak.
    """
    text = raw or ""
    while True:
        stripped = _strip_once(text)
        if stripped == text:
            return text.strip()
        text = stripped


def _tokens(text: str) -> list[str]:
    """Lower-case words and numbers; "1,000" is one number and curly apostrophes are plain."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text.lower().replace("\u2019", "'"))
    return _TOKEN.findall(text)


def _skeleton(tokens: list[str]) -> list[str]:
    """Numbers and content words in order: what is left when stop words are ignored."""
    return [t for t in tokens if t[0].isdigit() or t not in STOP_WORDS]


def lexically_same(parent: str, child: str, threshold: float = 0.9) -> bool:
    """True when ``child`` carries no new information over ``parent``, judged lexically.

    Same when equal after normalisation (case, whitespace, punctuation), or when the word-set
    Jaccard similarity is >= ``threshold`` AND the numbers and content (non-stop) words are
    the same sequence, i.e. only a few stop words differ ("So, how many ..."). Why a
    *sequence*: changing, dropping or moving a single number or event word ("gives away 4"
    -> "4 times as many") makes a different problem, which word overlap alone cannot see.
    """
    p, c = _tokens(clean_evolved_text(parent)), _tokens(clean_evolved_text(child))
    if p == c:
        return True
    ps, cs = set(p), set(c)
    jaccard = len(ps & cs) / len(ps | cs) if ps | cs else 1.0
    return jaccard >= threshold and _skeleton(p) == _skeleton(c)


_NOT_PLAIN = re.compile(r"[^\w\s]|_")  # neither a letter/digit nor whitespace


def _unparseable(raw: str, text: str, finish_reason: str | None) -> bool:
    """Truncated, unbalanced code fences, mostly non-linguistic characters, or a dangling end."""
    if finish_reason == "length" or (raw or "").count("```") % 2:
        return True
    if not any(ch.isalnum() for ch in text):
        return False  # no words at all ("", "...!?") is "empty", a different reason
    plain = len(text) - len(_NOT_PLAIN.findall(text))  # a regex: this runs on every evolved text
    if plain / len(text) < MIN_TEXT_CHAR_RATIO:
        return True
    words = text.lower().split()  # a dangling end only counts in a text long enough to be cut
    return len(words) >= 4 and (text[-1] in ",:;-(" or words[-1] in _DANGLING_WORDS)


def _garbled(text: str) -> bool:
    """U+FFFD or a control character: a model that emits bytes which are no text (a degenerate decode, a tokenizer
    without a byte fallback). The equality judge would call such a text "different", and without the judge nothing
    else looks at it, so it is caught here, whatever the share of readable characters around it."""
    return "\ufffd" in text or any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text)


def _is_refusal(text: str) -> bool:
    if len(text.split()) >= REFUSAL_MAX_WORDS:
        return False
    low = text.lower().replace("\u2019", "'")
    return bool(_REFUSAL_START.match(low) or _REFUSAL_ANYWHERE.search(low))


def _leaks_template(text: str) -> bool:
    low = text.lower()
    return any(p in low for p in LEAK_PHRASES) or bool(_HASH_LABEL.search(text)) or _trailing_note(low)


def _trailing_note(low: str) -> bool:
    """A note to the reader after the problem: past its last question mark, or in a paragraph of its own."""
    tails = [low.rsplit("?", 1)[1] if "?" in low else "", low.rsplit("\n\n", 1)[1] if "\n\n" in low else ""]
    return any(p in tail for tail in tails for p in NOTE_PHRASES)


def elimination_reason(parent: str, child: str, *, finish_reason: str | None = None,
                       same_threshold: float = 0.9) -> str | None:
    """None when ``child`` is an acceptable evolution of ``parent``, else one of REASONS.

    ``child`` is the raw model output (it is cleaned here); ``finish_reason`` is the API's
    ("length" means the output was cut off by the token limit).
    """
    text = clean_evolved_text(child)
    if _unparseable(child, text, finish_reason):
        return "unparseable"
    if _garbled(text):
        return "garbled"
    if not _skeleton(_tokens(text)):
        return "empty"
    if _leaks_template(text):
        return "leaked_template"
    if _is_refusal(text):
        return "refusal"
    if lexically_same(parent, text, same_threshold):
        return "no_new_information"
    return None


def answer_elimination_reason(answer: str) -> str | None:
    """None when the evolved response is an answer, else one of ANSWER_REASONS: bytes that are no text
    (``answer_garbled``), nothing but punctuation and stop words (``answer_empty``), a refusal (``answer_refusal``),
    fewer than MIN_ANSWER_WORDS words and numbers (``answer_too_short``). The caller has already turned a reply cut
    at ``max_tokens`` into a failure."""
    text = clean_evolved_text(answer)
    tokens = _tokens(text)
    if _garbled(text):
        return "answer_garbled"
    if not _skeleton(tokens):
        return "answer_empty"
    if _is_refusal(text):
        return "answer_refusal"
    if len(tokens) < MIN_ANSWER_WORDS:
        return "answer_too_short"
    return None


_EQUALITY = re.compile(r"\b(?:(not|non|no)[\s-]+(?:at\s+all\s+|exactly\s+|quite\s+|really\s+)?(?:the\s+)?)?"
                       r"(equal|same|identical|equivalent|different|distinct|unequal)\b(\s*\?)?", re.I)


def _mentions(text: str) -> list[tuple[int, bool]]:
    """(position, verdict) of every verdict word: True for equal / same, False for different; a negation in front
    turns it round ("not identical" is different); a word asked as a question ("Equal? No, ...") is no verdict."""
    out = []
    for m in _EQUALITY.finditer(text):
        if m.group(3):
            continue
        equal = m.group(2).lower() in ("equal", "same", "identical", "equivalent")
        out.append((m.start(), equal != bool(m.group(1))))
    return out


def parse_equality(text: str | None, cut: bool = False) -> bool | None:
    """The equality judge's verdict: True when the child adds nothing ("Equal"), False when it is "Different",
    None when the reply says neither, says both, or only asks (then it is asked again, and after three replies the
    evolution is recorded as failed: never guessed).

    Read as real models reply: "Different.", "**Equal**", "different", "The two problems are different.",
    "Not Equal", "not identical", "**Verdict:** Different". A reply cut off at max_tokens (``cut``) counts only
    when it opens with the verdict."""
    body = (text or "").strip().lstrip("*_\"'` ").strip()
    found = _mentions(body)
    verdicts = {v for _, v in found}
    if len(verdicts) != 1:
        return None
    if cut and found[0][0] > 0:
        return None
    return verdicts.pop()
