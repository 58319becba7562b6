"""``python -m perfsuite`` is the ``perfsuite`` command."""

from perfsuite.cli import main

if __name__ == "__main__":
    main()
