"""`import PyGPU` gives the very same module object as `import pygpu`, and
`import PyGPU.driver` (any submodule) the same module as `import pygpu.driver`."""
import importlib
import importlib.machinery
import sys

import pygpu


class _SubmoduleAlias:
    """Finds PyGPU.<name> as the module pygpu.<name>, imported on demand."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.startswith("PyGPU."):
            return importlib.machinery.ModuleSpec(fullname, _SubmoduleAlias)
        return None

    @staticmethod
    def create_module(spec):
        module = importlib.import_module("pygpu" + spec.name[len("PyGPU"):])
        spec.loader_state = module.__spec__
        return module

    @staticmethod
    def exec_module(module):
        module.__spec__ = module.__spec__.loader_state     # the import system set it to the alias's


if not any(f is _SubmoduleAlias or getattr(f, "__name__", None) == "_SubmoduleAlias" for f in sys.meta_path):
    sys.meta_path.insert(0, _SubmoduleAlias)
sys.modules[__name__] = pygpu
