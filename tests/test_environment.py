"""environment.yml (conda) and pyproject.toml (pip) must list the same packages."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def pyproject_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return set(project["dependencies"]) | set(extras["cpu"]) | set(extras["dev"])


def environment_requirements() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {r for r in pip if not r.startswith("-e")}


def test_both_files_list_the_same_packages_and_versions():
    assert environment_requirements() == pyproject_requirements()


def test_torch_and_tensorflow_are_pinned():
    reqs = pyproject_requirements()
    assert "torch==2.13.0" in reqs and "tensorflow-cpu==2.21.0" in reqs
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["gpu"] == ["tensorflow[and-cuda]==2.21.0"]


def test_every_package_says_which_lab_needs_it():
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if re.match(r"\s{6}- [A-Za-z]", line):  # the pip requirements
            assert re.search(r"#\s*(labs? \d\d|tests:)", line), f"no comment naming a lab: {line.strip()}"
