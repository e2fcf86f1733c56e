"""Fresh memory on even terms for both sides of a timed comparison.

On a VM whose host takes back free guest memory (virtio-balloon free page
reporting: free blocks of 2 MiB and more are handed to the host, here as
soon as they are free: /sys/module/page_reporting/parameters/min_free_ms
is 0), the first touch of such a page faults in the host too and costs
10-40x a normal page. Measured here: a 256 MiB os.pwrite into a fresh file
ran at 0.05-0.09 GiB/s after 3 s idle and at 0.4-1.2 GiB/s right after
256 MiB were touched and freed; filling a fresh 256 MiB np.empty took 626 ms
of CPU (1.6 s wall) after 3 s idle and 39 ms (100 ms wall) right after.
Which side of a round drew such pages for its page cache or fresh
destinations was luck, or the bench's order: a side timed right after a
large free gets the warm pages (a 256 MiB cell came out 0.20x one run and
12x the next). Both sides warm as many bytes as their timed part takes,
outside the timing, so neither pays the host's refault.

Twice as many bytes as the side takes: the pages freed are handed to the
host within moments, so a side whose faults start a little later (a move
whose pool threads wake first) or run on both CPUs could still draw
reported pages when exactly its own size was warmed. Measured on a 2-CPU VM
with 256 MiB CPU->CPU moves (bench/move.py's rounds, getrusage of the move
alone): warming 256 MiB, 3 of 14 rounds took 95-134 ms of system time
against 33-49 in the others, with the same count of page faults, while the
two-thread NumPy bound beside them (whose arrays freed just before it are
warm pages too) stayed at 36-54 ms; warming 512 MiB, no round of 14 went
past 62 ms. A single-threaded anchor draws warm pages either way."""

# Bytes warmed per byte a side takes (see above).
WARM_FACTOR = 2


def warm(nbytes):
    """Touch and free twice `nbytes` of memory just before a side's timed
    part, which takes `nbytes` of fresh memory."""
    if nbytes >= 1 << 20:
        import numpy as np  # after the caller's require_release_build

        a = np.empty(WARM_FACTOR * nbytes, dtype=np.uint8)
        a.fill(1)
        del a
