"""The real Model Zoo's mixture-of-experts model, mixtral with its published
`params_moe_111M_base.yaml` (4 experts, top-1 learned routing, a load-balancing loss logged
with `summarize_scalar` from inside the compiled forward), trained with `cszoo fit` on CSX
and on the CPU backend from the same initial weights, compared parameter by parameter, then
validated from the CSX checkpoint (`zoo.fit_on_both_backends`; the YAML shrunk through its
own keys as in test_nlp_models.py).

Two steps, not more: the learning-rate warm-up (cut to one step) makes the first step's
learning rate 0, so step 1 fills Adam's moments from the first batch's gradients and step 2
moves every weight by up to the peak learning rate `LR`. The bound is 0.05 LR per weight
(measured: 0.013 LR), a quarter of the dense models' bound since training moved the weights
by one step only, and `fit_on_both_backends` wants that movement above ten times the bound. Later steps are not comparable weight by weight:
top-1 routing is discontinuous, and the bfloat16 rounding differences between XLA and eager
torch (about 1e-4 of each update) move a router logit across a tie for some token within a
step or two — measured at step 3: the logged load-balancing loss differs (1.0071 / 1.0078)
while the routing entropies agree to 1e-5 — after which the experts concerned receive
different tokens and their Adam updates differ by up to a full step.

(In float32, `precision.enabled: false`, the backends differ from the first step by design:
the Model Zoo's MoE layers cast their inputs to the half dtype whenever `cstorch.use_cs()`,
as on the wafer, and compute in float32 on the CPU backend.)"""
from __future__ import annotations

import pytest

from . import synthetic, zoo

pytestmark = [pytest.mark.slow, pytest.mark.skipif(zoo.missing() is not None, reason=str(zoo.missing())),
              pytest.mark.usefixtures("shared_compile_cache")]  # a fit and its validation compile once (conftest)

STEPS = 2
#: the peak learning rate of the YAML (after its warm-up, cut to one step)
LR = 0.015625
MSL = 16
VOCAB = 97


def test_mixtral_moe_111m_base(tmp_path):
    train = synthetic.write_gpt_hdf5(tmp_path / "data" / "train", 24, MSL, VOCAB)
    val = synthetic.write_gpt_hdf5(tmp_path / "data" / "val", 8, MSL, VOCAB, seed=1)
    init, fit = "trainer.init", "trainer.fit"
    warmup = f"{init}.schedulers.0.ScalePerParamLR.scheduler.SequentialLR.schedulers.0.LinearLR.total_iters"
    params = zoo.shrink(zoo.MODELS / "nlp" / "mixtral" / "configs" / "params_moe_111M_base.yaml",
                        tmp_path / "params.yaml", {
        f"{init}.model.hidden_size": 32, f"{init}.model.num_heads": 4, f"{init}.model.filter_size": 64,
        f"{init}.model.num_hidden_layers": 2, f"{init}.model.vocab_size": VOCAB,
        f"{init}.model.max_position_embeddings": MSL, warmup: 1,
        f"{init}.loop.max_steps": STEPS, f"{init}.loop.num_steps": STEPS, f"{init}.loop.eval_steps": 2,
        f"{init}.checkpoint.steps": STEPS,
        f"{fit}.train_dataloader.data_dir": str(train), f"{fit}.train_dataloader.batch_size": 4,
        f"{fit}.val_dataloader.data_dir": str(val), f"{fit}.val_dataloader.batch_size": 4,
    })
    zoo.fit_on_both_backends(tmp_path, params, STEPS, atol=0.05 * LR, loss_rtol=2 ** -7)
