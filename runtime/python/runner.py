"""The skillhost script runtime: runs one script of a skill per call, as
`python3 script args…` would, inside the sandbox.

Built by the host's build script with componentize-py (`runtime/wit/
script.wit`, world `script-runtime`). What runs at import runs once, at
build: the refusals of `policy`, the standard library's export (build
only, `stdlib_export`) and the warm set below. Each call then runs in a
fresh instance made from that snapshot, so nothing a script imports,
patches or sets outlives its call.

The filesystem is the host's (`host/src/sandbox/vfs/`):

- `/python`: the standard library, read-only;
- `/pycache`: byte-code, read-only (`sys.pycache_prefix`): the library's
  under `/pycache/python`, the skill's under `/pycache/skill`;
- `/skill`: the skill's folder, read-only; its packages in
  `/skill/.python`;
- `/scratch`: the call's working folder, empty but for the call's input
  files, `out/` (what comes back) and `.tmp/` (`TMPDIR`).
"""

import atexit
import os
import runpy
import sys
import traceback

import policy  # noqa: F401 (the refusals, applied at import)
import stdlib_export
from wit_world import exports
from wit_world.exports import runner as _runner

#: The skill's folder.
SKILL = "/skill"
#: The skill's packages (wheels unpacked at install).
PACKAGES = "/skill/.python"
#: The call's working folder.
SCRATCH = "/scratch"
#: The call's temporary folder (`TMPDIR`), inside the scratch folder.
TMPDIR = "/scratch/.tmp"
#: Where byte-code is found.
PYCACHE = stdlib_export.PYCACHE
#: The library's place on `sys.path`.
STDLIB_PATH = [stdlib_export.STDLIB]

stdlib_export.export_if_building()

# The warm set: modules imported once at build so that no call pays for
# them (each costs a script that imports it 10^6 to 10^7 fuel from `.pyc`).
# They are what the public skills' scripts and their packages (pypdf,
# defusedxml, PyYAML, openpyxl) import first. None reads the environment,
# the clock or randomness into module state at import (`logging` does, the
# clock: not here; `random` is reseeded by the runtime at each instance's
# first call). A script's other imports load from `/python` at call time.
import argparse  # noqa: E402,F401
import base64  # noqa: E402,F401
import binascii  # noqa: E402,F401
import codecs  # noqa: E402,F401
import collections  # noqa: E402,F401
import copy  # noqa: E402,F401
import csv  # noqa: E402,F401
import dataclasses  # noqa: E402,F401
import datetime  # noqa: E402,F401
import enum  # noqa: E402,F401
import fnmatch  # noqa: E402,F401
import functools  # noqa: E402,F401
import glob  # noqa: E402,F401
import hashlib  # noqa: E402,F401
import json  # noqa: E402,F401
import math  # noqa: E402,F401
import pathlib  # noqa: E402,F401
import re  # noqa: E402,F401
import shutil  # noqa: E402,F401
import string  # noqa: E402,F401
import struct  # noqa: E402,F401
import tempfile  # noqa: E402,F401
import textwrap  # noqa: E402,F401
import typing  # noqa: E402,F401
import xml.dom.minidom  # noqa: E402,F401
import xml.etree.ElementTree  # noqa: E402,F401
import zipfile  # noqa: E402,F401
import zlib  # noqa: E402,F401


def _exit_code(code):
    """The process exit status `sys.exit(code)` gives natively."""
    if code is None:
        return 0
    if isinstance(code, int):
        # The status a parent sees is the low byte.
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001 (a message that cannot print)
        pass
    return 1


def _report(error, script):
    """Prints an uncaught exception as `python3` does: the traceback from
    the script's own frame on (runpy's frames above it are the runner's),
    through `sys.excepthook`."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    # The hook prints the exception's own traceback: cut it there too.
    error.__traceback__ = tb
    try:
        sys.excepthook(type(error), error, tb)
    except Exception:  # noqa: BLE001 (a broken hook: the default one)
        traceback.print_exception(type(error), error, tb)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 (a closed or replaced stream)
            pass


def _prepare(script, args):
    """The process a script expects: argv, paths, working folder,
    environment."""
    sys.argv[:] = [script, *args]
    path = [os.path.dirname(script)]
    if os.path.isdir(PACKAGES):
        path.append(PACKAGES)
    sys.path[:] = path + STDLIB_PATH
    sys.pycache_prefix = PYCACHE
    sys.dont_write_bytecode = True
    os.chdir(SCRATCH)
    os.environ.clear()
    os.environ["TMPDIR"] = TMPDIR
    tempfile.tempdir = None


class Runner(exports.Runner):
    """The `runner` interface of `runtime/wit/script.wit`."""

    def run(self, script: str, args: list[str]) -> int:
        code = 0
        try:
            _prepare(script, args)
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException as e:  # noqa: BLE001 (what python3 reports)
            _report(e, script)
            code = 1
        finally:
            try:
                atexit._run_exitfuncs()
            finally:
                _flush()
        return code

    def compile(self, root: str) -> _runner.Compiled:
        import importlib._bootstrap_external as external
        import importlib.util

        sys.pycache_prefix = PYCACHE
        files = 0
        failed = []
        for parent, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(parent, name)
                try:
                    with open(path, "rb") as f:
                        source = f.read()
                    code = compile(source, path, "exec", dont_inherit=True, optimize=0)
                    pyc = external._code_to_hash_pyc(
                        code, importlib.util.source_hash(source), False
                    )
                    out = importlib.util.cache_from_source(path)
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    # Buffered: a large .pyc is written whole, never cut
                    # short (CPython's own writer treats a short write as a
                    # failure).
                    with open(out, "wb") as f:
                        f.write(pyc)
                except (SyntaxError, ValueError, OSError) as e:
                    failed.append((path, f"{type(e).__name__}: {e}"))
                    continue
                files += 1
        return _runner.Compiled(files=files, failed=failed)


# What the build leaves behind is garbage; the snapshot keeps the rest.
import gc  # noqa: E402

gc.collect()
gc.freeze()
