"""IRF: tie rule, missing values, the eight tables published by Agent Vendor Verifier, `avv-score irf`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from avv_scoring import irf_scores
from avv_scoring.cli import main
from avv_scoring.metrics.irf import IRF_TABLE_COLUMNS

SEED = Path(__file__).parents[2] / "shared" / "seeds" / "000_71645598ff568167.txt"
# The published tables' column order (differs from the irf input table's).
PUBLISHED_COLUMNS = (
    "vendor",
    "irf",
    "success_rate",
    "f1",
    "tps",
    "schema_accuracy",
    "avg_ttft_ms",
    "avg_tokens",
)


def published_tables(text: str) -> dict[str, pd.DataFrame]:
    """The per-model tables: a model-name line, then `| Vendor | IRF Score | ...`, `|---|...`, rows."""
    lines = text.splitlines()
    tables: dict[str, pd.DataFrame] = {}
    for i, line in enumerate(lines):
        if not line.startswith("| Vendor | IRF Score |"):
            continue
        rows = []
        for row in lines[i + 2 :]:
            if not row.startswith("|") or row.startswith("|---"):
                break
            rows.append([cell.strip() for cell in row.strip().strip("|").split("|")])
        table = pd.DataFrame(rows, columns=list(PUBLISHED_COLUMNS))
        for col in PUBLISHED_COLUMNS[1:]:
            table[col] = table[col].astype(float)
        table.insert(0, "model", lines[i - 1].strip())
        tables[lines[i - 1].strip()] = table
    return tables


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    if not SEED.is_file():
        pytest.skip(f"reference tables not available: {SEED} does not exist")
    return published_tables(SEED.read_text(encoding="utf-8"))


def test_all_eight_published_tables(tables):
    assert sorted(tables) == sorted(
        [
            "claude-haiku-4.5",
            "claude-opus-4.5",
            "claude-sonnet-4.5",
            "deepseek-v3.2",
            "gemini-2.5-flash",
            "glm-4.7",
            "kimi-k2",
            "minimax-m2",
        ]
    )
    for model, table in tables.items():
        got = irf_scores(table.drop(columns="irf")).round(4)
        assert got.tolist() == table["irf"].tolist(), model


def test_published_tables_scored_together_rank_per_model(tables):
    everything = pd.concat(tables.values(), ignore_index=True)
    got = irf_scores(everything.drop(columns="irf")).round(4)
    assert got.tolist() == everything["irf"].tolist()


def test_ties_share_the_average_rank():
    table = pd.DataFrame({"model": "m", "vendor": ["a", "b", "c"], "success_rate": [1.0, 1.0, 0.5]})
    # a, b tie for ranks 1–2 → 1.5 each; c is 3rd.
    assert irf_scores(table).tolist() == pytest.approx([1 / 6.5, 1 / 6.5, 1 / 8])


def test_directions():
    table = pd.DataFrame(
        {
            "vendor": ["a", "b"],
            "f1": [0.9, 0.8],
            "success_rate": [0.9, 0.8],
            "schema_accuracy": [0.9, 0.8],
            "tps": [90, 80],
            "avg_tokens": [900, 800],
            "avg_ttft_ms": [900, 800],
        }
    )
    assert irf_scores(table).tolist() == pytest.approx([4 / 6 + 2 / 7, 4 / 7 + 2 / 6])


def test_missing_values_contribute_nothing_so_a_dead_vendor_ranks_last():
    nan = float("nan")
    table = pd.DataFrame(
        {
            "model": "m",
            "vendor": ["good", "slow", "dead"],
            "success_rate": [1.0, 0.5, 0.0],
            "f1": [1.0, 0.2, nan],
            "schema_accuracy": [1.0, 0.1, nan],
            "avg_tokens": [nan, 5000, nan],  # good reported no usage: no contribution, not the best rank
            "avg_ttft_ms": [100, 9000, nan],
            "tps": [100, 1, nan],
        }
    )
    irf = irf_scores(table)
    assert irf[0] == pytest.approx(5 / 6)
    assert irf[1] == pytest.approx(1 / 7 * 5 + 1 / 6)
    assert irf[2] == pytest.approx(1 / 8)
    assert irf.idxmin() == 2
    assert math.isclose(irf_scores(table.iloc[[2]])[2], 1 / 6)  # alone it is first on its one metric


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_cli_irf_adds_a_column(tmp_path, capsys):
    header = ",".join(IRF_TABLE_COLUMNS)
    src = _write(
        tmp_path / "t.csv",
        "\n".join(
            [
                header,
                "m,a,1,1,0.9,100,50,10",
                "m,b,0.5,,0.8,,60,20",
                "n,c,1,1,1,1,1,1",
            ]
        )
        + "\n",
    )
    assert main(["irf", src]) == 0
    out = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out), dtype=str, keep_default_na=False)
    assert list(out.columns) == [*IRF_TABLE_COLUMNS, "irf"]
    assert out["f1"].tolist() == ["1", "", "1"]  # input cells are kept as given
    a = 5 / 6 + 1 / 7  # first everywhere but TPS
    b = 3 / 7 + 1 / 6  # success, schema, TTFT 2nd; TPS 1st; F1 and tokens missing
    assert out["irf"].tolist() == [f"{a:.4f}", f"{b:.4f}", f"{1.0:.4f}"]


def test_cli_irf_bad_input_exits_2(tmp_path, capsys):
    header = ",".join(IRF_TABLE_COLUMNS)
    bad_number = _write(tmp_path / "bad.csv", header + "\nm,a,1,x,1,1,1,1\n")
    assert main(["irf", bad_number]) == 2
    err = capsys.readouterr().err
    assert "bad.csv:2" in err and "'f1'" in err and "Traceback" not in err
    missing_col = _write(tmp_path / "cols.csv", "model,vendor,f1\nm,a,1\n")
    assert main(["irf", missing_col]) == 2
    assert "missing column(s) success_rate" in capsys.readouterr().err
    assert main(["irf", str(tmp_path / "nope.csv")]) == 2
    assert "nope.csv" in capsys.readouterr().err
