"""Developer flows, each a ``python -m verif.flows.<name>`` behind a make target: they write the
project's records under docs/ (synthesis, formal proofs, coverage, mutants, lint, activation
traces, the benchmark page). Not installed."""
