"""The SGLang simulator and adapter against SGLang's real source: `python -m tools.fidelity`.

`source` reads a version's wheel as text; `structure` and `rules` read what one string literal
cannot decide (traceback frames, the server_args line, composed lines; the memory rules);
`messages` gathers the simulator's log lines and traces each to the source, `checks` compares the
flags and the default rules; each check fills a `section.Section`, a table.
"""
