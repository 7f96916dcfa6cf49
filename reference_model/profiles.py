"""Spec profiles: `published-37` (normative: the published NDK reference) and `aosp-2026` (AOSP today).

`aosp-2026` is built from what the AOSP module's public sources do (docs/vnpu.md §5). Wherever AOSP differs from the
published text, the profile accepts the AOSP behaviour *in addition to* the published one and tags the
branch with its discrepancy ID; a trace accepted only through tagged branches is explained as "AOSP
behaviour D<n>". Each field below names the discrepancy it models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .vocabulary import VNPU_PERSONALITIES


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    # D1: map after preemption fails with ENOMEM (and while a load is running).
    preempt_map_enomem: bool = False
    # D2: a negative device or UNKNOWN type is answered with ENOSYS (nothing configured), not EINVAL.
    invalid_pair_enosys: bool = False
    # D3: no priority validation: request priorities are ignored, setPriority returns 0 for any value.
    priority_unchecked: bool = False
    # D4: AllocRequest_free(NULL) dereferences NULL (crash).
    free_null_crashes: bool = False
    # D7: loadAsync while mapped is not refused by the client (the CTS expects success).
    load_while_mapped_ok: bool = False
    # D10: isSupported with an out-of-enum type fails the whole call with -1/EINVAL.
    support_bad_type_fails_call: bool = False
    # D11: any negative fd means "no file", not only -1.
    any_negative_fd_no_file: bool = False
    # D12: protection bits are not validated by the client (the driver decides).
    prot_unchecked: bool = False
    # D13: map does not check the prot subset on the client (the kernel decides).
    map_prot_unchecked: bool = False
    # D14: a notice that reaches a load in flight (or an allocation not yet answered) reports ECANCELED
    # before onPreempt, and "not while mapped" is not enforced by the client.
    preempt_extra_callbacks: bool = False
    # D22: ANpuBuffer_free while a load is in flight drops the load's late reply: no onLoad comes.
    free_drops_load_reply: bool = False
    # D23: loadAsync with fd -1 aborts the process (the owned-fd wrapper asserts fd != -1).
    load_fd_minus_one_aborts: bool = False
    # D24: the client marks a buffer preempted only when the service's notice reaches it: a map between
    # the preemption and the notice succeeds.
    preempt_notice_window: bool = False
    # D25: loadAsync with a negative fd other than -1 is answered with an error (ECONNRESET) and leaves the
    # client's buffer Loading: later maps fail with ENOMEM (and loads with EINVAL).
    load_bad_fd_wedges: bool = False


PUBLISHED: Final = Profile("published-37")
AOSP_2026: Final = Profile(
    "aosp-2026",
    preempt_map_enomem=True,
    invalid_pair_enosys=True,
    priority_unchecked=True,
    free_null_crashes=True,
    load_while_mapped_ok=True,
    support_bad_type_fails_call=True,
    any_negative_fd_no_file=True,
    prot_unchecked=True,
    map_prot_unchecked=True,
    preempt_extra_callbacks=True,
    free_drops_load_reply=True,
    load_fd_minus_one_aborts=True,
    preempt_notice_window=True,
    load_bad_fd_wedges=True,
)

PROFILES: Final[dict[str, Profile]] = {p.name: p for p in (PUBLISHED, AOSP_2026)}
# Every profile's name, the normative one first: what `--profile` offers.
PROFILE_NAMES: Final = tuple(PROFILES)
# The virtual NPU's personalities (vocabulary.yaml, docs/vnpu.md §5), the default first: the published
# behaviour, and AOSP's, named as its profile is.
PERSONALITIES: Final = VNPU_PERSONALITIES
if PERSONALITIES[0] != "published" or PERSONALITIES[1:] != (AOSP_2026.name,):
    raise ImportError(f"vocabulary.yaml's vnpu personalities {PERSONALITIES} are not the published behaviour "
                      f"and the {AOSP_2026.name} profile")


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}: expected one of {', '.join(sorted(PROFILES))}") from None
