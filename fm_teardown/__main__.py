"""`python -m fm_teardown` is the same as `fm`."""

from fm_teardown.entry import fm

if __name__ == "__main__":
    fm()
