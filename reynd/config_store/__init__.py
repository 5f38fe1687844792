"""The config generation store: runtime configuration in SQLite, a generation per boundary."""

from reynd.config_store.core import ConfigCore
from reynd.config_store.generations import ConfigDamaged
from reynd.config_store.substrate import ConfigStore

__all__ = ["ConfigCore", "ConfigDamaged", "ConfigStore"]
