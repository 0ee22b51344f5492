"""checkpoint-studio's remote scripts (antont-cerebras/checkpoint-studio, MIT; see
checkpoint_studio/README.md) read checkpoints that cstorch wrote, unmodified.

The tool runs each script with `python` after putting its parameters (a JSON object) in
the script's one `"__PARAMS__"` string literal; the tests do the same and run the result
with `runpy` in this process (a fresh interpreter would only add the imports' time). The checkpoints
come from a small custom loop (backend, compile, trace, DataExecutor,
checkpoint_closure, `cstorch.save`) run on CSX and on the CPU backend:
- `dump.py` lazily loads one with `cstorch.load(path, map_location=None)` and reports each
  tensor's name, dtype, shape and item size;
- `value_diff.py` loads two, compares every named pair in threads and reports the
  largest difference: CSX against CPU within 1e-5 (relative), and a negative control
  (before against after training) that differs."""
import contextlib
import io
import json
import os
import runpy

import torch

import cstorch

from .support import HERE, Classifier, classifier_loader, sgd

SENTINEL, PROGRESS = "CKPT_EXPLORER_META:", "CKPT_EXPLORER_PROG:"


def _train(device, out_dir, steps=4):
    """Train `Classifier` for `steps` steps; checkpoints (the model's flat state dict) on
    steps 2 and 4 as `checkpoint_<step>.mdl`, and the initial weights as `initial.mdl`."""
    cstorch._backend._reset_backend()
    backend = cstorch.backend(device)
    torch.manual_seed(0)
    model = Classifier()
    cstorch.save(model.state_dict(), os.path.join(out_dir, "initial.mdl"))
    compiled = cstorch.compile(model, backend)
    optimizer = sgd(model)

    @cstorch.trace
    def training_step(batch):
        loss = compiled(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    @cstorch.checkpoint_closure
    def save_checkpoint(step):
        cstorch.save(model.state_dict(), os.path.join(out_dir, f"checkpoint_{step}.mdl"))

    executor = cstorch.utils.data.DataExecutor(classifier_loader(), num_steps=steps, checkpoint_steps=2)
    for step, batch in enumerate(executor, start=1):
        training_step(batch)
        save_checkpoint(step)
    cstorch._backend._reset_backend()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _run_script(name, params, tmp_path):
    """Run checkpoint_studio/<name> with `params` in its `"__PARAMS__"` slot; the
    sentinel-tagged JSON lines it printed."""
    source = open(os.path.join(HERE, "checkpoint_studio", name), encoding="utf-8").read()
    assert source.count('"__PARAMS__"') == 1
    script = tmp_path / f"run_{name}"
    script.write_text(source.replace('"__PARAMS__"', json.dumps(json.dumps(params))), encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(script), run_name="__main__")
    return [json.loads(line[len(SENTINEL):]) for line in out.getvalue().splitlines() if line.startswith(SENTINEL)]


def test_dump_and_value_diff_read_csx_and_cpu_checkpoints(tmp_path):
    dirs = {device: tmp_path / device for device in ("CSX", "CPU")}
    final = {}
    for device, path in dirs.items():
        path.mkdir()
        final[device] = _train(device, str(path))

    [dump] = _run_script("dump.py", {"uri": str(dirs["CSX"] / "checkpoint_4.mdl"), "want_s3": False,
                                     "sentinel": SENTINEL, "progress": PROGRESS}, tmp_path)
    assert "error" not in dump, dump
    assert dump["tensors"] == [{"name": k, "dtype": str(v.dtype), "shape": list(v.shape), "itemsize": v.element_size()}
                               for k, v in final["CSX"].items()]

    names = list(final["CSX"])

    def value_diff(old, new):
        results = _run_script("value_diff.py", {
            "old": str(old), "new": str(new), "pairs": [[n, n] for n in names], "want_values": True,
            "want_hist": True, "full_hist": False, "bins": 16, "jobs": 2, "sentinel": SENTINEL,
            "status": "CKPT_EXPLORER_STAT:"}, tmp_path)
        summary = results.pop()["summary"]
        assert summary["tensors"] == summary["compared"] == len(names), results
        return {r["name"]: r for r in results}

    same = value_diff(dirs["CSX"] / "checkpoint_4.mdl", dirs["CPU"] / "checkpoint_4.mdl")
    for name in names:
        scale = final["CPU"][name].abs().max().item()
        assert same[name]["values"]["max_abs"] <= 1e-5 * scale, same[name]

    changed = value_diff(dirs["CSX"] / "initial.mdl", dirs["CSX"] / "checkpoint_2.mdl")
    assert all(changed[name]["values"]["differing"] > 0 for name in names), changed
