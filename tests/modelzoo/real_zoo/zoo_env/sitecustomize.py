"""Start-up of the processes that run the real Model Zoo in tests (this folder is first on
their PYTHONPATH, so Python imports this module when it starts).

torchvision's C++ operators: the real Model Zoo imports torchvision's Python transforms
wherever its trainer is imported (`cerebras.modelzoo.data.vision.preprocessing`). The
torchvision wheel on PyPI for torch 2.13 is built against torch's CUDA build, so beside
the CPU torch the tests run with, its extension library cannot load, and its import then
fails registering fake kernels for operators that were never declared ("operator
torchvision::nms does not exist"). Declaring those operators' schemas (no kernels) lets
the pure-Python part of torchvision import; calling one of them raises torch's usual
"no kernel" error. Where torchvision's extension loads, nothing is declared."""
import importlib.util

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


def _declare_torchvision_ops() -> None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    import ctypes
    import glob
    import os

    import torch

    libs = glob.glob(os.path.join(spec.submodule_search_locations[0], "_C*.so"))
    try:
        for lib in libs:
            ctypes.CDLL(lib)
        return  # the extension loads: torchvision declares its own operators
    except OSError:
        pass
    global _LIBRARY
    _LIBRARY = torch.library.Library("torchvision", "DEF")
    for schema in _TORCHVISION_OPS:
        _LIBRARY.define(schema)


_declare_torchvision_ops()
