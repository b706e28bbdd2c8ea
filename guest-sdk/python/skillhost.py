"""The skillhost guest SDK for Python skills.

A skill registers plain functions by tool name; the SDK implements the
``skillhost:plugin/tools`` export for componentize-py: ``implemented()``,
dispatch by tool name, decoding of the arguments (into a dataclass when the
function's parameter is annotated with one, a failure naming the field) and
encoding of the result. A raised :class:`ToolError` crosses to the caller
as the matching ``tool-error`` case; any other uncaught exception becomes a
``failed`` tool error carrying the exception's type and message.

    import skillhost
    from dataclasses import dataclass

    skill = skillhost.Skill()

    @dataclass
    class GreetArgs:
        name: str

    @skill.tool("demo.greet")
    def greet(args: GreetArgs) -> dict:
        skillhost.log.info(f"greeting {args.name}")
        return {"greeting": f"Hello, {args.name}!"}

    Tools = skill.tools()   # the export componentize-py looks for

Build with ``skillhost build DIR`` (componentize-py against the
``skillhost:plugin`` WIT world ``skill``).

A tool that needs nothing from the host can name arguments to be called
with while the component is built (``warm_up=[{...}]``): componentize-py
keeps the heap the main module leaves, so every instance starts with that
code already specialised by CPython and its caches filled, and a call
writes (and the sandbox copies) fewer of the heap's pages. The SDK freezes
that heap for the garbage collector once the tools are set up, so a
collection during a call does not walk (and write) the objects every
instance shares.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import traceback
import typing
from typing import Any, Callable, Dict, List, Optional, Sequence

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host as _host
from wit_world.imports import types as _types

__all__ = [
    "Skill",
    "ToolError",
    "InvalidInput",
    "Failed",
    "Denied",
    "invoke",
    "config",
    "read_ref",
    "read_ref_all",
    "progress",
    "elicit",
    "ask",
    "form",
    "sample",
    "roots",
    "log",
]


class ToolError(Exception):
    """Why a tool call did not produce a result. Raise one of the
    subclasses; the message reaches the caller."""

    kind = "failed"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(ToolError):
    """The arguments were malformed or failed a check: the caller should
    fix them. Name the offending field in the message."""

    kind = "invalid-input"


class Failed(ToolError):
    """The tool ran but could not complete."""

    kind = "failed"


class Denied(ToolError):
    """The call was not allowed."""

    kind = "denied"


def _to_wit(error: ToolError) -> Any:
    if isinstance(error, InvalidInput):
        return _types.ToolError_InvalidInput(error.message)
    if isinstance(error, Denied):
        return _types.ToolError_Denied(error.message)
    return _types.ToolError_Failed(error.message)


def _from_wit(value: Any) -> ToolError:
    message = str(getattr(value, "value", value))
    if isinstance(value, _types.ToolError_InvalidInput):
        return InvalidInput(message)
    if isinstance(value, _types.ToolError_Denied):
        return Denied(message)
    return Failed(message)


def invoke(tool: str, args: Dict[str, Any]) -> Any:
    """Calls another tool through the host (with the same authorization,
    validation and limits as any call) and returns its output. A tool this
    skill did not declare in ``tool_names`` raises :class:`Denied`."""
    try:
        return json.loads(_host.invoke(tool, json.dumps(args)))
    except Err as e:
        raise _from_wit(e.value) from None


def config(key: str) -> Optional[str]:
    """A configuration value the operator set for this skill, or None."""
    return _host.config(key)


def read_ref(ref: str, offset: int = 0, length: int = 64 * 1024) -> bytes:
    """Up to ``length`` bytes at ``offset`` of a blob passed to this call by
    reference; empty at the end. A reference not passed to this call raises
    :class:`Denied`."""
    try:
        return bytes(_host.read_ref(ref, offset, length))
    except Err as e:
        raise _from_wit(e.value) from None


def read_ref_all(ref: str, limit: int = 16 * 1024 * 1024) -> bytes:
    """The whole blob behind ``ref``, up to ``limit`` bytes (more raises
    :class:`InvalidInput`)."""
    out = bytearray()
    while True:
        chunk = read_ref(ref, len(out), 64 * 1024)
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > limit:
            raise InvalidInput(f"reference `{ref}` is larger than {limit} bytes")


def progress(done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
    """Reports how far this call has got: ``done`` so far, out of ``total``
    when known. The caller sees it when it asked for progress (an MCP
    client's ``progressToken``); otherwise the host drops it. Report
    increasing values; a lower one than the last is dropped."""
    _host.progress(
        float(done),
        None if total is None else float(total),
        None if message is None else str(message),
    )


def elicit(message: str, schema: Dict[str, Any]) -> "tuple[str, Optional[Dict[str, Any]]]":
    """Asks the calling user for input in the middle of the call.
    ``schema`` is the form (a JSON Schema object of flat string, number,
    integer, boolean and enum properties). Returns ``("accept", content)``,
    ``("decline", None)`` or ``("cancel", None)``; raises :class:`Denied`
    when the caller cannot be asked."""
    try:
        answer = _host.elicit(str(message), json.dumps(schema))
    except Err as e:
        raise _from_wit(e.value) from None
    kind = type(answer).__name__.lower()
    if kind.endswith("accept"):
        return "accept", json.loads(answer.value)
    if kind.endswith("decline"):
        return "decline", None
    return "cancel", None


def form(key: str, message: str, schema: Dict[str, Any], required: bool = False) -> Dict[str, Any]:
    """A question for :func:`ask`: a form for the user (MCP
    ``elicitation/create``)."""
    return {"key": key, "form": (message, schema), "required": required}


def sample(key: str, params: Dict[str, Any], required: bool = False) -> Dict[str, Any]:
    """A question for :func:`ask`: a completion by the caller's model (MCP
    ``sampling/createMessage`` parameters). Needs the skill's approved
    ``permissions.sampling``."""
    return {"key": key, "sample": params, "required": required}


def roots(key: str, required: bool = False) -> Dict[str, Any]:
    """A question for :func:`ask`: the caller's roots (MCP ``roots/list``).
    Needs the skill's approved ``permissions.roots``."""
    return {"key": key, "roots": True, "required": required}


def ask(questions: List[Dict[str, Any]]) -> List["tuple[str, Any]"]:
    """Asks the calling client several questions at once (made with
    :func:`form`, :func:`sample`, :func:`roots`); one answer per question,
    in order: ``("answered", result)`` with MCP's result of the question's
    method, or ``("unavailable", why)``. A client that answers by calling
    again (MCP 2026-07-28) makes the call stop here and run again from the
    start with the answers: do nothing you cannot repeat before your last
    ``ask``. Raises :class:`InvalidInput` for a malformed question and
    :class:`Denied` for one the skill's permissions do not allow."""
    requests = []
    for q in questions:
        if "form" in q:
            message, schema = q["form"]
            question: Any = _host.Question_Form(
                _host.FormRequest(str(message), json.dumps(schema))
            )
        elif "sample" in q:
            question = _host.Question_Sample(json.dumps(q["sample"]))
        else:
            question = _host.Question_Roots()
        requests.append(_host.InputRequest(str(q["key"]), question, bool(q.get("required"))))
    try:
        answers = _host.ask(requests)
    except Err as e:
        raise _from_wit(e.value) from None
    out: List["tuple[str, Any]"] = []
    for a in answers:
        if type(a).__name__.lower().endswith("answered"):
            out.append(("answered", json.loads(a.value)))
        else:
            out.append(("unavailable", a.value))
    return out


class _Log:
    """Log lines to the host's log, attributed to this skill and call."""

    def _write(self, level: Any, message: str) -> None:
        _host.log(level, str(message))

    def trace(self, message: str) -> None:
        self._write(_types.LogLevel.TRACE, message)

    def debug(self, message: str) -> None:
        self._write(_types.LogLevel.DEBUG, message)

    def info(self, message: str) -> None:
        self._write(_types.LogLevel.INFO, message)

    def warn(self, message: str) -> None:
        self._write(_types.LogLevel.WARN, message)

    def error(self, message: str) -> None:
        self._write(_types.LogLevel.ERROR, message)


log = _Log()


def _argument_type(func: Callable[..., Any]) -> Any:
    """The dataclass the function's first parameter is annotated with, or
    None (the function then gets the arguments as a dict)."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # unresolvable annotations: fall back to a dict
        return None
    params = [p for p in func.__code__.co_varnames[: func.__code__.co_argcount]]
    if not params:
        return None
    hint = hints.get(params[0])
    return hint if dataclasses.is_dataclass(hint) else None


def _decode(tool: str, cls: Any, args: Dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(args) - set(fields))
    if unknown:
        raise InvalidInput(f"`{tool}`: unknown field `{unknown[0]}`")
    for name, f in fields.items():
        required = (
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        if required and name not in args:
            raise InvalidInput(f"`{tool}`: missing field `{name}`")
    return cls(**args)


def _describe(e: BaseException) -> str:
    """An uncaught exception as the caller reads it: its type and message."""
    message = str(e)
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def _encode(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise Failed(f"the tool's result is not JSON: {e}") from None


#: How many times each warm-up argument object is run through the call
#: path: CPython specialises an instruction after a few runs of it.
WARM_UP_ROUNDS = 16


class Skill:
    """The tools of one skill, by name."""

    def __init__(self) -> None:
        self._tools: Dict[str, Callable[..., Any]] = {}
        self._warm_up: Dict[str, List[Dict[str, Any]]] = {}
        # Each tool's argument dataclass (or None), resolved once: by
        # tools(), which the main module calls last, so the answers are in
        # the component's pre-initialised heap and no call resolves type
        # hints again.
        self._argument_types: Dict[str, Any] = {}

    def tool(
        self, name: str, warm_up: Optional[Sequence[Dict[str, Any]]] = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Registers the decorated function as the tool ``name`` (as
        declared in skill.yaml).

        ``warm_up``: argument objects the tool is called with, through the
        whole call path (JSON in, decoding, the function, JSON out), when
        :meth:`tools` runs while the component is built. Every instance
        then starts from that warmed heap. Only for a tool that needs
        nothing from the host (no ``invoke``, ``config``, refs, HTTP or
        questions: the host is not there at build time) and whose warm-up
        leaves no state a call should not see. A warm-up call that fails
        fails the build, naming the tool."""

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._tools:
                raise ValueError(f"tool `{name}` is registered twice")
            self._tools[name] = func
            if warm_up:
                self._warm_up[name] = [dict(a) for a in warm_up]
            return func

        return register

    def implemented(self) -> List[str]:
        """The names of the registered tools."""
        return sorted(self._tools)

    def call(self, tool: str, arguments_json: str) -> str:
        """Runs ``tool``; raises componentize-py's ``Err`` with the WIT
        ``tool-error`` on failure."""
        try:
            return self._call(tool, arguments_json)
        except ToolError as e:
            raise Err(_to_wit(e)) from None
        except Err:
            raise
        except BaseException as e:  # the skill's own bug: report it, keep the message
            traceback.print_exc(file=sys.stderr)
            raise Err(
                _types.ToolError_Failed(f"uncaught exception in `{tool}`: {_describe(e)}")
            ) from None

    def _call(self, tool: str, arguments_json: str) -> str:
        func = self._tools.get(tool)
        if func is None:
            raise Failed(
                f"`{tool}` is not implemented by this component "
                f"(it implements: {', '.join(self.implemented()) or 'nothing'})"
            )
        try:
            args = json.loads(arguments_json)
        except ValueError as e:
            raise InvalidInput(f"`{tool}`: the arguments are not JSON: {e}") from None
        if not isinstance(args, dict):
            raise InvalidInput(f"`{tool}`: the arguments must be a JSON object")
        if tool not in self._argument_types:
            self._argument_types[tool] = _argument_type(func)
        cls = self._argument_types[tool]
        if cls is not None:
            try:
                args = _decode(tool, cls, args)
            except TypeError as e:
                raise InvalidInput(f"`{tool}`: {e}") from None
        return _encode(func(args))

    def tools(self) -> type:
        """The class componentize-py instantiates for the
        ``skillhost:plugin/tools`` export: assign it to ``Tools`` in the
        skill's main module."""
        skill = self
        for name, func in self._tools.items():
            self._argument_types[name] = _argument_type(func)
        for name, examples in self._warm_up.items():
            for args in examples:
                arguments_json = json.dumps(args)
                for _ in range(WARM_UP_ROUNDS):
                    try:
                        self._call(name, arguments_json)
                    except Exception as e:
                        why = e.message if isinstance(e, ToolError) else _describe(e)
                        raise RuntimeError(
                            f"warm-up of `{name}` with {arguments_json} failed: {why}"
                        ) from None

        # The heap as it is now is what every instance starts from, mapped
        # copy-on-write: a page a call writes is copied first. Collect the
        # build's garbage, then freeze what is left (CPython's advice for a
        # heap shared copy-on-write): a collection during a call then never
        # walks, and so never writes, the objects every instance shares.
        gc.collect()
        gc.freeze()

        class Tools(exports.Tools):
            def implemented(self) -> List[str]:
                return skill.implemented()

            def call(self, tool: str, arguments_json: str) -> str:
                return skill.call(tool, arguments_json)

        return Tools
