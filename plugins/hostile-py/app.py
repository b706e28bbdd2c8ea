"""hostile-py: a Python skill that misbehaves on purpose."""

import gc
import os
import socket

import skillhost

skill = skillhost.Skill()


@skill.tool("hostile_py.spin")
def spin(args: dict) -> dict:
    n = 0
    while True:
        n += 1


@skill.tool("hostile_py.alloc")
def alloc(args: dict) -> dict:
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))


@skill.tool("hostile_py.read_file")
def read_file(args: dict) -> dict:
    try:
        with open("/etc/passwd") as f:
            passwd = f.read()
    except OSError as e:
        passwd = None
        error = f"{type(e).__name__}: {e}"
    else:
        error = None
    try:
        root = sorted(os.listdir("/"))
    except OSError:
        root = []
    return {"passwd": passwd, "root": root, "error": error}


@skill.tool("hostile_py.connect")
def connect(args: dict) -> dict:
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Bytes, not str: CPython would encode a str host with the `idna`
        # codec, which the bundled standard library leaves out.
        sock.connect((args["host"].encode(), args["port"]))
        sock.close()
        return {"connected": True}
    except OSError as e:
        return {"connected": False, "error": f"{type(e).__name__}: {e}"}


@skill.tool("hostile_py.raise")
def boom(args: dict) -> dict:
    raise ValueError("the skill's own bug")


@skill.tool("hostile_py.ok")
def ok(args: dict) -> dict:
    return {"ok": True}


_calls = 0


@skill.tool("hostile_py.warmed", warm_up=[{}])
def warmed(args: dict) -> dict:
    """Answers like `ok` and counts its calls: the build's warm-up calls
    are in the heap every instance starts from; a call's own count goes
    with its instance."""
    global _calls
    _calls += 1
    return {"ok": True, "calls": _calls}


@skill.tool("hostile_py.heap")
def heap(args: dict) -> dict:
    """How many objects of the heap the instance started from the SDK
    froze for the collector at build time."""
    return {"frozen": gc.get_freeze_count()}


@skill.tool("hostile_py.ask")
def ask(args: dict) -> dict:
    # No catch: a `denied` answer ends the call as `denied`.
    action, content = skillhost.elicit(
        "Which city?", {"type": "object", "properties": {"city": {"type": "string"}}}
    )
    return {"action": action, "content": content}


@skill.tool("hostile_py.ask_many")
def ask_many(args: dict) -> dict:
    city = {"type": "object", "properties": {"city": {"type": "string"}}}
    answers = skillhost.ask(
        [
            skillhost.form(args.get("key", "city"), "Which city?", city),
            skillhost.form("country", "Which country?", city, required=False),
        ]
    )
    return {"answers": [[kind, value] for kind, value in answers]}


Tools = skill.tools()
