"""The simulated GPU node and the simulated engine servers (tests, demo, CI).

Nothing here may import the search, the estimator or the classifier: the simulator is
the stand-in for hardware and engines, and what the tool knows of it, it must learn.
"""
