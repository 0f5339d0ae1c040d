"""CUDA-graph timing for PyTorch peers, shared by the bench/ scripts: warm up on a side
stream (so cudnn.benchmark and lazy init happen outside capture), capture `calls` calls of
`fn` in one CUDA graph, and return the median milliseconds per call over `reps` replays,
each bracketed by CUDA events."""
import torch


def graph_ms_per_call(fn, calls=1, warm=5, reps=50):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        ts.append(start.elapsed_time(end) / calls)
    ts.sort()
    return ts[len(ts) // 2]
