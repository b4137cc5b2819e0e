"""The house rules a newcomer relies on: no import cycles among the project's own modules; core/ in the paper's
parts with imports running one way (model <- data <- inference <- training, explain beside them; nothing in core
imports a UI); studio/ in rooms (its page kit alone at its top, no cycle among its modules, tests/studio in the same
rooms) and every studio module in docs/studio-modules.md with who uses it; a thin studio/app.py and a README that is
a guide. Long files are split where an idea ends, not at a line count: no cap here."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "studio", "cli")
# What each part of core/ may import of the others (issue 50): the model of section 3 stands alone; data reads
# text into the model's ids; inference decodes; training trains and evaluates (decoding to score); explain opens
# a trained model up, and scores what a part knocked out changes as training evaluates (BLEU, chrF: issue 62).
# "top" is what joins them (core/bundle.py, core/checkpoint/); "export" writes for other engines.
# core/__init__.py, the public API, imports them all.
CORE_PARTS = ("model", "data", "inference", "training", "explain")
MAY_IMPORT = {
    "model": set(),
    "data": {"model"},
    "inference": {"model", "data", "top"},
    "training": {"model", "data", "inference", "top"},
    "explain": {"model", "data", "inference", "training", "top"},
    "top": {"model", "data"},
    "export": {"model", "data", "inference", "top"},
}
UI_PACKAGES = ("studio", "cli", "gradio", "plotly", "bertviz")
MAX_TOP_MODULES = 6  # directly in core/: __init__, bundle, checkpoint, ...
MAX_STUDIO_TOP_MODULES = 6  # directly in studio/: __init__, __main__, app, shell and the page kit
STUDIO_GUIDE = ROOT / "docs" / "studio-modules.md"


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


def core_part(module: str) -> str | None:
    """The part of core/ a module belongs to (None outside core and for core/__init__.py, the public API)."""
    parts = module.split(".")
    if parts[0] != "core" or len(parts) == 1:
        return None
    return parts[1] if parts[1] in (*CORE_PARTS, "export") else "top"


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one part of core/ into another that MAY_IMPORT does not allow, as "a imports b"."""
    return sorted(f"{name} imports {target}" for name, targets in graph.items() for target in targets
                  if core_part(name) and core_part(target) and core_part(name) != core_part(target)
                  and core_part(target) not in MAY_IMPORT[core_part(name)])


def part_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen from above: which part of core/ imports which."""
    parts: dict[str, set[str]] = {part: set() for part in MAY_IMPORT}
    for name, targets in graph.items():
        for target in targets:
            if core_part(name) and core_part(target) and core_part(name) != core_part(target):
                parts[core_part(name)].add(core_part(target))
    return parts


def test_core_is_in_the_papers_parts_and_imports_run_one_way():
    for part in CORE_PARTS:
        assert (ROOT / "core" / part / "__init__.py").is_file(), f"core/{part}/ is missing"
    top = [p.name for p in (ROOT / "core").glob("*.py")]
    assert len(top) <= MAX_TOP_MODULES, top
    assert wrong_way(import_graph()) == []
    assert cycles(part_graph(import_graph())) == []


def test_the_layering_rules_catch_a_wrong_way_import_and_a_cycle_of_parts():
    graph = {"core.data.batching": {"core.training.loss", "core.model.config"}, "core.training.loss": {"core.data.x"},
             "core.model.config": set(), "core": {"core.training.loss"}}  # the public API may import anything
    assert wrong_way(graph) == ["core.data.batching imports core.training.loss"]
    assert cycles(part_graph(graph)) == [["data", "training"]]


def test_nothing_in_core_imports_a_user_interface():
    found = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in UI_PACKAGES]
    assert found == []


def test_the_studio_app_stays_thin():
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

    from studio.server.registry import CHECKPOINTS

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        import pytest
        pytest.skip("not a git checkout")

    def ignored(path: Path) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=ROOT).returncode == 0

    assert ignored(CHECKPOINTS / "live-numbers-step300" / "model.safetensors")  # where TrainingJob.save writes
    assert not any(ignored(folder / "config.json") for folder in CHECKPOINTS.iterdir() if folder.is_dir()
                   if (folder / "config.json").exists() and not ignored(folder))
    shipped = CHECKPOINTS / "multi30k-de-en-small"
    assert not any(ignored(p) for p in shipped.iterdir()) and (shipped / "model.safetensors.index.json").exists()


def test_the_library_guide_names_every_module_of_core():
    guide = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    missing = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "core").rglob("*.py"))
               if path.name != "__init__.py" and f"`{path.name}`" not in guide]
    assert missing == []


def test_the_studio_is_in_rooms_with_only_its_page_kit_at_the_top():
    top = sorted(p.name for p in (ROOT / "studio").glob("*.py"))
    assert len(top) <= MAX_STUDIO_TOP_MODULES, top
    graph = import_graph()
    studio = {name: {t for t in targets if t.split(".")[0] == "studio"} for name, targets in graph.items()
              if name.split(".")[0] == "studio"}
    assert cycles(studio) == []


def test_the_studios_tests_are_in_its_rooms():
    """Each folder of tests/studio is a folder of studio/ (browser/ aside: the whole page in headless Chromium)."""
    rooms = {p.name for p in (ROOT / "studio").iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in (ROOT / "tests" / "studio").iterdir() if (p / "__init__.py").is_file()}
    assert sorted(folders - rooms - {"browser"}) == []


def studio_guide() -> dict[str, str]:
    """docs/studio-modules.md's rows: each module's path from the repository root -> its "Used by" cell. A section's
    heading names its folder (its first `studio/...` in backquotes); a row names a module in that folder."""
    rows, folder = {}, None
    for line in STUDIO_GUIDE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            folder = re.search(r"`(studio/[^`]*)`", line).group(1)
        elif folder and line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows[folder + cells[0].strip("`")] = cells[-1]
    return rows


def test_the_studio_guide_names_every_module_of_the_studio():
    listed = set(studio_guide())
    present = {str(p.relative_to(ROOT)) for p in (ROOT / "studio").rglob("*.py") if p.name != "__init__.py"}
    assert {"not listed": sorted(present - listed), "listed but gone": sorted(listed - present)} == {
        "not listed": [], "listed but gone": []}


def who_imports() -> dict[str, set[Path]]:
    """Module -> the files that import it: the project's modules and bench/'s scripts."""
    modules = project_modules()
    files = {name: path for name, path in modules.items()}
    files.update({f"bench.{path.stem}": path for path in sorted((ROOT / "bench").glob("*.py"))})
    users: dict[str, set[Path]] = {name: set() for name in modules}
    for name, path in files.items():
        for target in imports_of(name, path, set(modules)):
            if not name.startswith(f"{target}."):  # a module of a package reaching its package's __init__
                users[target].add(path.relative_to(ROOT))
    return users


def test_the_studio_guide_says_who_uses_each_module():
    """Each path in a row's "Used by" (from studio/; a folder: a module in it) imports the module, and every
    studio module that imports it is named there (a package's __init__ aside: the guide says what it gathers)."""
    users, wrong = who_imports(), []
    for path, cell in studio_guide().items():
        name = ".".join(Path(path).with_suffix("").parts)
        importers, said = users.get(name, set()), set()
        for named in re.findall(r"`([^`]+(?:\.py|/))`", cell):
            at = (ROOT / "studio" / named).resolve().relative_to(ROOT)
            these = {u for u in importers if u == at or (named.endswith("/") and at in u.parents)}
            wrong += [] if these else [f"{path}: {named} does not import it"]
            said |= these
        unsaid = {u for u in importers - said if u.parts[0] == "studio" and u.name != "__init__.py"}
        wrong += [f"{path}: used by {u}, not said" for u in sorted(unsaid)]
    assert wrong == []
