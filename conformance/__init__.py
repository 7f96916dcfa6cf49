"""The conformance suite: clause catalogue, scenario corpus and the thin pytest layer over them."""
