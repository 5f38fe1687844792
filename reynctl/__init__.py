"""reynctl: the command-line client of reynd, and its Python client library.

It speaks JSON-RPC 2.0 over the daemon's Unix socket and imports nothing from
`reynd` except the shared wire types (`reynd.protocol`) and the version. The
library's public modules are `reynctl.client` (blocking), `reynctl.aio`
(asyncio and trio) and `reynctl.errors`: see docs/client.md.
"""

from reynd import __version__ as __version__
