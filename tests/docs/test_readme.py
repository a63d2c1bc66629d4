import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_carries_the_tested_add_a_task_example_verbatim():
    example = python_blocks((ROOT / "environments" / "EXAMPLE.md").read_text())
    assert len(example) == 1
    assert example[0] in python_blocks((ROOT / "README.md").read_text())


def test_readme_quick_start_is_the_two_make_commands():
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("##", 1)[0]
    assert "make demo" in quick_start and "make test" in quick_start
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test:", makefile, flags=re.M) and re.search(r"^demo:", makefile, flags=re.M)


def test_readme_config_example_loads_and_its_schedule_fits_the_env(tmp_path):
    from sao_online.config import load_config
    from sao_online.config.run_schedule import resolve_schedule

    readme = (ROOT / "README.md").read_text()
    block = re.search(
        r"## Configuring an experiment.*?```yaml\n(.*?)```", readme, flags=re.S
    ).group(1)
    path = tmp_path / "my.yaml"
    path.write_text(block)
    config = load_config(path)
    assert resolve_schedule(config).change_points(until=config.budget.episodes) == [1500.0]


def readme_section(title: str) -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400


# Traces of how the project was made, which belong to git, not to user-facing text.
HISTORY = re.compile(
    r"[Ii]ssue \d+|\b20\d\d-\d\d-\d\d\b|this round|tried and dropped"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"
)


def test_readme_and_docs_carry_no_history():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {match.group(0)}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
        for match in HISTORY.finditer(line)
    ]
    assert not found, "issue numbers, dates or commit hashes in user-facing text:\n" + "\n".join(
        found
    )


def test_the_code_map_names_every_module_and_package():
    code_map = readme_section("Code map")
    named = set(re.findall(r"`([\w./]+)`", code_map))
    # A row names files of one folder after the first: `sao_online/advantages.py`, `losses.py`.
    names = {Path(name).name for name in named} | {name.rstrip("/") for name in named}
    package = ROOT / "sao_online"
    expected = [path.name for path in package.glob("*.py") if path.name != "__init__.py"]
    expected += [
        f"sao_online/{path.name}" for path in package.iterdir() if (path / "__init__.py").exists()
    ]
    expected += ["environments", "drift_schedules", "analysis", "configs", "tests", "docs"]
    missing = [name for name in expected if name not in names]
    assert not missing, f"the README's code map does not name {missing}"
    stale = [name for name in named if "/" in name and not (ROOT / name).exists()]
    assert not stale, f"the README's code map names what does not exist: {stale}"


def test_readme_links_point_at_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", readme)
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_readme_own_method_example_is_the_benchmark_pages():
    [ours] = python_blocks(readme_section("Benchmark your own method"))
    page = (ROOT / "docs" / "guides" / "benchmarking.md").read_text()
    section = page.split("## Benchmark your own method\n", 1)[1].split("\n## ", 1)[0]
    assert ours == python_blocks(section)[0]
