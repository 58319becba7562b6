"""The plugin's workloads, one module each; importing them imports neither torch nor triton."""
