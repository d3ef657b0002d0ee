"""The tokens of a planned response and the SSE events they go out in (simulator, pure): reasoning, content and
tool-call tokens, their grouping into chunks (``tokens_per_chunk``), tool-call argument fragments and filler
words. Every token costs one unit of ``completion_tokens`` and of decode time.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from dataclasses import dataclass, field

from avv_sim.quirks import HUGE_ARG_CHARS

HUGE_FRAGMENT_CHARS = 65_536  # a huge argument text goes out in fragments of this size
REASONING_WORDS: tuple[str, ...] = (
    "hmm", "let", "me", "think", "the", "user", "wants", "so", "maybe", "check", "first", "then", "consider",
    "tool", "answer", "okay", "wait", "right", "plan", "step", "which", "option", "best",
)
# A few characters per fragment, like a BPE tokenizer: a word (with its leading space), up to three
# digits, a run of whitespace, or one or two punctuation characters. Together they cover every character.
_FRAGMENT_RE = re.compile(r" ?[A-Za-z_]{1,8}| ?\d{1,3}|\s+|[^A-Za-z_\d\s]{1,2}")


@dataclass(frozen=True)
class Token:
    kind: str  # "reasoning" | "content" | "tool"
    text: str
    index: int = 0  # tool-call index for kind "tool"
    header: bool = False  # the tool-call delta that carries id/type/name


@dataclass
class Chunk:
    """One token-bearing SSE event: consecutive tokens of the same kind (and tool index)."""

    kind: str
    index: int
    header: bool
    text: str
    first_token: int
    last_token: int

    @property
    def n_tokens(self) -> int:
        return self.last_token - self.first_token + 1


@dataclass
class ToolCall:
    """One call of a response as it goes on the wire: its id, name and argument text in fragments."""

    index: int
    id: str
    name: str
    arguments: str
    broken: str | None  # None | "missing_required" | "wrong_type" | "unparseable"
    fragments: list[str] = field(default_factory=list)
    wrong_tool: bool = False  # another tool than the reference's (wrong_tool_rate)
    changed: tuple[str, ...] = ()  # argument keys whose value differs from the reference's (wrong_value_rate)


def tool_call_id(h: str, index: int) -> str:
    return "call_" + hashlib.sha256(f"{h}:id:{index}".encode()).hexdigest()[:24]


def split_fragments(text: str) -> list[str]:
    """Argument text as tokenizer-sized fragments (joined they give back ``text``)."""
    if len(text) > HUGE_ARG_CHARS // 2:  # huge_args: a handful of big fragments, not 250k events
        return [text[i : i + HUGE_FRAGMENT_CHARS] for i in range(0, len(text), HUGE_FRAGMENT_CHARS)]
    return _FRAGMENT_RE.findall(text) or [""]


def filler_words(h: str, purpose: str, n: int, words: tuple[str, ...]) -> list[str]:
    """``n`` words drawn from ``words`` by (``h``, ``purpose``): the same list for the same arguments."""
    return list(_filler(h, purpose, n, words))


@functools.lru_cache(maxsize=4096)
def _filler(h: str, purpose: str, n: int, words: tuple[str, ...]) -> tuple[str, ...]:
    # cached: the repeats of a body (and every profile) write the same most likely words (behaviour.answer_words)
    rng = random.Random(f"{h}:{purpose}")
    return tuple(rng.choice(words) for _ in range(n))


def word_tokens(kind: str, words: list[str]) -> list[Token]:
    """One token per word, each after the first with its leading space."""
    return [Token(kind, w if i == 0 else " " + w) for i, w in enumerate(words)]


def text_tokens(text: str) -> list[Token]:
    """Content tokens of a fixed text (its fragments)."""
    return [Token("content", f) for f in split_fragments(text)]


def tool_tokens(calls: list[ToolCall]) -> list[Token]:
    """Per call, its header token then its argument fragments."""
    return [t for c in calls for t in [Token("tool", "", c.index, True)] + [Token("tool", f, c.index)
                                                                             for f in c.fragments]]


def group_chunks(tokens: list[Token], per_chunk: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    for i, tok in enumerate(tokens):
        last = chunks[-1] if chunks else None
        if (
            last is not None
            and last.kind == tok.kind
            and last.index == tok.index
            and not tok.header
            and last.n_tokens < per_chunk
        ):
            last.text += tok.text
            last.last_token = i
        else:
            chunks.append(Chunk(tok.kind, tok.index, tok.header, tok.text, i, i))
    return chunks


def token_counts(chunks: list[Chunk]) -> dict[str, int]:
    """Tokens per kind across ``chunks`` (reasoning, content, tool)."""
    out = {"reasoning": 0, "content": 0, "tool": 0}
    for c in chunks:
        out[c.kind] += c.n_tokens
    return out
