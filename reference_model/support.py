"""Chapter "support": ANpuManager_isSupported."""

from __future__ import annotations

from ._context import TYPE_VALID, Ctx, Out, arg_list, errno_set, reject
from .rules import Reject, clause
from .state import Attrs, State, done, evolve_state
from .trace import Call, Ret


@clause("support-tests-requests", "support-returns", "support-error-returns", "support-ignored-fields",
        "support-modify-after-return")
def check_support(ctx: Ctx, reqs: list[Attrs], ret: Ret) -> Reject | None:
    """Spec: "Returns 0 on successfully testing whether the requests are supported or not (even if some or
    all of them are not supported); results are stored in outIsSupported." (support-returns)
    Spec: "Otherwise, if there is an error, returns -1 with with errno set, and results in outIsSupported
    should be ignored by the caller." (support-error-returns)
    Spec: "Tests if the provided requests are supported or not." (support-tests-requests)

    Readings: a request with a negative device or an invalid type can never be allocated, so it is not
    supported; with the device's pairs known (discovery), a pair outside them is not supported either.
    cookie, onAlloc and onPreempt do not matter (support-ignored-fields): a request without onAlloc is
    tested, not a crash.
    """
    if ret.ret == -1:
        if not errno_set(ret.errno):
            return reject("support-error-returns", "-1 without errno", ["0 with results", "-1 with errno set"],
                          "a failed isSupported sets errno")
        return None
    if ret.ret != 0:
        return reject("support-returns", f"ret={ret.ret}", ["0", "-1"], "isSupported returns 0 or -1")
    results = ret.extra.get("results")
    if not isinstance(results, list) or len(results) != len(reqs) or not all(isinstance(r, bool) for r in results):
        return reject("support-returns", f"results={results!r}", [f"{len(reqs)} booleans"],
                      "one result per request is stored in outIsSupported")
    pairs = ctx.caps.supported_pairs
    for i, (a, got) in enumerate(zip(reqs, results, strict=True)):
        if not got:
            continue
        if a.device < 0 or a.type not in TYPE_VALID:
            return reject("support-tests-requests", f"results[{i}]=true for device {a.device}, type {a.type}",
                          ["false"], "a request with an invalid device or type is never supported")
        if pairs is not None and (a.device, a.type) not in pairs:
            return reject("support-tests-requests", f"results[{i}]=true for pair ({a.device}, {a.type})",
                          ["false"], "the pair was not supported when the device was discovered")
    return None


def ret_is_supported(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    if ret.skipped is not None:
        return [done(s)]
    slots = arg_list(call, "reqs")
    if any(slot is None or slot not in s.reqs for slot in slots):
        return [done(s)]
    reqs = [s.reqs[slot].attrs for slot in slots if slot is not None]
    bad = check_support(ctx, reqs, ret)
    if bad is not None:
        return bad
    unsupported = unsupported_learned(s, reqs, ret)
    return [evolve_state(s, inflight=None, unsupported=unsupported)]


@clause("alloc-unsupported-fails")
def unsupported_learned(s: State, reqs: list[Attrs], ret: Ret) -> frozenset[tuple[int, int, int, int, int]]:
    """Spec: "If a request is not supported, ANpuManager_allocAsync() guarantees to respond onAlloc with a
    failure." (alloc-unsupported-fails)

    The parameters isSupported denied are remembered; a later submission with the same parameters must
    fail.
    """
    results = ret.extra.get("results")
    if ret.ret != 0 or not isinstance(results, list):
        return s.unsupported
    new = {a.support_key() for a, got in zip(reqs, results, strict=False) if got is False}
    return s.unsupported | new if new else s.unsupported
