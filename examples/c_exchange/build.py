"""Compile glue.c into an extension module beside this file."""
import subprocess
import sys
import sysconfig

import pygpu

cc = sysconfig.get_config_var("CC").split()[0] or "cc"
out = "glue" + sysconfig.get_config_var("EXT_SUFFIX")
cmd = [cc, "-shared", "-fPIC", "-std=c11", "-O2", "-Wall", "-Wextra", "-I", sysconfig.get_paths()["include"],
       "-I", pygpu.get_include(), "glue.c", "-o", out]
print(" ".join(cmd))
sys.exit(subprocess.call(cmd))
