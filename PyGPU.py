"""`import PyGPU` gives the very same module object as `import pygpu`."""
import sys

import pygpu

sys.modules[__name__] = pygpu
