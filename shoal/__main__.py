"""`python -m shoal`: the `shoal` command."""

from shoal.cli.app import main

if __name__ == "__main__":
    main()
