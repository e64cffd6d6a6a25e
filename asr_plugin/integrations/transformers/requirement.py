"""The one place that imports transformers for the integration, with an error saying what to install."""

from __future__ import annotations

TRANSFORMERS_TESTED = "5.23.0"  # the transformers version the integration is tested with (docs/transformers.md)


def require_transformers(what: str) -> None:
    """Import transformers' Parakeet models or raise an ImportError naming `what` needed them and how to get them."""
    try:
        import transformers.models.parakeet.modeling_parakeet  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f"{what} needs Hugging Face transformers with its Parakeet models, which cannot be imported here "
            f"({error}). Install transformers {TRANSFORMERS_TESTED}: pip install 'transformers=={TRANSFORMERS_TESTED}' "
            "(or this project's extra: pip install 'asr_plugin[transformers]')"
        ) from error
