"""The package's layers (docs/CONTRIBUTING_NOTES.md): every ``asr_plugin`` module imports only lower layers of
the package, wherever the import stands (module level or inside a function), never the tooling beside the
package (``scripts/benchmarks``, ``scripts/gpucheck``) or the tests, and no module imports itself through
others (no import cycle, function-level imports included). Read from the source with ``ast``: nothing is
imported."""

from __future__ import annotations

import ast
from pathlib import Path

import asr_plugin

PACKAGE = Path(asr_plugin.__file__).resolve().parent
# Lowest first; a module may import a layer of lower rank. The NeMo integration needs only the losses. Model
# files are read and written by `formats` (the model-format seam) only; evaluation and export are peers that ask
# it, not each other (same rank) nor fine-tuning (`SEAM_ONLY`).
RANKS = {
    "audio": 0,
    "config_nodes": 0,
    "files": 0,
    "line_fields": 0,
    "plain_data": 0,
    "progress": 0,
    "user_errors": 0,
    "losses": 0,
    "declared_shapes": 1,
    "integrations": 1,
    "text": 1,
    "frontend": 2,
    "models": 3,
    "data": 4,
    "decoding": 4,
    "formats": 5,
    "finetune": 6,
    "training": 7,
    "evaluation": 8,
    "export": 8,
}
SEAM_ONLY = {"evaluation": ("finetune",), "export": ("finetune",)}
# What data/ builds on, whatever the ranks say: the shared rooms and the front end never import data/, and data/
# (sources, preparation, loading, the demo corpus) never imports the models.
NEVER_IMPORTS = {room: ("data",) for room in ("audio", "files", "frontend", "line_fields", "progress", "text")} | {
    "data": ("models",)
}
OUTSIDE = ("benchmarks", "gpucheck", "tests", "tiny_models", "nemo_models", "nemo_streaming")


def imported_modules(path: Path) -> list[str]:
    """Every absolute module name `path` imports, at any depth of its syntax tree."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def module_name(path: Path, root: Path) -> str:
    """``a.b.c`` of ``<root>/a/b/c.py``, ``a.b`` of ``<root>/a/b/__init__.py``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package under `package_dir` it imports, at any depth of its syntax tree,
    relative imports resolved: ``import x`` names x (a package: its ``__init__``); ``from x import y`` names the
    module x.y where there is one, else x. The parent packages Python imports on the way are not edges (a
    package's ``__init__`` re-exporting its modules makes no cycle of the modules)."""
    root = package_dir.parent
    paths = {module_name(path, root): path for path in sorted(package_dir.rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        package = (name if path.name == "__init__.py" else name.rpartition(".")[0]).split(".")
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] if node.level else [])
                source = ".".join(part for part in (base, node.module) if part)
                targets.update(
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in paths else source for alias in node.names
                )
        graph[name] = {target for target in targets if target in paths and target != name}
    return graph


def shortest_cycle(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A shortest ``[start, ..., start]`` through modules named after `start` (breadth first), or None."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module]):
                if target == start:
                    return [*paths[module], start]
                if target > start and target not in paths:
                    paths[target] = [*paths[module], target]
                    following.append(target)
        frontier = following
    return None


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """A shortest cycle through each module that imports itself through others, listed from the cycle's first
    module by name (so each cycle once)."""
    return [cycle for start in sorted(graph) if (cycle := shortest_cycle(graph, start)) is not None]


def layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def test_every_part_of_the_package_has_a_layer():
    parts = {layer_of(path) for path in PACKAGE.rglob("*.py")} - {"__init__"}
    assert parts == set(RANKS)


def test_modules_import_only_lower_layers_and_nothing_beside_the_package():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = layer_of(path)
        for name in imported_modules(path):
            top, _, rest = name.partition(".")
            if top in OUTSIDE:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name} (tooling or tests beside the package)")
            elif top == "asr_plugin" and rest and layer != "__init__":
                target = rest.split(".")[0]
                if target != layer and RANKS.get(target, 99) >= RANKS[layer]:
                    wrong.append(f"{path.relative_to(PACKAGE)} ({layer}) imports {name} (not a lower layer)")
                if layer == "integrations" and target not in ("integrations", "losses"):
                    wrong.append(f"{path.relative_to(PACKAGE)} imports {name}: the integrations need only losses")
                if target in SEAM_ONLY.get(layer, ()):
                    wrong.append(f"{path.relative_to(PACKAGE)} imports {name}: {layer} reads models through formats")
    assert not wrong, "\n".join(wrong)


def forbidden_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module -> target`` of each import `NEVER_IMPORTS` forbids (relative imports resolved by the graph)."""
    room = lambda module: module.split(".")[1] if "." in module else ""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if room(target) in NEVER_IMPORTS.get(room(module), ())
    ]


def test_the_shared_rooms_and_the_front_end_never_import_data_and_data_never_imports_models():
    wrong = forbidden_imports(import_graph(PACKAGE))
    assert not wrong, "\n".join(wrong)


def test_the_forbidden_import_check_sees_one_it_is_given(tmp_path):
    package = tmp_path / "asr_plugin"
    for folder in ("frontend", "data", "models"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "frontend" / "spec.py").write_text("def f():\n    from ..data import reader\n")
    (package / "data" / "reader.py").write_text("import asr_plugin.models\n")
    (package / "models" / "joint.py").write_text("from asr_plugin.frontend import spec\n")  # allowed
    assert forbidden_imports(import_graph(package)) == [
        "asr_plugin.data.reader -> asr_plugin.models",
        "asr_plugin.frontend.spec -> asr_plugin.data.reader",
    ]


def test_the_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from benchmarks.loss import make_loss\n    import asr_plugin.training\n")
    assert imported_modules(module) == ["benchmarks.loss", "asr_plugin.training"]


def test_no_module_imports_itself_through_others():
    cycles = import_cycles(import_graph(PACKAGE))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_cycle_check_sees_a_cycle_it_is_given(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.a import f\n")
    (package / "a.py").write_text("from pkg.sub import g\n\ndef f():\n    return g()\n")
    (package / "sub" / "__init__.py").write_text("from .b import g\n")
    (package / "sub" / "b.py").write_text("def g():\n    from .. import a  # inside a function\n    return a.f\n")
    (package / "c.py").write_text("import pkg.a\n")  # imports a module of the cycle, not part of it
    graph = import_graph(package)
    assert graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"} and graph["pkg"] == {"pkg.a"}
    assert import_cycles(graph) == [["pkg.a", "pkg.sub", "pkg.sub.b", "pkg.a"]]
    (package / "sub" / "b.py").write_text("def g():\n    return 1\n")
    assert import_cycles(import_graph(package)) == []
