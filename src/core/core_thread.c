/* The core's background threads (core_thread_internal.h). */
#include "core_thread_internal.h"

#include <pthread.h>
#include <signal.h>

int sw_thread_start_detached(void *(*main)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the application's threads */
    pthread_t t;
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&t, &attr, main, arg);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
