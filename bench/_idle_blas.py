"""No spinning BLAS thread beside a movement benchmark's timed parts.

NumPy starts OpenBLAS's helper threads when it is imported, and an idle one
spins for about 0.1 s before it sleeps (10 clock ticks of CPU in a process
that only slept, read from /proc/self/task). On a 2-CPU machine that took a
CPU from whichever side ran first. The movement benchmarks do no linear
algebra: importing this module before NumPy asks OpenBLAS for one thread,
which starts no helper at all. A value set by the user is kept."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
