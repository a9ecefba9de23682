"""The command line and what it runs: batch (a pool or Ray) and the quality check."""
