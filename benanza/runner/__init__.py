"""Runner: run a compiled suite on the GPU, the system fingerprint, the measured ceilings."""
