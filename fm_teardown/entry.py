"""The console scripts' entry points (`fm`, `fm-teardown`, `python -m fm_teardown`).

A command's imports (typer, libtmux, fm's own modules) make a hundred thousand objects that
live until it exits, and not one of them is garbage; the cyclic collector's passes over them
while they are made were a fortieth of a one-task dry run's CPU. So the collector is off while
the entry point imports its command, and `fewer_collections` turns it back on, with what was
imported left out of its passes. Only in a process of fm's own: a program that imports fm
keeps its own collector settings.
"""

from __future__ import annotations

import gc

__all__ = ["fewer_collections", "fm", "fm_teardown"]


def fewer_collections() -> None:
    """A run builds a few thousand small values and almost no reference cycles, on top of the
    objects its imports made. The collector's default (a pass every 700 new objects, now and
    then over everything) rescans those again and again: about a twentieth of a one-task dry
    run's CPU. Leave the imported objects out of its passes and let them come less often; a
    cycle is still collected. Every 100,000 new objects: the audit of a hundred records makes
    a few hundred thousand, and a pass every 10,000 still cost it 1.5% of its CPU; what a
    cycle holds meanwhile is a few small values (a run makes almost none)."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 50)
    gc.enable()


def fm() -> None:
    gc.disable()  # on again in `cli.main` (`fewer_collections`), once its imports are made
    from fm_teardown.cli import main

    main()


def fm_teardown() -> None:
    gc.disable()
    from fm_teardown.commands.firstmate import main

    fewer_collections()
    main()
