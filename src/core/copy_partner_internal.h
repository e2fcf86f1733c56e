/* Host-to-host copies that a second thread may share (copy_partner.c). */
#ifndef SW_COPY_PARTNER_INTERNAL_H
#define SW_COPY_PARTNER_INTERNAL_H

#include <stddef.h>

/* Copies below this stay whole: handing half of one over costs about what
 * copying that half saves. bench/sweep.py cpu->cpu, 2 CPUs, 5 runs each:
 * 16 KiB moves one at a time 0.79-1.03x np.copyto whole, 0.70-0.88x split
 * (in flight 0.83-0.90 and 0.79-0.96); 32 KiB 0.80-0.93 and 0.73-1.05 (in
 * flight 0.85-0.92 and 0.96-1.11, 3 runs); 64 KiB in flight 0.90-0.98
 * whole, 1.01-1.18 split. */
#define SW_COPY_PARTNER_MIN_BYTES ((size_t)32 << 10)

/* memcpy(dst, src, n) of non-overlapping host buffers, returning when all
 * of it is copied. From SW_COPY_PARTNER_MIN_BYTES up, the second half goes
 * to the core's copy partner thread when it is free and spinning; the
 * caller copies the first half meanwhile. Never blocks on anything but
 * that half. */
void sw_copy_host(void *dst, const void *src, size_t n);

/* How many second halves the partner has copied in this process (a forked
 * child counts from its parent's figure): tests see that copies were shared. */
long sw_copy_partner_halves(void);

#endif
