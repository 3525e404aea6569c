"""Tools for testing theano_dag itself and programs built on it: :mod:`.fuzz`, a
seeded differential fuzzer of random graphs run on every engine against numpy."""
