"""What held the memory of an 8B sweep's token-tree rows: one masked attention call with Llama-3.1-8B's heads (32 query
heads over 8 key/value heads) on a packed row of W tokens after a P-token beginning, its score matrix whole (as before)
and in query chunks (`models.passes.attention.SCORE_BYTES`), on PyTorch's math kernel: the one a GPU falls back on for a
boolean mask with grouped heads (its fused kernels refuse that combination; the CPU's own kernel takes it). Each runs in
a fresh process on the CPU; the peak resident memory above the inputs' is printed beside the float32 scores' size, rows
x 32 x W x (P + W) x 4 bytes.
Usage: python benchmarks/memory.py [W ...]"""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import sys, torch
from llmaudit.models.passes import attention
W, P, whole = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "whole"
if whole:
    attention.SCORE_BYTES = 1 << 62
torch.manual_seed(0)
q = torch.randn(1, 32, W, 16)
k, v = torch.randn(1, 8, P + W, 16), torch.randn(1, 8, P + W, 16)
mask = torch.ones(1, 1, W, P + W, dtype=torch.bool).tril(P)
def peak():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
before = peak()
with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
    attention.grouped_sdpa(torch.nn.Module(), q, k, v, mask)
print(peak() - before)
"""


def peak_above_inputs(width: int, before: int, whole: bool) -> int:
    """Peak resident bytes of one masked attention call above what its inputs held, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(width), str(before), "whole" if whole else "chunked"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def main(widths: list[int]) -> None:
    before = 100
    print(f"{'row W':>6} {'scores (GiB)':>13} {'whole: peak (GiB)':>18} {'chunked: peak (GiB)':>20}")
    for width in widths:
        scores = 32 * width * (before + width) * 4 / 2**30
        whole, chunked = (peak_above_inputs(width, before, w) / 2**30 for w in (True, False))
        print(f"{width:>6} {scores:>13.2f} {whole:>18.2f} {chunked:>20.2f}")


if __name__ == "__main__":
    main([int(w) for w in sys.argv[1:]] or [1000, 2000, 4000])
