"""``python -m suite`` is the ``perfsuite`` command."""
from suite.cli import main

if __name__ == "__main__":
    main()
