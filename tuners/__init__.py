"""hwtune's tuners: searches behind one interface (search.py), the driver
that measures, stores and resumes them (loop.py), and the tuners built on
them. Importing the package registers every search; optuna itself is only
imported when an Optuna search is made."""

from hwtune.tuners import climb, optuna_search, search  # noqa: F401  (registers searches)
