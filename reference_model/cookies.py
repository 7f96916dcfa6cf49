"""Chapter "cookies": ownership of the cookie, the deleter, replacement, snapshots and borrowing.

Reading (docs/model.md §Readings): each setCookie() with a non-NULL deleter is one *hand-over* (a
token). The deleter is owed exactly once per hand-over, with the cookie value, after the last holder
lets go. Holders are: the request (until it is freed or its cookie replaced), every submission made
from it (until its onAlloc), every buffer allocated from it (until freed), every pending loadAsync on
such a buffer (until its onLoad). Replacement deletes the previous cookie *during* setCookie when the
request was its only holder; otherwise the deletion is deferred to the last holder, because the
snapshot rule guarantees earlier submissions still see the old value in their callbacks.

Borrowing (docs/model.md R2): a callback borrows its cookie until it returns. From trace version 2 each
callback writes ``cb_return`` just before it returns; a callback is *known* to have returned only once
its thread writes anything after that (the probe does nothing else before returning, but the
implementation learns of the return a little later). A callback of a version 1 trace is never known
to have returned.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._context import Ctx, Out, arg_bool, arg_cookie, arg_slot, reject
from .rules import Reject, clause, shows
from .state import NO_COOKIE, Borrow, CookieRef, Inflight, State, Token, done, evolve, show
from .trace import Call, Cb, CbReturn, Deleter, Ret
from .vocabulary import COOKIE_DELETERS


def hold(s: State, ref: CookieRef, delta: int, by: str = "") -> dict[int, Token]:
    """The token map with one more (or one fewer) holder of ``ref``'s token."""
    return hold_tokens(s.tokens, ref, delta, by)


def hold_tokens(current: Mapping[int, Token], ref: CookieRef, delta: int, by: str = "") -> dict[int, Token]:
    """``hold`` on a token map. ``by``: the clause of the call letting go; when it lets go of the last
    holder, the deleter that follows demonstrates that call's effect (Token.released_by)."""
    tokens = dict(current)
    if ref.token is not None:
        t = tokens.get(ref.token)
        if t is not None:
            holders = t.holders + delta
            released = by if by and holders <= 0 else t.released_by
            tokens[ref.token] = evolve(t, holders=holders, released_by=released)
    return tokens


def borrow(ctx: Ctx, s: State, ref: CookieRef, ev: Cb) -> State:
    """``s`` with the callback ``ev``, which carries ``ref``'s hand-over, borrowing it until it returns: a
    Borrow (trace version 2), or for good (version 1, where returns are not recorded: ``lingering``)."""
    tid = ref.token
    if tid is None or tid not in s.tokens:
        return s
    if ctx.returns:
        return evolve(s, cbs=(*s.cbs, Borrow(ev.line, ev.th, ev.kind, tid)))
    t = s.tokens[tid]
    if t.lingering:
        return s
    tokens = dict(s.tokens)
    tokens[tid] = evolve(t, lingering=True)
    return evolve(s, tokens=tokens)


def on_cb_return(ctx: Ctx, s: State, ev: CbReturn) -> Out:
    """The callback opened at line ``ev.opened`` is about to return: it is no longer certainly running."""
    for i, b in enumerate(s.cbs):
        if b.line == ev.opened:
            return [evolve(s, cbs=(*s.cbs[:i], evolve(b, running=False), *s.cbs[i + 1:]))]
    return [s]


def returned(s: State, lines: frozenset[int], line: int) -> State:
    """``s`` once the callbacks opened at ``lines`` are known to have returned (their thread wrote the
    event at ``line`` after their cb_return): their hand-overs are no longer borrowed by them."""
    if not s.cbs:
        return s
    keep = tuple(b for b in s.cbs if b.line not in lines)
    if len(keep) == len(s.cbs):
        return s
    tokens = dict(s.tokens)
    for b in s.cbs:
        t = tokens.get(b.token)
        if b.line in lines and t is not None:
            tokens[b.token] = evolve(t, borrow_end=line)
    return evolve(s, cbs=keep, tokens=tokens)


def borrowed(s: State, tid: int, *, running: bool = False) -> bool:
    """Whether a callback carrying hand-over ``tid`` is not known to have returned (``running``: has
    certainly not returned: no cb_return yet)."""
    return any(b.token == tid and (b.running or not running) for b in s.cbs)


@clause("cookie-ownership-donated", "cookie-shared-refcounted", "cookie-not-dereferenced", "cookie-clear",
        "cookie-default-null")
def hand_over(s: State, value: str | None, deleter: bool, step: int) -> tuple[CookieRef, State]:
    """Spec: "This donates the ownership of the cookie to ANpuManager. In other words, ANpuManager will be
    responsible for freeing the cookie with the provided deleter function." (cookie-ownership-donated)

    Every setCookie() with a deleter is its own hand-over, even for a value handed before
    (cookie-shared-refcounted: the user reference-counts, the deleter runs once per setCookie). A NULL
    deleter hands nothing over (cookie-clear, cookie-default-null), and the value is never dereferenced:
    raw integers travel through unchanged (cookie-not-dereferenced).
    """
    if not deleter:
        return CookieRef(value, None), s if value is None else evolve(s, unowned=s.unowned | {value})
    tid = s.next_id
    tokens = dict(s.tokens)
    tokens[tid] = Token(value, 1, step)
    return CookieRef(value, tid), evolve(s, tokens=tokens, next_id=tid + 1, handed=s.handed | {value})


@shows("cookie-null-deleter-nothing", "support-modify-after-return")
def call_set_cookie(ctx: Ctx, s: State, call: Call) -> Out:
    slot = arg_slot(call, "req")
    req = s.reqs.get(slot)
    if req is None:
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    value, deleter = arg_cookie(call, "cookie"), arg_bool(call, "deleter")
    ref, s2 = hand_over(s, value, deleter, call.step)
    old = req.cookie
    tokens = hold(s2, old, -1)
    owed = old.token if old.token is not None and unborrowed(s2, tokens.get(old.token), old.token, call) else None
    reqs = dict(s2.reqs)
    reqs[slot] = evolve(req, cookie=ref, attrs=evolve(req.attrs, unset=req.attrs.unset - {"cookie"}),
                        cookie_after_submit=req.submitted)
    out = evolve(s2, reqs=reqs, tokens=tokens,
                       inflight=Inflight(call.step, call.op, applied=True, owed_deletion=owed))
    if value is not None and not deleter:
        # Nothing may delete it: a trace that ends without a deleter call for it demonstrates the sentence.
        out = show(out, "cookie-null-deleter-nothing")
    return [show(out, "support-modify-after-return") if req.asked else out]


@clause("cookie-borrowed-in-callbacks")
def unborrowed(s: State, t: Token | None, tid: int, call: Call) -> bool:
    """Spec: "The cookie is borrowed, i.e. the user does not own the cookie and must not free it."
    (cookie-borrowed-in-callbacks)

    Whether hand-over ``tid`` has no holder left and no callback borrows it at ``call``: every callback
    that carried it is known to have returned before the call began (so the implementation cannot still
    see one running when the call lets go of the cookie). A version 1 trace never shows a return.
    """
    return (t is not None and t.holders == 0 and not t.lingering and not borrowed(s, tid)
            and t.borrow_end < call.line)


@clause("cookie-replace-deletes-previous", "cookie-clear")
def replaced_cookie_deleted(s: State, ret: Ret, clearing: bool) -> Reject | None:
    """Spec: "When setCookie() is called multiple times, the previous cookie will be deleted with the
    previous deleter function (if set) before the new cookie and the new deleter function are set."
    (cookie-replace-deletes-previous)

    When the request was the previous cookie's only holder, its deleter must have run before
    setCookie() returned. Where a callback carrying the cookie (an onAlloc, onLoad or onPreempt) may still
    be running when setCookie() begins — the trace does not show that it returned before — the callback
    still borrows the cookie: the deleter may then come once it returns, and is owed by the deleters'
    settle as every deleter is (``unborrowed``). ``clearing``: the call set both cookie and deleter to NULL
    ("To clear the cookie, set both cookie and cookieDeleter to NULL.", cookie-clear).
    """
    owed = s.inflight.owed_deletion if s.inflight is not None else None
    if owed is not None and owed in s.tokens:
        t = s.tokens[owed]
        cid = "cookie-clear" if clearing else "cookie-replace-deletes-previous"
        return reject(cid, "setCookie returned before the previous cookie's deleter ran",
                      [f"deleter({t.value}) before setCookie returns"],
                      f"the cookie {t.value} handed over at step {t.step} had no other holder")
    return None


@shows("cookie-clear", "cookie-replace-deletes-previous", "cookie-shared-refcounted")
def ret_set_cookie(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    clearing = arg_cookie(call, "cookie") is None and not arg_bool(call, "deleter")
    bad = replaced_cookie_deleted(s, ret, clearing)
    if bad is not None:
        return bad
    out = done(s)
    if s.inflight is not None and s.inflight.owed_deletion is not None:
        # The previous cookie's deleter ran inside the call, as the replacement (or the clear) requires.
        out = show(out, "cookie-clear" if clearing else "cookie-replace-deletes-previous")
    if call.in_cb == "preempt":
        out = show(out, "cookie-shared-refcounted")  # a cookie set inside onPreempt, as the text invites
    return [out]


@clause("cookie-deleter-called", "cookie-deleter-null-cookie", "cookie-null-deleter-nothing",
        "cookie-deleter-any-thread", "cookie-borrowed-in-callbacks", "cookie-ownership-donated",
        "preempt-onpreempt-purpose")
def on_deleter(ctx: Ctx, s: State, ev: Deleter) -> Out:
    """Spec: "If cookieDeleter is not NULL, it will be called with the cookie value." (cookie-deleter-called)
    Spec: "This will happen even if the cookie is NULL." (cookie-deleter-null-cookie)
    Spec: "If the cookieDeleter is NULL, nothing will happen, even when the cookie is not NULL."
    (cookie-null-deleter-nothing)
    Spec: "The deleter may be called from any thread." (cookie-deleter-any-thread)
    Spec: "The cookie is borrowed, i.e. the user does not own the cookie and must not free it."
    (cookie-borrowed-in-callbacks)

    A deleter call is attributed to a hand-over of that value whose holders have all let go and that no
    callback is certainly still running with (between its cb and its cb_return: trace version 2), or whose
    only holders are freed buffers the device may let go of (optional_deletion); with
    several such hand-overs of one value the deleter may be any one's (one candidate state each): a
    setCookie that owes the deletion of its previous hand-over is satisfied by the branch that takes it,
    while an older hand-over of the same value may still be deleted later. When
    the only such hand-overs are borrowed by a running callback, the cookie was deleted while borrowed. Deleting a
    cookie a request still holds breaks the ownership rule; deleting one a pending callback will receive
    breaks borrowing (cookie-borrowed-in-callbacks) — unless the only callbacks still owed with it are
    the onPreempt of freed buffers that a map or load showed preempted: the cookie was dropped as if
    that onPreempt were not coming, which is what fails (preempt-onpreempt-purpose).
    """
    value = ev.cookie
    if value not in s.handed:
        return never_handed_over(s, ev)
    bad = own_deleter(ev)
    if bad is not None:
        return bad
    held: list[tuple[int, Token]] = []  # hand-overs of this value that still have holders
    in_use: int | None = None  # a hand-over with no holder that a running callback still borrows
    deleted: list[State] = []  # one successor per hand-over the deleter may have been for
    for tid, t in s.tokens.items():
        if t.value == value:
            if t.holders <= 0:
                if borrowed(s, tid, running=True):
                    in_use = tid if in_use is None else in_use
                    continue
                tokens = dict(s.tokens)
                del tokens[tid]
                ghosts = tuple(g for g in s.ghosts if g.cookie.token != tid)
                carried = borrowed(s, tid)  # a callback carried it: the cookie outlived that callback
                cbs = tuple(b for b in s.cbs if b.token != tid) if s.cbs else s.cbs
                after = evolve(s, tokens=tokens, ghosts=ghosts, cbs=cbs)
                deleted.append(deletion_shown(after, t, ev, carried))
                continue
            held.append((tid, t))
    if deleted:
        return deleted
    let_go = [kept for tid, t in held if (kept := optional_deletion(s, tid, t, ev)) is not None]
    if let_go:
        return let_go
    shown = "NULL" if value is None else value
    if in_use is not None:
        cb = next(b for b in s.cbs if b.token == in_use and b.running)
        return reject("cookie-borrowed-in-callbacks",
                      f"deleter({shown}) while on{cb.kind.capitalize()}({shown}) is still running on {cb.th}",
                      ["deleter after the callback carrying the cookie returned"],
                      f"the callback that started at trace line {cb.line} had not returned (no cb_return yet): "
                      "it still borrows the cookie")
    if held:
        held_id, t = held[0]
        by_request = [slot for slot, r in s.reqs.items() if r.cookie.token == held_id]
        if by_request:
            return reject("cookie-ownership-donated", f"deleter({shown}) while request {by_request[0]} still holds it",
                          ["no deleter call while a request holds the cookie"],
                          f"the cookie handed over at step {t.step} is still set on a live request")
        waiting = [b for b in (*s.bufs.values(), *s.ghosts)
                   if b.cookie.token == held_id and b.freed and b.awaits_late_onpreempt()]
        owed = [b.handle for b in waiting if b.owes_onpreempt()]
        if owed and len(waiting) == t.holders:
            return reject("preempt-onpreempt-purpose", f"deleter({shown}) before the onPreempt owed for {owed[0]}",
                          ["onPreempt, then the deleter"],
                          f"{owed[0]} was shown preempted (ENOENT) and its request had onPreempt: the callback is "
                          "owed, and the cookie must outlive it")
        return reject("cookie-borrowed-in-callbacks", f"deleter({shown}) while a callback is still owed with it",
                      ["deleter after the last callback carrying the cookie"],
                      f"the cookie handed over at step {t.step} is still held by a submission, buffer or load")
    return reject("cookie-deleter-called", f"deleter({shown}) once more",
                  ["exactly one deleter call per setCookie() with a deleter"],
                  "every hand-over of this cookie has already been deleted")


def optional_deletion(s: State, tid: int, t: Token, ev: Deleter) -> State | None:
    """The state after a deleter call for hand-over ``t`` whose only holders are freed buffers the device
    may let go of: still mapped (their memory lives until the last unmap), or preempted by a vnpu command
    with a late onPreempt that may still come (preempt-after-free-race); None when something else holds it.
    An onPreempt that still comes after this finds the cookie deleted (cookie-borrowed-in-callbacks)."""
    optional = [b for b in (*s.bufs.values(), *s.ghosts) if b.cookie.token == tid and b.optional_hold()]
    if not optional or len(optional) != t.holders:
        return None
    tokens = dict(s.tokens)
    del tokens[tid]
    ghosts = tuple(g for g in s.ghosts if g.cookie.token != tid)
    bufs = {h: evolve(b, mapped_hold=False) if b.cookie.token == tid and b.mapped_hold else b
            for h, b in s.bufs.items()}
    return deletion_shown(evolve(s, tokens=tokens, ghosts=ghosts, bufs=bufs), t, ev, borrowed(s, tid))


@shows("cookie-deleter-called", "cookie-deleter-null-cookie", "cookie-deleter-any-thread", "cookie-ownership-donated",
       "cookie-borrowed-in-callbacks", "cookie-shared-refcounted", "req-free-destroys", "free-indicates-not-needed")
def deletion_shown(s: State, t: Token, ev: Deleter, carried: bool) -> State:
    """What a deleter call attributed to hand-over ``t`` demonstrates (``s``: the state after it).

    The deleter ran with the cookie value (cookie-deleter-called; cookie-deleter-null-cookie for NULL), on
    whatever thread (cookie-deleter-any-thread), and it was the function handed over with that value
    (cookie-ownership-donated: the probe hands distinct deleters and the trace names the one that ran);
    the cookie outlived the callbacks that borrowed it (cookie-borrowed-in-callbacks); another hand-over of
    the same value is still to be deleted on its own (cookie-shared-refcounted); the call that let go of
    the last holder did (Token.released_by: req-free-destroys, free-indicates-not-needed); a raw integer
    arrived as the value it was (cookie-raw-integer, cookie-not-dereferenced). ``carried``: a callback that
    carried the hand-over had begun (borrowed), so the deletion came after it.
    """
    shown = ["cookie-deleter-any-thread", "cookie-deleter-null-cookie" if t.value is None else "cookie-deleter-called"]
    if ev.fn is not None:
        shown.append("cookie-ownership-donated")
    if carried or t.lingering or t.borrow_end:
        shown.append("cookie-borrowed-in-callbacks")
    if any(other.value == t.value for other in s.tokens.values()):
        shown.append("cookie-shared-refcounted")
    if t.released_by:
        shown.append(t.released_by)
    return show(s, *shown, *cookie_value_shown(t.value))


@shows("cookie-raw-integer", "cookie-not-dereferenced")
def cookie_value_shown(value: str | None) -> tuple[str, ...]:
    """What a callback or deleter carrying ``value`` intact demonstrates: a raw integer travelled as the
    value it was, never dereferenced (cookie-raw-integer, cookie-not-dereferenced)."""
    if value is not None and value.startswith("raw:"):
        return ("cookie-raw-integer", "cookie-not-dereferenced")
    return ()


@clause("cookie-raw-integer", "cookie-null-deleter-nothing")
def never_handed_over(s: State, ev: Deleter) -> Reject:
    """Spec: "This is useful if the user stores an arbitrary 64-bit integer value in the cookie (so it is not
    a real pointer.)" (cookie-raw-integer)
    Spec: "If the cookieDeleter is NULL, nothing will happen, even when the cookie is not NULL."
    (cookie-null-deleter-nothing)

    A deleter called with a value no setCookie() handed over with a deleter: a deleter ran for a cookie set
    with a NULL deleter, when one was set with this value; else, when raw integers were handed over (or this
    value is one), the integer did not reach the deleter as the 64-bit value it was.
    """
    shown = "NULL" if ev.cookie is None else ev.cookie
    if ev.cookie in s.unowned:
        return reject("cookie-null-deleter-nothing", f"deleter({shown})", ["no deleter call"],
                      f"{shown} was set with a NULL deleter only")
    raw = (ev.cookie or "").startswith("raw:") or any((v or "").startswith("raw:") for v in s.handed)
    if raw:
        return reject("cookie-raw-integer", f"deleter({shown})", sorted(v or "NULL" for v in s.handed),
                      "no cookie with this value was handed over: the integer changed on its way to the deleter")
    return reject("cookie-null-deleter-nothing", f"deleter({shown})", ["no deleter call"],
                  "this cookie value was never handed over with a non-NULL deleter")


def deleter_index(value: str | None) -> int:
    """The probe's deleter function for a hand-over of ``value`` (vocabulary COOKIE_DELETERS): the cookie's
    number (slot ``c<N>`` or ``raw:<N>``) modulo their count, 0 for NULL."""
    if value is None:
        return 0
    digits = value[4:] if value.startswith("raw:") else value[1:]
    try:
        return int(digits) % COOKIE_DELETERS
    except ValueError:
        return 0


@clause("cookie-ownership-donated", "cookie-deleter-called")
def own_deleter(ev: Deleter) -> Reject | None:
    """Spec: "This donates the ownership of the cookie to ANpuManager. In other words, ANpuManager will be
    responsible for freeing the cookie with the provided deleter function." (cookie-ownership-donated)

    Each cookie is deleted by the deleter handed over with it: the probe hands distinct deleter
    functions and the trace names the one that ran.
    """
    want = deleter_index(ev.cookie)
    if ev.fn is None or ev.fn == want:
        return None
    shown = "NULL" if ev.cookie is None else ev.cookie
    return reject("cookie-ownership-donated", f"deleter #{ev.fn} called with {shown}", [f"deleter #{want}"],
                  f"{shown} was handed over with deleter #{want}, not with #{ev.fn}")


@clause("cookie-borrowed-in-callbacks")
def callback_cookie_alive(s: State, ref: CookieRef, ev: Cb) -> Reject | None:
    """Spec: "The cookie is borrowed, i.e. the user does not own the cookie and must not free it."
    (cookie-borrowed-in-callbacks)

    The implementation keeps the cookie alive for every callback that carries it: no callback may
    receive a cookie whose deleter already ran. Only a cookie handed over with a deleter is the
    implementation's to keep; one set without a deleter stays the application's, even when the
    application handed the same object over elsewhere and its deleter has run since.
    """
    if ref.token is None:
        return None
    if ev.cookie_deleted or ref.token not in s.tokens:
        return reject("cookie-borrowed-in-callbacks", f"on{ev.kind.capitalize()}({ev.cookie}) after its deleter ran",
                      ["callbacks before the cookie's deleter"],
                      "the callback received a cookie that was already deleted")
    return None


@clause("cookie-deleter-called", "cookie-deleter-null-cookie", "cookie-ownership-donated")
def all_deleted(s: State) -> Reject | None:
    """Spec: "If cookieDeleter is not NULL, it will be called with the cookie value." (cookie-deleter-called)

    At the end of teardown (every request and buffer freed, every callback delivered), each hand-over
    with no holder left must have been deleted exactly once.
    """
    for t in s.tokens.values():
        if t.holders <= 0:
            cid = "cookie-deleter-null-cookie" if t.value is None else "cookie-deleter-called"
            shown = "NULL" if t.value is None else t.value
            return reject(cid, f"no deleter call for {shown} handed over at step {t.step}",
                          [f"deleter({shown}) once"], "the implementation never freed a cookie it owned")
    return None


@clause("cookie-snapshot-at-alloc", "cookie-later-changes-no-effect", "alloc-snapshot-cookie-example",
        "cookie-callback-null-if-unset", "cookie-identify-request", "cookie-raw-integer", "cookie-default-null")
def unmatched_alloc_cookie(s: State, ev: Cb) -> Reject:
    """Spec: "The value of cookie is the one stored in the ANpuManager_AllocRequest at the time when
    ANpuManager_allocAsync() is called." (cookie-snapshot-at-alloc)
    Spec: "This is useful if the user stores an arbitrary 64-bit integer value in the cookie (so it is not
    a real pointer.)" (cookie-raw-integer)
    Spec: "For example, if you call ANpuManager_AllocRequest_setCookie() after ANpuManager_allocAsync() is
    called, the old cookie value will be used when the onAlloc callback is invoked."
    (alloc-snapshot-cookie-example)

    An onAlloc is attributed to a pending submission carrying the same cookie value; a value no pending
    submission carries is a cookie the request did not hold when allocAsync() was called (the example's
    very case when a request holds it now: set after allocAsync()). When a raw
    integer is involved (pending or delivered), the value did not survive as the 64-bit integer it was.
    """
    pending = sorted({"NULL" if sub.cookie.value is None else sub.cookie.value for sub in s.subs.values()})
    shown = "NULL" if ev.cookie is None else ev.cookie
    later = any(r.cookie.value == ev.cookie for r in s.reqs.values())
    why = ("the request holds this cookie now, but it was set after allocAsync()" if later
           else "no pending submission was made with this cookie")
    raw = (ev.cookie or "").startswith("raw:") or any((v or "").startswith("raw:") for v in pending)
    values = {x.cookie.value for x in s.subs.values()}
    # A NULL where cookies were set, or a value where only NULL was: the "NULL if not set" sentence. A value
    # the application never made (the probe names it "?0x...") where a cookie was set: the snapshot is wrong.
    null_case = ev.cookie is None or values == {None} or (None in values and not changed_value(ev.cookie))
    # A NULL the request kept because setCookie was never called: the default's sentence.
    nulls = [x for x in s.subs.values() if x.cookie.value is None]
    never_set = bool(nulls) and all("cookie" in x.attrs.unset for x in nulls)
    cid = "alloc-snapshot-cookie-example" if later else "cookie-raw-integer" if raw else (
        ("cookie-default-null" if never_set else "cookie-callback-null-if-unset") if null_case
        else "cookie-snapshot-at-alloc")
    return reject(cid, f"onAlloc(cookie={shown})", pending, why)


def changed_value(cookie: str | None) -> bool:
    """Whether a callback's cookie is no value the application made: the probe names an unknown pointer
    ``?0x...`` (an off-by-one or otherwise changed cookie)."""
    return cookie is not None and cookie.startswith("?")


NULL_REF = NO_COOKIE
