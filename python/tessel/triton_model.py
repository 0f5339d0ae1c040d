"""A tessel model in Triton Inference Server's Python backend.

`tessel serve --export-repo DIR` copies this file into the model repository as
`<model>/1/model.py`; Triton's Python backend imports it in a stub process per model instance
(one per GPU, or one on the CPU) and calls `TritonPythonModel.execute` with the requests its
dynamic batcher gathered. Everything it needs from the repository is in config.pbtxt: the model
file beside this one and the parameters `device`, `precision`, `profile_every` (and `python_path`, where
`tessel serve` runs a tessel that is not installed). The Python that runs the stub must have
the tessel package and numpy < 2 (the Python backend of Triton 2.51 reads numpy 1's C
structures) in its own site-packages: the stub's embedded interpreter ignores PYTHONPATH.

One batch of requests becomes one run of a tessel session: the requests' inputs, views of the
Python backend's shared memory, are gathered along the batch axis (on the GPU each is copied from
there straight into the engine's input buffer) and the outputs are split back per request. A request tessel refuses
gets that one line as its error; the batch's other requests still run, and the server goes on.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, List, Sequence, Tuple

import numpy as np

# Present in the stub process only (the Python backend puts it on sys.path).
import triton_python_backend_utils as pb_utils


class BatchSessions:
    """The tessel session of one model instance, run on any batch from 1 to max_batch.

    A model with a batch axis opens one dynamic-batch session over (1, max_batch): on the GPU
    one engine with a plan per profile batch (1, 2, 4, ..., max_batch and each multiple of
    profile_every; the engine runs a batch
    between profiles padded or split, as its predicted times say), on the CPU the reference
    executor at each run's batch. run() feeds a batch as the batcher formed it. An engine file
    (.tsl) keeps the batch range it was compiled with (`tessel serve` sets max_batch to its
    largest); a batch below its smallest, which only a static engine or one compiled for a
    range such as 8:64 has, is padded up to it here. A model without a batch axis runs as it is.
    """

    def __init__(self, path: str, device: str, precision: str, max_batch: int,
                 batched: bool = True, profile_every: int = 0) -> None:
        import tessel

        self.max_batch = max_batch
        if path.endswith(".tsl"):
            self._session = tessel.InferenceSession(path, device=device)
        elif batched and max_batch > 1:
            self._session = tessel.InferenceSession(path, device=device, precision=precision,
                                                    batch=(1, max_batch),
                                                    profile_every=profile_every or None)
        else:
            self._session = tessel.InferenceSession(path, device=device, precision=precision,
                                                    batch=1)
        # The smallest batch the session runs; 1 where run() is never asked to pad.
        self._min_batch = self._session.batch_range[0] if batched else 1
        self.inputs = self._session.get_inputs()
        self.outputs = self._session.get_outputs()

    @property
    def session(self):
        """The tessel.InferenceSession the batches run on."""
        return self._session

    def run(self, feeds: Sequence[Dict[str, np.ndarray]], n: int) -> List[np.ndarray]:
        """Runs the requests' feeds (each name -> array) as one batch of n items, their rows
        concatenated in order without a host copy (InferenceSession.run_gathered); the outputs
        have n rows."""
        parts = {k: [f[k] for f in feeds] for k in feeds[0]}
        if n >= self._min_batch:
            return self._session.run_gathered(None, parts)
        pad = self._min_batch - n
        for v in parts.values():
            v.append(np.zeros((pad,) + v[0].shape[1:], v[0].dtype))
        return [o[:n] for o in self._session.run_gathered(None, parts)]


def _select_gpu(device_id: int) -> None:
    """Makes the instance's GPU the only one this process sees, before tessel opens CUDA: a tessel
    session runs on device 0 of its process, and Triton starts one stub process per instance.
    device_id counts the GPUs Triton sees, which $CUDA_VISIBLE_DEVICES may already narrow."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",")] if visible else None
    os.environ["CUDA_VISIBLE_DEVICES"] = ids[device_id] if ids else str(device_id)


class TritonPythonModel:
    """The Python backend's model interface (initialize, execute, finalize)."""

    def initialize(self, args: Dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        # `tessel serve` names the tessel it runs: the stub's interpreter ignores PYTHONPATH.
        for p in reversed(params.get("python_path", "").split(os.pathsep)):
            if p and p not in sys.path:
                sys.path.insert(0, p)
        device = params.get("device", "cuda")
        if device == "cuda" and args.get("model_instance_kind") == "GPU":
            _select_gpu(int(args["model_instance_device_id"]))
        path = os.path.join(args["model_repository"], args["model_version"], params["model_file"])
        self._max_batch = max(int(config.get("max_batch_size", 0)), 1)
        self._batched = int(config.get("max_batch_size", 0)) > 0
        self._sessions = BatchSessions(path, device, params.get("precision", "fp16"),
                                       self._max_batch, self._batched,
                                       int(params.get("profile_every", "0")))
        self._input_names = [i.name for i in self._sessions.inputs]
        self._output_names = [o.name for o in self._sessions.outputs]

    def execute(self, requests: Sequence["pb_utils.InferenceRequest"]) -> list:
        # Triton has checked every request against config.pbtxt (names, types, shapes, the
        # batch limit) before it gets here; what tessel still refuses is answered per request.
        feeds, rows, responses = [], [], [None] * len(requests)
        for i, request in enumerate(requests):
            try:
                arrays = {n: pb_utils.get_input_tensor_by_name(request, n).as_numpy()
                          for n in self._input_names}
            except Exception as e:  # an input the batcher let through that numpy cannot view
                responses[i] = self._error(e)
                continue
            feeds.append((i, arrays))
            rows.append(next(iter(arrays.values())).shape[0] if self._batched else 1)
        if feeds:
            for (i, _), outputs in zip(feeds, self._run(feeds, rows)):
                responses[i] = outputs
        return responses

    def _run(self, feeds: List[Tuple[int, Dict[str, np.ndarray]]], rows: List[int]) -> list:
        """One tessel run for all requests; on an error, each request alone, so that one bad
        request fails by itself."""
        try:
            return self._responses([f for _, f in feeds], rows)
        except Exception as e:
            if len(feeds) == 1:
                return [self._error(e)]
        out = []
        for (_, f), n in zip(feeds, rows):
            try:
                out += self._responses([f], [n])
            except Exception as e:
                out.append(self._error(e))
        return out

    def _responses(self, feeds: List[Dict[str, np.ndarray]], rows: List[int]) -> list:
        if not self._batched:  # the model has no batch axis: one run per request
            return [self._response(self._sessions.session.run(None, f), 0, 1) for f in feeds]
        # The requests' inputs are views of the Python backend's shared memory, each copied
        # from there straight to the GPU.
        outputs = self._sessions.run(feeds, sum(rows))
        responses, start = [], 0
        for n in rows:
            responses.append(self._response(outputs, start, start + n))
            start += n
        return responses

    def _response(self, outputs: List[np.ndarray], start: int, stop: int):
        if self._batched:
            outputs = [o[start:stop] for o in outputs]
        return pb_utils.InferenceResponse(
            output_tensors=[pb_utils.Tensor(n, np.ascontiguousarray(o))
                            for n, o in zip(self._output_names, outputs)])

    @staticmethod
    def _error(e: Exception):
        line = str(e).splitlines()[0] if str(e) else type(e).__name__
        return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(line))

    def finalize(self) -> None:
        self._sessions = None
