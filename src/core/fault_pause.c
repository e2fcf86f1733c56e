/* Pause points for tests (fault-injection builds): a thread reaching an
 * armed pause point stops there, with whatever locks it holds, until the
 * test resumes it, so that a test can fork or observe at a known point
 * without sleeping. Armed like any fault: sw_fault_arm(name, skip, count). */
#include "fork_internal.h"
#include "strideweave/alloc.h"
#include "strideweave/testing.h"

#include <pthread.h>

SW_FORK_LINKED;

static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pause_cv = PTHREAD_COND_INITIALIZER;
static int paused;                 /* threads stopped at a pause point */
static unsigned long resume_gen;   /* bumped by sw_fault_resume */

/* The child of fork() has none of the paused threads. */
void sw_fault_pause_fork_child(void)
{
    pthread_mutex_init(&pause_mu, NULL);
    pthread_cond_init(&pause_cv, NULL);
    paused = 0;
}

void sw_fault_pause(const char *name)
{
    if (!sw_fault_hit(name))
        return;
    pthread_mutex_lock(&pause_mu);
    unsigned long gen = resume_gen;
    paused++;
    pthread_cond_broadcast(&pause_cv);
    while (resume_gen == gen)
        pthread_cond_wait(&pause_cv, &pause_mu);
    paused--;
    pthread_mutex_unlock(&pause_mu);
}

sw_status sw_fault_wait_paused(void)
{
    if (!sw_fault_enabled()) /* nothing ever pauses: waiting would hang */
        return SW_ENOTSUP;
    pthread_mutex_lock(&pause_mu);
    while (paused == 0)
        pthread_cond_wait(&pause_cv, &pause_mu);
    pthread_mutex_unlock(&pause_mu);
    return SW_OK;
}

void sw_fault_resume(void)
{
    pthread_mutex_lock(&pause_mu);
    resume_gen++;
    pthread_cond_broadcast(&pause_cv);
    pthread_mutex_unlock(&pause_mu);
}
