"""`reynctl bisect`: find the first bad checkpoint between a good and a bad one (issue 27).

`search` is the pure binary search; `candidates` lists the checkpoints to search,
`checkout` materializes one in a directory of its own, `progress` keeps the
interactive form's verdicts between runs, `session` ties them to a daemon.
"""
