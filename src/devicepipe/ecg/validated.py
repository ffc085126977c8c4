"""How far the beat classes and the rhythm have been validated: the EC57-style figures measured on
cardiologist-annotated recordings (``benchmarks/ec57.py``; ``benchmarks/results/ec57.md``), for a
report to print beside the counts it gives. A test holds these figures to the committed results.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NOT_DIAGNOSTIC", "VALIDATED", "VALIDATED_ON", "Validated"]


@dataclass(frozen=True)
class Validated:
    """One measured figure: what (a class, detection, AF), on which records, sensitivity and
    positive predictivity (or specificity, for AF) as fractions, and what it leaves out."""

    what: str
    records: str
    reference: int  # reference beats scored
    se: float
    ppv: float
    second: str = "+P"  # what ``ppv`` is: "+P", or "Sp" for AF
    note: str = ""


#: When and at which commit of the classes ``VALIDATED`` was measured.
VALIDATED_ON = "2026-11-29, benchmarks/ec57.py"

#: The figures, gross over the records named (MIT-BIH: Moody and Mark 2001; CPSC 2021: Wang et al.).
VALIDATED = (
    Validated("beats found", "MIT-BIH 100, 105, 106, 200; CPSC 2021 (9 records)", 13_007, 0.9984, 0.9967),
    Validated("V (ventricular ectopic)", "MIT-BIH 105, 106, 200", 1_387, 0.974, 0.983,
              note="+P 0.70 on noisy 105, where 0.7 % of the other beats are called V"),
    Validated("S (supraventricular ectopic)", "MIT-BIH 100; CPSC 2021", 55, 0.764, 0.894,
              note="aberrant ones are called V; the reference's blocked ones (no QRS) are not found"),
    Validated("atrial fibrillation, per beat", "CPSC 2021 (9 records)", 3_527, 0.958, 1.000, second="Sp",
              note="the kind (none, paroxysmal, persistent) right on 9 of 9 records; no AF called on MIT-BIH"),
)  # fmt: skip

#: What every report says beside the classes.
NOT_DIAGNOSTIC = (
    "These classes and events are computed, not read by a cardiologist: devicepipe is not a diagnostic "
    "device, and a clinical decision needs the ECG itself read by one."
)
