"""The house rules a newcomer relies on: no import cycles among the project's own modules, no source
file over 450 lines (tests and benchmarks aside), a thin studio/app.py and a README that is a guide."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "studio", "cli")
MAX_LINES = 450


def project_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the project's packages and train_cli.py."""
    modules = {"train_cli": ROOT / "train_cli.py", "app": ROOT / "app.py"}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules that `name` imports anywhere in its file (function-local imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return groups


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    # A package's __init__ importing its own submodules is not a cycle a reader meets.
    return {name: {t for t in targets if not name.startswith(f"{t}.")} for name, targets in graph.items()}


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_source_file_is_too_long():
    long = {str(path.relative_to(ROOT)): n for path in project_modules().values()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
    assert len((ROOT / "studio" / "app.py").read_text(encoding="utf-8").splitlines()) <= 300


def test_the_readme_is_a_guide_not_a_log():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def requirement_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_requirements_txt_installs_what_pyproject_declares():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["test"]
    assert requirement_lines((ROOT / "requirements.txt").read_text(encoding="utf-8")) == declared


def test_studio_saves_are_ignored_by_git_and_shipped_checkpoints_are_not():
    import shutil
    import subprocess

    from studio.registry import CHECKPOINTS

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        import pytest
        pytest.skip("not a git checkout")

    def ignored(path: Path) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=ROOT).returncode == 0

    assert ignored(CHECKPOINTS / "live-numbers-step300" / "model.safetensors")  # where TrainingJob.save writes
    assert not any(ignored(folder / "config.json") for folder in CHECKPOINTS.iterdir() if folder.is_dir()
                   if (folder / "config.json").exists() and not ignored(folder))
    assert not ignored(CHECKPOINTS / "multi30k-de-en-small" / "model.safetensors")
