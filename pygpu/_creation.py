"""GPUArray constructors built on the C primitives (empty, fill, set).

They launch nothing: zeros and full fill with memset or doubling copies,
arange is computed on the host and uploaded, concatenate and stack copy each
input into a slice of the result.
"""
import operator

import numpy as np


def _order_of(a, order):
    if order in ("A", "K", None):
        flags = a.flags
        return "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    return order


def _cast_like_numpy(value, dtype):
    """`value` as an array of `dtype`, converted as numpy.full converts it
    (numpy.copyto with unsafe casting; dtype None: the value's own)."""
    natural = np.asarray(value)
    if dtype is None:
        return natural
    out = np.empty(natural.shape, dtype)
    np.copyto(out, value, casting="unsafe")
    return out


def install(ns):
    """Define the constructors in namespace `ns` (the pygpu module dict),
    on top of its GPUArray, empty and to_gpu."""
    GPUArray, empty, to_gpu = ns["GPUArray"], ns["empty"], ns["to_gpu"]

    def zeros(shape, dtype=np.float64, order="C", allocator=None, *, stream=None):
        """A new GPUArray of zeros (PyCUDA's zeros(shape, dtype, allocator, order) too)."""
        return empty(shape, dtype, order, allocator, stream=stream).fill(0, stream)

    def ones(shape, dtype=np.float64, order="C", allocator=None, *, stream=None):
        """A new GPUArray of ones (PyCUDA's order of arguments too, as zeros)."""
        return empty(shape, dtype, order, allocator, stream=stream).fill(1, stream)

    def _filled(out, value, stream=None):
        if value.ndim == 0:
            return out.fill(value, stream)
        out.set(value, stream)          # an array value broadcasts, as in numpy.full
        return out

    def full(shape, fill_value, dtype=None, order="C", *, stream=None):
        """A new GPUArray with every element `fill_value` (dtype as NumPy infers)."""
        value = _cast_like_numpy(fill_value, dtype)
        return _filled(empty(shape, value.dtype, order, stream=stream), value, stream)

    def arange(start, stop=None, step=None, dtype=None, *, stream=None):
        """As numpy.arange, computed on the host and uploaded."""
        return to_gpu(np.arange(start, stop, step, dtype=dtype), stream)

    def _like(a, dtype, order, shape):
        if not (hasattr(a, "dtype") and hasattr(a, "shape") and hasattr(a, "flags")):
            raise TypeError(f"the *_like functions take a GPUArray or a NumPy array, not {type(a).__name__}")
        dtype = a.dtype if dtype is None else dtype
        shape = a.shape if shape is None else shape
        return empty(shape, dtype, _order_of(a, order))

    def empty_like(a, dtype=None, order="K", shape=None):
        """A new uninitialised GPUArray shaped like `a` (a GPUArray or NumPy array)."""
        return _like(a, dtype, order, shape)

    def zeros_like(a, dtype=None, order="K", shape=None):
        """A new GPUArray of zeros shaped like `a`."""
        return _like(a, dtype, order, shape).fill(0)

    def ones_like(a, dtype=None, order="K", shape=None):
        """A new GPUArray of ones shaped like `a`."""
        return _like(a, dtype, order, shape).fill(1)

    def full_like(a, fill_value, dtype=None, order="K", shape=None):
        """A new GPUArray shaped like `a`, every element `fill_value`."""
        out = _like(a, dtype, order, shape)
        return _filled(out, _cast_like_numpy(fill_value, out.dtype))

    def _as_gpu(x):
        return x if isinstance(x, GPUArray) else to_gpu(np.asarray(x))

    def concatenate(arrays, axis=0, allocator=None, *, stream=None):
        """Join GPUArrays along an existing axis (as numpy.concatenate)."""
        arrays = [_as_gpu(a) for a in arrays]
        if not arrays:
            raise ValueError("need at least one array to concatenate")
        first = arrays[0]
        if first.ndim == 0:
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        if axis is None:
            arrays = [a.ravel() for a in arrays]
            first, axis = arrays[0], 0
        axis = operator.index(axis)
        if not -first.ndim <= axis < first.ndim:
            raise np.exceptions.AxisError(axis, first.ndim)
        axis %= first.ndim
        dtype = np.result_type(*[a.dtype for a in arrays])
        for a in arrays:
            if a.ndim != first.ndim:
                raise ValueError("all the input arrays must have the same number of dimensions, but "
                                 f"the first has {first.ndim} and another has {a.ndim}")
            if any(n != m for i, (n, m) in enumerate(zip(a.shape, first.shape)) if i != axis):
                raise ValueError("all the input array dimensions except for the concatenation axis "
                                 f"must match exactly: {first.shape} and {a.shape} along axis {axis}")
        shape = list(first.shape)
        shape[axis] = sum(a.shape[axis] for a in arrays)
        out = empty(tuple(shape), dtype, stream=stream, allocator=allocator)
        index = [slice(None)] * first.ndim
        at = 0
        for a in arrays:
            index[axis] = slice(at, at + a.shape[axis])
            out[tuple(index)] = a
            at += a.shape[axis]
        return out

    def stack(arrays, axis=0, allocator=None, *, stream=None):
        """Join GPUArrays of one shape along a new axis (as numpy.stack)."""
        arrays = [_as_gpu(a) for a in arrays]
        if not arrays:
            raise ValueError("need at least one array to stack")
        shape = arrays[0].shape
        if any(a.shape != shape for a in arrays):
            raise ValueError("all input arrays must have the same shape")
        nd = len(shape) + 1
        axis = operator.index(axis)
        if not -nd <= axis < nd:
            raise np.exceptions.AxisError(axis, nd)
        axis %= nd
        index = (slice(None),) * axis + (None,)
        return concatenate([a[index] for a in arrays], axis, allocator, stream=stream)

    names = dict(zeros=zeros, ones=ones, full=full, arange=arange, empty_like=empty_like,
                 zeros_like=zeros_like, ones_like=ones_like, full_like=full_like,
                 concatenate=concatenate, stack=stack)
    for f in names.values():
        f.__module__ = "pygpu"
    ns.update(names)
    return list(names)
