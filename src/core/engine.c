#include "engine_internal.h"

#include <pthread.h>
#include <stdio.h>

void sw_engine_start(sw_executor **pool, void *(*completion)(void *), const char *what,
                     sw_status *status, char *msg, size_t msg_size)
{
    sw_error err;
    if (sw_executor_create(0, pool, &err) != SW_OK) {
        *pool = NULL;
        *status = err.code;
        snprintf(msg, msg_size, "%s", err.msg);
        return;
    }
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, completion, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        sw_executor_destroy(*pool);
        *pool = NULL;
        *status = SW_EIO;
        snprintf(msg, msg_size, "cannot start the %s", what);
    }
}
