"""The one place that imports NeMo for the integration, with an error saying what to install."""

from __future__ import annotations

NEMO_TESTED = "3.0.0"  # the NeMo version the integration is tested with (docs/nemo_plugin.md)


def require_nemo(what: str) -> None:
    """Import ``nemo.collections.asr`` or raise an ImportError naming `what` needed it and how to get NeMo."""
    try:
        import nemo.collections.asr  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f"{what} needs NeMo (nemo.collections.asr), which cannot be imported here ({error}). Install "
            f"NeMo {NEMO_TESTED}, best in a virtual environment of its own: pip install "
            f"'nemo-toolkit[asr]=={NEMO_TESTED}' (or this project's extra: pip install 'asr_plugin[nemo]')"
        ) from error
