"""docs/api.md against the module.

- Every public name is documented: the names of ``dir(pygpu)`` and of
  ``dir(pygpu.driver)`` without a leading underscore (modules they merely
  import left out), and the public methods and attributes of their classes
  (what a class adds to Python's built-in types, plus the interop dunders).
  A name is documented when it appears as a word inside a `code span` of
  docs/api.md; a class's member, when ``Class.member`` does, or the member
  does in a section (## heading) that names the class.  ``X_<dtype>`` in the
  docs stands for ``X_int8``, ``X_float32``, ...
- Every public callable has a docstring, and ``inspect.signature`` works on
  it (C functions through a ``name(...)\\n--\\n\\n`` first docstring line).
- Every name the docs present as PyGPU's exists: ``pygpu.X.y`` anywhere,
  ``X(...)`` calls, ``Class.member`` and ``.member`` in code spans, looked
  up in the module of the section (pygpu.driver's and pygpu.lowlevel's
  sections under "Compatibility", else pygpu) and its classes.

The failures list exactly what is missing.  The checks run on the backend in
use: members a backend lacks (``__cuda_array_interface__`` off CUDA) are
not asked of the docs there, and their mentions are accepted (BACKEND_ONLY).
"""
import builtins
import functools
import inspect
import os
import re
import types

import pytest

import pygpu
import pygpu.driver as driver
import pygpu.lowlevel as lowlevel

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "api.md")
with open(DOCS, encoding="utf-8") as _f:
    TEXT = _f.read()

pygpu.cudaGetDevice  # noqa: B018  (the lowlevel names load on first use)

DTYPES = pygpu._LOWLEVEL_DTYPES
DTYPE_NAME = re.compile(r"^(\w+?)_(%s)$" % "|".join(DTYPES))

# Dunders that are part of a class's documented interface.
INTEROP_DUNDERS = ("__dlpack__", "__dlpack_device__", "__cuda_array_interface__")

# Callables without an inspectable signature, and why that is right.
NO_SIGNATURE = {
    "BackendWarning": "a warning class: takes the message, as every Warning does",
}

# Names the docs use that are not PyGPU's (other libraries, CUDA, Python,
# the C API, parameters that are callables); they are not looked up.
FOREIGN = {
    # Python and NumPy
    "int", "len", "repr", "str", "hash", "bool", "float", "memoryview", "help", "isinstance", "print",
    "open", "range", "type",
    # the C API of include/pygpu/pygpu_api.h
    "Empty", "FromPointer", "PyGPU_ImportAPI", "AsArray", "StreamHandle",
    # the DLPack C exchange table's functions (include/pygpu/pygpu_dlpack.h)
    "managed_tensor_allocator", "managed_tensor_from_py_object_no_sync", "managed_tensor_to_py_object_no_sync",
    "dltensor_from_py_object_no_sync", "current_work_stream", "SetError",
    # parameters and placeholders in examples
    "allocator", "fn", "lib",
}
FOREIGN_PREFIXES = ("numpy.", "MPI.", "MPIX_", "mpi4py", "np.", "torch.", "cupy.", "cupyx.", "cp.", "jax.", "jnp.", "numba.", "cuda.", "lib.",
                    "cuda", "hip", "PyGPUArray_", "python", "nvidia-smi", "ctypes.", "contextvars.", "os.")


def _words_in_code():
    return set(re.findall(r"[A-Za-z_]\w*", " ".join(_code_spans(TEXT))))


def _code_spans(text):
    """The `code spans` and ``` blocks of markdown `text`."""
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
    rest = re.sub(r"```[^\n]*\n.*?```", "", text, flags=re.S)
    spans = re.findall(r"`([^`]+)`", rest)        # a span may wrap onto the next line
    return blocks + [" ".join(s.split()) for s in spans if "\n\n" not in s]


def _sections(text):
    """[(heading, body)] of each ## section (its ### subsections included)."""
    parts = re.split(r"^## ", text, flags=re.M)
    return [(p.split("\n", 1)[0], p) for p in parts[1:]]


SECTIONS = _sections(TEXT)
CODE_WORDS = _words_in_code()


def _template(name):
    """DeviceArray_int64 -> DeviceArray_<dtype> (also after a module
    prefix: pygpu.DeviceArray_<dtype>); other names as they are."""
    prefix, _dot, last = name.rpartition(".")
    m = DTYPE_NAME.match(last)
    return (prefix + _dot + f"{m.group(1)}_<dtype>") if m else name


def _documented_name(name):
    template = _template(name)
    if template != name:
        return template in TEXT
    return name in CODE_WORDS


# ---- the public names --------------------------------------------------------------

def _public(module, names):
    """{name: object} of `names` in `module`, less modules it merely imports."""
    out = {}
    for n in names:
        if n.startswith("_"):
            continue
        obj = getattr(module, n)
        if isinstance(obj, types.ModuleType) and not obj.__name__.startswith("pygpu."):
            continue
        out[n] = obj
    return out


TOP = _public(pygpu, dir(pygpu))
DRIVER = {n: o for n, o in _public(driver, dir(driver)).items() if getattr(pygpu, n, None) is not o}
PUBLIC = {**{f"pygpu.{n}": o for n, o in TOP.items()}, **{f"pygpu.driver.{n}": o for n, o in DRIVER.items()}}


def _builtin_names(cls):
    return set().union(*(dir(k) for k in cls.__mro__ if k.__module__ == "builtins"))


def _members(cls):
    """The public members `cls` adds to the built-in types, plus interop dunders."""
    names = {n for n in dir(cls) if not n.startswith("_")} - _builtin_names(cls)
    names |= {n for n in INTEROP_DUNDERS if hasattr(cls, n)}
    if issubclass(cls, BaseException):      # attributes set by __init__
        try:
            names |= {n for n in vars(cls()) if not n.startswith("_")}
        except Exception:  # noqa: BLE001 (an exception that needs arguments: class members only)
            pass
    return names


def _classes():
    """{label: class}, one label per class (X_<dtype> once for its 14
    classes; an alias such as pygpu.driver.Error once, as pygpu.GPUError)."""
    out, seen = {}, set()
    for label in sorted(PUBLIC, key=lambda lb: (lb.startswith("pygpu.driver."), lb)):
        obj = PUBLIC[label]
        if isinstance(obj, type) and obj not in seen:
            seen.add(obj)
            out.setdefault(_template(label), obj)
    return out


CLASSES = _classes()


def _own_members(cls):
    """The members `cls` adds to the public classes it derives from (so that
    each member is checked once, where it is introduced)."""
    names = _members(cls)
    for base in cls.__mro__[1:]:
        if base in CLASSES.values():
            names -= _members(base)
    return names


def _class_sections(cls_label):
    short = cls_label.rsplit(".", 1)[-1]
    pattern = re.compile(r"(?<![\w.])%s(?!\w)" % re.escape(short))
    return [body for _h, body in SECTIONS if pattern.search(body)]


def _member_documented(cls_label, member):
    short = cls_label.rsplit(".", 1)[-1]
    if f"{short}.{member}" in TEXT:
        return True
    word = re.compile(r"(?<![\w<])%s\b" % re.escape(member))
    for body in _class_sections(cls_label):
        if any(word.search(span) for span in _code_spans(body)):
            return True
    return False


# ---- (a) every public name is documented ---------------------------------------------

def test_public_names_documented():
    missing = sorted({_template(label) for label in PUBLIC if not _documented_name(label.rsplit(".", 1)[-1])})
    assert not missing, "not documented in docs/api.md: " + ", ".join(missing)


def test_class_members_documented():
    missing = []
    for label, cls in sorted(CLASSES.items()):
        for member in sorted(_own_members(cls)):
            if not _member_documented(label, member):
                missing.append(f"{label}.{member}")
    assert not missing, "not documented in docs/api.md: " + ", ".join(missing)


def test_the_core_classes_are_checked():
    for name in ("GPUArray", "Stream", "Event", "Device", "DeviceAllocation", "HostAllocation"):
        assert f"pygpu.{name}" in CLASSES and _members(CLASSES[f"pygpu.{name}"]), name


# ---- (b) docstrings and signatures ---------------------------------------------------

def _callables():
    """{label: callable}: the public functions and classes, and the methods
    of the classes (each defined once: inherited ones under their definer)."""
    out = {}
    for label, obj in PUBLIC.items():
        if callable(obj) and not isinstance(obj, types.ModuleType):
            out.setdefault(_template(label), obj)
    for label, cls in CLASSES.items():
        for member in sorted(_own_members(cls)):
            attr = inspect.getattr_static(cls, member, None)
            owner = next((k for k in cls.__mro__ if member in vars(k)), cls)
            if owner is not cls and owner.__module__ == "builtins":
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                attr = getattr(cls, member)
            if isinstance(attr, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
                continue
            if callable(attr) and not isinstance(attr, type):
                out.setdefault(f"{owner.__module__}.{_template(owner.__qualname__)}.{member}", attr)
    return out


CALLABLES = _callables()


def test_callables_have_docstrings():
    missing = sorted(label for label, obj in CALLABLES.items() if not (inspect.getdoc(obj) or "").strip())
    assert not missing, "no docstring: " + ", ".join(missing)


def test_callables_have_signatures():
    failing = []
    for label, obj in sorted(CALLABLES.items()):
        if label.rsplit(".", 1)[-1] in NO_SIGNATURE:
            continue
        try:
            inspect.signature(obj)
        except (TypeError, ValueError) as e:
            failing.append(f"{label} ({e})")
    assert not failing, "inspect.signature fails on: " + "; ".join(failing)


def test_no_signature_list_is_current():
    for name in NO_SIGNATURE:
        obj = getattr(pygpu, name)
        with pytest.raises((TypeError, ValueError)):
            inspect.signature(obj)


def test_c_signatures_come_from_docstrings():
    """C functions and methods: the text signature is the docstring's first
    line, so help() shows it too."""
    bad = []
    for label, obj in sorted(CALLABLES.items()):
        if isinstance(obj, (types.BuiltinFunctionType, types.MethodDescriptorType, types.ClassMethodDescriptorType)):
            if getattr(obj, "__text_signature__", None) is None:
                bad.append(label)
    assert not bad, "C callables without a `name(...)\\n--\\n\\n` docstring line: " + ", ".join(bad)


# ---- (c) every name the docs present exists ---------------------------------------------

def _scope(headings):
    """The module whose names the part of the docs under `headings` presents."""
    if "pygpu.driver" in headings or "PyCUDA's driver" in headings:
        return driver
    if "original PyGPU" in headings:
        return lowlevel
    return pygpu


def _subsections(body):
    """[(### heading or '', text)] of one ## section."""
    parts = re.split(r"^### ", body, flags=re.M)
    return [("", parts[0])] + [(p.split("\n", 1)[0], p) for p in parts[1:]]


@functools.lru_cache(maxsize=None)
def _namespaces(module):
    """The objects whose attributes a name in `module`'s part may be: the
    module, its classes, and pygpu's (driver classes extend them)."""
    spaces = [module, pygpu]
    for mod in {module, pygpu}:
        for n in dir(mod):
            obj = getattr(mod, n, None)
            if isinstance(obj, type) and not n.startswith("__"):
                spaces.append(obj)
                if issubclass(obj, BaseException):
                    try:
                        spaces.append(obj())
                    except Exception:  # noqa: BLE001
                        pass
    spaces.append(type(pygpu.zeros(1).flags))
    return tuple(spaces)


# Members that exist on some backends only: (name, why).
BACKEND_ONLY = {"__cuda_array_interface__": "the CUDA backend's arrays only"}


def _resolve_path(root, path):
    obj = root
    for part in path.split("."):
        if not part:
            continue
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if part in BACKEND_ONLY:
                return True
            return False
    return True


def _foreign(name):
    return name in FOREIGN or name.startswith(FOREIGN_PREFIXES) or name in dir(builtins)


def documented_names():
    """[(where, name, module)] of the names the docs present as PyGPU's."""
    found = []
    for heading, body in SECTIONS:
        for sub, text in _subsections(body):
            module = _scope(heading + " " + sub)
            for span in _code_spans(text):
                for path in re.findall(r"(?<![\w.])pygpu\.([A-Za-z_][\w.]*\w)", span):
                    found.append((heading, "pygpu." + path, pygpu))
                span = re.sub(r"(?<![\w.])(?:pygpu|PyGPU)\.[\w.]*", "", span)
                span = re.sub(r"\"[^\"]*\"|'[^']*'", "", span)       # string literals
                span = re.sub(r"\S*/\S*|\b\w+\.(?:c|h|py|pyi|md|cu|so|png)\b", "", span)   # file names
                for name in re.findall(r"(?<![\w.])([A-Za-z_][\w.]*\w)\(", span):
                    if not name.startswith("_") or name.startswith("__"):   # not `_async(...)` forms
                        found.append((heading, name, module))
                for name in re.findall(r"(?<![\w.<>)\]])(\.[A-Za-z_]\w*)", span):
                    found.append((heading, name, module))
                for name in re.findall(r"(?<![\w.])([A-Z]\w*\.[A-Za-z_]\w*)(?![\w(])", span):
                    found.append((heading, name, module))           # Class.member
    return found


def _exists(name, module):
    if name.startswith("pygpu."):
        return _resolve_path(pygpu, name[len("pygpu."):])
    if name.startswith("."):
        found = any(_resolve_path(ns, name[1:]) for ns in _namespaces(module))
    else:
        found = any(_resolve_path(ns, name) for ns in _namespaces(module))
    if found:
        return True
    # Not PyGPU's: a name of Python, NumPy, CUDA, another library ... (cuda*
    # names are PyGPU's own in the original PyGPU's section).
    head = name.lstrip(".").split(".", 1)[0]
    if module is lowlevel and head.startswith(("cuda", "hip")):
        return False
    if _foreign(name.lstrip(".")) or _foreign(head):
        return True
    # a.method() in an example, `a` a variable: the method must exist.
    if not name.startswith(".") and "." in name and head[:1].islower():
        return _exists(name[len(head):], module)
    return False


def test_documented_names_exist():
    missing = sorted({f"{name} (in '## {where}')" for where, name, module in documented_names()
                      if not _exists(name, module)})
    assert not missing, "docs/api.md presents names that do not exist: " + ", ".join(missing)


def test_documented_names_found():
    """The parser finds the names it should (a guard against a silent parser)."""
    names = {n for _w, n, _m in documented_names()}
    for expected in ("mem_alloc", "transfer_config", "pygpu.from_dlpack", ".synchronize", "cudaSetDevice"):
        assert expected in names, expected
