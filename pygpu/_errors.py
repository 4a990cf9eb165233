"""Exception types shared by every backend module of PyGPU.

They live in Python so that ``except pygpu.GPUError`` catches errors from any
backend (``pygpu._cuda``, ``pygpu._hip``, ``pygpu._host``); the C code raises
them through one helper (``pygpu_check`` in ``src/errors.c``).
"""


class GPUError(RuntimeError):
    """A device runtime call failed.

    Attributes: ``code`` (the vendor's status number), ``name`` (such as
    ``"cudaErrorInvalidValue"``), ``message`` (the runtime's text) and
    ``call`` (the runtime call or operation that failed).
    """

    def __init__(self, *args, code=None, name=None, message=None, call=None):
        super().__init__(*args)
        self.code = code
        self.name = name
        self.message = message
        self.call = call


class GPUMemoryError(GPUError, MemoryError):
    """Out of device (or page-locked host) memory."""


class BackendWarning(RuntimeWarning):
    """PyGPU fell back to another backend than the one wanted."""


for _cls in (GPUError, GPUMemoryError, BackendWarning):
    _cls.__module__ = "pygpu"
del _cls
