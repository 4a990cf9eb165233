"""Which of PyGPU's C files compile the same for every backend.

The three backends compile one set of sources with different macros
(PYGPU_BACKEND_<NAME>, the module's name, what kernel image there is).  A
file that names none of those macros, and includes no project header that
does, gives the same object whatever the backend: setup.py compiles it once
and links it into each backend (tests/test_build.py holds the rule to the
preprocessor's output).  The rule is conservative: a header that names a
backend's macro (dlpack.h, say) makes every file including it the backend's.
"""
import os
import re

BACKEND_MACROS = re.compile(
    r"\b(PYGPU_BACKEND_(CUDA|HIP|HOST)|PYGPU_MODULE_NAME|__HIP_PLATFORM_\w+|PYGPU_KERNEL_(IMAGE|SOURCE)"
    r"|PYGPU_KERNELS_ABSENT)\b")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
INCLUDE_DIRS = ("src", "include")


def backend_neutral(path, root=".", _seen=None):
    """True if the file at `path` (relative to `root`) and every project
    header it includes, directly or not, name no backend's macro."""
    seen = set() if _seen is None else _seen
    path = os.path.normpath(path)
    if path in seen:
        return True
    seen.add(path)
    with open(os.path.join(root, path)) as f:
        text = f.read()
    if BACKEND_MACROS.search(text):
        return False
    for inc in INCLUDE.findall(text):
        for base in (os.path.dirname(path),) + INCLUDE_DIRS:
            candidate = os.path.normpath(os.path.join(base, inc))
            if os.path.exists(os.path.join(root, candidate)):
                if not backend_neutral(candidate, root, seen):
                    return False
                break
        else:
            return False        # a header not found here: not known to be neutral
    return True
