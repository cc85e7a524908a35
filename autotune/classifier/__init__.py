"""The log classifier: what a server's log says happened (an `Outcome`, the phase it came in, the
evidence and the figures it gave), for any engine whose log rules the registry holds.

- `rules`: the vocabulary an engine's log rules are written in (`Rule`, `EngineLog`) and the rules
  every engine shares; `text`: each line cleaned of what a terminal, a container or a markdown paste
  put around it; `index`: which rules a line may match, cheaply.
- `classify`: the incremental reader a trial feeds line by line, and `classify_text` for a whole log;
  `verdict`: the evidence weighed into one classification; `corpus`: scoring on labelled real logs.

The engines import only the vocabulary; the reading imports the registry to find each engine's rules.
"""
