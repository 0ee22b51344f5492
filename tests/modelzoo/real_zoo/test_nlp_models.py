"""The real Model Zoo's language models, each with one of its published YAMLs, trained with
`cszoo fit` on CSX and on the CPU backend from the same initial weights, compared parameter
by parameter, then validated from the CSX checkpoint (`zoo.fit_on_both_backends`).

Each YAML is changed only through its own keys: model sizes, steps, batch sizes, data
folders and vocabulary files, the warm-up length of its learning-rate schedule (so that a
few steps move the weights measurably), dropout rates set to 0 (XLA's random generator is
not torch's: the backends would drop different units), plus
`checkpoint.save_initial_checkpoint` (the common initial weights; added to T5's YAML, which
leaves it to its default). The data is synthetic, in the formats the YAML's data processor
reads (`synthetic.py`).

Tolerances: these YAMLs train in 16-bit mixed precision on both backends (bfloat16; the CPU
backend computes cbfloat16 / float16 in bfloat16 too), and XLA and eager torch round the
16-bit intermediates at different places. The weights are compared after STEPS steps with
the warm-up cut to one step, so each Adam step moves a weight by up to the peak learning
rate `LR` (Adam normalises the update by the gradient's running RMS): the bound is 0.2 LR
per weight, and `fit_on_both_backends` checks training moved the weights by more than ten
times that. (Measured: GPT-3's updates agree to ~1e-3 relative, 0.06 LR per weight at
most, Llama 3.3's to 0.12 LR.) The eval loss of the validated checkpoint is computed in
bfloat16 on both: agreement to 2^-7. The cbfloat16 YAMLs (float16 on CSX) are compared
through each tensor's update (`update_rtol`), except T5's, run in float32 (see its test)."""
from __future__ import annotations

import math

import pytest

from . import synthetic, zoo

pytestmark = [pytest.mark.slow, pytest.mark.skipif(zoo.missing() is not None, reason=str(zoo.missing())),
              pytest.mark.usefixtures("shared_compile_cache")]  # a fit and its validation compile once (conftest)

NLP = zoo.MODELS / "nlp"
STEPS = 6
#: the peak learning rate of the GPT-3 YAML below (after its warm-up, cut to one step)
LR = 6e-4
MSL = 16
VOCAB = 97
#: BERT-Base's peak learning rate
BERT_LR = 1.767766952966369e-4
#: T5's learning rate, `InverseSquareRootDecayLR`'s 1 / sqrt(max(step, warmup_steps)): constant
#: for the first `warmup_steps` (3870) steps, so its `warmup_steps` is left as published
T5_LR = 3870 ** -0.5
#: T5's encoder and decoder sequence lengths
T5_SRC, T5_TGT = 32, 8
#: ComputeNorm's gradient norm, float16 (CSX) against bfloat16 (CPU), relative: bfloat16's 2^-8
#: (measured: 4.4e-4 at most over six steps; the loss scale it divides out is 2^15)
GRAD_NORM_RTOL = 2 ** -8


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
    smallest gradients).

    The Model Zoo's `ComputeNorm` callback is added (the YAML has no callbacks) and every step
    logged: the gradient norms it logs on CSX, computed in `on_before_optimizer_step` after the
    loss scale (2^15 at first) is divided out, equal the CPU backend's, which has no loss
    scaling, within GRAD_NORM_RTOL on every step whose gradients are finite (a step the scaler
    skips has infinite ones; it must not be all of them)."""
    train, val = _gpt_data(tmp_path)
    changes = _llama_changes(train, val, "trainer.init.schedulers.0.SequentialLR.schedulers.0.LinearLR.total_iters")
    changes["trainer.init.logging.log_steps"] = 1
    params = zoo.shrink(NLP / "llama" / "configs" / "params_llama2_7b.yaml", tmp_path / "params.yaml", changes,
                        add={"trainer.init.callbacks": [{"ComputeNorm": {}}]})
    runs = zoo.fit_on_both_backends(tmp_path, params, STEPS, atol=0.2 * 3e-4, loss_rtol=2 ** -7, update_rtol=0.05)
    csx, cpu = (runs["metrics"][device]["model_wise_grad_norm"] for device in ("CSX", "CPU"))
    assert sorted(csx) == sorted(cpu) == list(range(1, STEPS + 1))
    finite = [step for step in csx if math.isfinite(csx[step])]
    assert finite, f"every CSX step skipped: {csx}"
    for step in finite:
        assert csx[step] == pytest.approx(cpu[step], rel=GRAD_NORM_RTOL), (step, csx, cpu)


def _loaders(data_key: str, train: str, val: str, **changes) -> dict:
    """The same `changes` for the train, val and validate data loaders of a `trainer:` YAML,
    with the data folder (its key `data_key`) `train` or `val`."""
    out = {}
    for loader, data in (("trainer.fit.train_dataloader", train), ("trainer.fit.val_dataloader", val),
                         ("trainer.validate.val_dataloader", val)):
        out.update({f"{loader}.{key}": value for key, value in {data_key: data, **changes}.items()})
    return out


def test_bert_base_msl128(tmp_path):
    """`fp16_type: cbfloat16`, so each tensor's update is compared in norm, as for Llama 2
    (measured: 1.8 % at most, the position embeddings). The key projection's bias has no
    gradient in exact arithmetic (the attention softmax of a query is invariant to adding
    the same number to all its scores); it moves by rounding noise only (4e-3 LR at most,
    differently on each backend), so its update is measured against the floor of
    `assert_same_updates`. The dropout rates are set to 0: XLA's random generator is not
    torch's, so the two backends would drop different units."""
    data = tmp_path / "data"
    vocab = str(synthetic.write_wordpiece_vocab(data / "vocab.txt", VOCAB))
    train = str(synthetic.write_bert_csv(data / "train", 24, MSL, VOCAB))
    val = str(synthetic.write_bert_csv(data / "val", 8, MSL, VOCAB, seed=1))
    init = "trainer.init"
    params = zoo.shrink(NLP / "bert" / "configs" / "bert_base_MSL128.yaml", tmp_path / "params.yaml", {
        f"{init}.model.hidden_size": 32, f"{init}.model.num_heads": 4, f"{init}.model.filter_size": 64,
        f"{init}.model.num_hidden_layers": 2, f"{init}.model.vocab_size": VOCAB,
        f"{init}.model.max_position_embeddings": MSL,
        f"{init}.model.dropout_rate": 0.0, f"{init}.model.attention_dropout_rate": 0.0,
        f"{init}.schedulers.0.SequentialLR.schedulers.0.LinearLR.total_iters": 1,
        f"{init}.loop.max_steps": STEPS, f"{init}.loop.eval_frequency": STEPS, f"{init}.loop.eval_steps": 2,
        f"{init}.checkpoint.steps": STEPS, f"{init}.checkpoint.save_initial_checkpoint": True,
        **_loaders("data_dir", train, val, vocab_file=vocab, max_sequence_length=MSL, max_predictions_per_seq=4,
                   batch_size=4, num_workers=0),
    })
    zoo.fit_on_both_backends(tmp_path, params, STEPS, atol=0.2 * BERT_LR, loss_rtol=2 ** -7, update_rtol=0.05)


def test_t5_3b(tmp_path):
    """Run in float32 (its own `precision.enabled` set false), as fc_mnist's float16 YAML is:
    in its published cbfloat16 (float16 on CSX, bfloat16 on the CPU backend) no 16-bit
    comparison can be tight. AdaFactor normalizes each entry of a one-dimensional parameter
    (the layer norms) by that entry's own recent gradient (its first step is +-1 x the step
    size whatever the gradient's size), so an entry whose gradient is near zero steps the
    way its rounding goes, and with 32 decoder tokens a batch, one ReLU that a rounding
    difference switches changes a whole row of a gradient; the differences grow step by
    step. Measured, after six steps: each backend's cbfloat16 run differs from the float32
    run by up to 12 % per tensor (norm of the update difference), CSX from CPU by 13 %;
    with bfloat16 on both, CSX and CPU agree to 6e-7 after one step, 0.5 % after two, 4 %
    after three, 5.4 % after six. In float32 they agree to float32 rounding: 1.6e-6 of each
    update, 3e-5 T5_LR per weight at most (4 ulps of a layer-norm gain near 1; the bound is
    1e-4 T5_LR), and the same eval loss (bound: one unit in the last of the five digits the
    log prints, 1e-4 of it at most). The YAML does not save the initial checkpoint (the
    default), so `save_initial_checkpoint` is added to its `checkpoint`."""
    data = tmp_path / "data"
    vocab = str(synthetic.write_sentencepiece_vocab(data / "vocab.txt", VOCAB))
    # documents of one to two raw sequences (T5_SRC + 2 tokens before span corruption)
    train = str(synthetic.write_t5_text(data / "train", 24, 2 * (T5_SRC + 2), VOCAB))
    val = str(synthetic.write_t5_text(data / "val", 8, 2 * (T5_SRC + 2), VOCAB, seed=1))
    init = "trainer.init"
    params = zoo.shrink(NLP / "t5" / "configs" / "t5_3B.yaml", tmp_path / "params.yaml", {
        f"{init}.model.src_vocab_size": VOCAB, f"{init}.model.encoder_num_hidden_layers": 2,
        f"{init}.model.decoder_num_hidden_layers": 2, f"{init}.model.d_kv": 8, f"{init}.model.num_heads": 4,
        f"{init}.model.d_ff": 64, f"{init}.model.d_model": 32, f"{init}.model.dropout_rate": 0.0,
        f"{init}.model.src_max_position_embeddings": T5_SRC, f"{init}.model.tgt_max_position_embeddings": T5_TGT,
        f"{init}.precision.enabled": False,
        f"{init}.loop.max_steps": STEPS, f"{init}.loop.eval_frequency": STEPS, f"{init}.loop.eval_steps": 2,
        f"{init}.checkpoint.steps": STEPS, f"{init}.logging.log_steps": 1,
        **_loaders("src_data_dir", train, val, src_vocab_file=vocab, src_max_sequence_length=T5_SRC,
                   tgt_max_sequence_length=T5_TGT, batch_size=4, num_workers=0),
    }, add={f"{init}.checkpoint.save_initial_checkpoint": True})
    zoo.fit_on_both_backends(tmp_path, params, STEPS, atol=1e-4 * T5_LR, loss_rtol=1e-4)
