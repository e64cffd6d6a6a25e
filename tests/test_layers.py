"""The package's layers (docs/CONTRIBUTING_NOTES.md): every ``asr_plugin`` module imports only lower layers of
the package, wherever the import stands (module level or inside a function), and never the tooling beside
the package (``scripts/benchmarks``, ``scripts/gpucheck``) or the tests. Read from the source with ``ast``:
nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import asr_plugin

PACKAGE = Path(asr_plugin.__file__).resolve().parent
# Lowest first; a module may import a layer of lower rank. The NeMo integration needs only the losses. Model
# files are read and written by `formats` (the model-format seam) only; evaluation and export are peers that ask
# it, not each other (same rank) nor fine-tuning (`SEAM_ONLY`).
RANKS = {
    "config_nodes": 0,
    "host_syncs": 0,
    "plain_data": 0,
    "losses": 0,
    "declared_shapes": 1,
    "models": 1,
    "integrations": 1,
    "data": 2,
    "decoding": 2,
    "formats": 3,
    "finetune": 4,
    "training": 5,
    "evaluation": 6,
    "export": 6,
}
SEAM_ONLY = {"evaluation": ("finetune",), "export": ("finetune",)}
OUTSIDE = ("benchmarks", "gpucheck", "tests", "tiny_models", "nemo_models")


def imported_modules(path: Path) -> list[str]:
    """Every absolute module name `path` imports, at any depth of its syntax tree."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


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


def test_the_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from benchmarks.loss import make_loss\n    import asr_plugin.training\n")
    assert imported_modules(module) == ["benchmarks.loss", "asr_plugin.training"]
