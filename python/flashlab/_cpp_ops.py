"""Which registration of flashlab::fwd and flashlab::bwd torch_ops.py makes, and the C++ one's build.

  "cpp"     csrc/ops.cpp: the ops defined in C++ (TORCH_LIBRARY), their CUDA kernels and fwd's autograd in
            C++, so a call on CUDA tensors never enters Python (issue 16: the Python body cost ~45 us a
            call). Built on first use with torch.utils.cpp_extension.load (a C++ compiler, ninja and the
            CUDA headers needed; ~30-60 s, once: the build is cached under ~/.cache/flashlab/torch_ops/,
            one folder per source, header and torch version). torch_ops.py adds the CPU kernels and the
            fake implementations from Python.
  "python"  the pure-Python torch.library.custom_op of torch_ops.py, as before.

FLASHLAB_TORCH_OPS picks: unset tries "cpp" and falls back to "python" with a one-time warning saying why;
"python" forces the Python ops; "cpp" forces the C++ ops and raises when they cannot be built.

The extension does not link libflashlab.so: choose() hands it the addresses of flashlab_forward_v1 and
flashlab_backward_v1 from the library ctypes loaded (torch.ops.flashlab._set_entry_points).
"""
import ctypes
import hashlib
import os
import re
import sys
import warnings

from . import _abi

ENV = "FLASHLAB_TORCH_OPS"
NAME = "flashlab_ops"
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "csrc", "ops.cpp")


class Unavailable(Exception):
    """Why the C++ ops cannot be used here; quiet ones fall back without a warning."""

    def __init__(self, reason, quiet=False):
        super().__init__(reason)
        self.quiet = quiet


def _header_dir():
    """capi/include of the clone this package sits in, or a copy next to the package (flashlab/include/)."""
    for d in (os.path.join(HERE, "include"), os.path.join(HERE, os.pardir, os.pardir, "capi", "include")):
        if os.path.isfile(os.path.join(d, "flashlab.h")):
            return os.path.abspath(d)
    raise Unavailable("capi/include/flashlab.h not found (the C++ ops build from a clone, or from a copy of the "
                      "header in flashlab/include/)")


def _header_abi(header_dir):
    with open(os.path.join(header_dir, "flashlab.h")) as f:
        match = re.search(r"#define\s+FLASHLAB_ABI_VERSION\s+(\d+)", f.read())
    return int(match.group(1)) if match else None


def _build_directory(torch, header_dir):
    """One folder per (ops.cpp, flashlab.h, torch, CUDA): a changed source or header is a fresh build."""
    key = hashlib.sha256()
    for path in (SOURCE, os.path.join(header_dir, "flashlab.h")):
        with open(path, "rb") as f:
            key.update(f.read())
    key.update(f"{torch.__version__} {torch.version.cuda} {sys.version_info[:2]}".encode())
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "flashlab", "torch_ops", key.hexdigest()[:16])


def _summary(error):
    """The first line of a build error and its first compiler error line: enough to say why."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    first = next((line for line in lines[1:] if "error" in line.lower()), "")
    return (lines[0] + (" ... " + first if first else ""))[:400]


def _load(torch):
    """Builds (or finds built) and loads csrc/ops.cpp, then hands it the C ABI's entry points."""
    if torch.version.cuda is None:
        raise Unavailable(f"torch {torch.__version__} has no CUDA (the C++ ops are CUDA kernels)", quiet=True)
    try:
        lib = _abi.lib()
    except _abi.FlashlabError as e:  # the Python ops raise this same error at their first call
        raise Unavailable(str(e), quiet=True) from None
    header_dir = _header_dir()
    header_abi, library_abi = _header_abi(header_dir), lib.flashlab_abi_version()
    if header_abi != library_abi:
        raise Unavailable(f"{header_dir}/flashlab.h is ABI {header_abi} and {lib.path} ABI {library_abi}: rebuild "
                          "the library from this checkout")
    try:
        from torch.utils import cpp_extension
        build_dir = _build_directory(torch, header_dir)
        os.makedirs(build_dir, exist_ok=True)
        if not os.path.isfile(os.path.join(build_dir, NAME + ".so")):
            print(f"flashlab: building the C++ torch ops (once, ~30-60 s) in {build_dir}", file=sys.stderr,
                  flush=True)
        cpp_extension.load(name=NAME, sources=[SOURCE], extra_include_paths=[header_dir], extra_cflags=["-O2"],
                           build_directory=build_dir, with_cuda=True, is_python_module=False, verbose=False)
    except Exception as e:  # no compiler, no ninja, no CUDA headers, a compile error
        raise Unavailable(_summary(e)) from e
    address = lambda fn: ctypes.cast(fn, ctypes.c_void_p).value  # noqa: E731
    torch.ops.flashlab._set_entry_points(address(lib.flashlab_forward_v1), address(lib.flashlab_backward_v1),
                                         library_abi)


def choose(torch):
    """("cpp", "") when the C++ ops are now registered, else ("python", why not); FLASHLAB_TORCH_OPS
    decides as the module docstring says."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted not in ("", "cpp", "python"):
        raise ValueError(f"{ENV}={wanted!r}: expected 'python', 'cpp', or unset (C++ when it builds)")
    if wanted == "python":
        return "python", f"{ENV}=python"
    try:
        _load(torch)
        return "cpp", ""
    except Unavailable as e:
        reason = str(e)
        if wanted == "cpp":
            raise RuntimeError(f"{ENV}=cpp but flashlab's C++ torch ops are unavailable: {reason}") from e
        if not e.quiet:
            warnings.warn(f"flashlab: the C++ torch ops could not be built ({reason}); using the Python custom ops, "
                          f"which cost ~50 us more a call. {ENV}=cpp shows the whole error; {ENV}=python "
                          "chooses the Python ops without this warning", RuntimeWarning, stacklevel=3)
        return "python", reason
