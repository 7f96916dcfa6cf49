"""Mapping, reading and writing a buffer while a loadAsync is in flight (submitted, its onLoad not yet
observed), and the bytes of the load's range afterwards (docs/model.md §4, R15 and R16)."""

from __future__ import annotations

from typing import Any

from reference_model.caps import DeviceCaps

from .builder import PAIR, TB, allocated, teardown
from .coverage import covers
from .test_rules_alloc_map import digest
from .test_rules_requests_cookies import fails, passes, warns

VNPU = DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=1 << 20, policy="budget", vnpu_control=True)
FILE_SEED = 7
WRITE_SEED = 5
# The load: file bytes [0, 4096) into buffer bytes [0, 4096) of an 8 KiB buffer.
LOADED = digest(FILE_SEED, 4096)
WRITTEN = digest(WRITE_SEED, 4096)
JUNK = "0123456789abcdef"


def _map(b: TB, name: str = "m", *, ret: int = 0, errno: str | None = None, during: Any = ()) -> TB:
    return b.call("buf_map", map=name, buf="b", length=8192, prot=["READ", "WRITE"], flags=["SHARED"], offset=0,
                  ret=ret, errno=errno, during=during)


def _load(b: TB, *, during: Any = ()) -> TB:
    b.call("file_new", file="f", size=4096, seed=FILE_SEED)
    return b.call("buf_load", buf="b", fd="f", file_offset=0, length=4096, buffer_offset=0, onload=True,
                  during=during)


def _read(b: TB, value: str, *, offset: int = 0, length: int = 4096, during: Any = ()) -> TB:
    return b.extra(digest=value).call("map_read", map="m", offset=offset, length=length, during=during)


def _end(b: TB, mapped: bool = True) -> TB:
    return teardown(b, bufs=["b"], reqs=["r"], maps=["m"] if mapped else [])


def _map_refused(load: bool, errno: str = "EBUSY") -> TB:
    b = TB()
    allocated(b)
    if load:
        _load(b)
    _map(b, ret=-1, errno=errno)
    if load:
        b.emit(b.cb("load", None, 0, "B1"))
    return _end(b, mapped=False)


@covers("mapping.map_outcome", "mapping.load_exclusive")
def test_map_refused_during_a_load_is_not_a_fail_but_stays_one_without_a_load():
    passes(_map_refused(True))
    passes(_map_refused(True, "EAGAIN"))  # the text names no errno for it: any errno
    passes(_map_refused(True), caps=VNPU)
    fails(_map_refused(False), "map-maps-buffer")
    fails(_map_refused(False), "map-maps-buffer", caps=VNPU)


def _mapped_during_load(answer: Any, *, write: bool = False, read_after: str | None = None) -> TB:
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    if write:
        b.call("map_write", map="m", offset=0, length=4096, seed=WRITE_SEED)
    b.emit(b.cb("load", None, answer, "B1"))
    if read_after is not None:
        _read(b, read_after)
    return _end(b)


@covers("loading.on_load", "mapping.relax_loads")
def test_a_load_during_which_the_buffer_was_mapped_may_fail_or_succeed():
    passes(_mapped_during_load(0))
    passes(_mapped_during_load("EBUSY"))
    passes(_mapped_during_load(0, read_after=LOADED))
    fails(_mapped_during_load(0, read_after=JUNK), "load-async")
    # a load that stayed unmapped throughout must still succeed
    b = TB()
    allocated(b)
    _load(b)
    b.emit(b.cb("load", None, "EIO", "B1"))
    warns(_end(b, mapped=False), "R8")  # "done or has encountered an error": a reading, not a FAIL


@covers("mapping.read_digest", "loading.loaded_content")
def test_reads_during_a_load_are_not_judged():
    # mapped during the load, read before its onLoad: any bytes
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    _read(b, JUNK)
    b.emit(b.cb("load", None, 0, "B1"))
    _read(b, LOADED)
    passes(_end(b))
    # written during the load, then read before its onLoad: neither the write nor the file is owed
    for seen in (JUNK, WRITTEN, LOADED):
        b = TB()
        allocated(b)
        _load(b)
        _map(b)
        b.call("map_write", map="m", offset=0, length=4096, seed=WRITE_SEED)
        _read(b, seen)
        b.emit(b.cb("load", None, 0, "B1"))
        passes(_end(b))
    # mapped and written before the load (which must then be answered with an error): the load's range is
    # indeterminate until its onLoad, and after an error onLoad
    for seen in (JUNK, WRITTEN):
        b = TB()
        allocated(b)
        _map(b)
        b.call("map_write", map="m", offset=0, length=8192, seed=WRITE_SEED)
        _load(b)
        _read(b, seen)
        b.emit(b.cb("load", None, "EBUSY", "B1"))
        _read(b, seen)
        _read(b, digest(WRITE_SEED, 4096, 4096), offset=4096)  # outside the load's range: the write, exactly
        passes(_end(b))
    b = TB()
    allocated(b)
    _map(b)
    b.call("map_write", map="m", offset=0, length=8192, seed=WRITE_SEED)
    _load(b)
    b.emit(b.cb("load", None, "EBUSY", "B1"))
    _read(b, JUNK, offset=4096)
    fails(_end(b), "map-maps-buffer")


@covers("loading.on_load", "mapping.read_digest")
def test_after_onload_success_the_file_bytes_are_owed():
    b = TB()
    allocated(b)
    _load(b)
    b.emit(b.cb("load", None, 0, "B1"))
    _map(b)
    _read(b, LOADED)
    passes(_end(b))
    b = TB()
    allocated(b)
    _load(b)
    b.emit(b.cb("load", None, 0, "B1"))
    _map(b)
    _read(b, JUNK)
    fails(_end(b), "load-async")
    # mapped during the load but never written: the file's bytes after onLoad success
    fails(_mapped_during_load(0, read_after=WRITTEN), "load-async")


@covers("loading.on_load", "loading.loaded_content")
def test_bytes_written_during_a_load_are_indeterminate_after_it():
    # the write may land before or after the load's copy: either content, or a mixture, is legal
    for seen in (WRITTEN, LOADED, JUNK):
        passes(_mapped_during_load(0, write=True, read_after=seen))
    # bytes of the load's range the program did not write are the file's
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    b.call("map_write", map="m", offset=0, length=1024, seed=WRITE_SEED)
    b.emit(b.cb("load", None, 0, "B1"))
    _read(b, digest(FILE_SEED, 3072, 1024), offset=1024, length=3072)
    passes(_end(b))
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    b.call("map_write", map="m", offset=0, length=1024, seed=WRITE_SEED)
    b.emit(b.cb("load", None, 0, "B1"))
    _read(b, JUNK, offset=1024, length=3072)
    fails(_end(b), "load-async")
    # bytes written during the load outside its range are the write's
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    b.call("map_write", map="m", offset=4096, length=4096, seed=WRITE_SEED)
    b.emit(b.cb("load", None, 0, "B1"))
    _read(b, digest(WRITE_SEED, 4096), offset=4096)
    passes(_end(b))
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    b.call("map_write", map="m", offset=4096, length=4096, seed=WRITE_SEED)
    b.emit(b.cb("load", None, 0, "B1"))
    _read(b, JUNK, offset=4096)
    # bytes past the segment of a completed load that changed contradict the segment's length first
    fails(_end(b), "load-length-nonnegative")
    # a write after the onLoad was observed stands
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    b.emit(b.cb("load", None, 0, "B1"))
    b.call("map_write", map="m", offset=0, length=4096, seed=WRITE_SEED)
    _read(b, WRITTEN)
    passes(_end(b))
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    b.emit(b.cb("load", None, 0, "B1"))
    b.call("map_write", map="m", offset=0, length=4096, seed=WRITE_SEED)
    _read(b, LOADED)
    fails(_end(b), "map-maps-buffer")


@covers("loading.on_load", "mapping.read_digest")
def test_an_access_the_onload_overtakes_is_not_judged_against_either_content():
    # the onLoad is observed between the call and the return of a write: the write may have begun before
    # the copy ended, so its bytes are either
    for seen in (WRITTEN, LOADED, JUNK):
        b = TB()
        allocated(b)
        _load(b)
        _map(b)
        b.call("map_write", map="m", offset=0, length=4096, seed=WRITE_SEED, during=[b.cb("load", None, 0, "B1")])
        _read(b, seen)
        passes(_end(b))
    # the same for a read: it may have read bytes before the copy
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    _read(b, JUNK, during=[b.cb("load", None, 0, "B1")])
    _read(b, LOADED)
    passes(_end(b))
    b = TB()
    allocated(b)
    _load(b)
    _map(b)
    _read(b, JUNK, during=[b.cb("load", None, 0, "B1")])
    _read(b, JUNK)
    fails(_end(b), "load-async")


@covers("mapping.call_access")
def test_a_map_whose_call_began_before_the_onload_may_have_met_the_load():
    """The onLoad arrives while the map is in flight, and the map is refused: it may have met the load."""

    def refused(onload_during_map: bool) -> TB:
        b = TB()
        allocated(b)
        _load(b)
        onload = b.cb("load", None, 0, "B1")
        if not onload_during_map:
            b.emit(onload)
        _map(b, ret=-1, errno="EBUSY", during=[onload] if onload_during_map else ())
        return _end(b, mapped=False)

    passes(refused(True))
    passes(refused(True), caps=VNPU)
    fails(refused(False), "map-maps-buffer")  # the onLoad came before the map's call: no load to meet
