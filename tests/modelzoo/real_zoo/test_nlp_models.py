"""The real Model Zoo's language models, each with one of its published YAMLs, trained with
`cszoo fit` on CSX and on the CPU backend from the same initial weights, compared parameter
by parameter, then validated from the CSX checkpoint (`zoo.fit_on_both_backends`).

Each YAML is changed only through its own keys: model sizes, steps, batch sizes, data
folders, and the warm-up length of its learning-rate schedule (so that a few steps move the
weights measurably), plus `checkpoint.save_initial_checkpoint` (the common initial
weights). The data is synthetic, in the formats the YAML's data processor reads
(`synthetic.py`).

Tolerances: these YAMLs train in 16-bit mixed precision on both backends (bfloat16; the CPU
backend computes cbfloat16 / float16 in bfloat16 too), and XLA and eager torch round the
16-bit intermediates at different places. The weights are compared after STEPS steps with
the warm-up cut to one step, so each Adam step moves a weight by up to the peak learning
rate `LR` (Adam normalises the update by the gradient's running RMS): the bound is 0.2 LR
per weight, and `fit_on_both_backends` checks training moved the weights by more than ten
times that. (Measured: GPT-3's updates agree to ~1e-3 relative, 0.06 LR per weight at
most, Llama 3.3's to 0.12 LR.) The eval loss of the validated checkpoint is computed in
bfloat16 on both: agreement to 2^-7."""
from __future__ import annotations

import pytest

from . import synthetic, zoo

pytestmark = [pytest.mark.slow, pytest.mark.skipif(zoo.missing() is not None, reason=str(zoo.missing()))]

NLP = zoo.MODELS / "nlp"
STEPS = 6
#: the peak learning rate of the YAMLs below (after their warm-up, cut to one step)
LR = 6e-4
MSL = 16
VOCAB = 97


def _gpt_data(tmp_path):
    train = synthetic.write_gpt_hdf5(tmp_path / "data" / "train", 24, MSL, VOCAB)
    val = synthetic.write_gpt_hdf5(tmp_path / "data" / "val", 8, MSL, VOCAB, seed=1)
    return str(train), str(val)


def test_gpt3_cerebras_gpt_111m(tmp_path):
    train, val = _gpt_data(tmp_path)
    init, fit = "trainer.init", "trainer.fit"
    params = zoo.shrink(NLP / "gpt3" / "configs" / "Cerebras_GPT" / "111m.yaml", tmp_path / "params.yaml", {
        f"{init}.model.hidden_size": 32, f"{init}.model.num_heads": 4, f"{init}.model.filter_size": 64,
        f"{init}.model.num_hidden_layers": 2, f"{init}.model.vocab_size": VOCAB,
        f"{init}.model.max_position_embeddings": MSL,
        f"{init}.schedulers.0.SequentialLR.schedulers.0.LinearLR.total_iters": 1,
        f"{init}.loop.max_steps": STEPS, f"{init}.loop.eval_frequency": STEPS, f"{init}.loop.eval_steps": 2,
        f"{init}.checkpoint.steps": STEPS, f"{init}.checkpoint.save_initial_checkpoint": True,
        f"{fit}.train_dataloader.data_dir": train, f"{fit}.train_dataloader.batch_size": 4,
        f"{fit}.train_dataloader.num_workers": 0,
        f"{fit}.val_dataloader.data_dir": val, f"{fit}.val_dataloader.batch_size": 4,
        f"{fit}.val_dataloader.num_workers": 0,
        "trainer.validate.val_dataloader.data_dir": val, "trainer.validate.val_dataloader.batch_size": 4,
        "trainer.validate.val_dataloader.num_workers": 0,
    })
    zoo.fit_on_both_backends(tmp_path, params, STEPS, atol=0.2 * LR, loss_rtol=2 ** -7)


def _llama_changes(train, val, lr_warmup_key, kv_groups=None):
    init, fit = "trainer.init", "trainer.fit"
    kv = {f"{init}.model.extra_attention_params.num_kv_groups": kv_groups} if kv_groups else {}
    return {
        **kv, f"{init}.model.hidden_size": 32, f"{init}.model.num_heads": 4, f"{init}.model.rotary_dim": 8,
        f"{init}.model.filter_size": 64,
        f"{init}.model.num_hidden_layers": 2, f"{init}.model.vocab_size": VOCAB,
        f"{init}.model.max_position_embeddings": MSL,
        lr_warmup_key: 1,
        f"{init}.loop.max_steps": STEPS, f"{init}.loop.eval_steps": 2,
        f"{init}.checkpoint.steps": STEPS, f"{init}.checkpoint.save_initial_checkpoint": True,
        f"{fit}.train_dataloader.data_dir": train, f"{fit}.train_dataloader.batch_size": 4,
        f"{fit}.train_dataloader.num_workers": 0,
        f"{fit}.val_dataloader.data_dir": val, f"{fit}.val_dataloader.batch_size": 4,
        f"{fit}.val_dataloader.num_workers": 0,
    }


def test_llama_3p3_70b_msl_128k(tmp_path):
    train, val = _gpt_data(tmp_path)
    changes = _llama_changes(train, val, "trainer.init.schedulers.0.SequentialLR.schedulers.0.LinearLR.total_iters",
                             kv_groups=2)
    params = zoo.shrink(NLP / "llama" / "configs" / "params_llama3p3_70b_msl_128k.yaml", tmp_path / "params.yaml",
                        changes)
    zoo.fit_on_both_backends(tmp_path, params, STEPS, atol=0.2 * 7.5e-5, loss_rtol=2 ** -7)


def test_llama2_7b_in_cbfloat16(tmp_path):
    """`fp16_type: cbfloat16`: float16 on CSX (its proxy dtype, with dynamic loss scaling),
    bfloat16 on the CPU backend. With two 16-bit formats a gradient entry near zero can round
    to opposite signs, which Adam turns into opposite full-size steps of that one weight, so
    the weights are compared tensor by tensor through their training update, in norm: within
    5 % (measured: 1.4 % at most, the word embeddings, whose rows for rare tokens get the
    smallest gradients)."""
    train, val = _gpt_data(tmp_path)
    changes = _llama_changes(train, val, "trainer.init.schedulers.0.SequentialLR.schedulers.0.LinearLR.total_iters")
    params = zoo.shrink(NLP / "llama" / "configs" / "params_llama2_7b.yaml", tmp_path / "params.yaml", changes)
    zoo.fit_on_both_backends(tmp_path, params, STEPS, atol=0.2 * 3e-4, loss_rtol=2 ** -7, update_rtol=0.05)

