"""tessel: an ahead-of-time inference compiler for convolutional networks on NVIDIA Tensor Cores.

    import numpy as np, tessel
    sess = tessel.InferenceSession("resnet50.onnx", device="cuda", batch=8)
    x = np.random.rand(*sess.get_inputs()[0].shape).astype(np.float32)
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})

    tessel.compile("resnet50.onnx", "resnet50.tsl", target="sm_90a")  # no GPU needed
    engine = tessel.InferenceSession("resnet50.tsl")                   # loads, compiles nothing

    dyn = tessel.InferenceSession("resnet50.onnx", device="cuda", batch=(1, 64))  # any batch 1..64

On the GPU, PyTorch or CuPy tensors already there are run in place (no copies) on their
current stream, and the outputs come back as DLPack arrays (torch.from_dlpack takes them).
`python -m tessel compare MODEL --against onnxruntime` (or `tessel compare`) checks tessel
against onnxruntime or its own CPU reference, layer by layer with --bisect.
"""

from ._core import Error
from ._session import (
    BATCH_DIM,
    CompileResult,
    InferenceSession,
    InvalidArgument,
    Launch,
    NodeArg,
    compile,
    cuda_available,
)

__all__ = [
    "BATCH_DIM",
    "CompileResult",
    "Error",
    "InferenceSession",
    "InvalidArgument",
    "Launch",
    "NodeArg",
    "compile",
    "cuda_available",
]
__version__ = "0.1.0"
