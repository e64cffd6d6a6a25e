"""``trainer.max_steps`` means what it says: set, it ends the run although the config's ``max_epochs`` would have
stopped it first (Lightning stops at whichever limit comes first); unset, the epochs end it."""

from __future__ import annotations

from train_configs import compose_train

from asr_plugin.training.trainer_setup import build_trainer


def test_max_steps_ends_the_run_and_lifts_max_epochs(tmp_path, caplog):
    caplog.set_level("INFO")
    trainer, _ = build_trainer(compose_train(["trainer.max_steps=300", "~logger"], tmp_path))
    assert (trainer.max_steps, trainer.max_epochs) == (300, -1)
    assert "trainer.max_steps=300 optimizer steps; trainer.max_epochs=10 is lifted" in caplog.text
    trainer, _ = build_trainer(compose_train(["~logger"], tmp_path))
    assert (trainer.max_steps, trainer.max_epochs) == (-1, 10)
    assert "this run ends after trainer.max_epochs=10 epochs" in caplog.text
