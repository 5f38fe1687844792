"""reynctl: the command-line client of reynd.

It speaks JSON-RPC 2.0 over the daemon's Unix socket and imports nothing from
`reynd` except the shared wire types (`reynd.protocol`) and the version.
"""

from reynd import __version__ as __version__
