"""What the skillhost sandbox does not offer, refused with an exception
naming it.

Imported by the runner when the runtime is built: componentize-py
pre-initialises the runner and keeps the interpreter's memory, so every
call starts with these refusals in place (patching on first import, from
an import hook, did not take effect in the spike that preceded this
runtime; patching at build does).

- starting programs (`subprocess`, `os.system`, `os.popen`, `os.exec*`,
  `os.posix_spawn*`, `os.kill`): `SandboxRefusal`, a `PermissionError`;
- `os.fork` and the other process calls WASI lacks stay absent (the
  standard library tests `hasattr(os, "fork")`, and adding it broke
  `random`): reading one raises an `AttributeError` that names the
  sandbox;
- `ctypes`: an `ImportError` naming the sandbox, so `try: import ctypes`
  fallbacks still work;
- sockets (`socket.socket`, `socket.create_connection`, name lookups):
  `SandboxRefusal`; `urllib.request` turns it into a `URLError` naming
  the sandbox.

Threads keep CPython's own error (`RuntimeError: can't start new thread`).
"""

import os
import socket
import subprocess
import sys

#: Why no program can be started.
NO_PROGRAMS = "scripts run inside WebAssembly and cannot start other programs"
#: Why there are no sockets.
NO_SOCKETS = (
    "scripts have no sockets (the host answers no connection or name lookup "
    "from a script)"
)
#: Why native code cannot be loaded.
NO_NATIVE = "native code (ctypes) cannot be loaded in the WebAssembly sandbox"


class SandboxRefusal(PermissionError):
    """An operation the skillhost sandbox does not offer."""


def _refuser(what, why):
    def refused(*_args, **_kwargs):
        raise SandboxRefusal(f"{what} is not available in the skillhost sandbox: {why}")

    refused.__name__ = what.rsplit(".", 1)[-1]
    refused.__qualname__ = refused.__name__
    refused.__doc__ = f"Refused: {what} is not available in the skillhost sandbox ({why})."
    return refused


# -- os: starting programs ----------------------------------------------------

_STARTERS = (
    "system",
    "popen",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "posix_spawn",
    "posix_spawnp",
    "kill",
    "killpg",
)
for _name in _STARTERS:
    setattr(os, _name, _refuser(f"os.{_name}", NO_PROGRAMS))

#: Process calls that stay absent: `hasattr(os, name)` is false, reading
#: one names the sandbox.
_ABSENT = frozenset(
    {
        "fork",
        "forkpty",
        "vfork",
        "spawnl",
        "spawnle",
        "spawnlp",
        "spawnlpe",
        "spawnv",
        "spawnve",
        "spawnvp",
        "spawnvpe",
        "wait",
        "wait3",
        "wait4",
        "waitid",
        "waitpid",
        "register_at_fork",
    }
)


def _os_getattr(name):
    if name in _ABSENT:
        raise AttributeError(
            f"module 'os' has no attribute {name!r}: os.{name} is not available in "
            f"the skillhost sandbox ({NO_PROGRAMS})",
            name=name,
            obj=os,
        )
    raise AttributeError(f"module 'os' has no attribute {name!r}", name=name, obj=os)


os.__getattr__ = _os_getattr

# -- subprocess ------------------------------------------------------------------


class _RefusedPopen(subprocess.Popen):
    """`subprocess.Popen`, refused (still a class: code subclasses it)."""

    def __init__(self, *_args, **_kwargs):
        raise SandboxRefusal(
            f"subprocess.Popen is not available in the skillhost sandbox: {NO_PROGRAMS}"
        )

    def __del__(self):
        pass


_RefusedPopen.__name__ = "Popen"
_RefusedPopen.__qualname__ = "Popen"
subprocess.Popen = _RefusedPopen
for _name in ("run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"):
    setattr(subprocess, _name, _refuser(f"subprocess.{_name}", NO_PROGRAMS))

# -- socket --------------------------------------------------------------------


class _RefusedSocket(socket.socket):
    """`socket.socket`, refused (still a class: code subclasses it and
    checks instances against it)."""

    def __init__(self, *_args, **_kwargs):
        raise SandboxRefusal(
            f"socket.socket is not available in the skillhost sandbox: {NO_SOCKETS}"
        )

    def __del__(self):
        pass

    def __repr__(self):
        return "<refused socket>"


_RefusedSocket.__name__ = "socket"
_RefusedSocket.__qualname__ = "socket"
socket.socket = _RefusedSocket
socket.SocketType = _RefusedSocket
for _name in (
    "create_connection",
    "create_server",
    "socketpair",
    "fromfd",
    "getaddrinfo",
    "gethostbyname",
    "gethostbyname_ex",
    "gethostbyaddr",
    "getnameinfo",
    "getfqdn",
):
    if hasattr(socket, _name):
        setattr(socket, _name, _refuser(f"socket.{_name}", NO_SOCKETS))

# -- ctypes --------------------------------------------------------------------


class _Refused:
    """A meta path finder: modules that cannot work here fail to import
    with a message naming the sandbox."""

    REFUSED = {"ctypes": NO_NATIVE, "_ctypes": NO_NATIVE}

    def find_spec(self, name, path=None, target=None):
        why = self.REFUSED.get(name.partition(".")[0])
        if why is not None:
            raise ModuleNotFoundError(f"No module named {name!r}: {why}", name=name)
        return None

    def invalidate_caches(self):
        pass


sys.meta_path.insert(0, _Refused())
for _name in list(sys.modules):
    if _name.partition(".")[0] in _Refused.REFUSED:
        del sys.modules[_name]

del _name
