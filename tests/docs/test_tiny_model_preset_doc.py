"""docs/tiny_model_preset.md: its table is the one generated from the kept runs, and the
preset in the code is the setting those runs show re-adapting."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from docs_scripts import docs_script

from sao_online.config.model_presets import MODEL_PRESETS

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "tiny_model_preset"


def table_module():
    return docs_script("data/tiny_model_preset/table")


def test_the_page_table_is_generated_from_the_kept_runs():
    table = table_module()
    runs = pd.read_csv(DATA / "runs.csv")
    page = table.PAGE.read_text()
    assert table.render(page, runs) == page, "run docs/data/tiny_model_preset/table.py"
    assert table.summary_table(runs) in page


def test_the_preset_is_the_setting_with_which_every_run_re_adapted():
    runs = pd.read_csv(DATA / "runs.csv")
    [preset] = [setting for setting in runs["setting"].unique() if "(preset)" in setting]
    kl = float(re.search(r"kl ([\d.]+)", preset).group(1))
    assert MODEL_PRESETS["tiny"]["regularizers.kl_coef"] == kl
    chosen = runs[runs["setting"] == preset]
    assert set(chosen["method"]) == {"sao", "grpo"} and len(chosen) == 6
    assert chosen["reached_half_oracle"].all()
    paper = runs[runs["setting"].str.startswith("kl 0 ")]
    assert len(paper) == 6 and not paper["reached_half_oracle"].any()


def test_what_the_page_and_the_readme_say_about_kl_0_3_is_what_the_runs_show():
    runs = pd.read_csv(DATA / "runs.csv")
    demo = runs[runs["setting"] == "kl 0.3 (demo)"].groupby("method")["reached_half_oracle"]
    assert demo.sum().to_dict() == {"grpo": 1, "sao": 3}  # "GRPO in one seed of three"
    paper = runs[runs["setting"] == "kl 0 (paper)"]
    collapsed = paper[paper["phase1_end_no_colour_share"] > 0.5]
    assert list(zip(collapsed["method"], collapsed["seed"])) == [("sao", 2)]
