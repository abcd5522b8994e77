"""Stage 02: exact / MinHash / semantic dedup, decontamination and the SFT data file."""

from rleif_kit.core.moved import moved_attribute


def __getattr__(name: str):
    return moved_attribute(__name__, name)  # an old `from rleif_kit.dedup import name` names the new module
