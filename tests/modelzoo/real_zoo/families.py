"""Try the Model Zoo's other language-model families the way the tests in this folder try
gpt3, llama and mixtral, and print one table row per family (the list in docs/guides/modelzoo.md):

    python -m tests.modelzoo.real_zoo.families [family ...]

A family's first published YAML whose data processor reads the GPT HDF5 shards
(`synthetic.write_gpt_hdf5`) is shrunk through its own keys by one rule for all (the model
sizes it has, steps, batch sizes, data folders, the first warm-up cut to one step, dropout
rates set to 0 so that the two backends' random streams do not enter the comparison) plus
`checkpoint.save_initial_checkpoint` (added where the YAML lacks it: the two runs' common
initial weights), then trained on CPU and CSX from the same weights and measured (`measure`):
each tensor's update compared in norm, the eval losses of the CSX checkpoint on both
backends, and any step float16 loss scaling skipped (cbfloat16 computes in float16 on
CSX, in bfloat16 on the CPU backend, which has no loss scaling).

The families whose data is not GPT HDF5 (ESM-2, Transformer, ViT, DiT, DPR, DPO, the
multimodal ones) each carry a `Recipe` (`RECIPES`): the YAML, a writer of its data in the
format its data processor reads (`synthetic.py`) with the loader keys that point at it,
and the family's own size keys (nested ones as dotted paths, list items by index). The same
rule applies, plus what a comparison needs of such a YAML: the validate loader set like the
val one, one data worker per CSX where the YAML gives `num_workers_per_csx` (the CPU backend
has one; W workers each stream their own shard, batch k from worker k % W), and
`KeepNCheckpoints` keeping the initial checkpoint.

Not a test (a run takes about a minute per family, more than CI can spend on it);
test_families.py checks in CI that every family's YAML still shrinks (`prepare`)."""
from __future__ import annotations

import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

import cstorch

from . import synthetic, zoo

GPT_DATA = {"GptHDF5DataProcessor", "GptHDF5MapDataProcessor"}
FAMILIES = ("bloom", "btlm", "falcon", "gemma2", "gptj", "jais", "mistral", "santacoder", "starcoder")
MSL, VOCAB, STEPS = 16, 97, 4
#: the model sizes set where a YAML has them (head size 8: hidden_size / num_heads)
SIZES = {"hidden_size": 32, "num_heads": 4, "filter_size": 64, "num_hidden_layers": 2, "vocab_size": VOCAB,
         "max_position_embeddings": MSL, "rotary_dim": 8, "attention_inner_dim": 32,
         "attention_sliding_window_length": 8}


@dataclass
class Recipe:
    """A family whose data is not GPT HDF5: its YAML (under `zoo.MODELS`), a writer of its
    data (given the data folder, returns the keys to set in the train and the val loaders,
    as `{key: value}` each), its model sizes (dotted keys under `model`, set where the YAML
    has them, instead of `SIZES`) and any further changes (dotted keys from the top)."""
    yaml: str
    data: Callable[[Path], tuple]
    sizes: dict
    extra: dict = field(default_factory=dict)


def _esm2_data(data: Path) -> tuple:
    train = synthetic.write_mlm_hdf5(data / "train", 24, MSL)
    val = synthetic.write_mlm_csv(data / "val", 8, MSL, seed=1)
    return {"data_dir": str(train)}, {"data_dir": str(val)}


def _transformer_data(data: Path) -> tuple:
    vocab = str(synthetic.write_sentencepiece_vocab(data / "vocab.txt", VOCAB))
    loader = {"src_vocab_file": vocab, "src_max_sequence_length": MSL, "tgt_max_sequence_length": MSL}
    train = synthetic.write_translation_text(data / "train", 24, MSL, VOCAB)
    val = synthetic.write_translation_text(data / "val", 8, MSL, VOCAB, seed=1)
    return {**loader, "src_data_dir": str(train)}, {**loader, "src_data_dir": str(val)}


IMAGE, PATCH = 32, 8


def _imagenet_data(data: Path) -> tuple:
    root = str(synthetic.write_imagenet(data / "imagenet", 24, 8, IMAGE + 8))
    # no worker processes: torch's DataLoader then refuses a prefetch factor
    loader = {"data_dir": root, "image_size": [IMAGE, IMAGE], "use_worker_cache": False, "prefetch_factor": None,
              "persistent_workers": False}
    return loader, loader


#: `ImageNet1KProcessor`'s transforms at the image size, the random ones made identities
#: (crops of the whole image, no flips) so that no random stream enters the comparison
_VIT_TRANSFORMS = {
    "trainer.fit.train_dataloader.transforms.0.size": [IMAGE, IMAGE],
    "trainer.fit.train_dataloader.transforms.1.size": [IMAGE, IMAGE],
    "trainer.fit.train_dataloader.transforms.1.scale": [1.0, 1.0],
    "trainer.fit.train_dataloader.transforms.1.ratio": [1.0, 1.0],
    "trainer.fit.train_dataloader.transforms.2.p": 0.0,
    "trainer.fit.val_dataloader.transforms.0.size": [IMAGE, IMAGE],
}


LATENT = 4


def _latent_data(data: Path) -> tuple:
    dirs = [str(synthetic.write_latent_imagenet(data / name, 24, 8, 4, LATENT, seed=k))
            for k, name in enumerate(("latents", "latents_flipped"))]
    # its config wants a worker process (num_workers > 0)
    return {"data_dir": dirs, "num_workers": 1}, {"data_dir": dirs, "num_workers": 1}


def _dpr_data(data: Path) -> tuple:
    train = synthetic.write_dpr_hdf5(data / "train", 24, MSL, VOCAB)
    val = synthetic.write_dpr_hdf5(data / "val", 8, MSL, VOCAB, seed=1)
    return {"data_dir": str(train)}, {"data_dir": str(val)}


def _bert_encoder(prefix: str) -> dict:
    """The BERT sizes (and dropout rates) of the encoder block `prefix` of a model."""
    return {f"{prefix}.{k}": v for k, v in {
        "vocab_size": VOCAB, "hidden_size": 32, "num_heads": 4, "filter_size": 64, "num_hidden_layers": 2,
        "max_position_embeddings": MSL, "dropout_rate": 0.0, "attention_dropout_rate": 0.0}.items()}


def _dpo_data(data: Path) -> tuple:
    train = synthetic.write_dpo_hdf5(data / "train", 24, MSL, VOCAB)
    val = synthetic.write_dpo_hdf5(data / "val", 8, MSL, VOCAB, seed=1)
    return {"data_dir": str(train)}, {"data_dir": str(val)}


def _multimodal_data(data: Path, writer=synthetic.write_multimodal_hdf5) -> tuple:
    images = data / "images"
    patches = (IMAGE // 2 // PATCH) ** 2
    loaders = []
    for split, n, seed in (("train", 24, 0), ("val", 8, 1)):
        folder = writer(data / split, images, n, MSL, VOCAB, patches, IMAGE // 2, seed=seed)
        loaders.append({"data_dir": str(folder), "img_data_dir": str(images), "image_data_size": [3, IMAGE // 2,
                        IMAGE // 2]})
    return tuple(loaders)


def _llava_data(data: Path) -> tuple:
    return _multimodal_data(data, synthetic.write_llava_hdf5)


def _multimodal_sizes(image: str, projection: str = "image_model_list.global_image_projection") -> dict:
    """A ViT image encoder (the model's key path `image`) of 16 x 16 images in 8 x 8 patches,
    a 32-unit projection, a Llama text model: the sizes set under `model`."""
    vit = {"hidden_size": 32, "num_heads": 4, "filter_size": 64, "num_hidden_layers": 2,
           "image_size": [IMAGE // 2, IMAGE // 2], "patch_size": [PATCH, PATCH]}
    return {**{f"{image}.{k}": v for k, v in vit.items()},
            f"{projection}.input_unit": 32, f"{projection}.layers_units": [32, 32],
            **{f"text_model.{k}": v for k, v in SIZES.items()}}


#: the transforms of `MultimodalSimpleHDF5MapDataProcessor` at the image size
_MM_TRANSFORMS = {f"trainer.fit.{loader}.transforms.{i}.size": IMAGE // 2
                  for loader in ("train_dataloader", "val_dataloader") for i in (1, 2)}


#: the size keys of these recipes: head size 8, two layers
RECIPES = {
    "esm2": Recipe("nlp/esm2/configs/params_esm2_t12_35M_UR50D.yaml", _esm2_data,
                   {"hidden_size": 32, "num_heads": 4, "filter_size": 64, "num_hidden_layers": 2,
                    "max_position_embeddings": MSL, "rotary_dim": 8}),
    "transformer": Recipe("nlp/transformer/configs/transformer_base.yaml", _transformer_data,
                          {"src_vocab_size": VOCAB, "tgt_vocab_size": VOCAB, "d_model": 32, "d_kv": 8,
                           "num_heads": 4, "d_ff": 64, "encoder_num_hidden_layers": 2,
                           "decoder_num_hidden_layers": 2, "src_max_position_embeddings": MSL,
                           "tgt_max_position_embeddings": MSL}),
    "vision_transformer": Recipe("vision/vision_transformer/configs/params_vit_base_patch_16_imagenet_1k.yaml",
                                 _imagenet_data,
                                 {"hidden_size": 32, "num_heads": 4, "filter_size": 64, "num_hidden_layers": 2,
                                  "image_size": [IMAGE, IMAGE], "patch_size": [PATCH, PATCH]},
                                 _VIT_TRANSFORMS),
    "dit": Recipe("vision/dit/configs/params_dit_small_patchsize_2x2.yaml", _latent_data,
                  {"hidden_size": 32, "num_heads": 4, "filter_size": 64, "num_hidden_layers": 2,
                   "frequency_embedding_size": 16, "vae.latent_size": [LATENT, LATENT]},
                  # the data processor drops labels (classifier-free guidance) and refuses a rate of 0;
                  # it draws on the host, from the loader's seeded stream, the same on both backends
                  {"trainer.init.model.label_dropout_rate": 0.1}),
    "dpr": Recipe("nlp/dpr/configs/params_dpr_base_nq.yaml", _dpr_data,
                  {**_bert_encoder("q_encoder"), **_bert_encoder("ctx_encoder")}),
    "dpo": Recipe("nlp/dpo/configs/params_zephyr_7b_dpo.yaml", _dpo_data,
                  {f"policy_model.{k}": v for k, v in {
                      **SIZES, "extra_attention_params.num_kv_groups": 2, "embedding_dropout_rate": 0.0,
                      "dropout_rate": 0.0, "attention_dropout_rate": 0.0}.items()}),
    "multimodal_simple": Recipe("multimodal/multimodal_simple/configs/params_mm_llava_llama2_7b_phase1.yaml",
                                _multimodal_data,
                                _multimodal_sizes("image_model_list.image_models.0.image_encoder"),
                                _MM_TRANSFORMS),
    "llava": Recipe("multimodal/llava/configs/params_llava_v1p5_pretrain_7b_phase1_MSL2K.yaml", _llava_data,
                    _multimodal_sizes("image_model", "projector.image_model"), _MM_TRANSFORMS),
}

#: tensors whose gradient is zero in exact arithmetic: adding b.q_i to every score of query
#: i leaves its attention softmax unchanged, so the key bias b moves by rounding noise only,
#: which Adam scales up to a full step either way on each backend
ZERO_GRADIENT = ("proj_k_dense_layer.bias",)


def first_gpt_yaml(family: str) -> Path | None:
    for path in sorted((zoo.MODELS / "nlp" / family / "configs").glob("*.yaml")):
        text = path.read_text()
        if any(f"data_processor: {p}" in text for p in GPT_DATA) and "trainer:" in text:
            return path
    return None


def changes_for(published: Path, train: str, val: str) -> tuple[dict, dict, str]:
    """(changes to keys the YAML has, keys added, fp16_type)."""
    return _changes(published, SIZES, {"data_dir": train}, {"data_dir": val})


def _changes(published: Path, sizes: dict, train: dict, val: dict,
             validate: bool = False) -> tuple[dict, dict, str]:
    """`changes_for` with the model sizes `sizes` (dotted keys under `model`, set where the
    YAML has them) and the loader keys `train` / `val` ({key: value}) set besides the batch
    size and workers; with `validate`, `val` goes to `trainer.validate.val_dataloader` too
    where the YAML has it."""
    tree = yaml.safe_load(published.read_text())
    init = tree["trainer"]["init"]
    model = init["model"]
    changes = {f"trainer.init.model.{k}": v for k, v in sizes.items() if _has(model, k)}
    changes.update({f"trainer.init.model.{k}": 0.0 for k in model if k.endswith("dropout_rate")})
    groups = model.get("extra_attention_params", {}).get("num_kv_groups")
    if groups and groups > 1:
        changes["trainer.init.model.extra_attention_params.num_kv_groups"] = 2
    schedule = init["schedulers"][0]
    (kind, body), = schedule.items()
    if kind == "SequentialLR":
        (first_kind, first), = body["schedulers"][0].items()
        changes[f"trainer.init.schedulers.0.SequentialLR.schedulers.0.{first_kind}.total_iters"] = 1
    loop = init["loop"]
    changes["trainer.init.loop.max_steps"] = STEPS
    for key, value in (("eval_frequency", STEPS), ("eval_steps", 2), ("num_steps", STEPS)):
        if key in loop:
            changes[f"trainer.init.loop.{key}"] = value
    changes["trainer.init.checkpoint.steps"] = STEPS
    added = {}
    if "save_initial_checkpoint" in init["checkpoint"]:
        changes["trainer.init.checkpoint.save_initial_checkpoint"] = True
    else:
        added["trainer.init.checkpoint.save_initial_checkpoint"] = True
    loaders = [("trainer.fit.train_dataloader", train), ("trainer.fit.val_dataloader", val)]
    if validate and "val_dataloader" in (tree["trainer"].get("validate") or {}):
        loaders.append(("trainer.validate.val_dataloader", val))
    for loader, keys in loaders:
        changes.update({f"{loader}.batch_size": 4, f"{loader}.num_workers": 0})
        changes.update({f"{loader}.{k}": v for k, v in keys.items()})
    fp16 = init.get("precision", {}).get("fp16_type", "bfloat16")  # `MixedPrecision`'s default
    return changes, added, fp16


def _has(tree: dict, dotted: str) -> bool:
    for key in dotted.split("."):
        if isinstance(tree, list) and key.isdigit() and int(key) < len(tree):
            tree = tree[int(key)]
        elif isinstance(tree, dict) and key in tree:
            tree = tree[key]
        else:
            return False
    return True


def _set_micro_batch_sizes(params: Path, batch: int) -> None:
    """Set every `csx.performance.micro_batch_size` the YAML has (its Scoped*Flags
    callbacks; a key with dots in its name, which `zoo.shrink` cannot address) to `batch`."""
    tree = yaml.safe_load(params.read_text())

    def walk(node):
        if isinstance(node, dict):
            for key in node:
                if key.endswith("micro_batch_size"):
                    node[key] = batch
                else:
                    walk(node[key])
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(tree)
    params.write_text(yaml.safe_dump(tree, sort_keys=False))


def _skipped_steps(model_dir: Path, step: int) -> int:
    scaler = cstorch.load(str(model_dir / f"checkpoint_{step}.mdl")).get("grad_scaler") or {}
    return int(scaler.get("num_skipped_steps", 0))


def measure(tmp: Path, params: Path) -> str:
    """Fit on CPU, then on CSX from its initial weights; validate the CSX checkpoint on
    both. The result: the worst tensor's update difference in norm (`zoo.update_differences`;
    the key projection's bias set aside: `ZERO_GRADIENT`), the two eval losses, and the
    steps float16 loss scaling skipped."""
    cpu_dir, csx_dir = tmp / "model_cpu", tmp / "model_csx"
    zoo.cszoo("fit", params, "--target_device", "CPU", "--model_dir", cpu_dir, cwd=tmp)
    zoo.cszoo("fit", params, "--target_device", "CSX", "--model_dir", csx_dir,
              "--checkpoint_path", cpu_dir / "checkpoint_0.mdl", cwd=tmp)
    initial, cpu, csx = (zoo.checkpoint(cpu_dir, 0), zoo.checkpoint(cpu_dir, STEPS),
                         zoo.checkpoint(csx_dir, STEPS))
    differences = zoo.update_differences(csx, cpu, initial)
    ratios = {k: err / max(size, 1e-300) for k, (err, size) in differences.items() if not k.endswith(ZERO_GRADIENT)}
    worst = max(ratios, key=ratios.get)
    losses = [zoo.eval_loss(zoo.cszoo("validate", params, "--target_device", device, "--model_dir",
                                      tmp / f"validate_{device}", "--checkpoint_path",
                                      csx_dir / f"checkpoint_{STEPS}.mdl", cwd=tmp))
              for device in ("CSX", "CPU")]
    skipped = _skipped_steps(csx_dir, STEPS) - _skipped_steps(cpu_dir, STEPS)
    note = f"; CSX's float16 loss scaling skipped {skipped} step(s) on overflow" if skipped else ""
    return (f"trains; updates within {100 * ratios[worst]:.2g} % in norm (worst: {worst.split('model.')[-1]}); "
            f"validates, eval loss CSX {losses[0]:.4f} / CPU {losses[1]:.4f}{note}")


def _prepare_recipe(family: str, recipe: Recipe, tmp: Path) -> tuple[str, Path]:
    published = zoo.MODELS / recipe.yaml
    train, val = recipe.data(tmp / "data")
    changes, added, fp16 = _changes(published, recipe.sizes, train, val, validate=True)
    changes.update(recipe.extra)
    init = yaml.safe_load(published.read_text())["trainer"]["init"]
    for i, callback in enumerate(init.get("callbacks") or []):
        if "KeepNCheckpoints" in callback:  # keep the initial checkpoint too
            changes[f"trainer.init.callbacks.{i}.KeepNCheckpoints.n"] = STEPS + 1
    if _has(init, "backend.cluster_config.num_workers_per_csx"):
        # one data worker, as on the CPU backend: CSX's W workers each stream their own
        # shard (batch k from worker k % W), so with two the batches would differ
        changes["trainer.init.backend.cluster_config.num_workers_per_csx"] = 1
    return f"{family} `{published.name}` ({fp16})", zoo.shrink(published, tmp / "params.yaml", changes, add=added)


def _prepare_gpt(family: str, tmp: Path) -> tuple[str, Path]:
    published = first_gpt_yaml(family)
    if published is None:
        raise ValueError(f"{family} has no YAML with a GPT HDF5 data processor")
    train = synthetic.write_gpt_hdf5(tmp / "data" / "train", 24, MSL, VOCAB)
    val = synthetic.write_gpt_hdf5(tmp / "data" / "val", 8, MSL, VOCAB, seed=1)
    changes, added, fp16 = changes_for(published, str(train), str(val))
    return f"{family} `{published.name}` ({fp16})", zoo.shrink(published, tmp / "params.yaml", changes, add=added)


def prepare(family: str, tmp: Path) -> tuple[str, Path]:
    """(the family's name in docs/guides/modelzoo.md, its shrunk YAML in `tmp`, with its synthetic data there)."""
    name, params = _prepare_recipe(family, RECIPES[family], tmp) if family in RECIPES else _prepare_gpt(family, tmp)
    _set_micro_batch_sizes(params, 4)
    return name, params


def try_family(family: str) -> str:
    """One row of docs/guides/modelzoo.md's table: `| family, YAML | result |`."""
    with tempfile.TemporaryDirectory() as tmp:
        name = family
        try:
            name, params = prepare(family, Path(tmp))
            return f"| {name} | {measure(Path(tmp), params)} |"
        except Exception as e:  # noqa: BLE001 - a row per family, whatever stopped it
            traceback.print_exc()
            return f"| {name} | fails: {str(e).strip().splitlines()[-1][:200]} |"


def main(argv: list) -> int:
    why = zoo.missing()
    if why:
        print(why)
        return 1
    rows = [try_family(family) for family in (argv or (*FAMILIES, *RECIPES))]
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
