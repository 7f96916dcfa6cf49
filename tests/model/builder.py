"""A small trace builder for the model's tests: scenario steps and the probe's JSON lines together.

Steps are written in scenario YAML form (handle names, lists of prot names); the builder derives the
probe's echo (buffer handle ids, ints) the way the probe does, and its slots (r0/c0/m0/f0) from the
slot assignment the compiler and the judge use (reference_model/slots.py) over the steps so far.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from reference_model.caps import DeviceCaps
from reference_model.judge import Judgement, judge
from reference_model.scenario import Scenario, parse_scenario
from reference_model.slots import SlotMap, assign_slots, text_token
from reference_model.vocabulary import OPS, ArgKind, Op

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE: dict[str, str] = {
    c["id"]: c["quote"] for c in yaml.safe_load((ROOT / "conformance" / "clauses.yaml").read_text())["clauses"]
}
PROT = {"READ": 1, "WRITE": 2, "EXEC": 4}
MAPFLAG = {"SHARED": 1, "PRIVATE": 2, "FIXED": 0x10}
INT_RET_OPS = {"is_supported", "buf_free", "buf_map", "buf_unmap", "buf_set_priority", "vnpu"}
PAIR = (0, 1)
CAPS = DeviceCaps(supported_pairs=frozenset({PAIR}))


class TB:
    """Trace builder. ``call`` appends a step and its call/ret lines; callbacks go in between with
    ``during=[...]`` (lists of dicts made by ``cb``/``deleter``) or after with ``emit``."""

    def __init__(self, sid: str = "model.test", trace: int = 1) -> None:
        self.sid = sid
        self.t = 0
        self.steps: list[dict[str, Any]] = []
        self._slot_map = SlotMap({}, {})
        self._slot_steps = 0  # how many steps self._slot_map covers
        self.bound: dict[str, str] = {}
        self.teardown_step = 1000
        self.pending_extra: dict[str, Any] = {}
        begin: dict[str, Any] = {"ev": "begin", "scenario": sid, "pid": 1}
        if trace != 1:
            begin["trace"] = trace  # formats §5: version 2 records each callback's return (cb_return)
        self.lines: list[str] = [self._line(begin)]

    # -- plumbing ---------------------------------------------------------------------------------
    def _line(self, obj: dict[str, Any]) -> str:
        self.t += 1
        return json.dumps({**obj, "t": self.t}, separators=(",", ":"))

    def slot_map(self) -> SlotMap:
        """The slots of the steps so far, as the compiler and the judge assign them."""
        if self._slot_steps != len(self.steps):
            self._slot_map = assign_slots(self.scenario().steps)
            self._slot_steps = len(self.steps)
        return self._slot_map

    @property
    def slots(self) -> dict[str, str]:
        """Handle name -> slot over the steps so far."""
        return dict(self.slot_map().names)

    def slot(self, name: str) -> str:
        slot = self.slot_map().names.get(name)
        if slot is None:
            raise AssertionError(f"handle {name!r} is named before any step uses it: it has no slot yet")
        return slot

    def cookie(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, int):
            return f"raw:{value}"
        return self.slot(value)

    def _echo(self, op: str, args: dict[str, Any], step: int | None = None) -> dict[str, Any]:
        """The call's args as the probe echoes them; ``step`` is the call's step (default: the last)."""
        out: dict[str, Any] = {}
        for spec in OPS[Op(op)].args:
            v = args.get(spec.name)
            k = spec.kind
            if k in (ArgKind.REQ, ArgKind.MAP, ArgKind.FILE):
                out[spec.name] = self.slot(v)
            elif k is ArgKind.BUF:
                out[spec.name] = self.bound.get(v, v if isinstance(v, str) and v.startswith("B") else None)
            elif k is ArgKind.REQS:
                out[spec.name] = [self.slot(x) for x in v]
            elif k is ArgKind.BUFS:
                out[spec.name] = [self.bound.get(x, x if x.startswith("B") else None) for x in v]
            elif k is ArgKind.COOKIE:
                out[spec.name] = self.cookie(v)
            elif k is ArgKind.PROT:
                out[spec.name] = v if isinstance(v, int) else sum(PROT[x] for x in (v or []))
            elif k is ArgKind.MAPFLAGS:
                out[spec.name] = v if isinstance(v, int) else sum(MAPFLAG[x] for x in v)
            elif k is ArgKind.FDSEL:
                out[spec.name] = self.slot(v) if isinstance(v, str) else v["fd"]
            elif k is ArgKind.BINDSEL:
                out[spec.name] = {"cookie": self.cookie(v["cookie"])} if "cookie" in v else {"nth": v["nth"]}
            elif k is ArgKind.TEXT:
                out[spec.name] = text_token(str(v), self.slot_map(), len(self.steps) - 1 if step is None else step)
            else:
                out[spec.name] = v
        return out

    # -- events -----------------------------------------------------------------------------------
    def call(self, op: str, *, ret: Any = "default", errno: str | None = None, during: Iterable[dict[str, Any]] = (),
             teardown: bool = False, skipped: str | None = None, **args: Any) -> TB:
        scenario_args = dict(args)
        if teardown:
            step = self.teardown_step
            self.teardown_step += 1
        else:
            step = len(self.steps)
            self.steps.append({op: scenario_args or None})
        echo = self._echo(op, args, min(step, len(self.steps)))
        if ret == "default":
            ret = 0 if op in INT_RET_OPS else None
        call_ev: dict[str, Any] = {"ev": "call", "step": step, "op": op, "args": echo}
        if teardown:
            call_ev["teardown"] = True
        self.lines.append(self._line(call_ev))
        for ev in during:
            self.lines.append(self._line(ev))
        ret_ev: dict[str, Any] = {"ev": "ret", "step": step, "op": op, "ret": ret,
                                  "errno": errno if ret == -1 else None, "dur_ns": 10}
        if skipped is not None:
            ret_ev["skipped"] = skipped
        ret_ev.update(self.pending_extra)
        self.pending_extra = {}
        self.lines.append(self._line(ret_ev))
        return self

    def extra(self, **fields: Any) -> TB:
        """Fields for the ret event of the next call (results, digest, handle, closed, position...)."""
        self.pending_extra = dict(fields)
        return self

    def bind(self, buf: str, handle: str | None, nth: int = 0) -> TB:
        self.extra(handle=handle)
        self.call("bind", buf=buf, select={"nth": nth})
        if handle is not None:
            self.bound[buf] = handle
        return self

    def cb(self, kind: str, cookie: Any = None, error: Any = 0, buf: str | None = None, thread: str = "other",
           cookie_deleted: bool = False, th: str | None = None) -> dict[str, Any]:
        ev: dict[str, Any] = {"ev": "cb", "kind": kind, "cookie": self.cookie(cookie), "thread": thread}
        if kind != "preempt":
            ev["error"] = error
            ev["buf"] = buf
        if cookie_deleted:
            ev["cookie_deleted"] = True
        if th is not None:
            ev["th"] = th
        return ev

    def cb_return(self, kind: str, cookie: Any = None, th: str | None = None) -> dict[str, Any]:
        """The callback's last event before it returns (trace version 2)."""
        ev: dict[str, Any] = {"ev": "cb_return", "kind": kind, "cookie": self.cookie(cookie)}
        if th is not None:
            ev["th"] = th
        return ev

    def deleter(self, cookie: Any, thread: str = "other", th: str | None = None) -> dict[str, Any]:
        ev: dict[str, Any] = {"ev": "deleter", "cookie": self.cookie(cookie), "thread": thread}
        if th is not None:
            ev["th"] = th
        return ev

    def emit(self, *events: dict[str, Any]) -> TB:
        for ev in events:
            self.lines.append(self._line(ev))
        return self

    def settle(self, what: str, reached: bool = True) -> TB:
        return self.emit({"ev": "settle", "what": what, "expected": 0, "got": 0, "reached": reached})

    def end(self, status: str = "ok", code: int | None = 0, signal: str | None = None) -> TB:
        self.emit({"ev": "end", "scenario": self.sid})
        return self.exit(status, code, signal)

    def exit(self, status: str = "ok", code: int | None = 0, signal: str | None = None) -> TB:
        return self.emit({"ev": "exit", "scenario": self.sid, "status": status, "code": code, "signal": signal})

    # -- judging ----------------------------------------------------------------------------------
    def scenario(self) -> Scenario:
        data = {"id": self.sid, "title": "a model test", "clauses": ["alloc-async"],
                "steps": self.steps or [{"sleep_ms": {"ms": 0}}]}
        return parse_scenario(data, "<test>", "model")

    def judge(self, caps: DeviceCaps = CAPS, profile: str = "published-37") -> Judgement:
        return judge(self.scenario(), self.lines, caps, CATALOGUE, profile)


# -- common fragments ---------------------------------------------------------------------------------
def request(b: TB, req: str = "r", *, cookie: Any = "absent", deleter: bool = True, size: int = 8192,
            prot: Any = ("READ", "WRITE"), device: int = PAIR[0], type_: int = PAIR[1], onpreempt: bool = False,
            onalloc: bool = True) -> TB:
    b.call("req_create", req=req)
    b.call("req_set_device", req=req, device=device)
    b.call("req_set_type", req=req, type=type_)
    b.call("req_set_size", req=req, size=size)
    if prot is not None:  # None: the request keeps its default protection
        b.call("req_set_prot", req=req, prot=list(prot) if not isinstance(prot, int) else prot)
    if cookie != "absent":
        if isinstance(cookie, str):
            b.call("cookie_new", cookie=cookie)
        b.call("req_set_cookie", req=req, cookie=cookie, deleter=deleter)
    if onpreempt:
        b.call("req_set_onpreempt", req=req, set=True)
    if onalloc:
        b.call("req_set_onalloc", req=req, set=True)
    return b


def allocated(b: TB, req: str = "r", buf: str = "b", handle: str = "B1", **kw: Any) -> TB:
    """A request, its allocAsync answered with success, and the buffer bound to ``buf``."""
    cookie = kw.get("cookie", "absent")
    request(b, req, **kw)
    cv = None if cookie == "absent" else cookie
    b.call("alloc", reqs=[req], during=[b.cb("alloc", cv, 0, handle)])
    return b.bind(buf, handle)


def teardown(b: TB, bufs: Iterable[str] = (), reqs: Iterable[str] = (), deleted: Iterable[Any] = (),
             maps: Iterable[str] = ()) -> TB:
    """Settle, free what is left (deleters emitted during the frees), settle deleters, end."""
    b.settle("alloc").settle("load").settle("preempt")
    for m in maps:
        b.call("buf_unmap", map=m, offset=0, length=8192, teardown=True)
    dels = [b.deleter(c) for c in deleted]
    bl = list(bufs)
    if bl:
        b.call("buf_free", bufs=bl, teardown=True)
    for r in reqs:
        b.call("req_free", req=r, teardown=True)
    b.emit(*dels)
    b.settle("deleters")
    return b.end()
