"""map_prot: what /proc/self/maps says of a mapping's pages (docs/formats.md §5), also once the scenario
unmapped the first pages of the mapping (the pages left are compared with the object it showed when made)."""

from tests.probe.test_probe_threads import SETUP, probe_events


def test_map_prot_sees_the_pages_left_once_the_first_is_unmapped(probe_build, tmp_path):
    body = ("scenario t.mapprot 10000\n" + SETUP.replace("req_set_size r0 4096", "req_set_size r0 12288")
            + "req_set_prot r0 READ|WRITE\nalloc r0\nbind b0 cookie:c0\nbuf_map m0 b0 12288 READ SHARED 0\n"
            "map_prot m0 4096 4096\nbuf_unmap m0 0 4096\nmap_prot m0 4096 8192\nmap_read m0 8192 4096\n"
            "buf_unmap m0 4096 8192\nbuf_free b0\nend\n")
    events = probe_events(probe_build, tmp_path, body)
    before, after = [e for e in events if e["ev"] == "ret" and e["op"] == "map_prot"]
    assert before["mapped"] and before["prot_all"] == 1, before
    assert after["mapped"] and after["prot_all"] == 1 and after["prot_any"] == 1, after
