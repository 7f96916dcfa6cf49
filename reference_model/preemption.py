"""Chapter "preemption": onPreempt, preemption through the vnpu control, and what it changes.

onPreempt carries only the cookie, so it is attributed to a buffer with that cookie; several
candidates leave a choice (one candidate state each). Without a vnpu command a buffer can be
preempted at any time an implementation chooses (``Ctx.spontaneous``: capacity not declared).
"""

from __future__ import annotations

from dataclasses import replace

from . import policies
from ._context import PRIORITY_RANGE, Ctx, Out, reject
from .cookies import all_deleted, borrow, callback_cookie_alive, changed_value, cookie_value_shown, hold
from .rules import Reject, clause, shows
from .state import Buffer, Inflight, State, each_in_flight, evolve, show
from .trace import Call, Cb, End, Ret


@clause("preempt-callback-on-forced-dealloc", "preempt-onpreempt-purpose", "preempt-callback-any-thread",
        "preempt-after-free-race", "preempt-never-while-mapped", "req-onpreempt-default-null")
def preempt_allowed(ctx: Ctx, s: State, b: Buffer, ev: Cb) -> Reject | str | None:
    """Spec: "NpuManager calls this function when it needs to forcefully deallocate the buffer."
    (preempt-callback-on-forced-dealloc)
    Spec: "This callback will not be invoked while the application has the buffer mapped."
    (preempt-never-while-mapped)
    Spec: "This may be set to NULL, in which case NpuManager will not invoke any callback when preempting
    the buffer. Default value is NULL." (req-onpreempt-default-null)
    Spec: "Note: On race conditions, the preemption callback may be invoked after the caller has already
    freed the buffer." (preempt-after-free-race)
    Spec: "The callback may be called from any thread." (preempt-callback-any-thread)

    At most one onPreempt per buffer, only with onPreempt set, never while mapped (aosp-2026 does not
    enforce it: D14), and only for a buffer that was or may be preempted. Returns None, a discrepancy
    tag, or the rejection.
    """
    if not b.onpreempt:
        return reject("req-onpreempt-default-null", f"onPreempt(cookie={ev.cookie or 'NULL'}) for {b.handle}",
                      ["no onPreempt: the request's onPreempt was NULL"], "a NULL onPreempt is never invoked")
    if b.preempt_cb:
        return reject("preempt-callback-on-forced-dealloc", f"a second onPreempt for {b.handle}", ["one onPreempt"],
                      "a buffer is forcefully deallocated once")
    bad = callback_cookie_alive(s, b.cookie, ev)
    if bad is not None:
        return bad
    tag = None
    if b.maps > 0:
        if not ctx.profile.preempt_extra_callbacks:
            return reject("preempt-never-while-mapped", f"onPreempt for {b.handle} with {b.maps} live mapping(s)",
                          ["no onPreempt while the buffer is mapped"], "a mapped buffer is never preempted")
        tag = "D14"
    if not (b.preempted or ctx.spontaneous or b.preemptable or policies.lenient(s)) and b.outranked:
        return reject(b.outranked, f"onPreempt for {b.handle} (priority {b.priority}) after vnpu preempt=lowest",
                      ["the onPreempt of a buffer with the greatest priority value"],
                      "preempt=lowest takes a buffer of the numerically greatest priority (the least important); "
                      "the device preempted one whose priority, as last set, is smaller")
    if not (b.preempted or ctx.spontaneous or b.preemptable or policies.lenient(s)):
        return reject("preempt-callback-on-forced-dealloc", f"onPreempt for {b.handle}",
                      ["no onPreempt: nothing preempted this buffer"],
                      "the device declares its capacity and no vnpu command preempted the buffer")
    if not b.preempted and inside_free(s, ev):
        return "R13"
    return tag


def inside_free(s: State, ev: Cb) -> bool:
    """Whether the callback runs on the calling thread inside an ANpuBuffer_free()."""
    return ev.thread == "caller" and s.inflight is not None and s.inflight.op == "buf_free"


@clause("preempt-callback-on-forced-dealloc", "preempt-onpreempt-purpose", "preempt-map-enoent")
def announced_owed(b: Buffer) -> bool:
    """Spec: "Callback function to be invoked when NpuManager needs to forcefully deallocate the buffer."
    (preempt-onpreempt-purpose)
    Spec: "When the buffer is preempted, any subsequent attempt to map the buffer will fail with errno set
    to ENOENT." (preempt-map-enoent)

    A preemption the device did without a vnpu command is allowed, but it is announced: once a map or a
    load has shown the buffer preempted (ENOENT) and its request had onPreempt, the callback is owed. Once
    the scenario has freed the buffer it may still come, at any time (preempt-after-free-race), or not at
    all: Buffer.owes_onpreempt.
    """
    return b.owes_onpreempt()


def met_by_maps(s: State, handle: str) -> tuple[Inflight | None, tuple[tuple[str, Inflight], ...]]:
    """The in-flight calls with the onPreempt of ``handle`` recorded as come during them: a buf_map in
    flight may have been decided before the callback."""

    def mark(inf: Inflight) -> Inflight:
        return evolve(inf, preempt_met=(*inf.preempt_met, handle)) if inf.op == "buf_map" else inf

    return each_in_flight(s, mark)


@clause("cookie-later-changes-no-effect", "cookie-snapshot-at-alloc", "cookie-borrowed-in-callbacks",
        "preempt-callback-on-forced-dealloc")
def on_preempt(ctx: Ctx, s: State, ev: Cb) -> Out:
    """Spec: "Subsequent changes to the cookie in the ANpuManager_AllocRequest object after a given
    ANpuManager_allocAsync() is called has no effect on the callbacks generated from the given
    ANpuManager_allocAsync() call." (cookie-later-changes-no-effect)

    An onPreempt is attributed to a buffer (or a freed buffer's ghost) carrying its cookie that may be
    preempted now. Otherwise: a cookie already deleted, a value the application never made, a cookie a
    request was given after the allocAsync of a buffer still owed its onPreempt, or no buffer at all."""
    out: list[State] = []
    first: Reject | None = None
    for handle, b in s.bufs.items():
        if b.cookie.value != ev.cookie:
            continue
        res = preempt_allowed(ctx, s, b, ev)
        if isinstance(res, Reject):
            first = first or res
            continue
        bufs = dict(s.bufs)
        bufs[handle] = evolve(b, preempted=True, preempt_cb=True)
        tokens = hold(s, b.cookie, -1) if b.freed and b.awaits_late_onpreempt() else s.tokens
        inflight, parked = met_by_maps(s, handle)
        after = evolve(s, bufs=bufs, tokens=tokens, dids=s.dids | {res} if res else s.dids, inflight=inflight,
                       parked=parked)
        out.append(borrow(ctx, show(after, *onpreempt_shown(b, res), *victim_order_shown(s, b)), b.cookie, ev))
    for i, g in enumerate(s.ghosts):
        if g.cookie.value != ev.cookie:
            continue
        res = preempt_allowed(ctx, s, g, ev)
        if isinstance(res, Reject):
            first = first or res
            continue
        if not g.handle:  # the ghost of an allocation answered ECANCELED (aosp-2026 only)
            res = res or "D14"
        if inside_free(s, ev) and (g.preemptable or g.vnpu_preempted):
            # The free's own callback, not necessarily the notice of the command's preemption, which the device
            # may still be delivering (and then drop): the cookie may stay held for it. No second onPreempt.
            ghosts = (*s.ghosts[:i], evolve(g, preempt_cb=True, notice_hold=True), *s.ghosts[i + 1:])
            tokens = s.tokens
        else:
            ghosts = s.ghosts[:i] + s.ghosts[i + 1:]
            tokens = hold(s, g.cookie, -1) if g.awaits_late_onpreempt() else s.tokens
        after = evolve(s, ghosts=ghosts, tokens=tokens, dids=s.dids | {res} if res else s.dids)
        out.append(borrow(ctx, show(after, *onpreempt_shown(g, res)), g.cookie, ev))
    if out:
        return out
    if first is not None:
        return first
    if ev.cookie_deleted or (ev.cookie in s.handed and not any(t.value == ev.cookie for t in s.tokens.values())):
        return reject("cookie-borrowed-in-callbacks", f"onPreempt({ev.cookie or 'NULL'}) after its deleter ran",
                      ["the cookie kept alive while an onPreempt may still come"],
                      "the cookie was deleted (at free) although a late onPreempt could still carry it")
    if changed_value(ev.cookie) and any(b.onpreempt for b in s.bufs.values()):
        return reject("cookie-snapshot-at-alloc", f"onPreempt(cookie={ev.cookie})",
                      sorted({b.cookie.value or "NULL" for b in s.bufs.values() if b.onpreempt}),
                      "an onPreempt carries the cookie the request held when allocAsync() was called; the "
                      "application never made this value")
    # A request that holds the cookie now, given it after its allocAsync (a cookie it had when submitted,
    # whose submission brought no buffer, makes the onPreempt one of no buffer at all).
    if ev.cookie is not None and any(r.cookie.value == ev.cookie and r.cookie_after_submit
                                     for r in s.reqs.values()) and any(
            b.onpreempt and not b.preempt_cb for b in (*s.bufs.values(), *s.ghosts)):
        return reject("cookie-later-changes-no-effect", f"onPreempt(cookie={ev.cookie})",
                      sorted({b.cookie.value or "NULL" for b in s.bufs.values() if b.onpreempt}),
                      "a request holds this cookie now, set after the allocAsync() whose buffer is preempted: "
                      "later changes have no effect on the callbacks of that call")
    return reject("preempt-callback-on-forced-dealloc", f"onPreempt(cookie={ev.cookie or 'NULL'})",
                  ["no onPreempt: no buffer with this cookie"], "no allocated buffer carries this cookie")


@shows("preempt-callback-on-forced-dealloc", "preempt-onpreempt-purpose", "preempt-callback-any-thread",
        "preempt-after-free-race", "cookie-callback-null-if-unset", "cookie-snapshot-at-alloc")
def onpreempt_shown(b: Buffer, tag: str | None) -> tuple[str, ...]:
    """What an accepted onPreempt of ``b`` demonstrates: a callback on some thread; for a buffer the trace
    shows preempted (a vnpu command that took or could take it, a map or load answered ENOENT), the callback
    for its forced deallocation; after the scenario freed it, the race the note allows; the cookie of the
    snapshot. An onPreempt a reading or a discrepancy had to accept (R13, D14) demonstrates nothing."""
    if tag:
        return ()
    out = ["preempt-callback-any-thread"]
    if b.preempted or b.vnpu_preempted or b.preemptable:  # shown preempted, or a vnpu command could take it
        out += ["preempt-callback-on-forced-dealloc", "preempt-onpreempt-purpose"]
    if b.freed:
        out.append("preempt-after-free-race")
    value = b.cookie.value
    out += ["cookie-callback-null-if-unset"] if value is None else ["cookie-snapshot-at-alloc",
                                                                      *cookie_value_shown(value)]
    return tuple(out)


@shows("priority-request-range", "priority-set", "req-priority-default")
def victim_order_shown(s: State, victim: Buffer) -> tuple[str, ...]:
    """What the onPreempt of a `preempt=lowest` victim demonstrates on a device that declares the vnpu's
    victim order (Ctx.ranks_victims: the command then passed over the buffers it marked ``outranked``): the
    priorities the device holds are the ones last set — by the request (priority-request-range), by
    setPriority (priority-set), or left at the default (req-priority-default) — as far as they ordered the
    victim before the others."""
    passed_over = [b for b in s.bufs.values() if b.outranked and not b.freed]
    if victim.outranked or not passed_over:
        return ()
    ranked = [victim, *passed_over]
    out = ["priority-set" if any(b.priority_set for b in ranked) else "priority-request-range"]
    if any("priority" in b.unset and not b.priority_set for b in ranked):
        out.append("req-priority-default")
    return tuple(out)


def _target(s: State, ctx: Ctx, text: str) -> str | None:
    """The buffer a control command names. The trace carries the probe's slot (the compiler replaced
    the scenario's name), so a slot wins over a scenario name spelled the same (`b3` may be both)."""
    if text.startswith("B"):
        return text
    slot = text if text in ctx.names.values() else ctx.names.get(text, text)
    return s.slots.get(slot)


def _command(command: str) -> tuple[str, str]:
    """A control command's key and value. ``preempt_late=`` is read as ``preempt=``: it preempts the same
    buffer at once and only delivers the onPreempt later, a delay no rule bounds (the onPreempt is owed
    by the preempt settle, whenever it comes before it; preempt-window-before-callback)."""
    key, _, value = command.partition("=")
    return ("preempt" if key == "preempt_late" else key), value


def call_vnpu(ctx: Ctx, s: State, call: Call) -> Out:
    """Preemption commands may deliver onPreempt before the control call returns: mark candidates now."""
    command = call.args.get("command")
    if not isinstance(command, str):
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    key, value = _command(command)
    if key not in ("preempt", "pressure"):
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    if key == "pressure" and ctx.policy is not None and ctx.caps.capacity_bytes is not None:
        cap = ctx.caps.capacity_bytes
        s = (policies.pressure(ctx.policy, cap, s, int(value)) if value.isdigit() and int(value) < 2**64
             else policies.lose(s, cap, f"vnpu {command}"))
        return [evolve(s, inflight=Inflight(call.step, call.op, applied=True))]
    target = _target(s, ctx, value) if key == "preempt" and value != "lowest" else None
    if key == "preempt" and value != "lowest" and target is None:
        # The slot names no buffer (its allocation failed, legally): the probe skips the command.
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    bufs = dict(s.bufs)
    ranked = lowest_candidates(s) if key == "preempt" and target is None and ctx.ranks_victims else None
    for h, b in s.bufs.items():
        if not b.freed and b.maps == 0 and (target is None or h == target):
            if ranked is not None and h not in ranked[0]:
                bufs[h] = evolve(b, outranked=ranked[1])
            else:
                bufs[h] = evolve(b, preemptable=True, outranked="")
    subs = s.subs
    if target is None:
        # A buffer whose onAlloc is starting is the device's already, before the trace shows its callback:
        # the command may take it too.
        subs = {sid: replace(sub, preemptable=True) for sid, sub in s.subs.items()}
    return [evolve(s, bufs=bufs, subs=subs, inflight=Inflight(call.step, call.op, applied=True))]


@clause("preempt-never-while-mapped", "preempt-callback-on-forced-dealloc", "free-memory-after-last-unmap")
@shows("preempt-never-while-mapped", "req-onpreempt-default-null")
def ret_vnpu(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    """Spec: "This callback will not be invoked while the application has the buffer mapped."
    (preempt-never-while-mapped)

    ``vnpu preempt=<buffer>`` (or ``preempt_late=<buffer>``) returning 0 claims the buffer was preempted:
    it must not be mapped, and its onPreempt (if set) is owed. ``preempt=lowest`` preempts one unmapped
    live buffer (one candidate state per choice). ``pressure=`` may preempt unmapped buffers (also one
    whose onAlloc is just starting) and makes capacity unpredictable, whatever it returns (a reservation
    it could not meet stays); ``fail_next=`` forces the next allocation's errno.
    """
    command = call.args.get("command")
    s = evolve(s, inflight=None)
    if isinstance(command, str) and command.startswith("pressure=") and s.pool is not None:
        return pressure_answer(ctx, s, command, ret)
    if not isinstance(command, str) or ret.skipped is not None:
        return [s]
    key, value = _command(command)
    if key == "pressure":
        # The reservation stays in force when it could not be met (ENOMEM) too.
        return [evolve(s, relaxed_capacity=True)]
    if ret.ret != 0:
        # A preemption the device refused while the buffer (or every candidate) was mapped: the sentence's
        # case, and no onPreempt may follow while it stays mapped.
        return [show(s, "preempt-never-while-mapped")] if refused_while_mapped(s, ctx, key, value) else [s]
    if key == "fail_next":
        return [evolve(s, forced=(*s.forced, value))]
    if key != "preempt":
        return [s]
    if value == "lowest":
        out = []
        for h, b in s.bufs.items():  # the candidates call_vnpu ranked (it marked the others outranked)
            if not b.freed and b.maps == 0 and not b.vnpu_preempted and not b.outranked:
                bufs = dict(s.bufs)
                bufs[h] = evolve(b, preempted=True, vnpu_preempted=True)
                out.append(evolve(s, bufs=bufs))
        return out or [s]
    target = _target(s, ctx, value)
    victim = s.bufs.get(target) if target is not None else None
    if victim is None:
        return [s]
    b = victim
    if b.maps > 0:
        return reject("preempt-never-while-mapped", f"vnpu preempted {b.handle} while mapped",
                      ["vnpu_control fails with EBUSY while the buffer is mapped"],
                      "a mapped buffer is never preempted")
    bufs = dict(s.bufs)
    bufs[b.handle] = evolve(b, preempted=True, vnpu_preempted=True)
    preempted = evolve(s, bufs=bufs)
    # Preempted with a NULL onPreempt: no callback may come (one would be refused), which the trace shows.
    return [preempted if b.onpreempt else show(preempted, "req-onpreempt-default-null")]


def refused_while_mapped(s: State, ctx: Ctx, key: str, value: str) -> bool:
    """Whether a preemption command the device refused named a mapped buffer (or, for `preempt=lowest`, found
    every live buffer mapped): the case "will not be invoked while the application has the buffer mapped"
    speaks of, where no onPreempt may follow while it stays mapped."""
    if key != "preempt":
        return False
    if value == "lowest":
        live = [b for b in s.bufs.values() if not b.freed]
    else:
        target = _target(s, ctx, value)
        live = [s.bufs[target]] if target is not None and target in s.bufs else []
    return bool(live) and all(b.maps > 0 for b in live)


@clause("priority-request-range", "priority-set", "req-priority-default")
def lowest_candidates(s: State) -> tuple[frozenset[str], str]:
    """Spec: "This is the relative priority of the buffer within the app." (priority-request-range)
    Spec: "Sets the priority of the buffer." (priority-set)

    The buffers ``vnpu preempt=lowest`` may take: the unmapped live ones of the numerically greatest
    priority value (the vnpu's victim order, docs/vnpu.md §7; ties: any of them), and any with a load in
    flight (the vnpu may pass those over). Also the clause an onPreempt of one of the others contradicts:
    the priority the device holds for the buffers is not the one last set (by setPriority, or by the
    request). A priority outside the range that the device accepted (R4) ranks nothing: how the device
    orders it is not known. Nor does a buffer that may have been preempted already (by pressure, unseen, or
    passed over in a tie): the vnpu no longer counts it, so it sets no bar for the others.
    """
    live = {h: b for h, b in s.bufs.items() if not b.freed and b.maps == 0}
    idle = [b.priority for b in live.values()
            if not (b.loads or b.vnpu_preempted or b.preempted or b.preemptable)]
    top = max(idle, default=None)
    if any(b.priority not in PRIORITY_RANGE for b in live.values()):
        top = None
    ranked = frozenset(h for h, b in live.items() if top is None or b.loads or b.priority >= top)
    if any(b.priority_set for b in live.values()):
        cid = "priority-set"
    elif any("priority" in b.unset for b in live.values()):
        cid = "req-priority-default"  # a buffer kept the default: the order contradicts the default first
    else:
        cid = "priority-request-range"
    return ranked, cid


@clause("alloc-supported-may-fail")
def pressure_answer(ctx: Ctx, s: State, command: str, ret: Ret) -> Out:
    """Spec: "If a request is supported, ANpuManager_allocAsync() may still respond onAlloc with a failure
    due to other reasons, e.g., no memory." (alloc-supported-may-fail)

    Under a declared policy the vnpu ``pressure=`` command is predicted like an allocation: the victims
    were preempted when the call was made (policies.pressure); it returns 0 exactly when the policy's
    used bytes and the reservation then fit the capacity, else -1 (ENOMEM).
    """
    pool = s.pool
    assert pool is not None
    expect_ok = pool.pressure_ok
    s = evolve(s, pool=replace(pool, pressure_ok=None))
    if expect_ok is None or pool.lost is not None or ret.skipped is not None:
        return [s]
    if (ret.ret == 0) == expect_ok:
        return [s]
    return reject("alloc-supported-may-fail", f"vnpu {command} returned {ret.ret}",
                  ["0" if expect_ok else "-1 (ENOMEM)"],
                  f"policy {ctx.policy}: after preempting the buffers its victim order names, the reservation "
                  f"{'fits' if expect_ok else 'does not fit'}")


@clause("preempt-callback-on-forced-dealloc", "preempt-onpreempt-purpose")
def owed_preempts(s: State, announced: bool = True) -> Reject | None:
    """Spec: "Callback function to be invoked when NpuManager needs to forcefully deallocate the buffer."
    (preempt-onpreempt-purpose)

    By teardown's preempt settle (the probe waits there for the onPreempts commanded preemptions owe,
    docs/formats.md §4), and at the end, every buffer the vnpu confirmed preempting has had its onPreempt
    (if set) — unless the application freed the buffer first, which makes a late callback optional
    (preempt-after-free-race). A preemption the application saw (ENOENT, no command) owes its onPreempt
    too, but the text allows "a small time window" before the callback and the probe waits for no such
    one: it is owed at the end only when the deleter of the cookie it would carry has run, since the
    implementation deletes a cookie only once no callback will carry it (``announced`` False at the
    preempt settle). Without such a cookie nothing in the trace bounds the window: not owed, not shown.
    """
    for b in s.bufs.values():
        if b.vnpu_preempted and b.onpreempt and not b.preempt_cb and not b.freed:
            return reject("preempt-onpreempt-purpose", f"no onPreempt for {b.handle}", ["one onPreempt"],
                          "the vnpu preempted the buffer and its onPreempt is set")
    for b in (*s.bufs.values(), *s.ghosts) if announced else ():
        if announced_owed(b) and b.cookie.token is not None and b.cookie.token not in s.tokens:
            return reject("preempt-onpreempt-purpose", f"no onPreempt for {b.handle}", ["one onPreempt"],
                          f"{b.handle} was shown preempted (ENOENT) and its request had onPreempt")
    return None


@clause("preempt-onpreempt-purpose", "preempt-window-before-callback")
def settle_preempt(ctx: Ctx, s: State) -> Out:
    """Spec: "Callback function to be invoked when NpuManager needs to forcefully deallocate the buffer."
    (preempt-onpreempt-purpose)
    Spec: "There is a small time window between when the buffer is preempted and when
    ANpuManager_OnPreempt is called." (preempt-window-before-callback)

    The callback comes on a device thread, so it may arrive after the last step: the probe's preempt
    settle waits for it (up to the settle budget), and only then is it owed. The settle's ``reached``
    does not change the rule: a settle that gave up waited the whole budget (2 s by default) after the
    steps, well past the "small time window" the text allows, so an owed onPreempt still missing there
    fails — as an onAlloc missing at the alloc settle does. (The probe's wait may over-count, e.g. for
    a cookie submitted with and without onPreempt; the rule here is the model's exact one.)
    """
    bad = owed_preempts(s, announced=False)
    return bad if bad is not None else [s]


def settle_deleters(ctx: Ctx, s: State) -> Out:
    """The last settle of teardown: every onPreempt a seen preemption owes has arrived, then every
    cookie without holders has been deleted."""
    bad = owed_preempts(s) or all_deleted(s)
    return bad if bad is not None else [s]


def on_end(ctx: Ctx, s: State, ev: End) -> Out:
    bad = owed_preempts(s)
    return bad if bad is not None else [s]
