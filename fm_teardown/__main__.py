"""`python -m fm_teardown` is the same as `fm`."""

from fm_teardown.cli import main

if __name__ == "__main__":
    main()
