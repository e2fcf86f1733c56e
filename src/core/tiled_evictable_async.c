/* TiledEvictable asynchronous work (promote_async, evict_async,
 * project_async), its handles, and what a forked child does with work it
 * inherited.
 *
 * The work runs on the move engine's pool and completion thread
 * (engine_internal.h: one set of threads per process, one count of work
 * in flight for sw_move_drain, sw_tiled_evictable_drain and exit). The
 * shape is a move's: the caller's thread checks everything and marks the
 * tiles (pending or pinned), so a refusal returns at once with nothing
 * changed; the copy or gather runs on a pool thread without the carrier's
 * lock; the completion thread commits (or drops) all the request's tiles
 * together, clears the marks, then wakes the waiters. A work item holds
 * its own references until it committed, so a dropped handle neither
 * cancels nor blocks it.
 *
 * Every piece of work that marks tiles, blocking or not, is tracked from
 * before its marks are set until after they are cleared. fork() takes the
 * tracking lock and the lock of every tracked carrier (this file's
 * prepare step, the first of fork.c's), so the child sees whole records;
 * the child, which has none of the parent's threads, then ends every
 * tracked piece of work (this file's child step, right after the engine's
 * set the parent's moves aside):
 * clears its marks, leaves residency and values as they were, and fails
 * its handle (SW_ESTATE, "forked"). Unlike a move this runs no binding
 * hook, so it is done inside fork() itself. Storage a parent thread was
 * filling for that work is left alone in the child (forgotten, never
 * released: it may be half made, and FileBacked files belong to the
 * parent's session). */
#include "engine_internal.h"
#include "fault_internal.h"
#include "fork_internal.h"
#include "tiled_evictable_internal.h"

#include "strideweave/alloc.h"
#include "strideweave/executor.h"
#include "strideweave/move.h"

SW_FORK_LINKED;

struct sw_te_work {
    sw_engine_job ej; /* first: the engine hands back this pointer */
    _Atomic long refs;
    sw_tiled_evictable *te; /* one reference */
    te_track track;
    te_request *req;        /* residency, until committed */
    te_projection *pj;      /* projection, until committed */
    sw_completion *done;
    int committed;          /* status and result are final (completion thread) */
    sw_status status;
    sw_error err;
    sw_tensor *result;      /* projection, one reference */
    sw_te_work_fn notify;   /* sw_te_work_on_done, under notify_lock */
    void *notify_user;
    int notified;           /* committed: a callback registered now runs at once */
    int registered;         /* a callback was given (one per handle) */
    int issued;             /* a _start request: the pool only awaits its copies */
    _Atomic int kept;       /* the binding kept something for it (work_end) */
    int64_t copies;         /* residency: tiles it copies, set before it is handed out */
};

/* Guards every handle's callback and its notified flag (short sections
 * only: nothing is called with it held). */
static pthread_mutex_t notify_lock = PTHREAD_MUTEX_INITIALIZER;
/* The work whose stage or gather runs on this pool thread (hooks ask). */
static _Thread_local sw_te_work *current_work;
/* 1 while the completion thread commits (no hook's copy may run there). */
static _Thread_local int committing;
/* 1 while fork()'s child handler ends inherited work: no binding code runs
 * inside fork(), so work_end is not called there (what the binding kept
 * for that work stays in the child's binding). */
static _Thread_local int in_fork_child;

/* ---- tracking and fork --------------------------------------------------- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static te_track reg_head = {&reg_head, &reg_head, NULL, 0, NULL, NULL, NULL};

void sw_te_fork_prepare(void)
{
    pthread_mutex_lock(&reg_lock);
    for (te_track *t = reg_head.next; t != &reg_head; t = t->next)
        if (!t->te->fork_locked) {
            pthread_mutex_lock(&t->te->lock);
            t->te->fork_locked = 1;
        }
}

static void unlock_tracked(void)
{
    for (te_track *t = reg_head.next; t != &reg_head; t = t->next)
        if (t->te->fork_locked) {
            t->te->fork_locked = 0;
            pthread_mutex_unlock(&t->te->lock);
        }
}

void sw_te_fork_parent(void)
{
    unlock_tracked();
    pthread_mutex_unlock(&reg_lock);
}

static void work_unref_job(sw_te_work *w);

/* The child: this thread holds every lock prepare took; no other thread
 * exists (the engine gave the child a fresh engine and count already, so
 * none of this work is counted here). End every tracked piece of work. */
void sw_te_fork_child(void)
{
    unlock_tracked();
    in_fork_child = 1;
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    notify_lock = fresh; /* a parent's thread may have held it */
    while (reg_head.next != &reg_head) {
        te_track *t = reg_head.next;
        t->prev->next = t->next;
        t->next->prev = t->prev;
        t->next = t->prev = t;
        sw_tiled_evictable *te = t->te;
        sw_te_work *w = t->work;
        if (t->marked && t->request) {
            if (w)
                w->req = NULL;
            sw_te_request_finish(te, t->request, t, 1);
        } else if (t->marked && t->projection) {
            if (w)
                w->pj = NULL;
            sw_tensor *none = NULL;
            sw_te_project_finish(te, t->projection, t, 1, &none, NULL);
        }
        if (!w)
            continue; /* a blocking call of a thread that is not here */
        sw_completion_reset_after_fork(w->done);
        if (!sw_completion_is_done(w->done)) {
            if (!w->committed) {
                w->status = sw_error_set(&w->err, SW_ESTATE,
                                         "TiledEvictable: the process forked while this work "
                                         "ran in the parent; it did not complete here (tiles "
                                         "and values are as they were)");
                w->err.detail = SW_TE_ENDED_BY_FORK;
            }
            sw_completion_signal(w->done);
        }
        if (w->status != SW_OK) {
            sw_tensor_unref(w->result);
            w->result = NULL;
        }
        work_unref_job(w);
    }
    in_fork_child = 0;
    pthread_mutex_unlock(&reg_lock);
}

void sw_te_track_enter(te_track *t, sw_tiled_evictable *te)
{
    sw_engine_install_hooks();
    *t = (te_track){.te = te};
    pthread_mutex_lock(&reg_lock);
    t->prev = reg_head.prev;
    t->next = &reg_head;
    reg_head.prev->next = t;
    reg_head.prev = t;
    pthread_mutex_unlock(&reg_lock);
}

void sw_te_track_leave(te_track *t)
{
    pthread_mutex_lock(&reg_lock);
    t->prev->next = t->next;
    t->next->prev = t->prev;
    t->next = t->prev = t;
    pthread_mutex_unlock(&reg_lock);
}

void sw_tiled_evictable_drain(void) { sw_move_drain(); }

/* ---- handles ----------------------------------------------------------------- */

sw_te_work *sw_te_work_ref(sw_te_work *w)
{
    if (w)
        atomic_fetch_add(&w->refs, 1);
    return w;
}

void sw_te_work_unref(sw_te_work *w)
{
    if (!w || atomic_fetch_sub(&w->refs, 1) != 1)
        return;
    if (!in_fork_child && atomic_load(&w->kept) && w->te->hooked && w->te->hooks.work_end)
        w->te->hooks.work_end(w, 0, w->te->hooks.user);
    sw_tensor_unref(w->result);
    sw_tiled_evictable_unref(w->te);
    if (w->done)
        sw_completion_free(w->done);
    sw_free(w);
}

static void work_unref_job(sw_te_work *w) { sw_te_work_unref(w); }

int sw_te_work_done(sw_te_work *w) { return w && sw_completion_is_done(w->done); }

sw_status sw_te_work_wait(sw_te_work *w, sw_tensor **result, sw_error *err)
{
    if (!w)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the work handle must not be NULL");
    sw_completion_wait(w->done);
    if (w->status != SW_OK) {
        if (err)
            *err = w->err;
        return w->status;
    }
    if (result)
        *result = w->result ? sw_tensor_ref(w->result) : NULL;
    return SW_OK;
}

/* ---- running ----------------------------------------------------------------- */

static void run_work(sw_engine_job *job)
{
    sw_te_work *w = (sw_te_work *)job;
    current_work = w;
    if (w->req && w->issued)
        sw_te_request_await(w->req);
    else if (w->req)
        sw_te_request_stage(w->te, w->req);
    else if (w->issued)
        sw_te_project_await(w->te, w->pj, SW_OK, NULL);
    else
        sw_te_project_gather(w->te, w->pj);
    current_work = NULL;
}

sw_te_work *sw_te_work_current(void) { return current_work; }

int64_t sw_te_work_copies(sw_te_work *w)
{
    return w ? w->copies : 0;
}

void sw_te_work_note_kept(sw_te_work *w)
{
    if (w)
        atomic_store(&w->kept, 1);
}

/* A failed _start call reports on its caller: what the binding kept for w
 * goes to this thread (the call's error), nothing is left behind. */
static void hand_kept_to_caller(sw_te_work *w)
{
    if (atomic_exchange(&w->kept, 0) && w->te->hooked && w->te->hooks.work_end)
        w->te->hooks.work_end(w, 1, w->te->hooks.user);
}

sw_status sw_te_work_on_done(sw_te_work *w, sw_te_work_fn fn, void *user, sw_error *err)
{
    if (!w || !fn)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the work handle and the callback "
                            "must not be NULL");
    pthread_mutex_lock(&notify_lock);
    int now = w->notified || sw_completion_is_done(w->done);
    sw_status st = SW_OK;
    if (w->registered)
        st = sw_error_set(err, SW_ESTATE, "TiledEvictable: this work already has its callback");
    else {
        w->registered = 1;
        if (!now) {
            w->notify = fn;
            w->notify_user = user;
        }
    }
    pthread_mutex_unlock(&notify_lock);
    if (st == SW_OK && now)
        fn(w, user);
    return st;
}

/* Run the registered callback once, on the committing thread. */
static void notify_done(sw_te_work *w)
{
    pthread_mutex_lock(&notify_lock);
    sw_te_work_fn fn = w->notify;
    void *user = w->notify_user;
    w->notify = NULL;
    w->notified = 1;
    pthread_mutex_unlock(&notify_lock);
    if (fn)
        fn(w, user);
}

static void evict_plan(sw_tiled_evictable *te, int64_t *idx, int64_t n, int on_pool);
static sw_status work_new(sw_tiled_evictable *te, sw_te_work **out, sw_error *err);

/* Commit or drop, clear the marks, then wake; drops the job's reference. */
static void finish_work(sw_te_work *w)
{
    sw_error_clear(&w->err);
    if (w->req) {
        te_request *q = w->req;
        w->req = NULL;
        w->status = q->status;
        if (q->status != SW_OK)
            w->err = q->err;
        sw_te_request_finish(w->te, q, &w->track, 0);
    } else {
        te_projection *pj = w->pj;
        w->pj = NULL;
        sw_tensor *out = NULL;
        int64_t *evict = NULL;
        int64_t nevict = sw_te_project_take_evictions(pj, &evict);
        w->status = sw_te_project_finish(w->te, pj, &w->track, 0, &out, &w->err);
        w->result = out;
        /* The policy's evictions, now that the pins are gone: their own
         * work, issued before the handle completes (copies that finish on
         * this thread have landed when it does), never waited for here. */
        if (w->status == SW_OK && nevict > 0)
            evict_plan(w->te, evict, nevict,
                       committing && w->te->hooked && w->te->hooks.copy);
        sw_free(evict);
    }
    w->committed = 1;
    /* Wake the waiters while still tracked: a fork from here on finds the
     * work tracked and done, so the child (no completion thread) drops
     * the job's reference itself and its waiters never block. */
    sw_completion_signal(w->done);
    notify_done(w); /* before the drain count drops: a drain covers it */
    SW_FAULT_PAUSE("tile_commit_pause"); /* tests: fork between the two */
    sw_te_track_leave(&w->track);
    sw_te_work_unref(w); /* the job's reference */
}

/* A projection's policy evictions (`idx`, n tiles; the caller's) as work
 * of their own: those of the tiles free now (neither pinned nor pending)
 * are marked pending, all or none. Their copies are issued on this thread
 * (like evict_start: copies that finish at once have landed when the
 * projection's handle completes); a copy a hook finishes later (a
 * provider's completion) is awaited on the pool. Where a binding's copy
 * hook would run on the completion thread (`on_pool`), nothing is copied
 * there: the pool issues and awaits the copies (like evict_async); the
 * core's own copies (host memory, files) stay on this thread. The completion thread commits either way and
 * never waits for a hook's copy. Counted by the engine from its
 * submission, so drains and exit wait for it. When the pool refuses it
 * (exit began), it runs to the end here. It has no handle: a failure
 * leaves the tiles where they were. */
static void evict_plan(sw_tiled_evictable *te, int64_t *idx, int64_t n, int on_pool)
{
    int64_t m = sw_te_free_tiles(te, idx, n, idx);
    sw_te_work *w = NULL;
    if (m == 0 || work_new(te, &w, NULL) != SW_OK)
        return;
    sw_te_track_enter(&w->track, te);
    w->track.work = w;
    if (sw_te_request_begin(te, idx, m, 1, "evict tiles of", 0, &w->track, &w->req, NULL) !=
        SW_OK) {
        sw_te_track_leave(&w->track);
        sw_te_work_unref(w);
        return;
    }
    sw_te_work *outer = current_work;
    current_work = w;
    w->issued = !on_pool;
    if (w->issued)
        sw_te_request_issue(te, w->req);
    sw_te_work_ref(w); /* the job's reference, dropped when it commits */
    if ((w->issued && !sw_te_request_outstanding(w->req)) ||
        sw_engine_submit(&w->ej, "TiledEvictable", NULL) != SW_OK) {
        if (w->issued)
            sw_te_request_await(w->req);
        else
            sw_te_request_stage(te, w->req);
        finish_work(w); /* never counted: uncounts nothing */
    }
    current_work = outer;
    sw_te_work_unref(w);
}

/* The completion thread, for work the engine counted. */
static void commit(sw_engine_job *job)
{
    unsigned long generation = job->generation; /* read before the work can go */
    committing = 1;
    finish_work((sw_te_work *)job);
    committing = 0;
    sw_engine_uncount(generation);
}

static sw_status work_new(sw_tiled_evictable *te, sw_te_work **out, sw_error *err)
{
    sw_te_work *w = sw_calloc(1, sizeof *w);
    if (w && !(w->done = sw_completion_new())) {
        sw_free(w);
        w = NULL;
    }
    if (!w)
        return sw_error_set(err, SW_ENOMEM, "TiledEvictable: out of memory");
    atomic_init(&w->refs, 1);
    w->ej.run = run_work;
    w->ej.commit = commit;
    w->te = sw_tiled_evictable_ref(te);
    *out = w;
    return SW_OK;
}

/* The work is tracked and its tiles are marked: hand it to the pool. On
 * failure undo the marks (nothing changed) and free it. */
static sw_status submit(sw_te_work *w, sw_te_work **out, sw_error *err)
{
    sw_te_work_ref(w); /* the job's reference, dropped by commit */
    sw_status st;
    if (SW_FAULT_HIT("tile_submit"))
        st = sw_error_set(err, SW_EIO, "TiledEvictable: injected fault: submission failed");
    else
        st = sw_engine_submit(&w->ej, "TiledEvictable", err);
    if (st != SW_OK) {
        if (w->req) {
            w->req->status = st; /* drop, never commit */
            sw_te_request_finish(w->te, w->req, &w->track, 0);
        } else {
            sw_te_project_fail(w->pj, st);
            sw_te_project_finish(w->te, w->pj, &w->track, 0, NULL, NULL);
        }
        w->req = NULL;
        w->pj = NULL;
        sw_te_track_leave(&w->track);
        sw_te_work_unref(w);
        sw_te_work_unref(w);
        return st;
    }
    *out = w;
    return SW_OK;
}

/* Work for a residency request whose tiles are checked, tracked and
 * marked (sw_te_request_begin), not yet issued or submitted. */
static sw_status residency_begin(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                 int evict, sw_te_work **out, sw_error *err)
{
    int64_t *idx = NULL;
    sw_status st = sw_te_residency_indices(te, coords, n, evict, &idx, err);
    sw_te_work *w = NULL;
    if (st == SW_OK && (st = sw_engine_ready("TiledEvictable", err)) == SW_OK)
        st = work_new(te, &w, err);
    if (st != SW_OK) {
        sw_free(idx);
        return st;
    }
    sw_te_track_enter(&w->track, te);
    w->track.work = w;
    st = sw_te_request_begin(te, idx, n, evict, evict ? "evict tiles of" : "promote tiles of",
                             0, &w->track, &w->req, err);
    sw_free(idx);
    if (st != SW_OK) {
        sw_te_track_leave(&w->track);
        sw_te_work_unref(w);
        return st;
    }
    w->copies = w->req->copies;
    *out = w;
    return SW_OK;
}

static sw_status residency_async(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                 int evict, sw_te_work **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: out must not be NULL");
    sw_te_work *w = NULL;
    sw_status st = residency_begin(te, coords, n, evict, &w, err);
    return st == SW_OK ? submit(w, out, err) : st;
}

/* A _start request, its copies issued on the caller: when a hook's copy
 * is still to report, the pool waits for it and the completion thread
 * commits; else (or when the pool refuses it, after the reports) it
 * commits here. The handle is returned either way unless submission
 * failed (then nothing changed and the error is the call's). */
static sw_status submit_issued(sw_te_work *w, sw_te_work **out, sw_error *err)
{
    sw_te_work_ref(w); /* the job's reference, dropped when it commits */
    sw_status st = SW_OK;
    /* The fault is looked at first: whether copies are still outstanding
     * depends on when the hooks report, and a test needs it to hit. */
    if (SW_FAULT_HIT("tile_submit"))
        st = sw_error_set(err, SW_EIO, "TiledEvictable: injected fault: submission failed");
    else if (w->req ? sw_te_request_outstanding(w->req) : sw_te_project_outstanding(w->pj)) {
        st = sw_engine_submit(&w->ej, "TiledEvictable", err);
        if (st == SW_OK) {
            *out = w;
            return SW_OK;
        }
    }
    /* The hooks' copies report before anything is committed or dropped;
     * the engine never counted this work, so its commit here uncounts
     * nothing. */
    if (!w->req) {
        sw_te_project_await(w->te, w->pj, st, err);
    } else {
        sw_te_request_await(w->req);
        if (st != SW_OK && w->req->status == SW_OK) { /* a copy's failure came first */
            w->req->status = st;
            if (err)
                w->req->err = *err;
        }
    }
    finish_work(w);
    if (st != SW_OK) {
        /* The call's error is the work's own (the first failure); what a
         * hook raised for it goes to this thread, nothing is left behind. */
        st = w->status;
        if (err)
            *err = w->err;
        hand_kept_to_caller(w);
        sw_te_work_unref(w);
        return st;
    }
    *out = w;
    return SW_OK;
}

/* A _start call's copies issued on this thread (a hook of other work may
 * call it: the current work is restored after), then submitted. */
static sw_status issue_and_submit(sw_te_work *w, sw_te_work **out, sw_error *err)
{
    w->issued = 1;
    sw_te_work *outer = current_work;
    current_work = w;
    if (w->req) {
        sw_te_request_issue(w->te, w->req);
        w->copies = w->req->copies; /* 0 when the route hook refused */
    } else
        sw_te_project_issue(w->te, w->pj);
    current_work = outer;
    return submit_issued(w, out, err);
}

static sw_status residency_start(sw_tiled_evictable *te, const int64_t *coords, int64_t n,
                                 int evict, sw_te_work **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "TiledEvictable: out must not be NULL");
    sw_te_work *w = NULL;
    sw_status st = residency_begin(te, coords, n, evict, &w, err);
    if (st != SW_OK)
        return st;
    return issue_and_submit(w, out, err);
}

sw_status sw_tiled_evictable_promote_start(sw_tiled_evictable *te, const int64_t *coords,
                                           int64_t n, sw_te_work **out, sw_error *err)
{
    return residency_start(te, coords, n, 0, out, err);
}

sw_status sw_tiled_evictable_evict_start(sw_tiled_evictable *te, const int64_t *coords,
                                         int64_t n, sw_te_work **out, sw_error *err)
{
    return residency_start(te, coords, n, 1, out, err);
}

sw_status sw_tiled_evictable_promote_async(sw_tiled_evictable *te, const int64_t *coords,
                                           int64_t n, sw_te_work **out, sw_error *err)
{
    return residency_async(te, coords, n, 0, out, err);
}

sw_status sw_tiled_evictable_evict_async(sw_tiled_evictable *te, const int64_t *coords,
                                         int64_t n, sw_te_work **out, sw_error *err)
{
    return residency_async(te, coords, n, 1, out, err);
}

/* The opening both project calls share: checks, a work item tracked on `te`
 * and the projection begun (its refusals leave nothing behind). */
static sw_status project_work_begin(sw_tiled_evictable *te, const sw_layout *layout,
                                    int64_t offset, const sw_tile_selection *selection,
                                    sw_carrier *destination, sw_te_work **out,
                                    sw_te_work **work, sw_error *err)
{
    if (!te || !selection || !out)
        return sw_error_set(err, SW_ETYPE, "TiledEvictable: the carrier, the selection and out "
                            "must not be NULL");
    sw_te_work *w = NULL;
    sw_status st = sw_engine_ready("TiledEvictable", err);
    if (st == SW_OK)
        st = work_new(te, &w, err);
    if (st != SW_OK)
        return st;
    sw_te_track_enter(&w->track, te);
    w->track.work = w;
    st = sw_te_project_begin(te, layout, offset, selection, destination, &w->track, &w->pj, err);
    if (st != SW_OK) {
        sw_te_track_leave(&w->track);
        sw_te_work_unref(w);
        return st;
    }
    *work = w;
    return SW_OK;
}

sw_status sw_tiled_evictable_project_async(sw_tiled_evictable *te, const sw_layout *layout,
                                           int64_t offset, const sw_tile_selection *selection,
                                           sw_carrier *destination, sw_te_work **out,
                                           sw_error *err)
{
    sw_te_work *w = NULL;
    sw_status st = project_work_begin(te, layout, offset, selection, destination, out, &w, err);
    return st != SW_OK ? st : submit(w, out, err);
}

sw_status sw_tiled_evictable_project_start(sw_tiled_evictable *te, const sw_layout *layout,
                                           int64_t offset, const sw_tile_selection *selection,
                                           sw_carrier *destination, sw_te_work **out,
                                           sw_error *err)
{
    sw_te_work *w = NULL;
    sw_status st = project_work_begin(te, layout, offset, selection, destination, out, &w, err);
    if (st != SW_OK)
        return st;
    return issue_and_submit(w, out, err);
}
