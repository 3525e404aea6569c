"""Tools for testing theano_dag itself and programs built on it: :mod:`.fuzz`, a
seeded differential fuzzer of random graphs run on every engine against numpy;
:mod:`.scan_fuzz`, the same for loops; :mod:`.late_loads`, a function's C libraries
loaded at chosen points of its calls, as a background build finishes on a cold cache."""
