"""The wire and record types shared by the daemon and its clients.

Depends on nothing but the standard library and msgspec: this package is all
that `reynctl` imports from `reynd`.
"""
