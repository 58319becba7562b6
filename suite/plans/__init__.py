"""Run plans shipped with perfsuite (``perfsuite run --plan NAME``): TOML files, data only."""
