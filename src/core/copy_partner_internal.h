/* Host-to-host copies that a second thread may share (copy_partner.c). */
#ifndef SW_COPY_PARTNER_INTERNAL_H
#define SW_COPY_PARTNER_INTERNAL_H

#include <stddef.h>

/* Copies below this stay whole: handing half of one over costs about what
 * copying that half saves. bench/sweep.py cpu->cpu, 2 CPUs, 5 runs each:
 * 16 KiB moves one at a time 0.79-1.03x np.copyto whole, 0.70-0.88x split
 * (in flight 0.83-0.90 and 0.79-0.96); 32 KiB 0.80-0.93 and 0.73-1.05 (in
 * flight 0.85-0.92 and 0.96-1.11, 3 runs); 64 KiB in flight 0.87-0.98
 * whole, 0.96-1.19 split (11 runs in all). */
#define SW_COPY_PARTNER_MIN_BYTES ((size_t)32 << 10)
/* ... and spans above this as well (their callers copy them alone, or the
 * pool cuts them into parts from 32 MiB): 16 MiB moves one at a time ran
 * at 0.91-1.00x np.copyto with halves shared, 1.07-1.16x without (4 runs),
 * where 8 MiB ones gained (1.16-1.51x against 1.04-1.28x, 3 runs). Why is
 * not known; both threads then fault in fresh huge pages at once. */
#define SW_COPY_PARTNER_MAX_BYTES ((size_t)8 << 20)

/* memcpy(dst, src, n) of non-overlapping host buffers, returning when all
 * of it is copied. From SW_COPY_PARTNER_MIN_BYTES up (callers keep to
 * SW_COPY_PARTNER_MAX_BYTES; sw_copy_host splits any size), the second half goes
 * to the core's copy partner thread when it is free and spinning; the
 * caller copies the first half meanwhile. Never blocks on anything but
 * that half. `stream`: both halves with sw_copy_stream. */
void sw_copy_host(void *dst, const void *src, size_t n, int stream);

/* How many second halves the partner has copied in this process (a forked
 * child counts from its parent's figure): tests see that copies were shared. */
long sw_copy_partner_halves(void);

#endif
