#include "strideweave/alloc.h"
#include "fault_internal.h"
#include "alloc_internal.h"
#include "core_thread_internal.h"
#include "fork_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "strideweave/testing.h"

SW_FORK_LINKED;

/* Large blocks ask for transparent huge pages, as NumPy does: a fresh
 * 256 MiB buffer then takes 128 page faults instead of 65536, which is
 * most of the cost of a first write into it. From 2 MiB on, so that the
 * 4 MB buffers of a million Float32 values get their aligned interior
 * (usually one huge page) too. */
#define HUGE_PAGE ((uintptr_t)2 << 20)
#define HUGE_ADVICE_MIN ((size_t)2 << 20)

static void advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (bytes < HUGE_ADVICE_MIN)
        return;
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE); /* advice only */
#else
    (void)p;
    (void)bytes;
#endif
}

/* Each block carries a small header just below the aligned pointer:
 * the pointer malloc returned (to free it), the requested size, and the
 * export pin state: PIN per outstanding pin, plus FREED once the owner
 * called sw_free on a pinned block (quarantined). */
typedef struct block_header {
    void *base;
    size_t bytes;
    size_t total; /* bytes malloc handed out at base */
    uint64_t pins; /* serialized by the caller (alloc.h) */
} block_header;

#define PIN ((uint64_t)2)
#define FREED ((uint64_t)1)

static _Atomic int64_t live_bytes;

/* Blocks from 1 MiB on start on a page: a block device can then take
 * them in direct I/O without a staging copy (blockdev.c). */
#define PAGE_ALIGN_MIN ((size_t)1 << 20)
#define PAGE_ALIGNMENT ((size_t)4096)

static size_t alignment_of(size_t bytes)
{
    return bytes >= PAGE_ALIGN_MIN ? PAGE_ALIGNMENT : SW_ALIGNMENT;
}

static void *place(void *base, size_t bytes, size_t total)
{
    uintptr_t raw = (uintptr_t)base + sizeof(block_header);
    uintptr_t align = (uintptr_t)alignment_of(bytes);
    uintptr_t aligned = (raw + align - 1) & ~(align - 1);
    block_header *h = (block_header *)aligned - 1;
    h->base = base;
    h->bytes = bytes;
    h->total = total;
    h->pins = 0;
    atomic_fetch_add(&live_bytes, (int64_t)bytes);
    advise_huge_pages((void *)aligned, bytes);
    return (void *)aligned;
}

static int padded(size_t bytes, size_t *out)
{
    return !__builtin_add_overflow(bytes, alignment_of(bytes) + sizeof(block_header), out);
}

/* A small cache of large freed blocks. A tensor computation allocates and
 * frees buffers of the same few sizes over and over (results, gradients);
 * handing memory back to the kernel each time makes every reuse pay page
 * faults and page clearing again, which costs more than the arithmetic.
 * Cached blocks are not live: sw_alloc_live_bytes() does not count them.
 * Builds with AddressSanitizer skip the cache so it still sees every
 * use after free.
 *
 * 64 slots within the 64 MiB budget, so that blocks of 1 MiB fill it: a
 * move releases its source (C-23), and with 8 slots a run of 1 MiB moves
 * sent most sources to free(), whose heap trim (brk, 256 pages unmapped a
 * move) was a sixth of a CPU -> FileBacked move's time (bench/sweep.py
 * cpu->file single 1 MiB 0.78x; with 64 slots 1.00x). When the cache is
 * full, a freed block takes the place of the oldest blocks of another size
 * (too small, or wasting over a quarter, for it), so the cache follows the
 * sizes in use instead of holding the first ones it saw; blocks of the
 * freed block's own size are kept as they are. */
#define CACHE_MIN ((size_t)1 << 20)
#define CACHE_SLOTS 64
#define CACHE_MAX_BYTES ((size_t)64 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define CACHE_ENABLED 0
#else
#define CACHE_ENABLED 1
#endif

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static void *cache_base[CACHE_SLOTS];
static size_t cache_total[CACHE_SLOTS];
static uint64_t cache_age[CACHE_SLOTS]; /* when kept: a count of keeps */
static uint64_t cache_keeps;
static size_t cache_bytes;

/* Smaller freed blocks (4 KiB up to CACHE_MIN), kept by their exact
 * malloc size: a stack per size, a few sizes at once. Why: a move
 * releases its source (C-23), and glibc's free() of a 4-256 KiB chunk
 * walks its neighbours and bins, about 12 cache lines that the copies
 * between two moves have pushed out of L1 (callgrind --cache-sim: 8 of
 * the ~130 L1 misses a 16 KiB move in flight took beyond its copy). A
 * push here touches the block's header, the lock and two lines of this
 * table; the next carrier of that size pops it back. Guarded by cache_mu
 * (so fork and sw_alloc_trim cover it). Only release_block feeds it: a
 * pinned (exported) block never gets here before its last unpin.
 *
 * Of blocks under 128 KiB (malloc's own heap sizes) at most 1 MiB in all,
 * about what the CPU caches still hold of memory freed a moment ago: a
 * block kept past that is cold when it comes back, while malloc hands out
 * the memory freed last, which is usually warm. With 16 MiB of them kept, a
 * sweep round's destinations (made after its sources took the warm blocks)
 * were blocks a round old: a 16 KiB CPU -> CPU move took 3-3.6 us, its copy
 * running at ~6 GB/s as into uncached memory, while np.copyto into np.empty
 * (carved by malloc from the memory just touched and freed) took 1.7
 * (bench/sweep.py single 16 KiB 0.55-0.85x, 64 KiB 0.54-0.64x; with this
 * budget 0.90-1.03x and 0.86-0.99x; 3 runs each, 2 CPUs shared). Larger
 * blocks have 15 MiB of their own. */
#define SMALL_MIN ((size_t)4 << 10)
#define SMALL_SIZES 8
#define SMALL_DEPTH 256
#define SHORT_MAX ((size_t)128 << 10) /* blocks under this: SHORT_MAX_BYTES in all */
#define SHORT_MAX_BYTES ((size_t)1 << 20)
#define LONG_MAX_BYTES ((size_t)15 << 20) /* of blocks from SHORT_MAX on */

/* A moved source's block of SW_ALLOC_EXCESS_MIN bytes and up is kept past
 * those budgets, up to EXCESS_MAX bytes over them, and a background thread
 * (alloc_excess.c) frees the oldest blocks once EXCESS_WAKE bytes are
 * over, down to EXCESS_KEEP. Freed by the move instead, a run of such
 * sources ended in one slow move: glibc's free() of the block next to the
 * heap top merged the run into the top chunk and, past its trim
 * threshold, handed it all back to the kernel in one brk() (0.5 us a
 * page: 0.4-0.8 ms for 64 blocks of 64 KiB; bench/sweep.py cpu->file
 * single 64 KiB 0.67-0.79x, 1.00x with glibc's trim off). Kept, they also
 * serve the next carriers of their size, already mapped (sources moved to
 * files, then as many fresh CPU carriers: 14.5 page faults a 64 KiB carrier
 * when freed in the background without reuse). The thread is woken only
 * past EXCESS_WAKE, since waking it costs a system call; under that the
 * excess waits, with no timer (one that freed it a second later did so in
 * the middle of whatever ran then: small CPU -> CPU moves measured 0.1x
 * slower after a run of file moves). Smaller blocks are freed at once: they
 * cost little to free, and their budget is the one that keeps them warm. */
#define EXCESS_MAX ((size_t)8 << 20)
#define EXCESS_WAKE ((size_t)4 << 20)
#define EXCESS_KEEP ((size_t)2 << 20)

/* The two classes of kept blocks, each with its own budget: short (under
 * SHORT_MAX) and long. */
enum { SHORT_CLASS, LONG_CLASS, CLASSES };
static const size_t class_budget[CLASSES] = {SHORT_MAX_BYTES, LONG_MAX_BYTES};

static int class_of(size_t total)
{
    return total < SHORT_MAX ? SHORT_CLASS : LONG_CLASS;
}

static struct {
    size_t total[SMALL_SIZES]; /* malloc size of the stack's blocks; 0: unused */
    int count[SMALL_SIZES];
    size_t class_bytes[CLASSES]; /* kept, per class */
    uint64_t keeps;              /* a count of keeps: each block's age */
} small;
/* Each stack the oldest first. */
static void *small_base[SMALL_SIZES][SMALL_DEPTH];
static uint64_t small_age[SMALL_SIZES][SMALL_DEPTH];

/* cache_mu held: the bytes class c keeps over its budget, with `extra`
 * more of them. */
static size_t class_over(int c, size_t extra)
{
    size_t have = small.class_bytes[c] + extra;
    return have > class_budget[c] ? have - class_budget[c] : 0;
}

/* cache_mu held: the bytes kept over both budgets. */
static size_t small_excess(void)
{
    return class_over(SHORT_CLASS, 0) + class_over(LONG_CLASS, 0);
}

/* The stack of blocks of `total` bytes, or -1; with make, an empty stack
 * becomes it when none is. cache_mu held. */
static int small_stack(size_t total, int make)
{
    int free_slot = -1;
    for (int i = 0; i < SMALL_SIZES; i++) {
        if (small.total[i] == total)
            return i;
        if (free_slot < 0 && small.count[i] == 0)
            free_slot = i;
    }
    if (make && free_slot >= 0)
        small.total[free_slot] = total;
    return make ? free_slot : -1;
}

/* cache_mu held: count `total` bytes in (sign 1) or out (-1) of the cache. */
static void small_count(size_t total, int sign)
{
    size_t *bytes = &small.class_bytes[class_of(total)];
    *bytes = sign > 0 ? *bytes + total : *bytes - total;
}

static void *small_take(size_t total)
{
    void *base = NULL;
    pthread_mutex_lock(&cache_mu);
    int i = small_stack(total, 0);
    if (i >= 0 && small.count[i] > 0) {
        base = small_base[i][--small.count[i]];
        small_count(total, -1);
    }
    pthread_mutex_unlock(&cache_mu);
    return base;
}

/* Whether a freed block may exceed the budgets: a moved source's
 * (the thread's defer_frees, set by the move's commit) of
 * SW_ALLOC_EXCESS_MIN bytes and up. */
static int may_exceed(size_t total)
{
    return total >= SW_ALLOC_EXCESS_MIN && sw_core_thread_state.defer_frees;
}

static int small_keep(void *base, size_t total)
{
    int kept = 0, wake = 0;
    pthread_mutex_lock(&cache_mu);
    size_t over = class_over(class_of(total), total);
    /* A keep within its class's budget leaves the excess as it was. */
    size_t before = over ? small_excess() : 0;
    int room = over == 0 || (may_exceed(total) && before + total <= EXCESS_MAX);
    int i = room ? small_stack(total, 1) : -1;
    if (i >= 0 && small.count[i] < SMALL_DEPTH) {
        small_base[i][small.count[i]] = base;
        small_age[i][small.count[i]++] = ++small.keeps;
        small_count(total, 1);
        kept = 1;
        /* Only the keep that reaches the mark wakes the thread: it then
         * frees down to EXCESS_KEEP, so later keeps need not take its lock
         * while it works (each keep adds to the excess one block at a
         * time, so none can pass the mark unseen). */
        wake = over && before < EXCESS_WAKE && small_excess() >= EXCESS_WAKE;
    }
    pthread_mutex_unlock(&cache_mu);
    if (wake)
        sw_alloc_excess_wake();
    return kept;
}

/* cache_mu held: the stack whose oldest block is the oldest of a class
 * kept over its budget, or -1 when neither is. */
static int oldest_over(void)
{
    int oldest = -1;
    for (int i = 0; i < SMALL_SIZES; i++) {
        if (small.count[i] == 0 || class_over(class_of(small.total[i]), 0) == 0)
            continue;
        if (oldest < 0 || small_age[i][0] < small_age[oldest][0])
            oldest = i;
    }
    return oldest;
}

int sw_alloc_take_excess(void **batch, int max)
{
    int n = 0;
    pthread_mutex_lock(&cache_mu);
    int i;
    while (n < max && small_excess() > EXCESS_KEEP && (i = oldest_over()) >= 0) {
        batch[n++] = small_base[i][0];
        small_count(small.total[i], -1);
        int left = --small.count[i];
        memmove(&small_base[i][0], &small_base[i][1], (size_t)left * sizeof small_base[i][0]);
        memmove(&small_age[i][0], &small_age[i][1], (size_t)left * sizeof small_age[i][0]);
    }
    pthread_mutex_unlock(&cache_mu);
    return n;
}

int64_t sw_alloc_cached_small_blocks(void)
{
    int64_t n = 0;
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < SMALL_SIZES; i++)
        n += small.count[i];
    pthread_mutex_unlock(&cache_mu);
    return n;
}

int64_t sw_alloc_small_excess_bytes(void)
{
    pthread_mutex_lock(&cache_mu);
    int64_t e = (int64_t)small_excess();
    pthread_mutex_unlock(&cache_mu);
    return e;
}

/* cache_mu held: every small block back to malloc. */
static void small_trim_locked(void)
{
    for (int i = 0; i < SMALL_SIZES; i++) {
        while (small.count[i] > 0)
            free(small_base[i][--small.count[i]]);
        small.total[i] = 0;
    }
    for (int c = 0; c < CLASSES; c++)
        small.class_bytes[c] = 0;
}

/* Whether a cached block of `cached` bytes may serve an allocation of
 * `total`: large enough, wasting at most a quarter. */
static int serves(size_t cached, size_t total)
{
    return cached >= total && cached - total <= total / 4;
}

/* A cached block of at least `total` bytes, wasting at most a quarter. */
static void *cache_take(size_t total, size_t *got)
{
    if (!CACHE_ENABLED || total < SMALL_MIN)
        return NULL;
    if (total < CACHE_MIN) { /* exact size: *got stays total */
        return small_take(total);
    }
    void *base = NULL;
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (cache_base[i] && serves(cache_total[i], total)) {
            base = cache_base[i];
            *got = cache_total[i];
            cache_base[i] = NULL;
            cache_bytes -= cache_total[i];
            break;
        }
    }
    pthread_mutex_unlock(&cache_mu);
    return base;
}

/* cache_mu held: whether slot i holds a block of another size than
 * `total`: one that cannot serve an allocation of `total`, nor `total` one
 * of its size. */
static int other_size(int i, size_t total)
{
    return cache_base[i] && !serves(cache_total[i], total) && !serves(total, cache_total[i]);
}

/* cache_mu held: whether dropping every block of another size than `total`
 * would leave a slot and the bytes for it (else none is dropped). */
static int room_possible(size_t total)
{
    size_t kept_bytes = 0;
    int slot = 0;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (!cache_base[i] || other_size(i, total))
            slot = 1;
        else
            kept_bytes += cache_total[i];
    }
    return slot && kept_bytes + total <= CACHE_MAX_BYTES;
}

/* cache_mu held: the oldest block of another size than `total`, or -1. */
static int oldest_other_size(size_t total)
{
    int oldest = -1;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (other_size(i, total) && (oldest < 0 || cache_age[i] < cache_age[oldest]))
            oldest = i;
    return oldest;
}

/* cache_mu held: a free slot with room for `total` more bytes, made by
 * moving the oldest blocks of other sizes to `evicted` (freed by the caller
 * once the lock is dropped); -1, with nothing moved, when no room can be
 * made. */
static int make_room(size_t total, void **evicted, int *n_evicted)
{
    if (!room_possible(total))
        return -1;
    for (;;) {
        int slot = -1;
        for (int i = 0; i < CACHE_SLOTS && slot < 0; i++)
            if (!cache_base[i])
                slot = i;
        if (slot >= 0 && cache_bytes + total <= CACHE_MAX_BYTES)
            return slot;
        int old = oldest_other_size(total);
        if (old < 0)
            return -1; /* not reached: room_possible said dropping them makes room */
        evicted[(*n_evicted)++] = cache_base[old];
        cache_bytes -= cache_total[old];
        cache_base[old] = NULL;
    }
}

/* cache_keep for a block of a cacheable size (SMALL_MIN and up). */
static int cache_keep_cacheable(void *base, size_t total)
{
    if (total < CACHE_MIN)
        return small_keep(base, total);
    if (total > CACHE_MAX_BYTES)
        return 0;
    void *evicted[CACHE_SLOTS];
    int n_evicted = 0;
    pthread_mutex_lock(&cache_mu);
    int slot = make_room(total, evicted, &n_evicted);
    if (slot >= 0) {
        cache_base[slot] = base;
        cache_total[slot] = total;
        cache_age[slot] = ++cache_keeps;
        cache_bytes += total;
    }
    pthread_mutex_unlock(&cache_mu);
    for (int i = 0; i < n_evicted; i++)
        free(evicted[i]);
    return slot >= 0;
}

/* Keep a freed block for reuse; 0 when the cache has no room for it.
 * Inlined: most blocks (a DLPack export's, a layout's) are too small for
 * the cache, and then this is the whole of it. */
static inline int cache_keep(void *base, size_t total)
{
    return CACHE_ENABLED && total >= SMALL_MIN && cache_keep_cacheable(base, total);
}

int64_t sw_alloc_cached_large_blocks(void)
{
    int64_t n = 0;
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < CACHE_SLOTS; i++)
        n += cache_base[i] != NULL;
    pthread_mutex_unlock(&cache_mu);
    return n;
}

void sw_alloc_trim(void)
{
    pthread_mutex_lock(&cache_mu);
    SW_FAULT_PAUSE("alloc_trim_pause"); /* tests: fork with the lock held */
    for (int i = 0; i < CACHE_SLOTS; i++) {
        free(cache_base[i]);
        cache_base[i] = NULL;
    }
    cache_bytes = 0;
    small_trim_locked();
    pthread_mutex_unlock(&cache_mu);
    sw_alloc_excess_wait_idle(); /* and the blocks the thread took, freed */
}

void *sw_malloc(size_t bytes)
{
    size_t total;
    if (SW_FAULT_HIT("alloc") || !padded(bytes, &total))
        return NULL;
    void *base = cache_take(total, &total);
    if (!base)
        base = malloc(total);
    return base ? place(base, bytes, total) : NULL;
}

void *sw_calloc(size_t count, size_t size)
{
    size_t bytes, total;
    if (SW_FAULT_HIT("alloc") || __builtin_mul_overflow(count, size, &bytes) ||
        !padded(bytes, &total))
        return NULL;
    void *base = cache_take(total, &total);
    if (base) {
        void *p = place(base, bytes, total);
        memset(p, 0, bytes);
        return p;
    }
    base = calloc(1, total);
    return base ? place(base, bytes, total) : NULL;
}

static void release_block(block_header *h)
{
    atomic_fetch_sub(&live_bytes, (int64_t)h->bytes);
    void *base = h->base;
    if (!cache_keep(base, h->total))
        free(base);
}

/* ---- quarantine of pinned blocks ----------------------------------------- */

static _Atomic int64_t quarantined_blocks;
static _Atomic int64_t quarantined_bytes;

/* Hand the whole pages inside the block back to the kernel; the range stays
 * mapped (private, anonymous) and reads as zeros until written again. The
 * header's page is never touched: it lies below p. */
static void return_pages(void *p, size_t bytes)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    uintptr_t start = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t end = ((uintptr_t)p + bytes) & ~(uintptr_t)(page - 1);
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_DONTNEED); /* best effort */
}

void sw_alloc_pin(void *p)
{
    if (p)
        ((block_header *)p - 1)->pins += PIN;
}

static void leave_quarantine(block_header *h)
{
    atomic_fetch_sub(&quarantined_blocks, 1);
    atomic_fetch_sub(&quarantined_bytes, (int64_t)h->bytes);
    release_block(h);
}

void sw_alloc_unpin(void *p)
{
    if (!p)
        return;
    block_header *h = (block_header *)p - 1;
    h->pins -= PIN;
    if (h->pins == FREED) /* the last pin of a block its owner already freed */
        leave_quarantine(h);
}

void sw_free(void *p)
{
    if (!p)
        return;
    block_header *h = (block_header *)p - 1;
    if (h->pins == 0) {
        release_block(h);
        return;
    }
    /* Pinned: quarantine. The range stays reserved until the last unpin;
     * its whole pages go back to the kernel now. */
    h->pins |= FREED;
    atomic_fetch_add(&quarantined_blocks, 1);
    atomic_fetch_add(&quarantined_bytes, (int64_t)h->bytes);
    return_pages(p, h->bytes);
}

int64_t sw_alloc_quarantined_blocks(void)
{
    return atomic_load(&quarantined_blocks);
}

int64_t sw_alloc_quarantined_bytes(void)
{
    return atomic_load(&quarantined_bytes);
}

size_t sw_alloc_size(const void *p)
{
    return p ? ((const block_header *)p - 1)->bytes : 0;
}

void sw_alloc_count_live(int64_t delta)
{
    atomic_fetch_add(&live_bytes, delta);
}

int64_t sw_alloc_live_bytes(void)
{
    return atomic_load(&live_bytes);
}

/* ---- fault injection ---------------------------------------------------- */

#ifdef SW_FAULT_INJECTION
#define FAULT_SLOTS 8

typedef struct fault_slot {
    char name[32];
    long skip;
    long count;
} fault_slot;

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static fault_slot faults[FAULT_SLOTS];
static _Atomic int faults_armed; /* fast path: no lock when nothing is armed */

int sw_fault_enabled(void) { return 1; }

sw_status sw_fault_arm(const char *name, long skip, long count)
{
    if (!name || strlen(name) >= sizeof faults[0].name || skip < 0)
        return SW_EINVAL;
    pthread_mutex_lock(&fault_lock);
    sw_status st = SW_ENOMEM;
    for (int i = 0; i < FAULT_SLOTS; i++) {
        if (faults[i].name[0] == '\0' || strcmp(faults[i].name, name) == 0) {
            strcpy(faults[i].name, name);
            faults[i].skip = skip;
            faults[i].count = count;
            atomic_store(&faults_armed, 1);
            st = SW_OK;
            break;
        }
    }
    pthread_mutex_unlock(&fault_lock);
    return st;
}

void sw_fault_clear(void)
{
    pthread_mutex_lock(&fault_lock);
    memset(faults, 0, sizeof faults);
    atomic_store(&faults_armed, 0);
    pthread_mutex_unlock(&fault_lock);
}

int sw_fault_hit(const char *name)
{
    if (!atomic_load(&faults_armed))
        return 0;
    int hit = 0;
    pthread_mutex_lock(&fault_lock);
    for (int i = 0; i < FAULT_SLOTS; i++) {
        fault_slot *f = &faults[i];
        if (f->name[0] == '\0' || strcmp(f->name, name) != 0)
            continue;
        if (f->skip > 0) {
            f->skip--;
        } else if (f->count != 0) {
            hit = 1;
            if (f->count > 0)
                f->count--;
        }
        break;
    }
    pthread_mutex_unlock(&fault_lock);
    return hit;
}

int sw_fault_armed(const char *name)
{
    if (!atomic_load(&faults_armed))
        return 0;
    int armed = 0;
    pthread_mutex_lock(&fault_lock);
    for (int i = 0; i < FAULT_SLOTS; i++)
        if (faults[i].name[0] != '\0' && strcmp(faults[i].name, name) == 0) {
            armed = faults[i].count != 0;
            break;
        }
    pthread_mutex_unlock(&fault_lock);
    return armed;
}
#else
int sw_fault_enabled(void) { return 0; }
sw_status sw_fault_arm(const char *name, long skip, long count)
{
    (void)name; (void)skip; (void)count;
    return SW_ENOTSUP;
}
void sw_fault_clear(void) {}
int sw_fault_hit(const char *name) { (void)name; return 0; }
int sw_fault_armed(const char *name) { (void)name; return 0; }
#endif

/* ---- fork (fork.c: a leaf, nothing is taken under these locks) ---------- */

/* A large free()d block another thread is caching, or a fault test's
 * table another thread is reading, at fork(): held across it, so the
 * child's copy is never locked by a thread it lacks. */
void sw_alloc_fork_prepare(void)
{
    sw_alloc_excess_fork_prepare();
    pthread_mutex_lock(&cache_mu);
#ifdef SW_FAULT_INJECTION
    pthread_mutex_lock(&fault_lock);
#endif
}

void sw_alloc_fork_parent(void)
{
#ifdef SW_FAULT_INJECTION
    pthread_mutex_unlock(&fault_lock);
#endif
    pthread_mutex_unlock(&cache_mu);
    sw_alloc_excess_fork_parent();
}

void sw_alloc_fork_child(void)
{
#ifdef SW_FAULT_INJECTION
    pthread_mutex_unlock(&fault_lock);
#endif
    pthread_mutex_unlock(&cache_mu);
    sw_alloc_excess_fork_child();
}
