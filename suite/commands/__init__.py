"""The host's commands that are more than a few lines, one module each; perfsuite.cli attaches them."""
