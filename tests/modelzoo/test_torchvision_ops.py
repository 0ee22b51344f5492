"""torchvision beside the CPU torch (`cstorch.trainer.torchvision_ops`): the torchvision
that `requirements-modelzoo.txt` installs imports once cstorch has declared its operators,
as the real Model Zoo's import needs, with nothing added to PYTHONPATH but the guide's."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

DEPS = Path(__file__).resolve().parents[2] / ".modelzoo-deps"

pytestmark = pytest.mark.skipif(not (DEPS / "torchvision").is_dir(),
                                reason=f"torchvision of requirements-modelzoo.txt is not installed at {DEPS}")


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(DEPS))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_torchvision_imports_after_the_declaration_and_its_operators_are_known():
    declared = _python(
        "from cstorch.trainer.torchvision_ops import declare_torchvision_ops\n"
        "declare_torchvision_ops(); declare_torchvision_ops()\n"  # a second call is a no-op
        "import torch, torchvision.transforms\n"
        "print(torch.ops.torchvision.nms.default._schema)\n")
    assert declared.returncode == 0, declared.stderr[-3000:]
    assert "torchvision::nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor" in declared.stdout


def test_without_it_the_wheel_fails_where_its_extension_cannot_load():
    """What the declaration is for; where the extension loads (a matching torchvision
    build) the import works either way and there is nothing to show."""
    probe = _python("import ctypes, glob, os, importlib.util\n"
                    "d = importlib.util.find_spec('torchvision').submodule_search_locations[0]\n"
                    "[ctypes.CDLL(p) for p in glob.glob(os.path.join(d, '_C*.so'))]\n")
    if probe.returncode == 0:
        pytest.skip("torchvision's extension loads beside this torch: it declares its own operators")
    plain = _python("import torchvision.transforms")
    assert plain.returncode != 0 and "torchvision::nms" in plain.stderr
