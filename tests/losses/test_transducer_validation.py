"""Bad inputs raise ValueError/TypeError naming the argument and the sample, before any kernel runs: the same
catalogue for the RNN-T and the TDT loss, plus the lattices' own parameters (checked once, when a lattice is built)
and omega."""

import pytest
import torch

from asr_plugin.losses import RNNT, TDT, TransducerLoss, samplewise_transducer_loss, transducer_loss

TDT_DURATIONS = [0, 1, 2]


def call(problem, durations=None, **changes):
    """The batched loss on `problem`; with `durations`, the TDT loss of its logits followed by D duration scores
    (so V is the same in both)."""
    logits = problem.logits
    if durations is not None:
        logits = torch.cat([logits, torch.zeros(*logits.shape[:3], len(durations))], -1)
    args = dict(
        logits=logits,
        targets=problem.targets,
        logit_lengths=problem.logit_lengths,
        target_lengths=problem.target_lengths,
        blank=problem.blank,
        lattice=None if durations is None else TDT(durations),
    )
    args.update(changes)
    return transducer_loss(**args)


@pytest.mark.parametrize("durations", [None, TDT_DURATIONS], ids=["rnnt", "tdt"])
@pytest.mark.parametrize(
    "changes, error, match",
    [
        (lambda p: dict(logits=p.logits[0]), ValueError, r"logits must have shape \(B, T, U\+1, V( \+ D)?\)"),
        (lambda p: dict(logits=p.logits.detach().long()), TypeError, "logits must be a floating-point tensor"),
        (lambda p: dict(logits=p.logits.detach().numpy()), TypeError, "logits must be a torch.Tensor"),
        (lambda p: dict(targets=p.targets[:2]), ValueError, "targets has batch size 2 but logits has B = 3"),
        (
            lambda p: dict(targets=p.targets[:, :3]),
            ValueError,
            r"targets has U = 3 labels per sample but logits has U\+1 = 5",
        ),
        (lambda p: dict(targets=p.targets[0]), ValueError, r"targets must have shape \(B, U\)"),
        (lambda p: dict(targets=p.targets.float()), TypeError, "targets must be an integer tensor"),
        (lambda p: dict(logit_lengths=p.logit_lengths.float()), TypeError, "logit_lengths must be an integer tensor"),
        (lambda p: dict(target_lengths=p.target_lengths[:2]), ValueError, "target_lengths has batch size 2"),
        (
            lambda p: dict(logit_lengths=torch.tensor([6, 7, 2])),
            ValueError,
            r"logit_lengths\[1\] = 7 exceeds T = 6 of logits \(sample 1\)",
        ),
        (
            lambda p: dict(logit_lengths=torch.tensor([6, 0, 2])),
            ValueError,
            r"logit_lengths\[1\] = 0 is below 1 \(sample 1\)",
        ),
        (
            lambda p: dict(target_lengths=torch.tensor([4, 5, 0])),
            ValueError,
            r"target_lengths\[1\] = 5 exceeds U = 4 of logits",
        ),
        (
            lambda p: dict(target_lengths=torch.tensor([4, 1, -1])),
            ValueError,
            r"target_lengths\[2\] = -1 is below 0 \(sample 2\)",
        ),
        (
            lambda p: dict(targets=torch.tensor([[1, 2, 3, 7], [1, 1, 1, 1], [1, 1, 1, 1]])),
            ValueError,
            r"targets\[0, 3\] = 7 is out of range \[0, V = 7\) \(sample 0\)",
        ),
        (
            lambda p: dict(targets=torch.tensor([[1, 2, 3, 4], [-1, 1, 1, 1], [1, 1, 1, 1]])),
            ValueError,
            r"targets\[1, 0\] = -1 is out of range",
        ),
        (
            lambda p: dict(targets=torch.tensor([[1, 2, 0, 4], [1, 1, 1, 1], [0, 1, 1, 1]])),
            ValueError,
            r"targets\[0, 2\] = 0 is equal to blank = 0 \(sample 0\)",
        ),
        (lambda p: dict(blank=7), ValueError, r"blank = 7 is out of range \[0, V = 7\)"),
        (lambda p: dict(blank=-1), ValueError, "blank = -1 is out of range"),
        (lambda p: dict(blank=1.0), TypeError, "blank must be an int"),
        (lambda p: dict(reduction="avg"), ValueError, "reduction must be one of"),
        (lambda p: dict(logits=p.logits.detach().to("meta")), ValueError, "targets is on cpu but logits is on meta"),
    ],
)
def test_batched_errors(make_problem, changes, error, match, durations):
    problem = make_problem(batch=3, frames=6, labels=4, vocab=7, seed=21)
    problem.logit_lengths[:] = torch.tensor([6, 3, 2])
    problem.target_lengths[:] = torch.tensor([4, 1, 0])
    changes = changes(problem)
    logits = changes.get("logits")
    if durations is not None and isinstance(logits, torch.Tensor) and logits.dim() == 4 and logits.is_floating_point():
        if logits.device.type == "cpu":  # with duration scores
            changes["logits"] = torch.cat([logits, torch.zeros(*logits.shape[:3], len(durations))], -1)
    with pytest.raises(error, match=match):
        call(problem, durations, **changes)


def test_too_few_token_scores(make_problem):
    problem = make_problem(batch=3, frames=6, labels=4, vocab=7, seed=21)
    with pytest.raises(ValueError, match="the vocabulary size V must be >= 2"):
        call(problem, logits=problem.logits[..., :1])
    with pytest.raises(
        ValueError, match=r"last dimension \(4\) must hold V >= 2 token scores .* then the 3 duration scores"
    ):
        call(problem, TDT_DURATIONS, logits=problem.logits[..., :4])


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: TDT([1, 2]), ValueError, r"TDT: durations must contain 0 and 1 .* got \[1, 2\]"),
        (lambda: TDT([0, 2, 3]), ValueError, "durations must contain 0 and 1"),
        (lambda: TDT([]), ValueError, "durations must contain 0 and 1"),
        (lambda: TDT([0, 1, 1]), ValueError, r"sorted, distinct and non-negative, got \[0, 1, 1\]"),
        (lambda: TDT([1, 0, 2]), ValueError, "sorted, distinct and non-negative"),
        (lambda: TDT([-1, 0, 1]), ValueError, "sorted, distinct and non-negative"),
        (lambda: TDT([0, 1.0]), TypeError, r"durations must be ints, got \[0, 1.0\]"),
        (lambda: TDT([0, True]), TypeError, "durations must be ints"),
        (lambda: TDT("0,1"), TypeError, "durations must be a list of ints"),
        (lambda: TDT(4), TypeError, "durations must be a list of ints"),
        (lambda: TDT(torch.tensor([0, 1])), TypeError, "durations must be a list of ints"),
        (lambda: TDT(list(range(33))), ValueError, "at most 32 values, got 33"),
        (lambda: TDT([0, 1], sigma=-0.1), ValueError, "sigma .* must be >= 0, got -0.1"),
        (lambda: TDT([0, 1], sigma=float("nan")), TypeError, "TDT: sigma must be a finite float"),
        (lambda: TDT([0, 1], sigma="0.05"), TypeError, "sigma must be a finite float"),
        (lambda: TDT([0, 1], clamp=0.0), ValueError, "TDT: clamp must be None"),
        (lambda: RNNT(clamp=0.0), ValueError, "RNNT: clamp must be None"),
        (lambda: RNNT(clamp=-1), ValueError, "clamp must be None"),
        (lambda: RNNT(fastemit_lambda=-0.01), ValueError, "RNNT: fastemit_lambda must be >= 0"),
        (lambda: RNNT(fastemit_lambda=float("inf")), TypeError, "fastemit_lambda must be a finite float"),
    ],
)
def test_lattice_parameter_errors(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(
    "options, error, match",
    [
        (dict(lattice=TDT([0, 1]), omega=1.5), ValueError, r"omega .* must be in \[0, 1\], got 1.5"),
        (dict(omega=0.1), ValueError, r"omega = 0.1 applies to the TDT lattice only, the loss's lattice is RNNT\("),
        (dict(lattice=dict(kind="ctc")), ValueError, r"lattice.kind = 'ctc': one of \['rnnt', 'tdt'\]"),
        (dict(lattice=[0, 1]), TypeError, r"lattice must be a lattice such as RNNT\(\) or TDT"),
        (dict(durations=[0, 1]), TypeError, "unexpected keyword argument 'durations'"),
    ],
)
def test_loss_option_errors(make_problem, options, error, match):
    problem = make_problem(batch=3, frames=6, labels=4, vocab=7, seed=21)
    logits = torch.cat([problem.logits, torch.zeros(3, 6, 5, 2)], -1)
    with pytest.raises(error, match=match):
        transducer_loss(logits, problem.targets, problem.logit_lengths, problem.target_lengths, **options)
    with pytest.raises(error, match=match):
        TransducerLoss("samplewise", **options)


def test_targets_beyond_length_are_ignored(make_problem):
    """Padding ids (even blank or out of range) past a sample's target length are not validated."""
    problem = make_problem(batch=2, frames=4, labels=3, vocab=5, seed=22)
    problem.target_lengths[:] = torch.tensor([3, 1])
    problem.targets[1, 1:] = torch.tensor([0, 99])
    assert torch.isfinite(call(problem)).all()


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("column", [3, 7 + 1], ids=["token", "duration"])  # V = 7
def test_non_finite_logits_name_the_sample(make_problem, value, column):
    problem = make_problem(batch=3, frames=5, labels=2, seed=23, full_lengths=True)
    logits = torch.cat([problem.logits.detach(), torch.zeros(3, 5, 3, len(TDT_DURATIONS))], -1)
    logits[2, 1, 1, column] = value
    with pytest.raises(ValueError, match="logits of sample 2 are not finite"):
        call(problem, TDT_DURATIONS, logits=logits)
    if column < 7:
        with pytest.raises(ValueError, match="logits of sample 2 are not finite"):
            call(problem, logits=logits[..., :7])


def test_samplewise_errors(make_joint_problem):
    problem = make_joint_problem(batch=3, frames=5, labels=2, vocab=6, seed=24)
    enc, pred, joint = problem.encoder_out, problem.predictor_out, problem.joint
    lattice = problem.lattice()
    with pytest.raises(ValueError, match=r"encoder_out must have shape \(B, T, H_e\)"):
        samplewise_transducer_loss(enc[0], pred, joint, *lattice)
    with pytest.raises(TypeError, match="predictor_out must be a floating-point tensor"):
        samplewise_transducer_loss(enc, pred.detach().long(), joint, *lattice)
    with pytest.raises(ValueError, match="predictor_out has batch size 2 but encoder_out has B = 3"):
        samplewise_transducer_loss(enc, pred[:2], joint, *lattice)
    with pytest.raises(ValueError, match=r"targets has U = 2 labels per sample but predictor_out has U\+1 = 4"):
        samplewise_transducer_loss(enc, torch.cat([pred, pred[:, :1]], 1), joint, *lattice)
    with pytest.raises(ValueError, match=r"logit_lengths\[0\] = 6 exceeds T = 5 of encoder_out"):
        samplewise_transducer_loss(enc, pred, joint, lattice[0], torch.tensor([6, 1, 1]), lattice[2])
    with pytest.raises(TypeError, match="joint must be an nn.Module or a callable"):
        samplewise_transducer_loss(enc, pred, "joint", *lattice)
    with pytest.raises(ValueError, match=r"joint must return logits of shape \(N, T, U\+1, V\)"):
        samplewise_transducer_loss(enc, pred, lambda e, p: joint(e, p)[:, 0], *lattice)
    with pytest.raises(ValueError, match=r"targets\[0, 0\] = 6 is out of range \[0, V = 6\)"):
        samplewise_transducer_loss(enc, pred, joint, torch.full_like(lattice[0], 6), *lattice[1:])
    with pytest.raises(ValueError, match="memory_budget: cannot parse 'lots'"):
        samplewise_transducer_loss(enc, pred, joint, *lattice, memory_budget="lots")
    with pytest.raises(ValueError, match="reduction must be one of"):
        samplewise_transducer_loss(enc, pred, joint, *lattice, reduction="batchmean")


def test_samplewise_non_finite_joint_output(make_joint_problem):
    problem = make_joint_problem(batch=3, seed=25)
    encoder_out = problem.encoder_out.detach().clone()
    encoder_out[1, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="logits of sample 1 are not finite"):
        samplewise_transducer_loss(encoder_out, problem.predictor_out, problem.joint, *problem.lattice())
