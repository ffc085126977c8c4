"""The heart's answers from a recording's beats: heart rate and HRV in time (``rate``: each
beat's interval, each minute's rate, SDNN, RMSSD, pNN50), HRV in frequency (``spectral``: VLF,
LF and HF power of the normal-to-normal intervals) and the Holter summary of classed beats
(``holter``: burden, couplets, runs, bigeminy, pauses, rates). Host arrays in, plain numbers
and records out."""
