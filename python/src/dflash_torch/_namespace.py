"""The torch.library namespace of the ops: "dflash" for the pip package; the Hub layout generator
(python/tools/make_hub_layout.py) writes a build-unique one, so both can load in one process."""

NAMESPACE = "dflash"
