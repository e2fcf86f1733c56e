/* The move engine: validate, resolve the route by the exact pair of ops
 * tables, grow the destination, mark both carriers pending, run the
 * transfer on the pool (executor.c), and commit once on the completion
 * thread. The libuv shape: the pool's job touches only storage the pending
 * guard protects; the completion thread alone publishes. */
#include <pthread.h>
#include "fault_internal.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc_internal.h"
#include "engine_internal.h"
#include "fork_internal.h"
#include "carrier_internal.h"
#include "transfer_internal.h"
#include "core_thread_internal.h"
#include "move_exit_internal.h"
#include "move_profile_internal.h"
#include "parallel_internal.h"
#include "route_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/block_device.h"
#include "strideweave/clock.h"
#include "strideweave/copy.h"
#include "strideweave/executor.h"
#include "strideweave/filestore.h"
#include "strideweave/move.h"
#include "strideweave/tiled_evictable.h"
#include "tensor_internal.h"

SW_FORK_LINKED;

struct sw_move_handle {
    sw_job job; /* first: the executor hands back this pointer */
    _Atomic long refs;
    sw_tensor *src;      /* one reference */
    sw_carrier *dst;     /* one reference */
    sw_tensor *result;   /* built before submission, published at commit */
    sw_move_route route;
    sw_route_transfer_fn transfer; /* the route's own transfer, or NULL */
    int slotwise;        /* elementwise through the ops, not storage */
    int64_t bytes;
    sw_completion *done;
    sw_completion *reported; /* the SUBMIT event went out */
    int queued;          /* handed to the pool: commit will signal `done` */
    sw_status status;    /* terminal; set before `done` is signalled */
    sw_move_commit_fn on_commit;
    void *user;
    sw_move_commit_guard_fn enter, leave;
    int guard_held;      /* options->guard_held: a commit on the caller during
                            its call runs without enter/leave */
    sw_move_commit_check_fn check; /* options->commit_check, or NULL */
    sw_move_commit_guard_fn transfer_enter, transfer_leave; /* both or neither */
    int64_t *progress;   /* the caller's byte counter, else &progress_own */
    int64_t progress_own; /* bytes copied so far, when the caller gave no counter */
    int caller_waits;    /* the caller waits at once: every helper copies */
    struct sw_move_handle *held_next; /* queued by sw_move_hold */
    sw_move_transfer_fn supplied; /* the caller's transfer (move.h), or NULL */
    _Atomic int supplied_reported; /* sw_move_transfer_done was called */
    int done_inline;     /* ... inside `supplied`, on the submitting thread */
    _Atomic int counted; /* still counted in flight (sw_move_abandon clears) */
    unsigned long generation; /* engine_generation at submission */
    sw_move_hooks *prof; /* the profiling subscribers at submission, or NULL */
    void *profile_tag;   /* options->profile_tag, for the events */
    sw_move_profile_fn tag_hook; /* options->profile_tag_hook */
    uint64_t submit_ns;
    /* Fork (move.h, "Fork"): the live list, under drain_lock. */
    struct sw_move_handle *live_prev, *live_next;
    int live;            /* on live_head (or, in a child, inherited_head) */
    _Atomic int committing; /* its commit began: a fork does not end it */
    pthread_t supplier;  /* the thread inside `supplied`, while supplier_in */
    int supplier_in;
    int forked;          /* ended in a forked child (sw_move_ended_by_fork) */
    int light;           /* ran and committed on its caller by the light path:
                            no completions, nothing to wait for */
    int light_slot;      /* 1 + its index in light_live, or 0: on live_head */
    int no_result;       /* options->no_result: no result tensor is made */
    int grew;            /* it grew its destination from empty: a failure
                            at any later step undoes that */
    /* The light path's carriers, without references (its caller holds them
     * until it returns; in a forked child that caller is gone and never
     * drops them), for the fork rule. */
    sw_carrier *light_src, *light_dst;
    /* Its copy may be cut into parts that a thread waiting for it runs too
     * (sw_move_wait_for): set at submission, cleared once the copy is over
     * or takes one piece. */
    _Atomic int helpable;
    /* Last: a recycled handle clears everything before err.msg (about half
     * the handle) and only the message's first byte (light_handle_new). */
    sw_error err;
};

/* ---- the engine: pool, completion thread, drain ---------------------------- */

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static int engine_started;
static sw_executor *engine;
static sw_status engine_status = SW_OK;
static char engine_msg[sizeof(((sw_error *)0)->msg)];

static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drain_cond = PTHREAD_COND_INITIALIZER;
/* Counted without the lock; a drain sleeps under it and the last move out
 * takes it only when a drain is waiting (drain_waiters). */
static _Atomic long in_flight;
static _Atomic long drain_waiters;
/* Moves counted in flight belong to this generation; a forked child starts
 * a new one, so a parent's move committing there does not uncount. */
static _Atomic unsigned long engine_generation;
/* The supplied-transfer move whose `transfer` runs on this thread now. */
static _Thread_local sw_move_handle *supplying;


/* Process exit (move.h): set once exit begins; new moves are refused. The
 * engine's own threads (pool, completion) never wait for the drain: the
 * move they are running would be waiting for itself. */
static _Atomic int engine_exiting; /* written under engine_lock */
/* The exit drain is registered (the light path needs no engine thread,
 * only it; the fork handlers are fork.c's, in place since the library
 * loaded). */
static _Atomic int engine_hooks_registered;
_Thread_local sw_core_thread sw_core_thread_state;
#define engine_thread (sw_core_thread_state.engine)

/* sw_move_hold: moves queued here, in order, instead of on the pool. */
#define SPARE_HANDLES 32
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static sw_move_handle *spare_handles[SPARE_HANDLES];
static int spare_count;
/* The spare handle taken and given back first, without spare_lock: one
 * after another, light moves keep reusing this one (an exchange instead
 * of two lock rounds per move). */
static sw_move_handle *_Atomic spare_first;
static _Atomic int holding; /* written under engine_lock */
static sw_move_handle *held_head, *held_tail;

/* A span up to this runs on its caller (move.h, "Where the transfer
 * runs"): a pool round trip costs more than such a copy. Measured at the
 * line (bench/move_overhead.py --size 65536 and 65540, 64 KiB in flight,
 * callgrind over all threads): the pool's side cost 6,100 more
 * instructions a move CPU->CPU (5,300 CPU->FileBacked) and one futex wake,
 * about twice a light move's whole fixed cost; bench/inline_threshold.py
 * times both sides of the line. 256 move_async of 16 and 64 KiB in flight
 * (bench/sweep.py's cells) on the pool instead, with this at 8 KiB, took
 * 2.3x and 1.4x the process CPU time per move of running them here, on a
 * loaded 2-CPU machine: the line stays at 64 KiB. */
#define HERE_BYTES ((int64_t)64 << 10)
/* The same when the caller waits at once. A bigger one goes to the pool
 * so that its caller sleeps through the copy rather than spend the CPU
 * time the scheduler later charges it for (a caller that copied 256 MiB
 * itself was found preempted by the next pool wake-up for the whole of
 * that next copy, on a busy 2-CPU machine). */
#define HERE_WAITED_BYTES ((int64_t)16 << 20)
/* A write into a FileBacked the caller does not wait for runs here only up
 * to this: past it the pool's thread spends the write's system call while
 * the caller goes on making the next moves and, in its wait, helps with
 * the rest. bench/sweep.py cpu->file, 256 of 64 KiB in flight, 2 CPUs:
 * 1.10-1.43x the pwrite loop on the pool, 0.89-1.03x here (4 and 5 runs);
 * at 16 KiB it was no better (0.87-1.11 against 0.94-0.98), and a copy
 * between host memories or a read out of a file stays faster here at
 * 64 KiB (cpu->cpu 0.78-0.83 on the pool against 0.90-0.92). */
#define HERE_FILE_WRITE_BYTES ((int64_t)32 << 10)

static void commit(sw_move_handle *m);
static void run_transfer(sw_job *job);
static void live_add(sw_move_handle *m);
static void live_remove(sw_move_handle *m);
static void moves_after_fork_child(void);
static void move_free(sw_move_handle *m, int wait_commit);
static void engine_job_run(sw_job *job);

static void *completion_main(void *arg)
{
    (void)arg;
    engine_thread = 1;
    for (;;) {
        sw_job *job = sw_executor_next_completed(engine, 1);
        if (job && job->run == engine_job_run)
            ((sw_engine_job *)job)->commit((sw_engine_job *)job);
        else if (job)
            commit((sw_move_handle *)job);
    }
    return NULL;
}

/* After fork() the child has none of the parent's threads: it starts its
 * own pool on its first move. Moves the parent had in flight stay pending
 * in the child (their carriers are the parent's business). */
static void engine_after_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    engine_lock = fresh;
    drain_lock = fresh;
    sw_move_hooks_after_fork_child();
    spare_lock = fresh; /* another thread may have held it at fork() */
    spare_count = 0;    /* ... mid-change: the spare handles are left behind */
    drain_cond = fresh_cond;
    engine_started = 0;
    engine = NULL; /* the parent's executor is left as it was: its locks may be held */
    engine_status = SW_OK;
    engine_exiting = 0;
    holding = 0;
    held_head = held_tail = NULL; /* the parent's business, like its moves */
    atomic_store(&in_flight, 0);
    atomic_store(&drain_waiters, 0);
    atomic_fetch_add(&engine_generation, 1);
}

/* At exit (atexit, and first thing in the session directory's own exit
 * cleanup, whichever runs first): refuse new moves, then wait for those in
 * flight to commit, so that no transfer is cut short by the end of the
 * process and every carrier they held is let go before the files go. */
void sw_move_exit_drain(void)
{
    pthread_mutex_lock(&engine_lock);
    engine_exiting = 1;
    pthread_mutex_unlock(&engine_lock);
    if (!engine_thread) {
        sw_move_hold(0); /* held moves finish too */
        sw_move_drain();
    }
}

/* The child of fork() (fork.c's engine step): a fresh engine, then the
 * parent's moves set aside (move.h, "Fork"). TiledEvictable's step, which
 * fork.c runs right after this one, ends its inherited work on that
 * engine. */
void sw_move_fork_child(void)
{
    engine_after_fork_child();
    sw_engine_held_after_fork();
    moves_after_fork_child();
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void hooks_install(void)
{
    atexit(sw_move_exit_drain);
    atomic_store(&engine_hooks_registered, 1);
}

void sw_engine_install_hooks(void)
{
    pthread_once(&hooks_once, hooks_install);
}

/* The pool and the detached completion thread; on failure nothing is
 * left running and engine_status / engine_msg say why. Under engine_lock. */
static void engine_start(void)
{
    sw_engine_install_hooks();
    sw_error err;
    if (sw_executor_create(0, &engine, &err) != SW_OK) {
        engine = NULL;
        engine_status = err.code;
        snprintf(engine_msg, sizeof engine_msg, "%s", err.msg);
        return;
    }
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, completion_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        sw_executor_destroy(engine);
        engine = NULL;
        engine_status = SW_EIO;
        snprintf(engine_msg, sizeof engine_msg, "cannot start the move completion thread");
    }
}

static sw_status engine_get(sw_error *err)
{
    pthread_mutex_lock(&engine_lock);
    if (engine_exiting) {
        pthread_mutex_unlock(&engine_lock);
        return sw_error_set(err, SW_ESTATE,
                            "move: the process is exiting; no new move can start");
    }
    if (!engine_started) {
        engine_started = 1;
        engine_start();
    }
    sw_status st = engine_status;
    char msg[sizeof engine_msg];
    if (st != SW_OK) {
        /* A start that failed is tried again by the next move. */
        snprintf(msg, sizeof msg, "%s", engine_msg);
        engine_started = 0;
        engine_status = SW_OK;
    }
    pthread_mutex_unlock(&engine_lock);
    if (st != SW_OK)
        return sw_error_set(err, st, "move: %s", msg);
    return SW_OK;
}

/* Count a move into or out of flight; the last one out wakes the drains. */
static void in_flight_add(int delta)
{
    /* A drain counts itself waiting before it reads in_flight; this reads
     * the waiters after the count changed (both sequentially consistent),
     * so one of the two sees the other. */
    if (atomic_fetch_add(&in_flight, delta) + delta == 0 && atomic_load(&drain_waiters) > 0) {
        pthread_mutex_lock(&drain_lock);
        pthread_cond_broadcast(&drain_cond);
        pthread_mutex_unlock(&drain_lock);
    }
}

/* ---- other work on the engine (engine_internal.h) --------------------------- */

static void engine_job_run(sw_job *job)
{
    engine_thread = 1; /* exit from inside it does not wait for it */
    ((sw_engine_job *)job)->run((sw_engine_job *)job);
}

sw_status sw_engine_ready(const char *who, sw_error *err)
{
    sw_error e;
    if (atomic_load(&engine_exiting))
        return sw_error_set(err, SW_ESTATE, "%s: the process is exiting; no new work can start",
                            who);
    if (engine_get(&e) != SW_OK)
        return sw_error_set(err, e.code, "%s: %s", who,
                            strncmp(e.msg, "move: ", 6) == 0 ? e.msg + 6 : e.msg);
    return SW_OK;
}

sw_status sw_engine_submit(sw_engine_job *j, const char *who, sw_error *err)
{
    sw_status st = sw_engine_ready(who, err);
    if (st != SW_OK)
        return st;
    j->job.run = engine_job_run;
    j->generation = atomic_load(&engine_generation);
    /* Counted, then exit looked for: an exit that began meanwhile either
     * sees the count (and waits) or is seen here (a refusal). */
    in_flight_add(1);
    if (atomic_load(&engine_exiting))
        st = sw_error_set(err, SW_ESTATE, "%s: the process is exiting; no new work can start",
                          who);
    else
        st = sw_executor_submit(engine, &j->job, err);
    if (st != SW_OK)
        sw_engine_uncount(j->generation);
    return st;
}

void sw_engine_uncount(unsigned long generation)
{
    if (generation == atomic_load(&engine_generation))
        in_flight_add(-1);
}

void sw_engine_count(long delta)
{
    in_flight_add((int)delta);
}

int sw_engine_exiting(void)
{
    return atomic_load(&engine_exiting);
}

/* Whether `m` is still to be uncounted, claiming that once (its commit or
 * sw_move_abandon, whichever comes first); the caller then calls
 * in_flight_add(-1). Read before the handle can go. */
static int take_count(sw_move_handle *m)
{
    return atomic_exchange(&m->counted, 0) &&
           m->generation == atomic_load(&engine_generation);
}

static void uncount(sw_move_handle *m)
{
    if (take_count(m))
        in_flight_add(-1);
}

void sw_move_drain(void)
{
    pthread_mutex_lock(&drain_lock);
    atomic_fetch_add(&drain_waiters, 1);
    while (atomic_load(&in_flight) > 0)
        pthread_cond_wait(&drain_cond, &drain_lock);
    atomic_fetch_sub(&drain_waiters, 1);
    pthread_mutex_unlock(&drain_lock);
}

int sw_move_drain_for(int64_t timeout_ns)
{
    if (timeout_ns < 0) {
        sw_move_drain();
        return 1;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* drain_cond uses the default clock */
    int64_t ns = (int64_t)until.tv_nsec + timeout_ns % 1000000000LL;
    until.tv_sec += (time_t)(timeout_ns / 1000000000LL + ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&drain_lock);
    atomic_fetch_add(&drain_waiters, 1);
    int timed_out = 0;
    while (atomic_load(&in_flight) > 0 && !timed_out)
        timed_out = pthread_cond_timedwait(&drain_cond, &drain_lock, &until) != 0;
    int drained = atomic_load(&in_flight) <= 0;
    atomic_fetch_sub(&drain_waiters, 1);
    pthread_mutex_unlock(&drain_lock);
    return drained;
}

void sw_move_abandon(sw_move_handle *m)
{
    if (m)
        uncount(m);
}

/* ---- routes --------------------------------------------------------------- */

/* The route of the exact pair of ops tables from the registry's fixed
 * table (route.h: the engine runs the core's own routes; a binding's run
 * through a transfer it supplies): a bulk or class route, else the
 * elementwise fallback. */
static sw_move_route resolve(const sw_carrier_class *s, const sw_carrier_class *d,
                             sw_route_transfer_fn *transfer)
{
    const sw_route_builtin *b = sw_route_builtin_of(s, d);
    *transfer = b ? b->transfer : NULL;
    return b ? SW_ROUTE_BULK : SW_ROUTE_ELEMENTWISE;
}

sw_move_route sw_move_route_for(const sw_carrier *src, const sw_carrier *dst)
{
    sw_route_transfer_fn transfer;
    return resolve(src->ops, dst->ops, &transfer);
}

/* The built-in classes whose storage a transfer reaches directly (host
 * memory or a file): the only ones a move may run on its caller, since no
 * callback of theirs can block. */
static int storage_builtin(const sw_carrier_class *c)
{
    return c == &sw_cpu_class || c == &sw_generic_class || c == &sw_file_backed_class;
}

/* Host-memory spans up to this many bytes grow an empty FileBacked by
 * their write alone (grow_locked). A large file keeps its resize, so that
 * a size the file system refuses is refused before the move starts. */
#define GROW_BY_WRITE_BYTES ((int64_t)1 << 20)

/* C-12: grow the empty destination d (both carriers locked) to exactly the
 * span of l. A bulk copy from host memory into a FileBacked writes every
 * byte of the new span from offset 0, and that write extends the file to
 * exactly its length: only the size is recorded then (a resize first costs
 * a small move a system call of about its own cost). `bulk_here`: the
 * move copies by the core's own bulk transfer. A failure changed nothing
 * and says so in err->detail, so that a binding refuses the request with
 * it as it refuses a row (move.h, SW_MOVE_GROWTH_FAILED). */
static sw_status grow_locked(const sw_carrier *s, sw_carrier *d, const sw_layout *l,
                             int bulk_here, sw_error *err)
{
    sw_status st;
    if (bulk_here && d->ops == &sw_file_backed_class &&
        (s->ops == &sw_cpu_class || s->ops == &sw_generic_class) && l->cosize > 0 &&
        l->cosize <= GROW_BY_WRITE_BYTES / (int64_t)sw_dtype_slot_bytes(s->dtype))
        st = sw_file_backed_grow_for_write_locked(d, l->cosize, err);
    else
        st = d->ops->allocate(d->impl, l->cosize, err);
    if (st != SW_OK && err)
        err->detail = SW_MOVE_GROWTH_FAILED;
    return st;
}

/* A failed move gives back the growth it made (both carriers locked), so
 * that its destination is as it was: size, contents and version (the
 * version never changed). Not in a forked child: the file is its parent's
 * too, where the move may still be running. */
static void undo_growth_locked(sw_move_handle *m, sw_carrier *d)
{
    if (m->grew && !m->forked && !d->released)
        d->ops->unallocate(d->impl, NULL);
    m->grew = 0;
}

/* Row 9 of the validation (move.h), both carriers locked: the route
 * registry's class rules (a TiledEvictable never moves, a block device
 * carrier only to and from CPU), then the block device's state. */
static sw_status check_pins_locked(sw_carrier *s, sw_carrier *d, sw_error *err)
{
    sw_route_pin pin = sw_route_pin_of(s->ops, d->ops);
    if (pin != SW_ROUTE_PIN_NONE)
        return sw_route_refuse_pin(pin, sw_carrier_name(s), sw_carrier_name(d), err);
    return sw_block_device_check_faulted_locked(s, d, err);
}

/* ---- the transfer (pool thread, no lock: the pending guard holds) ---------- */

static sw_status transfer_slotwise(sw_move_handle *m, sw_error *err)
{
    return sw_move_copy_slotwise(m->src->carrier, m->src->offset, m->src->layout, m->dst, err);
}

/* A layout's leaf modes without its extent-1 leaves (sw_copy_layout_modes):
 * a light move finds them once, when it decides it may run here, and its
 * transfer reads them from there. */
typedef struct copy_modes {
    int ndim; /* < 0: more modes than a copy takes */
    int64_t extents[SW_COPY_MAX_DIMS], strides[SW_COPY_MAX_DIMS];
} copy_modes;

/* Whether a transfer of l copies its span whole and in order: a bulk
 * route, or a layout that is one stride-1 run from slot 0 (`modes`: l's
 * leaf modes without extent-1 leaves). */
static int whole_span(const sw_layout *l, sw_move_route route, const copy_modes *modes)
{
    if (l->cosize <= 0 || modes->ndim < 0)
        return 0;
    if (route == SW_ROUTE_BULK)
        return 1;
    return modes->ndim == 0 ? l->cosize == 1
                            : modes->ndim == 1 && modes->strides[0] == 1 &&
                                  modes->extents[0] == l->cosize;
}

/* The storage copy of the span (s, offset, l) into d at 0; `modes`: l's,
 * or NULL to find them here (>= 0 modes: new_move or light_eligible
 * checked). */
static sw_status transfer_span(sw_carrier *s, int64_t offset, const sw_layout *l, sw_carrier *d,
                               sw_move_route route, int caller_waits, int64_t *progress,
                               const copy_modes *modes, sw_move_handle *owner, sw_error *err)
{
    sw_carrier_storage ss, ds;
    sw_status st = s->ops->storage(s->impl, &ss, err);
    if (st == SW_OK)
        st = d->ops->storage(d->impl, &ds, err);
    if (st != SW_OK)
        return st;
    /* A large write into a file never runs beside the background freeing
     * of a file an earlier move released (filestore.h); reads need not wait. */
    if (ds.kind == SW_ENDPOINT_FILE &&
        l->cosize * (int64_t)sw_dtype_slot_bytes(s->dtype) >= ((int64_t)1 << 20))
        sw_filestore_large_closes_wait();
    copy_modes own;
    if (!modes) {
        own.ndim = sw_copy_layout_modes(l, own.extents, own.strides);
        modes = &own;
    }
    sw_transfer t = {
        .src = {.kind = ss.kind, .host = ss.host, .fd = ss.fd, .offset = offset},
        .dst = {.kind = ds.kind, .host = ds.host, .fd = ds.fd, .offset = 0},
        .itemsize = sw_dtype_slot_bytes(s->dtype),
        .bulk = route == SW_ROUTE_BULK,
        .cosize = l->cosize,
        .ndim = modes->ndim,
        .extents = modes->extents,
        .strides = modes->strides,
        .progress = progress,
        .unwaited = !caller_waits,
    };
    /* The move checked the span against both carriers under their locks
     * before it marked them: a small whole span skips sw_transfer_run's
     * checks of a described transfer. */
    if ((int64_t)t.itemsize * l->cosize <= HERE_BYTES)
        return whole_span(l, route, modes) ? sw_transfer_run_whole_span(&t, err)
                                           : sw_transfer_run(&t, err);
    /* The caller only waits: a large span takes every helper. Otherwise
     * one CPU stays with the threads that keep running meanwhile. */
    int most = caller_waits ? 0 : sw_parallel_width() - 1;
    if (!caller_waits && most < 1)
        most = 1;
    /* A file destination is written in one piece (sw_transfer_run_parallel):
     * nothing for a waiter to run. */
    if (owner && ds.kind == SW_ENDPOINT_FILE) {
        atomic_store(&owner->helpable, 0);
        owner = NULL;
    }
    return sw_transfer_run_parallel(&t, most, owner, err);
}

static sw_status transfer_storage(sw_move_handle *m, sw_error *err)
{
    return transfer_span(m->src->carrier, m->src->offset, m->src->layout, m->dst, m->route,
                         m->caller_waits, m->progress, NULL, m, err);
}

static void run_transfer(sw_job *job)
{
    sw_move_handle *m = (sw_move_handle *)job;
    engine_thread = 1;
    SW_FAULT_PAUSE("move_transfer_pause"); /* tests: hold a move in flight */
    sw_error_clear(&m->err);
    if (SW_FAULT_HIT("move_transfer"))
        m->status = sw_error_set(&m->err, SW_EIO, "move: injected transfer failure");
    else if (m->transfer)
        m->status = m->transfer(m->src->carrier, m->src->offset, m->dst, m->src->layout,
                                m->progress, &m->err);
    else
        m->status = m->slotwise ? transfer_slotwise(m, &m->err) : transfer_storage(m, &m->err);
    atomic_store(&m->helpable, 0); /* its waiters only wait from here */
}

/* ---- commit (completion thread) -------------------------------------------- */

/* The profiling hook's event, when the move observed a hook. */
static void profile(sw_move_handle *m, sw_move_event_kind kind, sw_status status)
{
    if (!m->prof)
        return; /* and no clock read: most moves observe no hook */
    sw_move_event ev = {
        .kind = kind, .move = m, .route = m->route, .bytes = m->bytes,
        .submit_ns = m->submit_ns,
        .complete_ns = kind == SW_MOVE_EVENT_COMPLETE ? sw_clock_ns() : 0,
        .status = status,
    };
    sw_move_hooks_emit(m->prof, &ev, m->tag_hook, m->profile_tag);
}

/* Release a move's source at its commit (carriers locked): a large file's
 * storage is freed in the background (filestore.h), not on the thread that
 * commits; the name is gone at once all the same. */
static void release_moved_source(sw_carrier *s, sw_core_thread *th)
{
    /* Only a class that says its release may remove files sets the flag
     * (sw_filestore_defer_large_closes, in the thread's block `th`). */
    int files = (s->ops->flags & SW_CARRIER_CLASS_RELEASE_REMOVES_FILES) != 0;
    if (files)
        th->defer_large_closes = 1;
    th->defer_frees = 1; /* its host memory, in the background (alloc_excess.c) */
    sw_carrier_release_locked(s);
    th->defer_frees = 0;
    if (files)
        th->defer_large_closes = 0;
}

/* The options' commit check (move.h), after the commit guard is entered
 * and before any carrier changes: its refusal is the move's failure, so
 * the commit then keeps the source live as for a failed transfer. */
static void check_before_commit(sw_move_handle *m, sw_carrier *d)
{
    if (!m->check || m->status != SW_OK)
        return;
    sw_error_clear(&m->err);
    sw_status st = m->check(m, m->user, &m->err);
    if (st == SW_OK)
        return;
    if (m->err.code != st)
        sw_error_set(&m->err, st, "move: the %s destination cannot take the result",
                     sw_carrier_name(d));
    m->status = st;
}

/* The step every commit takes on the carriers, the pair locked (commit_guarded,
 * light_commit, move_one_round): a move that succeeded releases its source
 * and its progress ends whole (a transfer that counts coarsely, or not at
 * all, counts every byte); one that failed (its transfer, commit_check,
 * the re-check below, a fork) leaves its source live and gives back the
 * growth it made.
 * `marked`: the move let go of the locks after its checks, so its pending
 * marks are cleared here and its destination checked again first (a
 * destination released or shrunk meanwhile fails the move); a move that
 * held the locks throughout set no mark and has nothing to check again.
 * `l` (the move's layout) is read only when the move has not failed.
 * Inlined, so that each caller's constant `marked` costs no branch. What
 * differs around it stays with each path: where the result is made or
 * dropped, the events, on_commit and the guard. */
static inline __attribute__((always_inline)) void settle_locked(sw_move_handle *m, sw_carrier *s,
                                                                sw_carrier *d, const sw_layout *l,
                                                                int marked, sw_core_thread *th)
{
    if (marked) {
        if (m->status == SW_OK &&
            (d->released ||
             (!SW_CARRIER_STATE_ONLY(d) && d->ops->size(d->impl) < l->cosize)))
            m->status = sw_error_set(&m->err, SW_ESTATE,
                                     "move: the %s destination lost its storage before commit",
                                     sw_carrier_name(d));
        s->pending_src = 0;
        d->pending_dst = 0;
    }
    if (m->status != SW_OK) {
        undo_growth_locked(m, d);
        return;
    }
    /* A STATE_ONLY source's slots are the binding's: its on_commit releases
     * it (sw_carrier_release_moved), which it may refuse. A light move's
     * carriers are the core's own classes, never STATE_ONLY. */
    if (!SW_CARRIER_STATE_ONLY(s))
        release_moved_source(s, th);
    __atomic_store_n(m->progress, m->bytes, __ATOMIC_RELAXED);
}

/* `caller_guard`: the commit runs on the caller of sw_move_async during
 * that call, and the caller holds the commit guard already (guard_held). */
static void commit_guarded(sw_move_handle *m, int caller_guard)
{
    sw_carrier *s = m->src->carrier, *d = m->dst;
    int guard = m->enter && !caller_guard;
    atomic_store(&m->committing, 1);
    /* SUBMIT is always reported before COMPLETE. */
    sw_completion_wait(m->reported);
    if (guard)
        m->enter(m->user);
    check_before_commit(m, d);
    sw_carrier_lock_pair(s, d);
    /* Marked: the transfer ran with the locks let go (pool, supplier). */
    settle_locked(m, s, d, m->src->layout, 1, &sw_core_thread_state);
    sw_carrier_unlock_pair(s, d);

    /* Hooks after the carriers changed, before any waiter wakes, with no
     * core lock held: the profiling event first, so that on_commit finds
     * what it recorded. */
    profile(m, SW_MOVE_EVENT_COMPLETE, m->status);
    if (m->on_commit)
        m->on_commit(m, m->status, m->status == SW_OK ? m->result : NULL, m->user);
    if (guard && m->leave)
        m->leave(m->user);
    /* The move lets go of its carriers before anyone learns it finished:
     * once sw_move_wait returns (or sw_move_done says 1), it holds no
     * reference to the source or the destination, only the published
     * result (held by the handle, for later waits). */
    sw_tensor *src = m->src, *unpublished = m->status == SW_OK ? NULL : m->result;
    sw_carrier *dst = m->dst;
    m->src = NULL;
    m->dst = NULL;
    if (unpublished)
        m->result = NULL;
    sw_tensor_unref(unpublished);
    sw_tensor_unref(src);
    sw_carrier_unref(dst);
    /* Read now: the handle may be gone once `done` is signalled. */
    int counted = take_count(m);
    live_remove(m);
    /* Drop the job's reference before waking anyone, so that the last
     * reference (and with it the result) goes on the thread that drops the
     * handle. A handle freed meanwhile waits for this signal first
     * (move_free). */
    if (atomic_fetch_sub(&m->refs, 1) == 1)
        move_free(m, 0);
    else
        sw_completion_signal(m->done);

    /* Last: sw_move_drain promises the move let go of everything. */
    if (counted)
        in_flight_add(-1);
}

static void commit(sw_move_handle *m)
{
    commit_guarded(m, 0);
}

/* ---- handles -------------------------------------------------------------- */

sw_move_handle *sw_move_ref(sw_move_handle *m)
{
    if (m)
        atomic_fetch_add(&m->refs, 1);
    return m;
}

/* Handles of light moves are recycled: such a handle holds no completion
 * and no reference once freed, so the next light move takes it back
 * instead of asking the allocator (a move's largest fixed cost after the
 * copy). At most SPARE_HANDLES wait, under spare_lock (declared above).
 * Those are not live (sw_alloc_live_bytes), as blocks in the allocator's
 * own cache are not: a leak check around moves that ran nested or on
 * several threads at once, the first time in a process, would otherwise
 * count the handles they left in the list. The one handle in spare_first,
 * swapped on every light move, stays counted: an atomic add there would
 * cost every move. */

static void light_handle_free(sw_move_handle *m);

static sw_move_handle *light_handle_new(void)
{
    sw_move_handle *m = atomic_exchange(&spare_first, NULL);
    if (!m) {
        pthread_mutex_lock(&spare_lock);
        if (spare_count > 0) {
            m = spare_handles[--spare_count];
            sw_alloc_count_live((int64_t)sw_alloc_size(m));
        }
        pthread_mutex_unlock(&spare_lock);
    }
    if (!m)
        return sw_calloc(1, sizeof *m);
    if (SW_FAULT_HIT("alloc")) { /* the same injected failures as sw_calloc */
        light_handle_free(m);
        return NULL;
    }
    /* As new from sw_calloc for every reader: the message is read only
     * after a failure set it, and as a string (sw_error_set ends it). */
    memset(m, 0, offsetof(sw_move_handle, err.msg));
    m->err.msg[0] = '\0';
    return m;
}

static void light_handle_free(sw_move_handle *m)
{
    sw_move_handle *none = NULL;
    if (atomic_compare_exchange_strong(&spare_first, &none, m))
        return;
    pthread_mutex_lock(&spare_lock);
    int kept = spare_count < SPARE_HANDLES;
    if (kept) {
        spare_handles[spare_count++] = m;
        sw_alloc_count_live(-(int64_t)sw_alloc_size(m));
    }
    pthread_mutex_unlock(&spare_lock);
    if (!kept)
        sw_free(m);
}

static void move_free(sw_move_handle *m, int wait_commit)
{
    /* The completion thread may still be signalling `done` (it dropped its
     * reference just before): let it finish touching the handle. */
    if (wait_commit && m->queued)
        sw_completion_wait(m->done);
    sw_tensor_unref(m->result);
    sw_tensor_unref(m->src);
    sw_carrier_unref(m->dst);
    sw_move_hooks_drop(m->prof);
    if (m->done)
        sw_completion_free(m->done);
    if (m->reported)
        sw_completion_free(m->reported);
    if (m->light && !m->done && !m->reported)
        light_handle_free(m);
    else
        sw_free(m);
}

void sw_move_unref(sw_move_handle *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1)
        move_free(m, 1);
}

const sw_error *sw_move_error(sw_move_handle *m)
{
    /* From on_commit on the status is terminal: the commit runs after the
     * transfer (or the refusal of the pool) set it. */
    return m && m->status != SW_OK ? &m->err : NULL;
}

int sw_move_done(sw_move_handle *m) { return m && (m->light || sw_completion_is_done(m->done)); }
sw_move_route sw_move_route_of(sw_move_handle *m) { return m->route; }
int64_t sw_move_bytes(sw_move_handle *m) { return m->bytes; }

void sw_move_progress(sw_move_handle *m, int64_t *done, int64_t *total)
{
    int64_t n = m ? __atomic_load_n(m->progress, __ATOMIC_RELAXED) : 0, all = m ? m->bytes : 0;
    if (done)
        *done = n < all ? n : all;
    if (total)
        *total = all;
}

/* How often a waiter looks for parts of a helpable move's copy: its first
 * few looks, for a pool thread that is about to cut them, and later ones
 * (the move waits behind others in the pool, or its last parts run and
 * may take a while). */
#define HELP_FIRST_POLL_NS ((int64_t)100 * 1000)
#define HELP_FIRST_POLLS 10
#define HELP_POLL_NS ((int64_t)1000 * 1000)

/* While m's copy may still have parts for a waiter, run those nobody
 * started, looking again every so often: 1 once m committed, 0 when the
 * deadline (*timeout_ns >= 0) passed, -1 when nothing is left to run,
 * with *timeout_ns then what is left of the wait. A part run here may end
 * past the deadline. */
static int help_while_waiting(sw_move_handle *m, int64_t *timeout_ns)
{
    uint64_t start = sw_clock_ns();
    int helped = 0, polls = 0;
    while (atomic_load(&m->helpable) && !sw_completion_is_done(m->done)) {
        if (sw_parallel_help(m)) {
            helped = 1;
            continue;
        }
        int64_t step = !helped && polls++ < HELP_FIRST_POLLS ? HELP_FIRST_POLL_NS : HELP_POLL_NS;
        if (*timeout_ns >= 0) {
            int64_t left = *timeout_ns - (int64_t)(sw_clock_ns() - start);
            if (left <= 0)
                return 0;
            if (left < step)
                step = left;
        }
        if (sw_completion_wait_for(m->done, step))
            return 1;
    }
    if (*timeout_ns >= 0) {
        int64_t left = *timeout_ns - (int64_t)(sw_clock_ns() - start);
        *timeout_ns = left > 0 ? left : 0;
    }
    return -1;
}

/* sw_move_wait_for and sw_move_wait_helping: `help` lets this thread run
 * parts of the move's copy. */
static int wait_for(sw_move_handle *m, int64_t timeout_ns, int help)
{
    /* A light move committed before its caller got the handle. */
    if (!m || m->light)
        return 1;
    /* A forked child's inherited move: nobody here would finish it. */
    if (m->generation != atomic_load(&engine_generation)) {
        if (!sw_completion_is_done(m->done))
            sw_move_end_inherited();
        help = 0; /* its parts were the parent's */
    }
    if (help) {
        int done = help_while_waiting(m, &timeout_ns);
        if (done >= 0)
            return done;
    }
    if (timeout_ns < 0) {
        sw_completion_wait(m->done);
        return 1;
    }
    return sw_completion_wait_for(m->done, timeout_ns);
}

int sw_move_wait_for(sw_move_handle *m, int64_t timeout_ns)
{
    return wait_for(m, timeout_ns, timeout_ns < 0);
}

int sw_move_wait_helping(sw_move_handle *m, int64_t slice_ns)
{
    return wait_for(m, slice_ns, 1);
}

sw_status sw_move_wait(sw_move_handle *m, sw_tensor **result, sw_error *err)
{
    if (!m)
        return sw_error_set(err, SW_ETYPE, "sw_move_wait: move must not be NULL");
    sw_move_wait_for(m, -1);
    if (m->status != SW_OK) {
        if (err)
            *err = m->err;
        return m->status;
    }
    if (result)
        *result = sw_tensor_ref(m->result);
    return SW_OK;
}

/* ---- submission ----------------------------------------------------------- */

/* A refusal names its row (move.h, sw_move_refusal) next to the message
 * `st` already filled in. */
static sw_status refused(sw_error *err, sw_move_refusal *why, sw_move_refusal row, sw_status st)
{
    *why = row;
    if (err)
        err->detail = (int)row;
    return st;
}

/* Row 7's three reasons, in the binding's order: pending before owned
 * before intrinsic. A destination pending in a move is refused even on
 * the thread running that move's transfer (whose slot writes the pending
 * guard lets through): a second move would clear the first one's mark. */
static sw_status check_destination_mutable_locked(sw_carrier *d, const sw_move_check_args *a,
                                                  sw_move_refusal *why, sw_error *err)
{
    int pending = d->pending_src || d->pending_dst;
    int owned = d->owner_token && sw_carrier_owned_blocks_locked(d);
    int immutable = !d->intrinsic_mutable ||
                    ((a->flags & SW_MOVE_CHECK_DST_MUTABILITY) && a->dst_immutable);
    if (!pending && !owned && !immutable)
        return SW_OK;
    return refused(err, why,
                   pending ? SW_MOVE_DESTINATION_PENDING
                   : owned ? SW_MOVE_DESTINATION_OWNED
                           : SW_MOVE_DESTINATION_IMMUTABLE,
                   sw_error_set(err, SW_ESTATE, "move: the destination %s carrier is not mutable%s",
                                sw_carrier_name(d),
                                pending ? " (it is taking part in a pending move)"
                                : owned ? " (it is owned by another carrier)"
                                        : ""));
}

/* Row 8: a STATE_ONLY carrier's dtype is the binding's (in `a`); without
 * its answer the row is skipped. */
static sw_status check_dtype_locked(sw_carrier *s, sw_carrier *d, const sw_move_check_args *a,
                                    sw_move_refusal *why, sw_error *err)
{
    int values_known = (a->flags & SW_MOVE_CHECK_DTYPE) || !SW_CARRIER_STATE_ONLY(s);
    int dst_known = (a->flags & SW_MOVE_CHECK_DST_DTYPE) || !SW_CARRIER_STATE_ONLY(d);
    sw_dtype values = (a->flags & SW_MOVE_CHECK_DTYPE) ? a->dtype : s->dtype;
    sw_dtype held = SW_CARRIER_STATE_ONLY(d) ? a->dst_dtype : d->dtype;
    if (!values_known || !dst_known || held == values)
        return SW_OK;
    return refused(err, why, SW_MOVE_DTYPE_MISMATCH,
                   sw_error_set(err, SW_ETYPE, "move: the destination holds %s, the tensor %s",
                                sw_dtype_info_of(held)->name, sw_dtype_info_of(values)->name));
}

/* Row 10: a STATE_ONLY destination's size is the binding's (in `a`);
 * without its answer the row is skipped. */
static sw_status check_size_locked(sw_carrier *d, const sw_move_check_args *a, int *grow,
                                   sw_move_refusal *why, sw_error *err)
{
    int state_only = SW_CARRIER_STATE_ONLY(d);
    if (state_only && !(a->flags & SW_MOVE_CHECK_DST_SIZE))
        return SW_OK;
    int64_t size = state_only ? a->dst_slots : d->ops->size(d->impl);
    if (size >= a->cosize)
        return SW_OK;
    int can_grow = state_only ? a->dst_grows : d->ops->allocate && d->ops->unallocate;
    if (size == 0 && can_grow) {
        *grow = 1;
        return SW_OK;
    }
    return refused(err, why, SW_MOVE_TOO_SMALL,
                   sw_error_set(err, SW_EINVAL,
                                "move: the destination %s carrier has %lld slots, the layout "
                                "needs %lld, and it cannot allocate",
                                sw_carrier_name(d), (long long)size, (long long)a->cosize));
}

/* Rows 2-10 of the validation order (move.h), with the carriers locked.
 * `d` may be NULL or `s` (rows 4 and 5 then fail after rows 2 and 3). */
static sw_status check_rows_locked(sw_carrier *s, sw_carrier *d, const sw_move_check_args *a,
                                   int *grow, sw_move_refusal *why, sw_error *err)
{
    int supplied = (a->flags & SW_MOVE_CHECK_SUPPLIED) != 0;
    sw_status st;
    *grow = 0;
    *why = SW_MOVE_ACCEPTED;
    if (s->released)
        return refused(err, why, SW_MOVE_SOURCE_RELEASED,
                       sw_error_set(err, SW_ESTATE, "move: the source %s carrier is released",
                                    sw_carrier_name(s)));
    if (s->owner_token && sw_carrier_owned_blocks_locked(s))
        return refused(err, why, SW_MOVE_SOURCE_OWNED,
                       sw_error_set(err, SW_ESTATE,
                                    "move: the source %s carrier is owned by another carrier",
                                    sw_carrier_name(s)));
    if (s->pending_src || s->pending_dst)
        return refused(err, why, SW_MOVE_SOURCE_PENDING,
                       sw_error_set(err, SW_ESTATE,
                                    "move: the source %s carrier is taking part in a pending "
                                    "move; wait for that move first",
                                    sw_carrier_name(s)));
    if (SW_CARRIER_STATE_ONLY(s) && !supplied)
        return refused(err, why, SW_MOVE_SOURCE_STATE_ONLY,
                       sw_carrier_refuse_state_only(s, "be a move's source", err));
    if (!d)
        return refused(err, why, SW_MOVE_NO_DESTINATION,
                       sw_error_set(err, SW_ETYPE,
                                    "move: destination must be a carrier, not NULL"));
    if (d == s)
        return refused(err, why, SW_MOVE_SAME_CARRIER,
                       sw_error_set(err, SW_EINVAL,
                                    "move: the destination is the tensor's own carrier; pass a "
                                    "different carrier"));
    if (SW_CARRIER_STATE_ONLY(d) && !supplied)
        return refused(err, why, SW_MOVE_DESTINATION_STATE_ONLY,
                       sw_carrier_refuse_state_only(d, "be a move's destination", err));
    if (d->released)
        return refused(err, why, SW_MOVE_DESTINATION_RELEASED,
                       sw_error_set(err, SW_ESTATE,
                                    "move: the destination %s carrier is released",
                                    sw_carrier_name(d)));
    if ((st = check_destination_mutable_locked(d, a, why, err)) != SW_OK ||
        (st = check_dtype_locked(s, d, a, why, err)) != SW_OK)
        return st;
    if (!(a->flags & SW_MOVE_CHECK_OWN_ROUTE) && (st = check_pins_locked(s, d, err)) != SW_OK)
        return refused(err, why, SW_MOVE_ROUTE_REFUSED, st);
    return check_size_locked(d, a, grow, why, err);
}

/* The rows as a move with `o` runs them: what the core cannot know of a
 * STATE_ONLY destination comes from the supplied transfer's options (the
 * binding grew an empty one already). */
static sw_status validate_locked(sw_carrier *s, sw_carrier *d, const sw_layout *l,
                                 const sw_move_options *o, int *grow, sw_error *err)
{
    sw_move_check_args a = {.cosize = l->cosize};
    if (o && o->transfer) {
        a.flags = SW_MOVE_CHECK_SUPPLIED | SW_MOVE_CHECK_DST_SIZE;
        a.dst_slots = o->dst_slots;
    }
    sw_move_refusal why;
    return check_rows_locked(s, d, &a, grow, &why, err);
}

sw_status sw_move_check(sw_carrier *src, sw_carrier *dst, const sw_move_check_args *args,
                        sw_move_refusal *refusal, int *grows, sw_error *err)
{
    sw_move_refusal why = SW_MOVE_ACCEPTED;
    int grow = 0;
    sw_status st;
    if (!args)
        st = sw_error_set(err, SW_EINVAL, "sw_move_check: args must not be NULL");
    else if (SW_FAULT_HIT("move_check")) /* tests: which moves check apart from their start */
        st = sw_error_set(err, SW_EIO, "move: injected check failure");
    else if (!src)
        st = refused(err, &why, SW_MOVE_NO_SOURCE,
                     sw_error_set(err, SW_ETYPE, "move: source carrier must not be NULL"));
    else if (!dst || dst == src) {
        pthread_mutex_lock(&src->lock);
        st = check_rows_locked(src, dst, args, &grow, &why, err);
        pthread_mutex_unlock(&src->lock);
    } else {
        sw_carrier_lock_pair(src, dst);
        st = check_rows_locked(src, dst, args, &grow, &why, err);
        sw_carrier_unlock_pair(src, dst);
    }
    if (refusal)
        *refusal = why;
    if (grows)
        *grows = grow;
    return st;
}

/* The caller's guard around a transfer run on its own thread (move.h,
 * transfer_enter): never around one the pool runs. */
static void transfer_enter(sw_move_handle *m)
{
    if (m->transfer_enter)
        m->transfer_enter(m->user);
}

static void transfer_leave(sw_move_handle *m)
{
    if (m->transfer_leave)
        m->transfer_leave(m->user);
}

/* What a handle keeps of the caller's options (both paths). */
static void take_options(sw_move_handle *m, const sw_move_options *o)
{
    m->on_commit = o->on_commit;
    m->user = o->user;
    m->enter = o->commit_enter;
    m->leave = o->commit_leave;
    m->guard_held = o->guard_held;
    m->check = o->commit_check;
    if (o->transfer_enter && o->transfer_leave) {
        m->transfer_enter = o->transfer_enter;
        m->transfer_leave = o->transfer_leave;
    }
    m->progress = o->progress ? o->progress : &m->progress_own;
    m->caller_waits = o->caller_waits;
    m->profile_tag = o->profile_tag;
    m->tag_hook = o->profile_tag_hook;
}

static sw_status new_move(sw_tensor *t, sw_carrier *d, const sw_move_options *o,
                          sw_move_handle **out, sw_error *err)
{
    sw_move_handle *m = sw_calloc(1, sizeof *m);
    if (!m)
        return sw_error_set(err, SW_ENOMEM, "move: out of memory");
    atomic_init(&m->refs, 1);
    m->job.run = run_transfer;
    m->progress = &m->progress_own;
    m->src = sw_tensor_ref(t);
    m->dst = sw_carrier_ref(d);
    m->done = sw_completion_new();
    m->reported = sw_completion_new();
    m->no_result = o && o->no_result;
    if (!m->no_result) {
        sw_layout *l = sw_layout_copy(t->layout, err);
        if (l && !(m->result = sw_tensor_wrap(d, 0, l, err)))
            sw_layout_free(l);
    }
    if (!m->done || !m->reported || (!m->result && !m->no_result)) {
        sw_move_unref(m);
        return sw_error_set(err, SW_ENOMEM, "move: out of memory");
    }
    const sw_carrier_class *so = t->carrier->ops, *dops = d->ops;
    size_t width = sw_dtype_slot_bytes(t->carrier->dtype);
    m->route = resolve(so, dops, &m->transfer);
    int64_t ext[SW_COPY_MAX_DIMS], str[SW_COPY_MAX_DIMS];
    m->slotwise = !so->storage || !dops->storage || sw_copy_layout_modes(t->layout, ext, str) < 0;
    if (o) {
        take_options(m, o);
        /* A block device carrier moves only by its own route, never slot
         * by slot (slot writes are not made durable). */
        if (o->elementwise && !m->transfer) {
            m->route = SW_ROUTE_ELEMENTWISE;
            m->transfer = NULL;
        }
        if (o->transfer) {
            m->route = SW_ROUTE_SUPPLIED;
            m->transfer = NULL;
            m->supplied = o->transfer;
        }
    }
    m->bytes = m->supplied ? (o->bytes > 0 ? o->bytes : 0)
               : (m->route == SW_ROUTE_BULK ? t->layout->cosize : t->layout->size) *
                     (int64_t)width;
    /* Before the pool can start it: a waiter that comes early polls for
     * its parts rather than sleep through the copy (sw_move_wait_for). */
    atomic_store(&m->helpable, !m->supplied && !m->transfer && !m->slotwise &&
                                   !m->caller_waits &&
                                   m->bytes >= SW_TRANSFER_PARALLEL_MIN_BYTES &&
                                   sw_parallel_width() > 1);
    *out = m;
    return SW_OK;
}

/* Whether this move runs on its caller (move.h, "Where the transfer
 * runs"). Never while a test holds transfers at their pause point. */
static int runs_block_route_here(const sw_move_handle *m);

/* The largest span between host classes that runs on its caller, by
 * destination class and whether the caller waits at once. */
static int64_t here_bytes(const sw_carrier_class *dst, int caller_waits)
{
    if (caller_waits)
        return HERE_WAITED_BYTES;
    return dst == &sw_file_backed_class ? HERE_FILE_WRITE_BYTES : HERE_BYTES;
}

static int runs_here(const sw_move_handle *m)
{
    if (m->transfer && !m->supplied && !SW_FAULT_ARMED("move_transfer_pause"))
        return runs_block_route_here(m);
    if (m->supplied || m->transfer || m->slotwise || !storage_builtin(m->src->carrier->ops) ||
        !storage_builtin(m->dst->ops) || SW_FAULT_ARMED("move_transfer_pause"))
        return 0;
    int64_t span = m->src->layout->cosize * (int64_t)sw_dtype_slot_bytes(m->src->carrier->dtype);
    return span <= here_bytes(m->dst->ops, m->caller_waits);
}

/* A block device route (CPU <-> BlockDeviceCarrier) on its caller (move.h,
 * "Where the transfer runs"): up to 16 MiB when the caller waits at once,
 * either way; a read out of the device up to 64 KiB always (the pool round
 * trip measured as most of a small read's time), unless a test holds
 * device transfers at a pause point. A write into the device otherwise
 * goes to the pool, where writers in flight share fdatasyncs. */
static int block_route_here(const sw_carrier *s, const sw_layout *l, int caller_waits)
{
    int64_t span = l->cosize * (int64_t)sw_dtype_slot_bytes(s->dtype);
    if (caller_waits && span <= HERE_WAITED_BYTES)
        return 1;
    return s->ops == &sw_block_device_carrier_class && span <= HERE_BYTES &&
           !sw_block_device_route_may_pause();
}

static int runs_block_route_here(const sw_move_handle *m)
{
    return block_route_here(m->src->carrier, m->src->layout, m->caller_waits);
}

/* Hand a supplied-transfer move to its transfer, on this thread (move.h,
 * "transfers a binding supplies"); a report made inside it commits here. */
static void start_supplied(sw_move_handle *m)
{
    sw_move_handle *outer = supplying;
    supplying = m;
    m->supplier = pthread_self();
    m->supplier_in = 1;
    m->supplied(m, m->user);
    m->supplier_in = 0;
    supplying = outer;
    if (m->done_inline) {
        int was = engine_thread;
        engine_thread = 1;
        commit_guarded(m, m->guard_held);
        engine_thread = was;
    }
}

static void transfer_done(sw_move_handle *m, sw_status status, const sw_error *err, int here);

void sw_move_transfer_done(sw_move_handle *m, sw_status status, const sw_error *err)
{
    transfer_done(m, status, err, 0);
}

void sw_move_transfer_done_here(sw_move_handle *m, sw_status status, const sw_error *err)
{
    transfer_done(m, status, err, 1);
}

static void transfer_done(sw_move_handle *m, sw_status status, const sw_error *err, int here)
{
    if (!m || !m->supplied || atomic_exchange(&m->supplied_reported, 1))
        return;
    if (status == SW_OK) {
        m->status = SW_OK;
    } else if (err && err->code != SW_OK) {
        m->err = *err;
        m->status = err->code;
    } else {
        m->status = sw_error_set(&m->err, status, "move: the supplied transfer failed");
    }
    if (supplying == m) {
        m->done_inline = 1; /* start_supplied commits once `transfer` returns */
        return;
    }
    if (here) { /* the reporting thread commits, as the completion thread would */
        int was = engine_thread;
        engine_thread = 1;
        commit(m);
        engine_thread = was;
        return;
    }
    /* The completion thread commits, as for a pool job. Without one (a
     * forked child's inherited move): here. */
    sw_error perr;
    sw_executor *ex = NULL;
    pthread_mutex_lock(&engine_lock);
    if (engine_started && engine_status == SW_OK &&
        m->generation == atomic_load(&engine_generation))
        ex = engine;
    pthread_mutex_unlock(&engine_lock);
    if (ex && sw_executor_post_completed(ex, &m->job, &perr) == SW_OK)
        return;
    commit(m);
}

static sw_status move_async(sw_tensor *t, sw_carrier *dst, const sw_move_options *options,
                            sw_move_handle **out, sw_error *err);

/* ---- the light path: a move that runs on its caller ------------------------
 *
 * A small move between built-in storage classes runs and commits on its
 * caller (move.h, "Where the transfer runs"). It needs none of what a move
 * handed to another thread needs: no completions (it committed before the
 * caller gets the handle), no references to the carriers or a tensor on the
 * source (the caller holds them until it returns), no result tensor unless
 * one is wanted (made at commit), and one lock round on the carrier pair to
 * validate and mark, one to commit; or, for a caller holding its commit
 * guard (move_one_round), a single lock round through the copy. The rules
 * are the same: pending marks (or locks held throughout), the profiling
 * events, the commit guard and on_commit, counted in flight for drains and
 * exit, refused once exit began. */

/* The route a light move takes (resolved once, by light_eligible). */
typedef struct light_route {
    sw_move_route route;
    sw_route_transfer_fn fn; /* a block device's route; NULL between host classes */
    copy_modes modes;        /* the layout's, between host classes */
    int one_round;           /* it may check, copy and commit in one lock round
                                (move_one_round) */
} light_route;

/* Whether a move of the span (s, l) into d takes the light path; its
 * route in *r when it does. */
static int light_eligible(const sw_carrier *s, const sw_layout *l, const sw_carrier *d,
                          const sw_move_options *o, light_route *r)
{
    if (!d || d == s || (o && o->transfer) || atomic_load(&holding) ||
        !atomic_load(&engine_hooks_registered))
        return 0;
    sw_route_transfer_fn route_fn;
    r->route = resolve(s->ops, d->ops, &route_fn);
    r->fn = route_fn;
    r->one_round = 0;
    if (r->route == SW_ROUTE_BULK && route_fn)
        return !(o && o->elementwise) && block_route_here(s, l, o && o->caller_waits) &&
               !SW_FAULT_ARMED("move_transfer_pause");
    if (!storage_builtin(s->ops) || !storage_builtin(d->ops) || !s->ops->storage ||
        !d->ops->storage)
        return 0;
    r->modes.ndim = sw_copy_layout_modes(l, r->modes.extents, r->modes.strides);
    if (r->modes.ndim < 0)
        return 0;
    int64_t span = l->cosize * (int64_t)sw_dtype_slot_bytes(s->dtype);
    int waits = o && o->caller_waits;
    /* A copy between host classes no bigger than a move that does not wait
     * runs here: short enough to hold the carriers' locks through it when
     * the caller holds the guard (see move_one_round). */
    r->one_round = o && o->guard_held && span <= HERE_BYTES && !o->commit_check &&
                   !o->transfer_enter;
    return span <= here_bytes(d->ops, waits) && !SW_FAULT_ARMED("move_transfer_pause");
}

/* sw_tensor_new's checks of a span, for a move of a span without a tensor
 * (sw_move_span_async), in its order and words. */
static sw_status light_span_locked(sw_carrier *s, int64_t offset, const sw_layout *l,
                                   sw_error *err)
{
    int64_t end;
    if (s->released)
        return sw_error_set(err, SW_ESTATE, "tensor: the %s carrier is released",
                            sw_carrier_name(s));
    if (__builtin_add_overflow(offset, l->cosize, &end) || end > s->ops->size(s->impl))
        return sw_error_set(err, SW_ERANGE,
                            "tensor: offset %lld + cosize %lld exceeds the carrier's %lld slots",
                            (long long)offset, (long long)l->cosize,
                            (long long)s->ops->size(s->impl));
    return SW_OK;
}

/* A light move's result: a tensor on `d` at 0 with `l`'s layout; NULL
 * with `err` set when out of memory. */
static sw_tensor *light_result(sw_carrier *d, const sw_layout *l, sw_error *err)
{
    sw_tensor *result = NULL;
    sw_layout *copy = sw_layout_copy(l, err);
    if (copy && !(result = sw_tensor_wrap(d, 0, copy, err)))
        sw_layout_free(copy);
    if (!result)
        sw_error_set(err, SW_ENOMEM, "move: out of memory");
    return result;
}

/* The commit of a light move, on its caller (as commit() does it);
 * `caller_guard` as for commit_guarded. */
static void light_commit(sw_move_handle *m, sw_carrier *s, const sw_layout *l, sw_carrier *d,
                         sw_core_thread *th, int caller_guard)
{
    int guard = m->enter && !caller_guard;
    atomic_store(&m->committing, 1);
    sw_tensor *result = NULL;
    if (m->status == SW_OK && !m->no_result && !(result = light_result(d, l, &m->err)))
        m->status = SW_ENOMEM;
    if (guard)
        m->enter(m->user);
    check_before_commit(m, d);
    sw_carrier_lock_pair(s, d);
    /* Marked: the copy ran between two lock rounds. `l` is NULL for a
     * move a fork ended (end_inherited): it failed, so it is not read. */
    settle_locked(m, s, d, l, 1, th);
    sw_carrier_unlock_pair(s, d);
    if (m->status != SW_OK) {
        sw_tensor_unref(result);
        result = NULL;
    }
    m->result = result;
    profile(m, SW_MOVE_EVENT_COMPLETE, m->status);
    if (m->on_commit)
        m->on_commit(m, m->status, result, m->user);
    if (guard && m->leave)
        m->leave(m->user);
    /* The caller's carriers may be gone from here on (leave may drop the
     * binding's last references): only the handle is touched. */
    live_remove(m);
    uncount(m);
}

/* A light move's handle, from its route and the caller's options (both
 * light paths); NULL when out of memory. */
static inline __attribute__((always_inline)) sw_move_handle *light_handle_for(sw_carrier *s, const sw_layout *l,
                                        const sw_move_options *o, const light_route *r)
{
    sw_move_handle *m = light_handle_new();
    if (!m)
        return NULL;
    atomic_init(&m->refs, 1);
    m->light = 1;
    m->job.run = run_transfer;
    m->progress = &m->progress_own;
    m->route = r->route;
    m->transfer = r->fn;
    if (o && o->elementwise && !r->fn)
        m->route = SW_ROUTE_ELEMENTWISE;
    m->bytes = (m->route == SW_ROUTE_BULK ? l->cosize : l->size) *
               (int64_t)sw_dtype_slot_bytes(s->dtype);
    if (o) {
        take_options(m, o);
        m->no_result = o->no_result;
    }
    return m;
}

/* A light move's start, the pair locked (both light paths): a span's
 * checks, rows 2-10, the exit check and the growth of an empty
 * destination, in that order; *grow says whether it grew. */
static inline __attribute__((always_inline)) sw_status light_start_locked(sw_move_handle *m, sw_carrier *s, int64_t offset,
                                    const sw_layout *l, int span_checks, sw_carrier *d,
                                    const sw_move_options *o, int *grow, sw_error *err)
{
    sw_status st = SW_OK;
    *grow = 0;
    if (span_checks)
        st = light_span_locked(s, offset, l, err);
    if (st == SW_OK)
        st = validate_locked(s, d, l, o, grow, err);
    if (st == SW_OK && atomic_load(&engine_exiting))
        st = sw_error_set(err, SW_ESTATE, "move: the process is exiting; no new move can start");
    if (st == SW_OK && *grow)
        st = grow_locked(s, d, l, m->route == SW_ROUTE_BULK && !m->transfer, err);
    return st;
}

/* A light move's transfer, on its caller (both light paths). */
static inline __attribute__((always_inline)) void light_transfer(sw_move_handle *m, sw_carrier *s, int64_t offset, const sw_layout *l,
                           sw_carrier *d, const light_route *r)
{
    /* Nobody can read a light move's own counter before it commits (the
     * caller gets the handle after), and the commit sets it whole: the
     * transfer counts only into a counter the caller gave. Counting costs
     * a locked add after each copy, which waits for the copy's stores. */
    int64_t *progress = m->progress == &m->progress_own ? NULL : m->progress;
    sw_error_clear(&m->err);
    if (SW_FAULT_HIT("move_transfer"))
        m->status = sw_error_set(&m->err, SW_EIO, "move: injected transfer failure");
    else if (m->transfer)
        m->status = m->transfer(s, offset, d, l, progress, &m->err);
    else
        m->status = transfer_span(s, offset, l, d, m->route, m->caller_waits, progress,
                                  &r->modes, NULL, &m->err);
}

/* The light path in one lock round (move.h, guard_held): the caller holds
 * the commit guard for the whole call, the copy is small and between host
 * classes, and no profiling subscriber watches. Under the pair's locks it
 * checks, grows, copies and commits, so no other thread ever sees the
 * carriers between those steps: no pending mark is set, and nobody waits
 * for this move but by waiting for those locks (a few microseconds: at
 * most HERE_BYTES). It is not on the live list: the caller's guard keeps
 * fork() out for the whole call (move.h), and a child forked anyway
 * could not take these carriers' locks. It is counted in flight before
 * the exit check, so an exit either waits for it or refuses it. on_commit
 * runs after the locks are let go, with the caller's guard (no
 * enter/leave). */
static sw_status move_one_round(sw_move_handle *m, sw_carrier *s, int64_t offset,
                                const sw_layout *l, int span_checks, sw_carrier *d,
                                const sw_move_options *o, const light_route *r,
                                sw_move_handle **out, sw_error *err)
{
    sw_core_thread *th = &sw_core_thread_state;
    int grow;
    m->generation = atomic_load(&engine_generation);
    atomic_store(&m->counted, 1);
    in_flight_add(1);
    sw_carrier_lock_pair(s, d);
    sw_status st = light_start_locked(m, s, offset, l, span_checks, d, o, &grow, err);
    if (st == SW_OK && SW_FAULT_HIT("move_submit")) {
        if (grow)
            d->ops->unallocate(d->impl, NULL);
        st = sw_error_set(err, SW_EIO, "move: injected submission failure");
    }
    sw_tensor *result = NULL;
    /* Exit from a transfer or on_commit here does not wait for this move. */
    int was = th->engine;
    if (st == SW_OK) {
        m->grew = grow;
        th->engine = 1;
        light_transfer(m, s, offset, l, d, r);
        if (m->status == SW_OK && !m->no_result &&
            !(result = light_result(d, l, &m->err)))
            m->status = SW_ENOMEM;
        /* Not marked: nothing let go of either lock since the rows, so
         * no mark was set and the destination is as they found it. */
        settle_locked(m, s, d, l, 0, th);
    }
    sw_carrier_unlock_pair(s, d);
    if (st != SW_OK) {
        uncount(m);
        light_handle_free(m);
        return st;
    }
    m->result = result;
    if (m->on_commit)
        m->on_commit(m, m->status, result, m->user);
    th->engine = was;
    uncount(m);
    *out = m;
    return SW_OK;
}

/* The light path in two lock rounds: check, grow and mark; copy; commit. */
static sw_status move_light(sw_carrier *s, int64_t offset, const sw_layout *l, int span_checks,
                            sw_carrier *d, const sw_move_options *o, const light_route *r,
                            sw_move_handle **out, sw_error *err)
{
    if (span_checks && offset < 0)
        return sw_error_set(err, SW_EINVAL, "tensor: offset must be >= 0, not %lld",
                            (long long)offset);
    sw_move_handle *m = light_handle_for(s, l, o, r);
    if (!m)
        return sw_error_set(err, SW_ENOMEM, "move: out of memory");
    /* Most moves observe no subscriber: one atomic load says so. */
    sw_move_hooks *prof = sw_move_hooks_take();
    if (r->one_round && !prof)
        return move_one_round(m, s, offset, l, span_checks, d, o, r, out, err);
    int grow = 0;
    sw_carrier_lock_pair(s, d);
    sw_status st = light_start_locked(m, s, offset, l, span_checks, d, o, &grow, err);
    if (st == SW_OK) {
        m->grew = grow;
        s->pending_src = 1;
        d->pending_dst = 1;
    }
    sw_carrier_unlock_pair(s, d);
    if (st != SW_OK) {
        sw_move_hooks_drop(prof);
        sw_free(m);
        return st;
    }
    m->prof = prof;
    m->submit_ns = m->prof ? sw_clock_ns() : 0;
    m->generation = atomic_load(&engine_generation);
    atomic_store(&m->counted, 1);
    in_flight_add(1);
    /* On the live list like any move, so that a child forked meanwhile by
     * another thread ends it (move.h, "Fork"); its transfer runs here. */
    m->light_src = s;
    m->light_dst = d;
    m->supplier = pthread_self();
    m->supplier_in = 1;
    live_add(m);
    if (SW_FAULT_HIT("move_submit")) {
        live_remove(m);
        sw_carrier_lock_pair(s, d);
        s->pending_src = 0;
        d->pending_dst = 0;
        if (grow)
            d->ops->unallocate(d->impl, NULL);
        sw_carrier_unlock_pair(s, d);
        uncount(m);
        sw_move_hooks_drop(m->prof); /* the subscribers' snapshot it took */
        sw_free(m);
        return sw_error_set(err, SW_EIO, "move: injected submission failure");
    }
    profile(m, SW_MOVE_EVENT_SUBMIT, SW_OK);
    /* Exit from a hook or a transfer here does not wait for this move.
     * The thread's block's address is taken once: each access of a
     * thread-local of a shared library is a call to __tls_get_addr. */
    sw_core_thread *th = &sw_core_thread_state;
    int was = th->engine;
    th->engine = 1;
    transfer_enter(m);
    light_transfer(m, s, offset, l, d, r);
    transfer_leave(m);
    light_commit(m, s, l, d, th, m->guard_held);
    th->engine = was;
    *out = m;
    return SW_OK;
}

sw_status sw_move_async(sw_tensor *t, sw_carrier *dst, const sw_move_options *options,
                        sw_move_handle **out, sw_error *err)
{
    /* A span never checked against its carrier is checked as a span's. */
    if (t && t->unchecked)
        return sw_move_span_async(t->carrier, t->offset, t->layout, dst, options, out, err);
    return move_async(t, dst, options, out, err);
}

sw_status sw_move_span_async(sw_carrier *src, int64_t offset, const sw_layout *layout,
                             sw_carrier *dst, const sw_move_options *options,
                             sw_move_handle **out, sw_error *err)
{
    sw_move_refusal why;
    if (!src || !layout)
        return refused(err, &why, SW_MOVE_NO_SOURCE,
                       sw_error_set(err, SW_ETYPE,
                                    "move: source carrier and layout must not be NULL"));
    light_route r;
    if (out && light_eligible(src, layout, dst, options, &r))
        return move_light(src, offset, layout, 1, dst, options, &r, out, err);
    sw_tensor *t = NULL;
    if (!SW_CARRIER_STATE_ONLY(src)) {
        sw_status st = sw_tensor_new(src, offset, layout, &t, err);
        if (st != SW_OK)
            return st;
    } else {
        if (offset < 0)
            return sw_error_set(err, SW_EINVAL, "move: offset must be >= 0, not %lld",
                                (long long)offset);
        if (!options || !options->transfer)
            return refused(err, &why, SW_MOVE_SOURCE_STATE_ONLY,
                           sw_carrier_refuse_state_only(src, "be a move's source", err));
        sw_layout *l = sw_layout_copy(layout, err);
        if (!l)
            return err ? err->code : SW_ENOMEM;
        if (!(t = sw_tensor_wrap(src, offset, l, err))) {
            sw_layout_free(l);
            return SW_ENOMEM;
        }
    }
    sw_status st = move_async(t, dst, options, out, err);
    sw_tensor_unref(t);
    return st;
}

static sw_status move_async(sw_tensor *t, sw_carrier *dst, const sw_move_options *options,
                            sw_move_handle **out, sw_error *err)
{
    sw_move_refusal why;
    if (!t)
        return refused(err, &why, SW_MOVE_NO_SOURCE,
                       sw_error_set(err, SW_ETYPE, "move: tensor must be a tensor, not NULL"));
    if (!out)
        return sw_error_set(err, SW_EINVAL, "move: out must not be NULL");
    sw_carrier *s = t->carrier;
    int grow = 0;
    sw_status st;
    if (!dst || dst == s) {
        pthread_mutex_lock(&s->lock);
        st = validate_locked(s, dst, t->layout, options, &grow, err);
        pthread_mutex_unlock(&s->lock);
        return st;
    }
    light_route r;
    if (light_eligible(s, t->layout, dst, options, &r))
        return move_light(s, t->offset, t->layout, 0, dst, options, &r, out, err);
    sw_carrier_lock_pair(s, dst);
    st = validate_locked(s, dst, t->layout, options, &grow, err);
    sw_carrier_unlock_pair(s, dst);
    if (st != SW_OK)
        return st;

    /* Everything that can fail for want of memory or threads, before any
     * carrier changes. */
    sw_move_handle *m = NULL;
    if ((st = engine_get(err)) != SW_OK || (st = new_move(t, dst, options, &m, err)) != SW_OK)
        return st;

    /* Validate again under the locks (another thread may have changed
     * either carrier meanwhile), then grow and mark pending atomically. */
    sw_carrier_lock_pair(s, dst);
    st = validate_locked(s, dst, t->layout, options, &grow, err);
    if (st == SW_OK && grow)
        st = grow_locked(s, dst, t->layout,
                         m->route == SW_ROUTE_BULK && !m->transfer && !m->slotwise &&
                             !m->supplied,
                         err);
    if (st == SW_OK) {
        m->grew = grow;
        s->pending_src = 1;
        dst->pending_dst = 1;
    }
    sw_carrier_unlock_pair(s, dst);
    if (st != SW_OK) {
        sw_move_unref(m);
        return st;
    }

    m->prof = sw_move_hooks_take();
    m->submit_ns = sw_clock_ns();
    m->generation = atomic_load(&engine_generation);
    atomic_store(&m->counted, 1);
    in_flight_add(1);
    live_add(m);
    sw_move_ref(m); /* the job's reference, dropped by commit */
    m->queued = 1;
    int here = 0, held = 0;
    if (SW_FAULT_HIT("move_submit")) {
        st = sw_error_set(err, SW_EIO, "move: injected submission failure");
    } else {
        pthread_mutex_lock(&engine_lock);
        if (holding && !m->supplied) {
            held = 1;
            m->held_next = NULL;
            if (held_tail)
                held_tail->held_next = m;
            else
                held_head = m;
            held_tail = m;
        } else {
            here = runs_here(m);
        }
        pthread_mutex_unlock(&engine_lock);
        if (!held && !here && !m->supplied) {
            /* Without a profiling hook there is no SUBMIT event to order
             * before COMPLETE: let the commit go now, so that queuing the
             * job is the last thing this call does (on a busy machine the
             * woken pool preempts its caller right there). */
            if (!m->prof)
                sw_completion_signal(m->reported);
            st = sw_executor_submit(engine, &m->job, err);
            if (st == SW_OK && !m->prof) {
                *out = m;
                return SW_OK;
            }
        }
    }
    if (st != SW_OK) {
        m->queued = 0;
        /* Not queued: undo the marks and the growth, leave no handle. */
        sw_carrier_lock_pair(s, dst);
        s->pending_src = 0;
        dst->pending_dst = 0;
        if (grow)
            dst->ops->unallocate(dst->impl, NULL);
        sw_carrier_unlock_pair(s, dst);
        uncount(m);
        live_remove(m);
        sw_move_unref(m);
        sw_move_unref(m);
        return st;
    }
    profile(m, SW_MOVE_EVENT_SUBMIT, SW_OK);
    sw_completion_signal(m->reported);
    if (m->supplied && !held) {
        start_supplied(m);
    } else if (here) {
        /* The transfer and the commit on this thread, as the pool and the
         * completion thread would run them. Exit from a hook here does not
         * wait for this move either. */
        int was = engine_thread;
        transfer_enter(m);
        run_transfer(&m->job);
        transfer_leave(m);
        commit_guarded(m, m->guard_held);
        engine_thread = was;
    }
    *out = m;
    return SW_OK;
}

void sw_move_hold(int on)
{
    pthread_mutex_lock(&engine_lock);
    holding = on != 0;
    sw_move_handle *m = on ? NULL : held_head;
    if (!on)
        held_head = held_tail = NULL;
    pthread_mutex_unlock(&engine_lock);
    while (m) {
        sw_move_handle *next = m->held_next;
        sw_error err;
        if (sw_executor_submit(engine, &m->job, &err) != SW_OK) {
            /* The pool refuses it: its terminal failure, committed here. */
            m->err = err;
            m->status = err.code != SW_OK ? err.code : SW_EIO;
            commit(m);
        }
        m = next;
    }
}

sw_status sw_move(sw_tensor *t, sw_carrier *dst, sw_tensor **result, sw_error *err)
{
    sw_move_handle *m;
    sw_move_options waits = {.caller_waits = 1};
    sw_status st = sw_move_async(t, dst, &waits, &m, err);
    if (st != SW_OK)
        return st;
    st = sw_move_wait(m, result, err);
    sw_move_unref(m);
    return st;
}

/* ---- fork: a child ends the moves it inherited (move.h, "Fork") ------------ */

/* Every move from its pending marks until its commit let go of it, so
 * that a forked child can find those it inherited. Under drain_lock. */
static sw_move_handle *live_head;
/* In a forked child: the parent's moves not ended yet. Under drain_lock. */
static sw_move_handle *inherited_head;

static void live_link(sw_move_handle **head, sw_move_handle *m)
{
    m->live_prev = NULL;
    m->live_next = *head;
    if (*head)
        (*head)->live_prev = m;
    *head = m;
}

static void live_unlink(sw_move_handle **head, sw_move_handle *m)
{
    if (m->live_prev)
        m->live_prev->live_next = m->live_next;
    else if (*head == m)
        *head = m->live_next;
    if (m->live_next)
        m->live_next->live_prev = m->live_prev;
    m->live_prev = m->live_next = NULL;
}

/* A light move is live for a few microseconds on its caller: it takes a
 * slot here with one compare-exchange instead of two rounds of drain_lock
 * around the list (bench/move_overhead.py: about 120 instructions a small
 * move). Only a child of fork() reads the slots, from the snapshot fork
 * made; with every slot taken, a light move goes on the list. */
#define LIGHT_LIVE_SLOTS 64
static sw_move_handle *_Atomic light_live[LIGHT_LIVE_SLOTS];

static int light_live_take(sw_move_handle *m)
{
    for (int i = 0; i < LIGHT_LIVE_SLOTS; i++) {
        sw_move_handle *none = NULL;
        if (!atomic_load_explicit(&light_live[i], memory_order_relaxed) &&
            atomic_compare_exchange_strong(&light_live[i], &none, m)) {
            m->light_slot = i + 1;
            return 1;
        }
    }
    return 0;
}

static void live_add(sw_move_handle *m)
{
    if (m->light && light_live_take(m))
        return;
    pthread_mutex_lock(&drain_lock);
    live_link(&live_head, m);
    m->live = 1;
    pthread_mutex_unlock(&drain_lock);
}

static void live_remove(sw_move_handle *m)
{
    if (m->light_slot) {
        atomic_store(&light_live[m->light_slot - 1], NULL);
        m->light_slot = 0;
        return;
    }
    pthread_mutex_lock(&drain_lock);
    if (m->live) {
        live_unlink(&live_head, m);
        m->live = 0;
    }
    pthread_mutex_unlock(&drain_lock);
}

/* In a forked child: the light moves in slots join the list, where the
 * rest of the fork rule finds them (under drain_lock from here on). */
static void light_live_to_list(void)
{
    for (int i = 0; i < LIGHT_LIVE_SLOTS; i++) {
        sw_move_handle *m = atomic_exchange(&light_live[i], NULL);
        if (!m)
            continue;
        m->light_slot = 0;
        live_link(&live_head, m);
        m->live = 1;
    }
}

/* Whether the transfer of `m` runs on this thread, the one that forked
 * (a supplied transfer inside sw_move_async here, or one holding transfer
 * access to either carrier here): it continues in the child and commits
 * as it would have. */
static sw_carrier *src_of(sw_move_handle *m)
{
    return m->light ? m->light_src : m->src->carrier;
}

static sw_carrier *dst_of(sw_move_handle *m)
{
    return m->light ? m->light_dst : m->dst;
}

static int transfer_runs_here(sw_move_handle *m)
{
    if (m->supplier_in && pthread_equal(m->supplier, pthread_self()))
        return 1;
    return sw_carrier_in_transfer(src_of(m)) || sw_carrier_in_transfer(dst_of(m));
}

/* Part of the fork child step, after engine_after_fork_child (which gave
 * drain_lock a fresh state): only the forking thread exists. Locks and
 * completions of the inherited moves another thread may have held are
 * made fresh; the moves are set aside for sw_move_end_inherited, except
 * one whose transfer runs on this thread. No hook runs here (a binding's
 * runtime is not ready yet inside fork()). */
static void moves_after_fork_child(void)
{
    light_live_to_list();
    sw_move_handle *m = live_head;
    live_head = NULL;
    inherited_head = NULL;
    while (m) {
        sw_move_handle *next = m->live_next;
        if (!m->light) { /* a light move has no completions */
            sw_completion_reset_after_fork(m->done);
            sw_completion_reset_after_fork(m->reported);
        }
        int committing = atomic_load(&m->committing);
        if (!committing) {
            /* A thread the child lacks may have held them. */
            pthread_mutex_init(&src_of(m)->lock, NULL);
            pthread_mutex_init(&dst_of(m)->lock, NULL);
        }
        if (!committing && transfer_runs_here(m))
            live_link(&live_head, m);
        else
            live_link(&inherited_head, m);
        m = next;
    }
}

#define FORKED_MESSAGE                                                                     \
    "move: the move was in flight when the process forked, and its transfer cannot "    \
    "finish in the child process; here the source is unchanged and the destination's " \
    "values are unspecified: start the move again if the child needs it"

/* One inherited move fails now, committed on this thread. */
static void end_inherited(sw_move_handle *m)
{
    if (atomic_load(&m->committing)) {
        /* Its commit was under way on a thread the child lacks: nothing
         * more can be learnt or undone; its waiters wake. */
        if (!m->light)
            sw_completion_signal(m->done);
        return;
    }
    atomic_store(&m->supplied_reported, 1); /* a late report changes nothing */
    m->forked = 1;
    m->status = sw_error_set(&m->err, SW_ESTATE, FORKED_MESSAGE);
    /* Transfer access the parent's threads held on its carriers goes. */
    sw_carrier_drop_inherited_access(src_of(m));
    sw_carrier_drop_inherited_access(dst_of(m));
    if (m->light) {
        /* Its caller is gone: the failed commit clears the marks and runs
         * on_commit here; nobody holds the handle, so it stays. */
        int was = engine_thread;
        engine_thread = 1;
        light_commit(m, m->light_src, NULL, m->light_dst, &sw_core_thread_state, 0);
        engine_thread = was;
        return;
    }
    sw_completion_signal(m->reported); /* its SUBMIT may never have gone out */
    int was = engine_thread;
    engine_thread = 1;
    commit(m);
    engine_thread = was;
}

void sw_move_end_inherited(void)
{
    for (;;) {
        pthread_mutex_lock(&drain_lock);
        sw_move_handle *m = inherited_head;
        if (m) {
            live_unlink(&inherited_head, m);
            m->live = 0;
        }
        pthread_mutex_unlock(&drain_lock);
        if (!m)
            return;
        end_inherited(m);
    }
}

int sw_move_ended_by_fork(sw_move_handle *m)
{
    return m && m->forked;
}
