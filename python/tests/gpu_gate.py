"""CTest's python_gpu: runs test_gpu.py where torch >= 2.4 sees a CUDA device; elsewhere prints why and
exits 77, which CTest reports as Skipped (never as passed)."""
import os
import subprocess
import sys

SKIP = 77


def why_not():
    try:
        import torch
    except ImportError:
        return "no torch (the GPU tests need PyTorch >= 2.4 with CUDA)"
    if not hasattr(torch.library, "custom_op"):
        return f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return ""


if __name__ == "__main__":
    reason = why_not()
    if reason:
        print(f"SKIPPED: python/tests/test_gpu.py: {reason}")
        sys.exit(SKIP)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                              os.path.join(here, "test_gpu.py")]))
