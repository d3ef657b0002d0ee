"""Which writing system the simulated model answers in (simulator, pure decisions like :mod:`.behaviour`): the
prompt's script, or another one when the profile's ``language_drift_rate`` draws a drift (the symptom MiniMax's
language-following check detects).

- prompt script = the script with the most letters in the last ``user`` message (Hiragana / Katakana present
  → ``Japanese``; Han without kana → ``Han``); ``Latin`` when it has none of the known letters;
- drift script = ``Cyrillic``, or ``Latin`` when the prompt itself is Cyrillic.

The simulator keeps its own small table (not the harness's detector), so a test that compares the harness's
verdicts with the truth log compares two independent implementations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from avv_core.json_types import JSONMapping

#: Content words per script ("one short word per token").
WORDS: dict[str, tuple[str, ...]] = {
    "Latin": (
        "the", "a", "of", "to", "and", "in", "is", "it", "you", "that", "for", "on", "are", "with", "as", "this",
        "be", "at", "one", "have", "from", "or", "by", "word", "but", "what", "all", "were", "we", "when", "your",
        "can", "said", "there", "use", "an", "each", "which", "do", "how", "if", "will", "up", "about", "out",
        "many", "then", "them", "so", "some", "would", "make", "like", "time", "has", "look", "two", "more", "go",
        "see", "way", "could", "no", "than", "first", "been", "call", "who",
    ),
    "Cyrillic": ("и", "в", "не", "на", "что", "это", "погода", "сегодня", "хорошо", "город", "мы", "дом"),
    "Greek": ("και", "το", "της", "είναι", "καιρός", "σήμερα", "καλός", "πόλη", "εμείς", "σπίτι"),
    "Hebrew": ("של", "את", "על", "זה", "מזג", "האוויר", "היום", "יפה", "אנחנו", "בית"),
    "Arabic": ("في", "من", "على", "هذا", "الطقس", "اليوم", "جميل", "مدينة", "نحن", "بيت"),
    "Devanagari": ("और", "है", "के", "में", "यह", "मौसम", "आज", "अच्छा", "हम", "घर"),
    "Thai": ("และ", "ที่", "ของ", "ใน", "เป็น", "อากาศ", "วันนี้", "ดี", "เรา", "บ้าน"),
    "Hangul": ("그리고", "우리", "는", "오늘", "날씨", "가", "좋다", "한국", "에서", "있다"),
    "Japanese": ("これ", "は", "日本", "の", "です", "ます", "東京", "に", "を", "が", "天気", "今日"),
    "Han": ("我们", "的", "是", "在", "这个", "中国", "天气", "今天", "很", "好"),
}

# (first, last, script) for the scripts above; Latin letters are the rest of isalpha() below U+0250.
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x024F, "Latin"),
    (0x0370, 0x03FF, "Greek"),
    (0x0400, 0x04FF, "Cyrillic"),
    (0x0590, 0x05FF, "Hebrew"),
    (0x0600, 0x06FF, "Arabic"),
    (0x0900, 0x097F, "Devanagari"),
    (0x0E00, 0x0E7F, "Thai"),
    (0x1100, 0x11FF, "Hangul"),
    (0x3040, 0x30FF, "Kana"),
    (0x4E00, 0x9FFF, "Han"),
    (0xAC00, 0xD7AF, "Hangul"),
)
DEFAULT_SCRIPT = "Latin"


def _script(char: str) -> str | None:
    code = ord(char)
    for lo, hi, name in _RANGES:
        if lo <= code <= hi:
            return name
    return None


def _last_user_text(body: JSONMapping) -> str:
    text = ""
    for msg in body.get("messages") or []:
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
            text = content if isinstance(content, str) else ""
    return text


def prompt_script(body: JSONMapping) -> str:
    """The script the simulated model answers in when it does not drift (see the module docstring)."""
    counts = Counter(s for s in map(_script, (c for c in _last_user_text(body) if c.isalpha())) if s)
    if not counts:
        return DEFAULT_SCRIPT
    if counts["Kana"]:
        counts["Japanese"] = counts.pop("Kana") + counts.pop("Han", 0)
    return max(counts, key=lambda s: (counts[s], s))


def drift_script(script: str) -> str:
    """The script a drifting answer is written in: Cyrillic, or Latin for a Cyrillic prompt."""
    return "Latin" if script == "Cyrillic" else "Cyrillic"
