"""Is it the same model? The two-sample identity test (scoring layer, pure numpy): do two sets of answers to the same
prompts come from one distribution? The columns that use it are :mod:`avv_scoring.metrics.identity`.

After Model Equality Testing (Gao, Liang and Guestrin, ICLR 2025: an MMD test with a Hamming kernel on the first
tokens of each completion and a permutation p-value). Definitions (docs/scoring.md, "Is it the same model?"):

- **An answer** is what a successful item returned, as :class:`Answers` holds it: its prompt (the sample id), the
  first :data:`TEXT_CHARS` characters of its content, its labels (the call decision, the tools called, the calls
  with their canonical arguments, the finish reason: one code each) and the log of its length (characters of the
  content and the calls' arguments).
- **Kernel** ``k(a, b)``: the mean of :data:`PARTS` kernels, each 1 when the two answers agree on that part: the
  share of the first :data:`TEXT_CHARS` character positions holding the same character (a Hamming kernel over UTF-16
  code units, so a character beyond the Basic Multilingual Plane counts two; a shorter text is padded, and padding
  equals padding), one equality kernel per label, and ``exp(−|ln(1 + len a) −
  ln(1 + len b)|)`` (a Laplace kernel) for the length. Each is positive definite and equals 1 on the diagonal, so
  ``k`` is too. Answers to different prompts are never compared.
- **Statistic**: per prompt with at least :data:`MIN_ANSWERS` answers on each side (``n`` and ``m``), the unbiased
  estimate of the squared maximum mean discrepancy, ``MMD²_u = ΣΣ_{i≠j} k(xᵢ, xⱼ) / n(n−1) + ΣΣ_{i≠j} k(yᵢ, yⱼ) /
  m(m−1) − 2 ΣΣ k(xᵢ, yⱼ) / nm``. The test statistic is ``Σ_p MMD²_u,p / σ_p``, where ``σ_p`` is the standard
  deviation of prompt p's MMD²_u over all its relabellings (exact, :func:`permutation_sd`; a prompt whose answers
  are all alike has σ = 0 and adds nothing): a prompt whose answers mix calls and text swings far more under
  relabelling than one answered in text, and would drown the others in a plain mean. σ_p depends on the prompt's
  answers but not on their labels, so the test stays exact. The reported size of the difference is the plain mean
  of MMD²_u over the prompts (:attr:`Outcome.statistic`).
- **p-value**, stratified by prompt: the two sides' labels are permuted *within* each prompt's answers (every prompt
  keeps its ``n`` and ``m``; each relabelling drawn uniformly, independently per prompt) with a seeded generator;
  Besag and Clifford's sequential p-value: draws stop once :data:`STOP_AFTER` permuted statistics reached the
  observed one (``p = STOP_AFTER / drawn``), else after ``permutations`` (``p = (1 + reached) / (permutations +
  1)``). Under the null — each prompt's answers are exchangeable between the sides — ``P(p ≤ α) ≤ α``, whatever
  the kernel.

Everything is vectorised: the prompts are grouped by (n, m); per group one ``(prompts, n + m, n + m)`` kernel array
(built in chunks of prompts) and, per batch of permutations, the labels drawn from a table of every n-subset (one
integer per prompt and draw) and one batched matrix product.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Characters of each answer's content the text kernel compares (position by position).
TEXT_CHARS = 100
#: The code point a shorter text is padded with (U+FFFF, a noncharacter: never sent as text).
PAD = 0xFFFF
#: The parts of the kernel, in the order of :attr:`Answers.labels` after the text (each weighs 1 / len(PARTS)).
PARTS: tuple[str, ...] = ("text", "decision", "tools", "calls", "finish", "length")
LABEL_PARTS: tuple[str, ...] = PARTS[1:-1]
#: Answers each side must give to one prompt for the prompt to enter the test (the unbiased estimate needs 2).
MIN_ANSWERS = 2
#: Label permutations of one test, at most: the smallest p-value is 1 / (PERMUTATIONS + 1). With STOP_AFTER 20 a
#: p-value below 0.05 needs more than 400 draws; 500 leave room and cost half of a thousand where vendors differ.
PERMUTATIONS = 500
#: The sequential p-value stops once this many permuted statistics reached the observed one.
STOP_AFTER = 20
#: Entries of the (prompts × slots × slots × characters) comparison built at once (memory bound per chunk).
_CHUNK_CELLS = 4_000_000
#: Permutations drawn per batch (memory: batch × prompts × slots floats).
_PERMUTATION_BATCH = 100
#: The largest table of label subsets kept (4 MB): above it a permutation is drawn by shuffling.
_SUBSET_TABLE = 1 << 20
#: The permuted labels built at once (prompts × draws × slots float32; see :func:`_labellings`).
_LABELS_BYTES = 16 << 20
#: The largest table of subsets kept unpacked as rows of 0 / 1 (one gather per draw instead of a bit unpacking).
_ROWS_BYTES = 16 << 20
#: A prompt whose MMD²_u varies less than this over its relabellings is constant (its answers alike): left out.
_CONSTANT = 1e-6
#: The kernel's resolution (its values are multiples of 1 / _QUANTUM).
_QUANTUM = 4096
#: Up to this many answers per prompt, sums of kernel entries stay below 2²⁴ quanta: exact in float32 (else float64).
_FLOAT32_SLOTS = 64


@dataclass(frozen=True)
class Answers:
    """Answers as arrays, one row per answer (both sides together; a boolean array elsewhere says which side)."""

    prompt: np.ndarray  # (A,) int64: the prompt's code (answers to one prompt share it)
    #: (A, TEXT_CHARS) uint16: the first UTF-16 code units (characters), padded with PAD; with ``text_code``, one
    #: row per code instead (row c is the text of code c: a run's answers share few texts, and a row per answer
    #: would be 200 bytes each)
    text: np.ndarray
    labels: np.ndarray  # (A, len(LABEL_PARTS)) int64: one code per label part (equal codes = equal parts)
    log_length: np.ndarray  # (A,) float64: ln(1 + characters of the content and the calls' arguments)
    #: (A,) int64: equal codes exactly for equal texts, each the row of ``text`` holding the answer's text (the
    #: kernel compares each pair of distinct texts once); None: ``text`` has a row per answer and the codes are
    #: worked out from it when needed (:func:`text_codes`).
    text_code: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.prompt)
        text_rows = n if self.text_code is None else int(self.text_code.max(initial=-1)) + 1
        if self.text.ndim != 2 or self.text.shape[1] != TEXT_CHARS or len(self.text) < text_rows \
                or (self.text_code is None and len(self.text) != n) or self.labels.shape != (n, len(LABEL_PARTS)) \
                or self.log_length.shape != (n,) or (self.text_code is not None and self.text_code.shape != (n,)):
            raise ValueError("Answers: every array needs one row per answer")

    def __len__(self) -> int:
        return len(self.prompt)

    def take(self, index: np.ndarray) -> Answers:
        """The answers at ``index`` (an integer or boolean index)."""
        if self.text_code is None:
            return Answers(self.prompt[index], self.text[index], self.labels[index], self.log_length[index])
        return Answers(self.prompt[index], self.text, self.labels[index], self.log_length[index],
                       self.text_code[index])

    def first_units(self) -> np.ndarray:
        """(A,) uint16: each answer's first text unit (:data:`PAD` without content)."""
        return self.text[:, 0] if self.text_code is None else self.text[self.text_code, 0]

    def text_codes(self) -> np.ndarray:
        """(A,) int64: ``text_code``, or one code per distinct ``text`` row (first appearance first) without it."""
        return self.text_code if self.text_code is not None else distinct_row_codes(self.text)


def distinct_row_codes(array: np.ndarray) -> np.ndarray:
    """(A,) int64: one code per distinct row of a 2-d array, in order of first appearance."""
    if not len(array):
        return np.zeros(0, dtype=np.int64)
    rows = np.ascontiguousarray(array).view(np.uint8).reshape(len(array), -1)
    return pd.factorize(pd.Series([row.tobytes() for row in rows], dtype=object))[0].astype(np.int64)


def _combined_codes(*columns: np.ndarray) -> np.ndarray:
    """(A,) int64: one code per distinct combination of the columns' values, in order of first appearance."""
    codes, _ = pd.factorize(columns[0])
    for values in columns[1:]:
        more, uniques = pd.factorize(values)
        codes, _ = pd.factorize(codes.astype(np.int64) * len(uniques) + more)  # < A²: one integer per pair
    return codes.astype(np.int64)


def encode_text(texts: Sequence[str], chars: int = TEXT_CHARS) -> np.ndarray:
    """(len(texts), chars) uint16: each text's first ``chars`` UTF-16 code units — its first characters, a character
    outside the Basic Multilingual Plane (an emoji) taking two — padded with :data:`PAD`."""
    if not len(texts):
        return np.zeros((0, chars), dtype=np.uint16)
    pad = chr(PAD)  # each text is encoded on its own: equal texts give equal rows, wherever they are
    joined = "".join(text[:chars].ljust(chars, pad) for text in texts).encode("utf-16-le")
    if len(joined) == 2 * chars * len(texts):  # every character one code unit: one encode for all of them
        return np.frombuffer(joined, dtype=np.uint16).reshape(len(texts), chars).copy()
    out = np.full((len(texts), chars), PAD, dtype=np.uint16)
    for i, text in enumerate(texts):
        units = np.frombuffer(text[:chars].encode("utf-16-le"), dtype=np.uint16)[:chars]
        out[i, :len(units)] = units
    return out


def answer_lengths(content_chars: object, argument_chars: object) -> np.ndarray:
    """The length part of each answer: ln(1 + characters of the content + characters of the calls' arguments)."""
    return np.log1p(np.asarray(content_chars, dtype=np.float64) + np.asarray(argument_chars, dtype=np.float64))


@dataclass(frozen=True)
class Outcome:
    """One test's result."""

    statistic: float  # mean over the tested prompts of MMD²_u (about 0 under the null; larger = further apart)
    p: float  # the stratified permutation p-value
    prompts: int  # prompts with ≥ MIN_ANSWERS answers on each side (the ones tested)
    answers: tuple[int, int]  # answers of the first and of the second side on those prompts
    permutations: int  # permuted statistics drawn (fewer than PERMUTATIONS when the sequential p-value stopped)


@dataclass(frozen=True)
class _Group:
    """The tested prompts with one (n, m): ``slots[p]`` = the indexes of prompt p's answers, its n first-side answers
    first."""

    slots: np.ndarray  # (P_g, n + m) int64
    n: int  # first-side answers per prompt
    m: int  # second-side answers per prompt


def side_counts(prompt: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompt codes, answers of the first side, of the second side) per distinct prompt."""
    codes, inverse = np.unique(prompt, return_inverse=True)
    inverse = inverse.reshape(-1)
    n_second = np.bincount(inverse, weights=second.astype(np.float64), minlength=len(codes)).astype(np.int64)
    total = np.bincount(inverse, minlength=len(codes)).astype(np.int64)
    return codes, total - n_second, n_second


def testable_prompts(prompt: np.ndarray, second: np.ndarray, least: int = MIN_ANSWERS) -> int:
    """Prompts with at least ``least`` answers on each side."""
    _, n, m = side_counts(prompt, second)
    return int(((n >= least) & (m >= least)).sum())


def _groups(prompt: np.ndarray, second: np.ndarray, least: int) -> list[_Group]:
    """The prompts with ≥ ``least`` answers on each side, grouped by (n, m) (dense arrays, no padding)."""
    codes, n, m = side_counts(prompt, second)
    kept = (n >= least) & (m >= least)
    index = np.flatnonzero(np.isin(prompt, codes[kept]))
    order = index[np.lexsort((second[index], prompt[index]))]  # by prompt, the first side first
    starts = np.flatnonzero(np.r_[True, prompt[order][1:] != prompt[order][:-1]]) if len(order) else order
    first, other = n[kept], m[kept]  # per kept prompt, in code order as ``starts`` has them
    groups: list[_Group] = []
    for n_g, m_g in sorted(set(zip(first.tolist(), other.tolist(), strict=True))):
        rows = np.flatnonzero((first == n_g) & (other == m_g))
        groups.append(_Group(order[starts[rows][:, None] + np.arange(n_g + m_g)[None, :]], n_g, m_g))
    return groups


def kernel(answers: Answers, slots: np.ndarray) -> np.ndarray:
    """(P, c, c) float32: ``k`` between the answers of each prompt (``slots``: (P, c) answer indexes; see the module
    docstring), 0 on the diagonal, rounded to a multiple of 1 / :data:`_QUANTUM`: every sum of its entries is then
    exact in float32 (c ≤ :data:`_FLOAT32_SLOTS`), so two labellings with the same sums tie exactly."""
    prompts, width = slots.shape
    out = np.zeros((prompts, width, width), dtype=np.float32)
    codes = answers.text_codes()
    texts = answers.text if answers.text_code is not None else answers.text[_first_rows(codes)]  # text per code
    step = max(1, _CHUNK_CELLS // max(1, width * width * TEXT_CHARS))
    for lo in range(0, prompts, step):
        at = slots[lo:lo + step]
        labels = answers.labels[at].astype(np.int32)  # (c, N, C): codes below 2³¹ (one per answer at most)
        length = answers.log_length[at]  # (c, N)
        total = _same_characters(codes[at], texts) / TEXT_CHARS
        total += (labels[:, :, None, :] == labels[:, None, :, :]).sum(axis=-1, dtype=np.uint8)
        total += np.exp(-np.abs(length[:, :, None] - length[:, None, :]))
        out[lo:lo + step] = np.round(total * (_QUANTUM / len(PARTS))) / _QUANTUM
    out[:, np.arange(width), np.arange(width)] = 0.0
    return out


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """Per code 0 … max, the position of its first row."""
    firsts = np.full(int(codes.max(initial=-1)) + 1, -1, dtype=np.int64)
    firsts[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # the last write per code is its first row
    return firsts


def _same_characters(codes: np.ndarray, texts: np.ndarray) -> np.ndarray:
    """(c, N, N) uint8: the positions holding the same character in each pair of the answers with text ``codes``
    (c, N) — counted once per distinct pair of texts (answers repeat: a cached answer, calls without content)."""
    low = np.minimum(codes[:, :, None], codes[:, None, :])
    high = np.maximum(codes[:, :, None], codes[:, None, :])
    pairs, pair_of = np.unique(low * len(texts) + high, return_inverse=True)
    same = (texts[pairs // len(texts)] == texts[pairs % len(texts)]).sum(axis=-1, dtype=np.uint8)
    return same[pair_of.reshape(low.shape)]


@functools.lru_cache(maxsize=64)
def _subsets(size: int, chosen: int) -> np.ndarray | None:
    """Every subset of ``chosen`` of ``size`` slots as a bit mask (uint32), or None when there are more than
    :data:`_SUBSET_TABLE` of them. Drawing one uniformly is drawing the labels of one uniform permutation."""
    if size > 31 or math.comb(size, chosen) > _SUBSET_TABLE:
        return None
    if chosen == 0:
        return np.zeros(1, dtype=np.uint32)
    if chosen == size:
        return np.array([(1 << size) - 1], dtype=np.uint32)
    without, with_last = _subsets(size - 1, chosen), _subsets(size - 1, chosen - 1)
    assert without is not None and with_last is not None
    return np.concatenate([without, with_last | np.uint32(1 << (size - 1))])


@functools.lru_cache(maxsize=8)
def _subset_rows(size: int, chosen: int) -> np.ndarray | None:
    """:func:`_subsets` as (subsets, size) float32 rows of 0 / 1, when that table is at most 16 MB."""
    table = _subsets(size, chosen)
    if table is None or len(table) * size * 4 > _ROWS_BYTES:
        return None
    return ((table[:, None] >> np.arange(size, dtype=np.uint32)) & 1).astype(np.float32)


def _labellings(group: _Group, draws: int, rng: np.random.Generator) -> Iterator[tuple[slice, np.ndarray]]:
    """(prompts, labellings) in chunks of the group's prompts: ``labellings`` (prompts, draws, n + m) float32, 1
    where a slot is on the first side, one uniform permutation of each prompt's labels per draw, independent across
    prompts and draws. The draws are made at once (the random stream does not depend on the chunks); the 0 / 1 rows
    are built a chunk at a time (at most :data:`_LABELS_BYTES`: 100 draws of 30,000 prompts would be 240 MB)."""
    width = group.n + group.m
    prompts = len(group.slots)
    table = _subsets(width, group.n)
    if table is None:
        out = np.empty((prompts, draws, width), dtype=np.float32)
        out[...] = np.arange(width) < group.n
        yield slice(0, prompts), rng.permuted(out, axis=-1, out=out)
        return
    picked = rng.integers(0, len(table), size=(prompts, draws))
    rows = _subset_rows(width, group.n)
    step = max(1, _LABELS_BYTES // max(1, draws * width * 4))
    for lo in range(0, prompts, step):
        at = slice(lo, min(prompts, lo + step))
        if rows is not None:
            yield at, np.take(rows, picked[at], axis=0)
        else:
            yield at, ((table[picked[at]][..., None] >> np.arange(width, dtype=np.uint32)) & 1).astype(np.float32)


def _mmd(k0: np.ndarray, row_sums: np.ndarray, total: np.ndarray, first: np.ndarray, n: int, m: int) -> np.ndarray:
    """(P_g, draws) MMD²_u of each prompt under each labelling: ``first`` (P_g, draws, c) = 1 on the first side."""
    if n + m > _FLOAT32_SLOTS:
        k0, row_sums, first = k0.astype(np.float64), row_sums.astype(np.float64), first.astype(np.float64)
    q = np.einsum("pdc,pdc->pd", np.matmul(first, k0), first).astype(np.float64)  # x' K0 x: within the first side
    r = np.einsum("pdc,pc->pd", first, row_sums).astype(np.float64)  # x' K0 1
    within_first = q / (n * (n - 1))
    within_second = (total[:, None] - 2 * r + q) / (m * (m - 1))
    across = (r - q) / (n * m)
    return within_first + within_second - 2 * across


def permutation_sd(k0: np.ndarray, n: int, m: int) -> np.ndarray:
    """(P,) the standard deviation of each prompt's MMD²_u over all its relabellings (exact: the moments of the
    quadratic form ``α x'K0x + β x'K0 1`` in a uniform subset indicator x of n out of c = n + m slots)."""
    c = n + m
    s, u, s2 = (np.empty(len(k0)) for _ in range(3))
    step = max(1, _LABELS_BYTES // max(1, c * c * 8))  # float64 copies a chunk of prompts at a time (peak RSS)
    for lo in range(0, len(k0), step):
        k = k0[lo:lo + step].astype(np.float64)
        w = k.sum(axis=-1)
        s[lo:lo + step], u[lo:lo + step], s2[lo:lo + step] = w.sum(axis=-1), (w ** 2).sum(axis=-1), \
            (k ** 2).sum(axis=(-1, -2))
    p1, p2 = n / c, n * (n - 1) / (c * (c - 1))
    p3 = n * (n - 1) * (n - 2) / (c * (c - 1) * (c - 2))
    p4 = n * (n - 1) * (n - 2) * (n - 3) / (c * (c - 1) * (c - 2) * (c - 3))
    var_q = 2 * s2 * p2 + (4 * u - 4 * s2) * p3 + (s * s - 4 * u + 2 * s2) * p4 - (p2 * s) ** 2
    var_r = p1 * u + p2 * (s * s - u) - (p1 * s) ** 2
    cov = 2 * u * p2 + (s * s - 2 * u) * p3 - p2 * s * p1 * s
    alpha = 1 / (n * (n - 1)) + 1 / (m * (m - 1)) + 2 / (n * m)  # MMD²_u = α q + β r + a constant
    beta = -2 / (m * (m - 1)) - 2 / (n * m)
    return np.sqrt(np.maximum(alpha * alpha * var_q + beta * beta * var_r + 2 * alpha * beta * cov, 0.0))


def two_sample_test(answers: Answers, second: np.ndarray, rng: np.random.Generator,
                    permutations: int = PERMUTATIONS, stop_after: int = STOP_AFTER,
                    least: int = MIN_ANSWERS) -> Outcome | None:
    """The stratified permutation test of "the first side's answers (``second`` false) and the second side's come
    from one distribution, prompt by prompt"; None when no prompt has ``least`` answers on each side. The
    p-value is Besag and Clifford's sequential one: permuted statistics are drawn until ``stop_after`` of them
    reach the observed one (p = stop_after / drawn) or ``permutations`` were drawn (p = (1 + reached) /
    (permutations + 1))."""
    second = np.asarray(second, dtype=bool)
    groups = _groups(answers.prompt, second, least)
    if not groups:
        return None
    prompts = sum(len(g.slots) for g in groups)
    parts = []
    observed = mean = scale = 0.0
    for g in groups:
        k0 = kernel(answers, g.slots)
        row_sums = k0.sum(axis=-1)
        total = row_sums.astype(np.float64).sum(axis=-1)
        sd = permutation_sd(k0, g.n, g.m)
        weight = np.where(sd > _CONSTANT, 1.0 / np.maximum(sd, _CONSTANT), 0.0)  # alike answers: a constant, left out
        parts.append((g, k0, row_sums, total, weight))
        template = np.broadcast_to((np.arange(g.n + g.m) < g.n).astype(np.float32), (len(g.slots), 1, g.n + g.m))
        own = _mmd(k0, row_sums, total, np.ascontiguousarray(template), g.n, g.m)[:, 0]
        observed += float(weight @ own)
        scale += float(np.abs(weight * own).sum())
        mean += float(own.sum())
    mean /= prompts
    # the sums are exact (see kernel); only the weighted sum over prompts rounds, far below any real difference
    tolerance = 1e-10 * (1.0 + scale)
    reached = drawn = 0
    while drawn < permutations:
        batch = min(_PERMUTATION_BATCH, permutations - drawn)
        stats = np.zeros(batch)
        for g, k0, row_sums, total, weight in parts:
            values = np.empty((len(g.slots), batch))
            for at, first in _labellings(g, batch, rng):  # each prompt's MMD²_u on its own: chunks change no bit
                values[at] = _mmd(k0[at], row_sums[at], total[at], first, g.n, g.m)
            stats += weight @ values
        hits = np.cumsum(stats >= observed - tolerance)
        if reached + hits[-1] >= stop_after:  # the stop_after-th reaches it in this batch: stop right there
            drawn += int(np.searchsorted(hits, stop_after - reached)) + 1
            return Outcome(mean, stop_after / drawn, prompts, _answer_counts(groups), drawn)
        reached += int(hits[-1])
        drawn += batch
    return Outcome(mean, (1 + reached) / (permutations + 1), prompts, _answer_counts(groups), drawn)


def _answer_counts(groups: Sequence[_Group]) -> tuple[int, int]:
    return sum(len(g.slots) * g.n for g in groups), sum(len(g.slots) * g.m for g in groups)


def halves(prompt: np.ndarray, order_key: np.ndarray) -> np.ndarray:
    """Per answer: whether it is in the later half of its prompt's answers, by ``order_key`` (the earlier
    ⌊count / 2⌋ answers of a prompt are the first half). The baseline against itself, split so, is the identity
    test's noise floor."""
    if not len(prompt):
        return np.zeros(0, dtype=bool)
    order = np.lexsort((order_key, prompt))
    sorted_prompt = prompt[order]
    _, starts, sizes = np.unique(sorted_prompt, return_index=True, return_counts=True)
    rank = np.arange(len(order)) - np.repeat(starts, sizes)
    later = np.empty(len(order), dtype=bool)
    later[order] = rank >= np.repeat(sizes // 2, sizes)
    return later


def answer_codes(answers: Answers) -> np.ndarray:
    """(A,) int64: one code per answer, equal exactly for answers alike in every part the kernel compares (their
    text units, labels and length as bytes, factorized)."""
    if not len(answers):
        return np.zeros(0, dtype=np.int64)
    return _combined_codes(answers.text_codes(), *answers.labels.astype(np.int64).T,
                           np.round(answers.log_length * 1e6).astype(np.int64))


def alike_share(prompt: np.ndarray, codes: np.ndarray) -> tuple[float, int]:
    """(share of prompts with ≥ 2 answers whose answers all have one code (:func:`answer_codes`), those prompts):
    near 1 at a temperature above 0 means cached or greedy answers."""
    if not len(prompt):
        return float("nan"), 0
    _, inverse, count = np.unique(prompt, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    first = np.zeros(len(count), dtype=np.int64)
    first[inverse[::-1]] = codes[::-1]  # one answer's code per prompt (the first, written last)
    differ = np.bincount(inverse, weights=(codes != first[inverse]), minlength=len(count))
    several = count >= 2
    if not several.any():
        return float("nan"), 0
    return float((differ[several] == 0).mean()), int(several.sum())


__all__ = ["LABEL_PARTS", "MIN_ANSWERS", "PAD", "PARTS", "PERMUTATIONS", "STOP_AFTER", "TEXT_CHARS", "Answers",
           "Outcome", "alike_share", "answer_codes", "answer_lengths", "distinct_row_codes", "encode_text", "halves",
           "kernel", "permutation_sd", "side_counts", "testable_prompts", "two_sample_test"]
