"""Language following (harness pure core: no model, no I/O): which writing system a text is in, by Unicode
script ranges.

Used by the sample loader (a sample's language check, validated before any request), the record (its
``expected_language`` column) and scoring (``language_following_rate``). Module state: constant tables.

A sample's **language check** is one spec string:

- an ISO 639-1 code (``ja``, ``ru``, ``zh``; a region tag like ``pt-BR`` counts as ``pt``) → the scripts
  that language is written in (:data:`LANGUAGE_SCRIPTS`; Japanese = Han + Hiragana + Katakana);
- a script name (``Cyrillic``, ``Greek``, ``Han`` …; case-insensitive) → that script;
- ``minimax:no-cyrillic`` → MiniMax-Provider-Verifier's own rule, reproduced exactly: the answer is valid
  when no character lies in U+0400–U+04FF (its ``not_contains_russian_characters_unicode``; the answer to a
  Japanese prompt must not drift into Russian).

The check (:func:`check_language`), for every spec but the MiniMax rule::

    letters = alphabetic characters (str.isalpha) of the content, code spans (``` fenced ``` and `inline`) removed
    share   = letters in one of the expected scripts / letters
    valid   = share ≥ SCRIPT_SHARE_MIN (0.5: the expected script holds the majority of the letters)

A content with no letter left is not valid (nothing in it shows the expected language).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from avv_core.json_types import JSONMapping, JSONValue

#: The share of letters that must be in the expected script(s).
SCRIPT_SHARE_MIN = 0.5

#: MiniMax-Provider-Verifier's rule (check_type ``contains_russian_characters_unicode``).
MINIMAX_NO_CYRILLIC = "minimax:no-cyrillic"
MINIMAX_CYRILLIC_RANGE = (0x0400, 0x04FF)

#: check_type values that ask for a language check: ours, and MiniMax's validator name.
CHECK_LANGUAGE_FOLLOWING = "language_following"
CHECK_MINIMAX_CYRILLIC = "contains_russian_characters_unicode"

#: Unicode blocks per script (inclusive code point ranges; Unicode 15 block boundaries).
SCRIPT_RANGES: dict[str, tuple[tuple[int, int], ...]] = {
    "Latin": ((0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x00D6), (0x00D8, 0x00F6), (0x00F8, 0x024F),
              (0x1E00, 0x1EFF), (0x2C60, 0x2C7F), (0xA720, 0xA7FF), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A)),
    "Greek": ((0x0370, 0x03FF), (0x1F00, 0x1FFF)),
    "Cyrillic": ((0x0400, 0x052F), (0x1C80, 0x1C8F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F)),
    "Armenian": ((0x0530, 0x058F),),
    "Hebrew": ((0x0590, 0x05FF), (0xFB1D, 0xFB4F)),
    "Arabic": ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "Devanagari": ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
    "Bengali": ((0x0980, 0x09FF),),
    "Tamil": ((0x0B80, 0x0BFF),),
    "Thai": ((0x0E00, 0x0E7F),),
    "Georgian": ((0x10A0, 0x10FF),),
    "Hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xFFA0, 0xFFDC)),
    "Hiragana": ((0x3040, 0x309F),),
    "Katakana": ((0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)),
    "Han": ((0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B), (0x3400, 0x4DBF),
            (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x323AF)),
}
SCRIPTS: tuple[str, ...] = tuple(SCRIPT_RANGES)
#: Letters in none of the known scripts.
OTHER = "Other"

_LATIN = frozenset({"Latin"})
#: ISO 639-1 code → the scripts its text is written in.
LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    **{code: _LATIN for code in ("en", "fr", "de", "es", "it", "pt", "nl", "pl", "tr", "vi", "id", "ms", "sv",
                                 "da", "no", "nb", "fi", "cs", "sk", "ro", "hu", "hr", "sl", "et", "lv", "lt",
                                 "ca", "eu", "ga", "is", "sq", "tl", "sw", "af", "uz", "az")},
    **{code: frozenset({"Cyrillic"}) for code in ("ru", "uk", "be", "bg", "mk", "kk", "ky", "mn", "tg")},
    "el": frozenset({"Greek"}),
    "hy": frozenset({"Armenian"}),
    "he": frozenset({"Hebrew"}),
    "yi": frozenset({"Hebrew"}),
    **{code: frozenset({"Arabic"}) for code in ("ar", "fa", "ur", "ps")},
    **{code: frozenset({"Devanagari"}) for code in ("hi", "mr", "ne", "sa")},
    "bn": frozenset({"Bengali"}),
    "ta": frozenset({"Tamil"}),
    "th": frozenset({"Thai"}),
    "ka": frozenset({"Georgian"}),
    "ko": frozenset({"Hangul", "Han"}),
    "ja": frozenset({"Han", "Hiragana", "Katakana"}),
    "zh": frozenset({"Han"}),
}

# One sorted table of (start, end, script) for bisection.
_TABLE = sorted((lo, hi, name) for name, ranges in SCRIPT_RANGES.items() for lo, hi in ranges)
_STARTS = [lo for lo, _, _ in _TABLE]
_CODE_RE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)


def script_of(char: str) -> str:
    """The script of one character by its code point (:data:`OTHER` outside every known range)."""
    code = ord(char)
    i = bisect.bisect_right(_STARTS, code) - 1
    if i >= 0:
        lo, hi, name = _TABLE[i]
        if lo <= code <= hi:
            return name
    return OTHER


def strip_code(text: str) -> str:
    """``text`` without Markdown code (fenced blocks and inline spans): code is in no natural language."""
    return _CODE_RE.sub(" ", text)


def script_counts(text: str) -> Counter[str]:
    """Letters (``str.isalpha``) per script, code spans removed."""
    return Counter(script_of(c) for c in strip_code(text) if c.isalpha())


def dominant_script(text: str) -> str | None:
    """The script with the most letters (ties: the order of :data:`SCRIPTS`); None without letters."""
    counts = script_counts(text)
    counts.pop(OTHER, None)
    if not counts:
        return None
    order = {name: i for i, name in enumerate(SCRIPTS)}
    return max(counts, key=lambda s: (counts[s], -order[s]))


def language_of_text(text: str) -> str | None:
    """The language check a prompt implies: ``ja`` when it has kana and is mostly Han/kana, ``ko`` for
    Hangul, ``zh`` for Han without kana, else the dominant script's name; None without letters."""
    counts = script_counts(text)
    main = dominant_script(text)
    if main is None:
        return None
    if main in ("Han", "Hiragana", "Katakana"):
        return "ja" if counts["Hiragana"] or counts["Katakana"] else "zh"
    if main == "Hangul":
        return "ko"
    return main


@dataclass(frozen=True)
class LanguageCheck:
    """A parsed spec: the expected scripts, or MiniMax's no-Cyrillic rule."""

    spec: str  # canonical spec string (what records.csv holds)
    scripts: frozenset[str]  # expected scripts (empty for the MiniMax rule)
    minimax_rule: bool = False


def parse_check(spec: str) -> LanguageCheck:
    """Parse a spec (see the module docstring); ValueError naming the accepted forms otherwise."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"expected_language must be a non-empty string, got {spec!r}")
    text = spec.strip()
    if text.lower() == MINIMAX_NO_CYRILLIC:
        return LanguageCheck(MINIMAX_NO_CYRILLIC, frozenset(), True)
    code = re.split(r"[-_]", text, maxsplit=1)[0].lower()
    if code in LANGUAGE_SCRIPTS:
        return LanguageCheck(code, LANGUAGE_SCRIPTS[code])
    by_name = {name.lower(): name for name in SCRIPTS}
    if text.lower() in by_name:
        name = by_name[text.lower()]
        return LanguageCheck(name, frozenset({name}))
    raise ValueError(
        f"expected_language {spec!r} is neither an ISO 639-1 code we know ({', '.join(sorted(LANGUAGE_SCRIPTS))}) "
        f"nor a script ({', '.join(SCRIPTS)}) nor {MINIMAX_NO_CYRILLIC!r}"
    )


@dataclass(frozen=True)
class LanguageVerdict:
    valid: bool
    share: float | None  # letters in the expected scripts / letters (None for the MiniMax rule or no letters)
    letters: int


def check_language(content: str, spec: str | LanguageCheck) -> LanguageVerdict:
    """Whether ``content`` follows the language check ``spec`` (formulas in the module docstring)."""
    check = spec if isinstance(spec, LanguageCheck) else parse_check(spec)
    if check.minimax_rule:
        lo, hi = MINIMAX_CYRILLIC_RANGE
        return LanguageVerdict(not any(lo <= ord(c) <= hi for c in content), None, sum(c.isalpha() for c in content))
    counts = script_counts(content)
    letters = sum(counts.values())
    if not letters:
        return LanguageVerdict(False, None, 0)
    share = sum(n for script, n in counts.items() if script in check.scripts) / letters
    return LanguageVerdict(share >= SCRIPT_SHARE_MIN, share, letters)


# ------------------------------------------------------------------------------------- samples


def check_types(value: object) -> list[str]:
    """A sample's ``check_type`` as a list (MiniMax writes a list; a single string is accepted).
    ValueError for anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"check_type must be a string or a list of strings, got {value!r}")


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": "..."}, ...]
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def last_user_text(messages: Iterable[JSONValue]) -> str:
    """The text of the last ``user`` message (content parts joined)."""
    text = ""
    for msg in messages:
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            text = _text_of(msg.get("content"))
    return text


def sample_language_check(metadata: JSONMapping, body: JSONMapping) -> str | None:
    """The canonical language-check spec of a sample, or None when it asks for none.

    - ``expected_language`` set → that spec;
    - else ``check_type`` holds ``contains_russian_characters_unicode`` → :data:`MINIMAX_NO_CYRILLIC`;
    - else ``check_type`` holds ``language_following`` → the language of the last user message
      (:func:`language_of_text`).

    ValueError (naming the field) for a bad ``expected_language`` / ``check_type``, or a
    ``language_following`` sample whose prompt has no letter to tell its language by.
    """
    types = check_types(metadata.get("check_type"))
    expected = metadata.get("expected_language")
    if expected is not None:
        return parse_check(expected).spec
    if CHECK_MINIMAX_CYRILLIC in types:
        return MINIMAX_NO_CYRILLIC
    if CHECK_LANGUAGE_FOLLOWING in types:
        inferred = language_of_text(last_user_text(body.get("messages") or []))
        if inferred is None:
            raise ValueError("check_type language_following, but the last user message has no letter to tell its "
                             "language by; set expected_language")
        return inferred
    return None
