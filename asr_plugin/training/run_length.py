"""Which limit ends a training run. Lightning stops at whichever of ``max_epochs`` and ``max_steps`` comes first, so
``trainer.max_steps=300`` on top of the config's ``max_epochs: 10`` silently stops after 10 short epochs. Here a
``trainer.max_steps`` that is set (> 0) is the run's length: the epoch limit is lifted, and the run says so."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

UNLIMITED = -1  # Lightning's "no epoch limit"


def length_overrides(trainer: Mapping[str, Any]) -> dict[str, Any]:
    """The Trainer arguments that make ``trainer.max_steps`` (when > 0) end the run: ``max_epochs`` lifted; {}
    when no step limit is set (the epochs end it). Logs which limit ends the run either way."""
    steps, epochs = trainer.get("max_steps", UNLIMITED), trainer.get("max_epochs")
    if steps is None or steps <= 0:
        log.info("this run ends after trainer.max_epochs=%s epochs", epochs)
        return {}
    if epochs is None or epochs == UNLIMITED:
        log.info("this run ends after trainer.max_steps=%d optimizer steps", steps)
        return {}
    log.info(
        "this run ends after trainer.max_steps=%d optimizer steps; trainer.max_epochs=%s is lifted (Lightning "
        "would stop at whichever came first)",
        steps,
        epochs,
    )
    return {"max_epochs": UNLIMITED}
