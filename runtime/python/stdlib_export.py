"""Build time only: copies the standard library the runtime was built with,
byte-compiled by its own CPython, into one archive the host embeds.

componentize-py mounts the standard library at `/python` and each `-p`
folder at `/0`, `/1`, … while it pre-initialises the runner, and writes to
those folders land on the building machine. The build script puts a marker
file (`MARKER`) in an empty folder it passes as a `-p` folder; when the
runner is imported with that folder on `sys.path`, this module writes
`stdlib.zip` there:

- `python/…`: every file of `/python` (sources and data files; no
  `__pycache__`), mounted read-only at `/python` at run time, the path the
  build imported from (packages imported during the build keep
  `__path__ == ['/python/…']`);
- `pycache/python/….cpython-314.pyc`: each `.py` file byte-compiled as an
  unchecked-hash `.pyc` (no source timestamp is consulted), where
  `sys.pycache_prefix = "/pycache"` finds it at run time.

The archive is stored, not compressed (the build script compresses it
whole). Outside the build there is no marker and this does nothing.
"""

import gc
import importlib._bootstrap_external as _external
import importlib.util
import os
import sys
import zipfile

#: The marker file the build script puts in the export folder.
MARKER = "skillhost-export"
#: The archive written beside it.
ARCHIVE = "stdlib.zip"
#: Where the standard library is mounted, at build and at run time.
STDLIB = "/python"
#: The `sys.pycache_prefix` of the runtime.
PYCACHE = "/pycache"
#: Every entry's time (zip cannot store earlier than 1980); the host gives
#: the files its own.
_ENTRY_TIME = (1980, 1, 1, 0, 0, 0)


def export_folder():
    """The export folder, when the runtime is being built; else `None`."""
    for entry in sys.path:
        if entry.startswith("/") and os.path.isfile(os.path.join(entry, MARKER)):
            return entry
    return None


def _entry(name):
    info = zipfile.ZipInfo(name, date_time=_ENTRY_TIME)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def _pyc(path, source):
    """The unchecked-hash `.pyc` of `source`, or `None` if it does not
    compile (some data files of the library end in `.py`)."""
    try:
        code = compile(source, path, "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError):
        return None
    return bytes(
        _external._code_to_hash_pyc(code, importlib.util.source_hash(source), False)
    )


def export(folder):
    """Writes the archive into `folder` (atomically: a partial file is
    renamed once complete)."""
    tag = sys.implementation.cache_tag
    partial = os.path.join(folder, ARCHIVE + ".partial")
    files = compiled = 0
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as archive:
        for parent, dirs, names in os.walk(STDLIB):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = os.path.relpath(parent, STDLIB)
            rel = "" if rel == "." else rel + "/"
            for name in sorted(names):
                path = os.path.join(parent, name)
                with open(path, "rb") as f:
                    data = f.read()
                archive.writestr(_entry(f"python/{rel}{name}"), data)
                files += 1
                if name.endswith(".py"):
                    pyc = _pyc(path, data)
                    if pyc is not None:
                        stem = name[: -len(".py")]
                        archive.writestr(
                            _entry(f"pycache/python/{rel}{stem}.{tag}.pyc"), pyc
                        )
                        compiled += 1
    os.replace(partial, os.path.join(folder, ARCHIVE))
    gc.collect()
    return files, compiled


def export_if_building():
    """Exports the library when the marker says this is the build."""
    folder = export_folder()
    if folder is not None:
        export(folder)
