"""`reynctl bisect`: find the first bad checkpoint between a good and a bad one (issue 27).

`search` is the pure binary search; `history` lists the checkpoints to search,
`checkout` materializes one in a directory of its own, `run` tests them with a
command and reports (`results`), `progress` keeps the interactive form's verdicts
between runs of reynctl.
"""
