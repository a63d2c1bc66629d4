import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    from sao_online.runtime.envs import resolve_schedule

    readme = (ROOT / "README.md").read_text()
    block = re.search(
        r"## Configuring an experiment.*?```yaml\n(.*?)```", readme, flags=re.S
    ).group(1)
    path = tmp_path / "my.yaml"
    path.write_text(block)
    config = load_config(path)
    assert resolve_schedule(config).change_points(until=config.budget.episodes) == [1500.0]
