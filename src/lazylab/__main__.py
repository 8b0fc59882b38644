"""``python -m lazylab``: the same command line as the ``lazylab`` script."""

from lazylab.cli import main

# The guard matters: process-pool workers (spawn) import the main module as __mp_main__.
if __name__ == "__main__":
    main()
