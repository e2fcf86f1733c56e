/* What the core keeps per thread, in one thread-local block: every
 * function of a shared library that touches a thread-local pays a call to
 * __tls_get_addr for it, so a move's path takes the block's address once
 * and passes it on (a small move touched three of them). */
#ifndef STRIDEWEAVE_CORE_THREAD_INTERNAL_H
#define STRIDEWEAVE_CORE_THREAD_INTERNAL_H

typedef struct sw_core_thread {
    /* An engine thread (pool, completion), or inside a move's transfer or
     * commit run here: exit does not wait for the drain (move.c). */
    int engine;
    /* Large file closes are deferred to the reaper: a move's source
     * release (sw_filestore_defer_large_closes, filestore.c). */
    int defer_large_closes;
    /* Host blocks the reuse caches refuse are freed by a background
     * thread: a move's source release (alloc_excess.c). */
    int defer_frees;
} sw_core_thread;

extern _Thread_local sw_core_thread sw_core_thread_state __attribute__((visibility("hidden")));

/* Start a detached thread running main(arg) with every signal blocked, so
 * that signals go to the application's threads (core_thread.c); 0, or the
 * pthread_create error. */
int sw_thread_start_detached(void *(*main)(void *), void *arg);

#endif
