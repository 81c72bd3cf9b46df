"""Lab 09 on a GPU: the batcher, fp16 autocast and a CUDA graph replay against the CPU model.

The batcher and its forward pass are lab 09's (lab_utils.labs.lab09.lesson), through the bench's make_batcher and
local_runner."""
from __future__ import annotations

from ...compare import max_abs_diff
from .serving import wide_head_model, burst, request_images, run_load
from .bench import local_runner, make_batcher


# ---- GPU ---------------------------------------------------------------------------------------------------------------

def gpu_check(width: int = 512) -> dict[str, str]:
    """On a GPU: lab 09's batcher, fp16 autocast and a CUDA graph replay, each against the CPU model."""
    import torch

    names = ("dynamic batcher on the GPU", "fp16 autocast", "CUDA graph replay")
    if not torch.cuda.is_available():
        return {name: "skipped: no GPU" for name in names}
    results = {}
    cpu_model, images = wide_head_model(width), request_images(128)
    with torch.inference_mode():
        expected = cpu_model(images)
    gpu_model = wide_head_model(width, device="cuda")
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False  # compare fp32 with fp32
    try:
        run = run_load(make_batcher(local_runner(gpu_model, "cuda"), 32, 2), burst(len(images)), images, drain_s=20)
        got = torch.stack([r.output for r in run.requests])
        diff = max_abs_diff(got, expected)
        results[names[0]] = "passed" if diff <= 1e-4 else f"failed: max |GPU - CPU| = {diff:.1e} > 1e-4"
        x = images.cuda()
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
            half = gpu_model(x).float().cpu()
        relative = max_abs_diff(half, expected) / float(expected.abs().max())
        results[names[1]] = ("passed" if relative <= 2e-2 else
                             f"failed: fp16 differs from fp32 by {relative:.1%} of the largest logit")
        static_x = x.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode():
            with torch.cuda.stream(stream):
                for _ in range(3):
                    gpu_model(static_x)  # warm up on a side stream before capture, as torch's docs advise
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_y = gpu_model(static_x)
            static_x.copy_(x)
            graph.replay()
            diff = max_abs_diff(static_y, expected)
        results[names[2]] = "passed" if diff <= 1e-4 else f"failed: max |replay - CPU| = {diff:.1e} > 1e-4"
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    return results
