"""The config generation store: runtime configuration in SQLite, a generation per boundary.

The daemon's side of it (`ConfigStore`, trio) is imported from `reynd.config_store.substrate`,
never from here: `reynd repair --verify` and `reynd backup` read config.db through this
package without an event loop.
"""

from reynd.config_store.core import ConfigCore
from reynd.config_store.generations import ConfigFileDamaged

__all__ = ["ConfigCore", "ConfigFileDamaged"]
