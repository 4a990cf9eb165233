"""PyCUDA's ``import pycuda.autoinit``: ``import pygpu.autoinit`` (or
``import PyGPU.autoinit``) checks that the runtime has a device.

There is nothing to initialise: PyGPU uses each device's primary context,
and device 0 is current until another is chosen.  ``device`` is the current
device (a pygpu.driver.Device) and ``context`` the pygpu.driver.Context
class, whose synchronize() and get_device() work.
"""
from pygpu import driver as _driver

_driver.init()
device = _driver.Context.get_device()
context = _driver.Context
