"""torchvision's C++ operators, declared where its extension library cannot load.

The real Model Zoo imports torchvision's Python transforms wherever its trainer is
imported (`cerebras.modelzoo.data.vision.preprocessing`). The torchvision wheel that pip
resolves for a torch release may be built against torch's CUDA build; beside the CPU
torch its extension library (`torchvision/_C*.so`) cannot load, and torchvision's import
then fails registering fake kernels for operators that were never declared ("operator
torchvision::nms does not exist"), so every Model Zoo model fails at import.

`declare_torchvision_ops()` runs before cstorch imports anything of the real Model Zoo
(`real_modelzoo`: the Trainer and `cszoo` resolve a YAML's names through it; and
`cerebras/modelzoo/__init__.py` when it loads the real package): where the extension loads it does nothing (torchvision declares its
own operators); elsewhere it declares the operators' schemas, without kernels, so the
pure-Python part of torchvision imports, and calling one of the operators raises torch's
usual "no kernel" error. The Model Zoo's language models never call them."""
import ctypes
import glob
import importlib.util
import os
import sys

#: torchvision's C++ operator schemas (torchvision/csrc/ops), declared only where its
#: extension library cannot be loaded
_TORCHVISION_OPS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,"
    " int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width,"
    " int sampling_ratio, bool aligned) -> Tensor",
    "qroi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,"
    " int sampling_ratio, bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,"
    " int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels,"
    " SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width)"
    " -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width)"
    " -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height,"
    " SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h,"
    " SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups,"
    " SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask,"
    " Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h,"
    " SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask)"
    " -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
)


_LIBRARY = None  # the torch.library.Library holding the declarations, once made


def declare_torchvision_ops() -> None:
    """Declare torchvision's operators where its extension cannot load (module docstring);
    idempotent, and a no-op where torchvision is not installed or already imported."""
    global _LIBRARY
    if _LIBRARY is not None or "torchvision" in sys.modules:
        return
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    try:
        for lib in glob.glob(os.path.join(spec.submodule_search_locations[0], "_C*.so")):
            ctypes.CDLL(lib)
        return  # the extension loads: torchvision declares its own operators
    except OSError:
        pass
    import torch

    _LIBRARY = torch.library.Library("torchvision", "DEF")
    for schema in _TORCHVISION_OPS:
        _LIBRARY.define(schema)
