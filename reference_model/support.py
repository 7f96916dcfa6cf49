"""Chapter "support": ANpuManager_isSupported."""

from __future__ import annotations

from collections.abc import Sequence

from ._context import TYPE_VALID, Ctx, Out, arg_list, errno_set, reject, slot_label
from .rules import Reject, clause, shows
from .state import Attrs, State, SupportKey, done, evolve, show
from .trace import Call, Ret


@clause("support-tests-requests", "support-returns", "support-error-returns", "support-ignored-fields",
        "support-modify-after-return", "support-out-array-size")
def check_support(ctx: Ctx, reqs: list[Attrs], cookies: list[str | None], ret: Ret,
                  slots: Sequence[str] = ()) -> Reject | str:
    """Spec: "Returns 0 on successfully testing whether the requests are supported or not (even if some or
    all of them are not supported); results are stored in outIsSupported." (support-returns)
    Spec: "Otherwise, if there is an error, returns -1 with with errno set, and results in outIsSupported
    should be ignored by the caller." (support-error-returns)
    Spec: "Tests if the provided requests are supported or not." (support-tests-requests)
    Spec: "The following fields in the requests are ignored:" (support-ignored-fields)
    Spec: "It must be valid for at least requestsLen elements for ANpuManager_isSupported() to write to."
    (support-out-array-size)

    Any return other than 0 or -1 is a FAIL. Nothing may be written past ``requestsLen`` elements (the
    probe's canary after the array, ``canary``). Within one call, two requests that differ only in the
    ignored fields (cookie, onAlloc, onPreempt) get the same answer, and so does a request listed twice.
    Reading R5 (WARN, never FAIL): a request with a negative device or an invalid type is not supported;
    with the device's pairs known (discovery), a pair outside them is not supported either. A request
    without onAlloc is tested, not a crash. Returns the rejection, or the reading tag ("" when none).
    """
    if ret.extra.get("canary") is False:
        return reject("support-out-array-size", "a write past outIsSupported[requestsLen - 1]",
                      [f"writes to outIsSupported[0..{len(reqs) - 1}] only"],
                      "the output array is only valid for requestsLen elements")
    if ret.ret == -1:
        if not errno_set(ret.errno):
            return reject("support-error-returns", "-1 without errno", ["0 with results", "-1 with errno set"],
                          "a failed isSupported sets errno")
        return ""
    if ret.ret != 0:
        return reject("support-returns", f"ret={ret.ret}", ["0", "-1"], "isSupported returns 0 or -1")
    results = ret.extra.get("results")
    if not isinstance(results, list) or len(results) != len(reqs) or not all(isinstance(r, bool) for r in results):
        return reject("support-returns", f"results={results!r}", [f"{len(reqs)} booleans"],
                      "one result per request is stored in outIsSupported")
    seen: dict[tuple[object, ...], int] = {}
    for i, a in enumerate(reqs):
        j = seen.setdefault(a.support_key(), i)
        if results[j] != results[i]:
            other = reqs[j]
            same = (other.onalloc, other.onpreempt, cookies[j]) == (a.onalloc, a.onpreempt, cookies[i])
            cid = "support-tests-requests" if same else "support-ignored-fields"
            what = "the same request" if same else "requests that differ only in cookie, onAlloc or onPreempt"
            which = f"requests {j + 1} and {i + 1} of {len(reqs)}"
            if len(slots) == len(reqs):
                which += f" ({slot_label(ctx, slots[j])}; {slot_label(ctx, slots[i])})"
            return reject(cid, f"results[{j}]={results[j]}, results[{i}]={results[i]}",
                          ["the same answer for both"], f"{what}, tested in one call: {which}")
    pairs = ctx.caps.supported_pairs
    for a, got in zip(reqs, results, strict=True):
        outside = pairs is not None and (a.device, a.type) not in pairs
        if got and (a.device < 0 or a.type not in TYPE_VALID or outside):
            return "R5"
    return ""


def ret_is_supported(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    if ret.skipped is not None:
        return [done(s)]
    slots = arg_list(call, "reqs")
    if any(slot is None or slot not in s.reqs for slot in slots):
        return [done(s)]
    reqs = [s.reqs[slot].attrs for slot in slots if slot is not None]
    cookies = [s.reqs[slot].cookie.value for slot in slots if slot is not None]
    res = check_support(ctx, reqs, cookies, ret, [slot for slot in slots if slot is not None])
    if isinstance(res, Reject):
        return res
    unsupported = unsupported_learned(s, reqs, ret)
    asked = dict(s.reqs)
    for slot in slots:
        if slot is not None and not asked[slot].asked:
            asked[slot] = evolve(asked[slot], asked=True)
    out = evolve(s, reqs=asked, inflight=None, unsupported=unsupported, dids=s.dids | {res} if res else s.dids)
    return [show(out, *support_shown(reqs, cookies, ret))]


@shows("support-returns", "support-tests-requests", "support-error-returns", "support-out-array-size",
        "support-ignored-fields")
def support_shown(reqs: list[Attrs], cookies: list[str | None], ret: Ret) -> list[str]:
    """What an accepted isSupported answer demonstrates: 0 with one answer per request
    (support-returns, support-tests-requests); the answer to input the implementation may take as an error
    (invalid device or type): 0 with answers, or -1 with errno (support-error-returns: the sentence's
    "if there is an error" cannot be forced, so the answer to input that may be one is what a trace can
    show); nothing written past the array (support-out-array-size, the probe's canary); the same answer for
    requests that differ only in an ignored field (support-ignored-fields).
    """
    out: list[str] = []
    if ret.extra.get("canary") is True:
        out.append("support-out-array-size")
    may_err = any(a.device < 0 or a.type not in TYPE_VALID for a in reqs)
    if ret.ret == -1:
        return [*out, "support-error-returns"]
    out.append("support-returns")
    if reqs:
        out.append("support-tests-requests")
    if may_err:
        out.append("support-error-returns")
    groups: dict[object, set[tuple[bool, bool, str | None]]] = {}
    for a, cookie in zip(reqs, cookies, strict=True):
        groups.setdefault(a.support_key(), set()).add((a.onalloc, a.onpreempt, cookie))
    if any(len(ignored) > 1 for ignored in groups.values()):
        out.append("support-ignored-fields")
    return out


@clause("alloc-unsupported-fails")
def unsupported_learned(s: State, reqs: list[Attrs], ret: Ret) -> frozenset[SupportKey]:
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
