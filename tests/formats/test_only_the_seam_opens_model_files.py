"""Only the model-format seam (``asr_plugin.formats``) opens model files: evaluation, transcription, the exports,
fine-tuning, resuming and the scripts ask it. Read from the source with ``ast`` (nothing is imported): every call
that reads or writes a serialised model or an archive, and every import of an archive or pickle module, in the
package and in ``scripts/``, outside the seam, must be one of `ALLOWED`, each with the reason it is not a model
file the seam should read. Docstrings and comments that name these calls are text, not calls, and pass."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEAM = "asr_plugin/formats/"
# What opens a model file: torch's, torch.export's and ONNX's readers and writers, onnxruntime's sessions, NeMo's
# own (restore_from, save_to: any receiver), and the modules that read archives or pickles.
CALLS = (
    "torch.load",
    "torch.save",
    "torch.export.load",
    "torch.export.save",
    "torch.onnx.export",
    "onnx.load",
    "onnx.save",
    "onnxruntime.InferenceSession",
    "quantize_dynamic",
)
METHODS = ("restore_from", "save_to")
MODULES = ("tarfile", "zipfile", "pickle", "safetensors")
# (file, what it does) outside the seam -> why it is not a model file the seam should read
ALLOWED = {
    (
        "asr_plugin/data/sources/download.py",
        "import tarfile",
    ): "LibriSpeech's download archives: corpus audio, not a model",
    ("asr_plugin/data/demo/tts_piper.py", "onnxruntime.InferenceSession"): "the Piper voice that synthesises the mini "
    "corpus: a text-to-speech model the data layer runs, not a transducer",
    ("asr_plugin/export/programs.py", "torch.export.save"): "the export's own output (encoder/predictor/joint.pt2)",
    ("asr_plugin/export/programs.py", "torch.export.load"): "the export's runtime running its own output "
    "(ExportedTransducer.load); no entry point takes it as a model source",
    ("asr_plugin/export/onnx_files.py", "torch.onnx.export"): "the ONNX export's own output",
    ("asr_plugin/export/onnx_files.py", "onnx.load"): "the ONNX export's own output, its metadata set and checked",
    ("asr_plugin/export/onnx_files.py", "onnx.save"): "the ONNX export's own output, its metadata set",
    ("asr_plugin/export/onnx_files.py", "quantize_dynamic"): "the ONNX export's own int8 copy",
    ("asr_plugin/export/sherpa_decode.py", "onnx.load"): "the ONNX export's metadata, to decode it with sherpa-onnx",
    ("scripts/gpucheck/stages.py", "import tarfile"): "the GPU check's archive of its results, not a model",
    ("scripts/benchmarks/nemo_examples.py", "save_to"): "NeMo itself writing its example models: the independent "
    "reference the import is compared with",
    ("scripts/benchmarks/nemo_compare.py", "restore_from"): "NeMo itself restoring the model our import of it is "
    "compared with",
    ("scripts/benchmarks/nemo_reference.py", "restore_from"): "NeMo itself restoring its reference model",
    ("scripts/benchmarks/decoding.py", "restore_from"): "NeMo itself restoring the .nemo whose decoding it times "
    "beside ours",
    ("scripts/nemo_finetune_table.py", "restore_from"): "NeMo itself restoring the models it fine-tunes beside ours",
}


def dotted(node: ast.expr) -> str:
    """``a.b.c`` of an attribute chain over a name ('' for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def model_file_access(path: Path) -> set[str]:
    """What `path` does of `CALLS`, `METHODS` (by name) and imports of `MODULES` (``import <module>``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Call):
            if dotted(node.func) in CALLS:
                found.add(dotted(node.func))
            if isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
                found.add(node.func.attr)
        elif isinstance(node, ast.Import):
            found |= {f"import {alias.name}" for alias in node.names if alias.name.split(".")[0] in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in MODULES:
            found.add(f"import {node.module.split('.')[0]}")
    return found


def accesses_outside_the_seam() -> dict[tuple[str, str], Path]:
    files = sorted([*(REPO / "asr_plugin").rglob("*.py"), *(REPO / "scripts").rglob("*.py")])
    return {
        (rel, what): path
        for path in files
        if not (rel := path.relative_to(REPO).as_posix()).startswith(SEAM)
        for what in model_file_access(path)
    }


def test_only_the_seam_opens_model_files():
    found = accesses_outside_the_seam()
    wrong = [f"{file}: {what}" for file, what in sorted(set(found) - set(ALLOWED))]
    assert not wrong, "model files opened outside asr_plugin.formats (ask the seam):\n" + "\n".join(wrong)


def test_every_exception_is_still_needed():
    assert not set(ALLOWED) - set(accesses_outside_the_seam()), "remove the exceptions no file needs"


def test_the_check_sees_calls_imports_and_nemos_methods(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""torch.load in a docstring is text."""\n'
        "import tarfile\n"
        "from zipfile import ZipFile\n"
        "def f(model, path):\n"
        "    state = torch.load(path, weights_only=True)\n"
        "    write_atomic(path, lambda tmp: torch.save(state, tmp))\n"
        "    model.save_to(path)\n"
        "    return ASRModel.restore_from(path)\n"
    )
    assert model_file_access(module) == {
        "import tarfile",
        "import zipfile",
        "torch.load",
        "torch.save",
        "save_to",
        "restore_from",
    }
