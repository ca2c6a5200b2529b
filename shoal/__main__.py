"""`python -m shoal`: the same as the `shoal` command."""

from shoal.cli.entry import main

main()
