"""Engine adapters: each engine is data plus pure functions (argv, log → events → outcome,
URLs, verification), kept in a registry. No `if engine == ...` chains outside the registry."""
