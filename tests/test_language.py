"""Language following: the script detector per script, the spec forms, MiniMax's rule, sample validation and the
``language_following_rate`` metric (pure; no model, no sockets)."""

from __future__ import annotations

import json
import math

import pytest

from avv_core.errors import InputError
from avv_core.language import (
    MINIMAX_NO_CYRILLIC,
    SCRIPT_SHARE_MIN,
    check_language,
    dominant_script,
    language_of_text,
    parse_check,
    sample_language_check,
    script_of,
)
from avv_core.samples import load_samples
from avv_scoring.metrics.verifiers import language_following_rate
from avv_scoring.testing import records_frame

# One natural sentence per script: (script, ISO 639-1 code, text).
SENTENCES = [
    ("Latin", "en", "The weather in Paris is sunny today."),
    ("Cyrillic", "ru", "Сегодня в Москве солнечная погода."),
    ("Greek", "el", "Ο καιρός στην Αθήνα είναι ηλιόλουστος."),
    ("Hebrew", "he", "מזג האוויר בתל אביב שמשי היום."),
    ("Arabic", "ar", "الطقس في القاهرة مشمس اليوم."),
    ("Devanagari", "hi", "आज दिल्ली में मौसम धूप वाला है।"),
    ("Thai", "th", "วันนี้อากาศที่กรุงเทพแดดจัด"),
    ("Hangul", "ko", "오늘 서울 날씨는 맑습니다."),
    ("Han", "zh", "今天北京的天气很晴朗。"),
    ("Armenian", "hy", "Այսօր Երևանում արևոտ է։"),
    ("Georgian", "ka", "დღეს თბილისში მზიანი ამინდია."),
    ("Bengali", "bn", "আজ ঢাকায় রোদ ঝলমলে আবহাওয়া।"),
    ("Tamil", "ta", "இன்று சென்னையில் வெயில் அதிகம்."),
]
JAPANESE = "今日の東京はとても晴れています。カレーを食べました。"


@pytest.mark.parametrize("script, code, text", SENTENCES, ids=[s for s, _, _ in SENTENCES])
def test_each_script_is_detected_and_follows_its_language_and_script_name(script, code, text):
    assert dominant_script(text) == script
    assert check_language(text, code).valid and check_language(text, code).share == 1.0
    assert check_language(text, script).valid and check_language(text, script.lower()).valid
    other = "Latin" if script != "Latin" else "Cyrillic"
    verdict = check_language(text, other)
    assert not verdict.valid and verdict.share == 0.0


def test_japanese_is_han_plus_kana_and_each_kana_has_its_script():
    assert script_of("あ") == "Hiragana" and script_of("カ") == "Katakana" and script_of("東") == "Han"
    assert script_of("ー") == "Katakana" and script_of("々") == "Han" and script_of("é") == "Latin"
    assert language_of_text(JAPANESE) == "ja" and language_of_text("今天天气很好") == "zh"
    assert language_of_text("오늘 날씨") == "ko" and language_of_text("Погода") == "Cyrillic"
    assert language_of_text("12 + 30 = 42 !") is None
    assert check_language(JAPANESE, "ja").valid and not check_language(JAPANESE, "zh").valid  # kana are not zh


def test_share_threshold_code_and_no_letters():
    assert SCRIPT_SHARE_MIN == 0.5
    # 6 Cyrillic letters of 12: exactly the threshold passes; one letter fewer fails
    assert check_language("абвгде abcdef", "ru").share == 0.5 and check_language("абвгде abcdef", "ru").valid
    assert not check_language("абвгд abcdef", "ru").valid
    # code is in no language: a Russian answer with an English code block still follows Russian
    answer = "Вот решение:\n```python\nfor item in items:\n    print(item)\n```\nИспользуйте `sorted()` здесь."
    assert check_language(answer, "ru").valid and check_language(answer, "ru").share == 1.0
    verdict = check_language("42 / 7 = 6", "ja")
    assert not verdict.valid and verdict.letters == 0 and verdict.share is None


def test_minimax_rule_is_reproduced_exactly():
    # MiniMax's not_contains_russian_characters_unicode: valid iff no code point in U+0400..U+04FF
    assert check_language(JAPANESE, MINIMAX_NO_CYRILLIC).valid
    assert not check_language(JAPANESE + "Привет", MINIMAX_NO_CYRILLIC).valid
    assert not check_language("ӿ", MINIMAX_NO_CYRILLIC).valid  # U+04FF, the last code point of its range
    assert check_language("ԁ", MINIMAX_NO_CYRILLIC).valid  # U+0501: Cyrillic Supplement, outside MiniMax's range
    assert check_language("English only", MINIMAX_NO_CYRILLIC).valid  # its rule checks only for Russian
    assert check_language("   ", MINIMAX_NO_CYRILLIC).valid
    # the special case inside the general check: a Japanese prompt answered in Russian fails both
    assert not check_language("Сегодня солнечно", "ja").valid


def test_spec_forms_and_errors():
    assert parse_check("JA").spec == "ja" and parse_check("pt-BR").spec == "pt" and parse_check("zh_CN").spec == "zh"
    assert parse_check("cyrillic").spec == "Cyrillic" and parse_check("Minimax:No-Cyrillic").minimax_rule
    for bad in ("klingon", "", "xx", 3):
        with pytest.raises(ValueError):
            parse_check(bad)


def test_sample_language_check_from_metadata_and_prompt():
    body = {"messages": [{"role": "system", "content": "You are helpful."},
                         {"role": "user", "content": [{"type": "text", "text": "富士山の高さは？"}]}]}
    assert sample_language_check({}, body) is None
    assert sample_language_check({"check_type": "language_following"}, body) == "ja"
    assert sample_language_check({"check_type": ["contains_russian_characters_unicode"]}, body) == MINIMAX_NO_CYRILLIC
    assert sample_language_check({"expected_language": "Hiragana", "check_type": "language_following"},
                                 body) == "Hiragana"
    assert sample_language_check({"check_type": ["tool_calls"]}, body) is None  # other MiniMax checks: no language
    with pytest.raises(ValueError, match="no letter"):
        sample_language_check({"check_type": "language_following"}, {"messages": [{"role": "user", "content": "42"}]})
    with pytest.raises(ValueError, match="check_type"):
        sample_language_check({"check_type": 7}, body)


def test_sample_file_keeps_the_checks_out_of_the_body_and_names_bad_lines(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in [
        {"messages": [{"role": "user", "content": "Сколько стоит билет?"}], "check_type": "language_following"},
        {"messages": [{"role": "user", "content": "日本ではどのような時にお年玉を渡しますか？"}],
         "check_type": ["contains_russian_characters_unicode"]},
        {"messages": [{"role": "user", "content": "Hi"}], "expected_language": "el"},
    ]) + "\n", encoding="utf-8")
    samples = load_samples(good).samples
    assert [s.language_check for s in samples] == ["Cyrillic", MINIMAX_NO_CYRILLIC, "el"]
    assert all("check_type" not in s.body and "expected_language" not in s.body for s in samples)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}], "expected_language": "klingon"})
                   + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:1: expected_language 'klingon'"):
        load_samples(bad)


def test_language_following_rate_counts_checked_successes_only():
    rows = records_frame([
        {"sample_id": "1", "expected_language": "ru", "content": "Сегодня солнечно."},  # valid
        {"sample_id": "2", "expected_language": "ru", "content": "It is sunny."},  # checked, not valid
        {"sample_id": "3", "expected_language": "ru", "status": "failed"},  # failed: not checked
        {"sample_id": "4", "expected_language": "ru", "content": "", "finish_reason": "tool_calls"},  # no content
        {"sample_id": "5", "content": "Anything"},  # no language check
        {"sample_id": "6", "expected_language": MINIMAX_NO_CYRILLIC, "content": "晴れです"},  # valid
    ])
    assert language_following_rate(rows) == {"language_following_rate": 2 / 3, "language_following_checked": 3,
                                             "language_following_valid": 2}
    none = language_following_rate(records_frame([{"sample_id": "1", "content": "x"}]))
    assert math.isnan(none["language_following_rate"]) and none["language_following_checked"] == 0
