"""Short ids tell episodes apart: a label never shows only a prefix that every episode of a run shares."""

from __future__ import annotations

from ares_viewer.model import render

RUN = ["runs/2026-11-01/deepseek-v3/trajs/astropy__astropy-12907",
       "runs/2026-11-01/deepseek-v3/trajs/django__django-11099",
       "runs/2026-11-01/qwen3/trajs/astropy__astropy-12907"]


def test_path_ids_keep_their_distinguishing_end_not_their_shared_start():
    shown = [render.short_id(i, RUN) for i in RUN]
    assert len(set(shown)) == len(RUN)  # before: "deepseek", "deepseek", "qwen3/t" or "trajs/as"
    assert shown[0].endswith("deepseek-v3/trajs/astropy__astropy-12907")
    assert shown[2].endswith("qwen3/trajs/astropy__astropy-12907")
    assert all("astropy__astropy-12907" in s or "django__django-11099" in s for s in shown)


def test_uuids_are_cut_to_eight_characters_and_short_ids_stay_whole():
    assert render.short_id("0b17f852-8687-4e04-a8c5-e078baf6b285") == "0b17f852"
    assert render.short_id("math-rl/it0/train/g0/t3") == "math-rl/it0/train/g0/t3"
    assert render.short_id("astropy__astropy-12907") == "astropy__astropy-12907"
    assert render.short_id("x" * 60) == "…" + "x" * 39
