"""Build: locate CUDA, cuDNN and cuBLAS, and compile generated suites with CMake."""
