"""One checkpoint-format registry (`cstorch.storage.FORMATS`, `detect`) serves
`cstorch.load`/`save`, the converters of `cstorch.checkpoint` and its command line; the
storage layer imports nothing above it and needs no function-local import."""
from __future__ import annotations

import ast
import json
import os
import pathlib

import numpy as np
import pytest
import torch

import cstorch
from cstorch.checkpoint import convert, info
from cstorch.checkpoint.__main__ import main
from cstorch.storage import FORMATS, CheckpointFormat, detect, state_from_layout
from cstorch.storage.formats import register
from cstorch.storage.layout import Layout, layout_of

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _files(tmp_path):
    state = {"w": torch.arange(4.0), "n": 3}
    h5 = tmp_path / "a.mdl"
    cstorch.save(state, h5)
    orbax = tmp_path / "a_orbax"
    convert(h5, orbax, "orbax")
    pt = tmp_path / "a.pt"
    torch.save(state, pt)
    legacy = tmp_path / "legacy.pt"
    torch.save(state, legacy, _use_new_zipfile_serialization=False)
    return state, {"h5": h5, "orbax": orbax, "torch": pt, "legacy": legacy}


def test_the_registry_lists_every_format_once_in_detection_order():
    assert list(FORMATS) == ["h5", "orbax", "torch"]
    with pytest.raises(ValueError, match="registered already"):
        register(FORMATS["h5"])


def test_detect_finds_each_format(tmp_path):
    state, files = _files(tmp_path)
    for name, path in files.items():
        fmt = detect(path)
        assert fmt.name == ("torch" if name == "legacy" else name)
        back = cstorch.load(path)
        assert torch.equal(back["w"] + 0, state["w"]) and back["n"] == 3, name
    with pytest.raises(FileNotFoundError, match="No checkpoint"):
        detect(tmp_path / "missing")


def _toy_format() -> CheckpointFormat:
    """A JSON format, to show that load, convert, info and the CLI all go through FORMATS."""
    def detect_toy(path):
        return str(path).endswith(".toy")

    def read(path, allow_pickle=False):
        with open(path) as f:
            doc = json.load(f)
        state = {k: torch.tensor(v) if isinstance(v, list) else v for k, v in doc.items()}
        layout = layout_of(state)
        layout.source = str(path)
        return layout

    def write(layout: Layout, path, allow_pickle=False):
        state = state_from_layout(layout)
        with open(path, "x") as f:
            json.dump({k: v.tolist() if isinstance(v, torch.Tensor) else v for k, v in state.items()}, f)

    def load(path, map_location=None, allow_pickle=False, **_):
        return state_from_layout(read(path))

    return CheckpointFormat("toy", "toy JSON file", detect_toy, read, write, load)


def test_load_convert_info_and_the_cli_share_the_registry(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(FORMATS, "toy", _toy_format())
    state, files = _files(tmp_path)
    convert(files["h5"], tmp_path / "a.toy", "toy")  # converters write through FORMATS
    back = cstorch.load(tmp_path / "a.toy")  # cstorch.load detects through FORMATS
    assert back["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and back["n"] == 3
    assert info(tmp_path / "a.toy")[0]["format"] == "toy"
    assert main(["convert", str(tmp_path / "a.toy"), str(tmp_path / "b.mdl"), "--to", "h5"]) == 0  # the CLI too
    assert main(["convert", str(files["torch"]), str(tmp_path / "b.toy"), "--to", "toy"]) == 0
    assert json.loads((tmp_path / "b.toy").read_text()) == {"w": [0.0, 1.0, 2.0, 3.0], "n": 3}
    assert torch.equal(cstorch.load(tmp_path / "b.mdl")["w"] + 0, state["w"])
    capsys.readouterr()


def test_converting_to_an_unknown_format_is_refused(tmp_path):
    _, files = _files(tmp_path)
    with pytest.raises(ValueError, match="Unknown checkpoint format 'zip'; cstorch writes h5, orbax, torch"):
        convert(files["h5"], tmp_path / "x", "zip")


def test_info_reads_torch_pickles_too(tmp_path):
    _, files = _files(tmp_path)
    header, entries = info(files["torch"])
    assert header["format"] == "torch" and {e.key for e in entries} == {"w", "n"}


# -- layering -------------------------------------------------------------------------------------
def _imports(path: pathlib.Path):
    """(module imported, at module level?) for every import of a source file."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            yield base, id(node) in top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top


@pytest.mark.parametrize("package", ["storage", "checkpoint"])
def test_no_function_local_imports(package):
    for path in sorted((ROOT / "cstorch" / package).glob("*.py")):
        local = [name for name, at_top in _imports(path) if not at_top]
        assert not local, f"{path.name} imports {local} inside a function"


def test_storage_imports_nothing_above_it():
    for path in sorted((ROOT / "cstorch" / "storage").glob("*.py")):
        for name, _ in _imports(path):
            assert not name.lstrip(".").startswith(("checkpoint", "trainer")), f"{path.name} imports {name}"
            assert not name.startswith(("cstorch.checkpoint", "cstorch.trainer")), f"{path.name} imports {name}"


def test_the_h5_writer_is_what_save_uses(tmp_path, monkeypatch):
    written = []
    fmt = FORMATS["h5"]
    monkeypatch.setitem(FORMATS, "h5", CheckpointFormat(fmt.name, fmt.description, fmt.detect, fmt.read,
                                                        lambda layout, p, allow_pickle=False: written.append(p)
                                                        or fmt.write(layout, p), fmt.load))
    cstorch.save({"a": np.arange(3)}, tmp_path / "x.mdl")
    assert written == [tmp_path / "x.mdl"] and os.path.exists(tmp_path / "x.mdl")
