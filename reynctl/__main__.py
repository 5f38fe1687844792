"""`python -m reynctl`."""

from reynctl.cli import main

main()
