"""docs/calibration.md's record and benchmarks/calibration/README.md: both generated from
probes.yaml and the kept folders, every folder indexed once, and each status true of its data."""

from __future__ import annotations

import pytest
from docs_scripts import docs_script


@pytest.fixture(scope="module")
def record():
    return docs_script("data/calibration_record/table")


def test_the_page_table_and_the_index_are_generated_from_the_record_and_the_data(record):
    page = record.PAGE.read_text()
    updated, index = record.render(page, record.load_record())
    assert updated == page, "run docs/data/calibration_record/table.py"
    assert record.INDEX.read_text() == index, "run docs/data/calibration_record/table.py"


def test_every_kept_calibration_folder_is_in_the_record_once(record):
    kept = sorted(path.parent.parent.name for path in record.CALIBRATION.glob("*/results/runs.csv"))
    named = [entry["folder"] for entry in record.load_record()]
    assert sorted(named) == kept
    assert len(set(named)) == len(named)


def test_each_status_is_what_the_folders_runs_are(record):
    kept = record.lite_runs()
    for entry in record.load_record():
        tasks, all_kept = record.kept_tasks(record.CALIBRATION / entry["folder"], kept)
        if entry["status"] == "canonical":
            assert all_kept, f"{entry['folder']}: canonical, but not every run is a kept result"
        elif entry["status"] == "probe":
            assert not tasks, f"{entry['folder']}: a probe, but {tasks} runs are kept results"
        else:  # superseded: the tier's own tasks, not all of them kept
            assert not all_kept, f"{entry['folder']}: every run is kept: canonical, not superseded"
            assert set(entry["tasks"]) <= set(record.FAMILIES), entry["folder"]


def test_every_folder_is_told_in_a_section_of_the_calibration_page(record):
    for entry in record.load_record():
        pages = {page for page, _ in record.sections_using(entry["folder"])}
        assert record.PAGE in pages, entry["folder"]


def test_a_folder_is_found_by_its_whole_name_and_not_inside_a_code_block(record, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Top\n\n## Probe A\n\n`benchmarks/calibration/name-longer` ran.\n\n"
        "```bash\n# not a heading\n"
        "sao-online benchmark --suite benchmarks/calibration/name/suite.yaml\n"
        "```\n\n## Probe B's run, again\n\nSee `calibration/name`.\n"
    )
    assert record.sections_using("name", (page,)) == [
        (page, "Probe A"),  # the command in the code block, under the last heading
        (page, "Probe B's run, again"),
    ]
    assert record.sections_using("name-longer", (page,)) == [(page, "Probe A")]


def test_anchors_are_the_ones_mkdocs_gives(record):
    assert record.slug("The lite tier's results") == "the-lite-tiers-results"
    assert record.slug("CodeShift at twice the learning rate") == (
        "codeshift-at-twice-the-learning-rate"
    )
    assert record.slug("ReasonShift leaning less, with cheaper retries") == (
        "reasonshift-leaning-less-with-cheaper-retries"
    )


def test_a_task_of_no_family_and_an_unknown_status_are_named(record, tmp_path):
    with pytest.raises(SystemExit, match="'MazeShift'"):
        record.family_of("MazeShift")
    probes = tmp_path / "probes.yaml"
    probes.write_text("- {folder: x, status: kept, tried: y, tasks: {A: b}}\n")
    with pytest.raises(SystemExit, match="x: status 'kept' is none of canonical"):
        record.load_record(probes)
    probes.write_text("- {folder: x, status: probe}\n")
    with pytest.raises(SystemExit, match="x: no tasks, tried"):
        record.load_record(probes)
