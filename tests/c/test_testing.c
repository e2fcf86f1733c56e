/* strideweave/testing.h, the fault-injection switchboard, as a test sees it:
 * built against the installed headers only and linked to the shared
 * library, in a build with fault injection and in one without (where
 * every call exists and answers "off" at once). */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "strideweave/status.h"
#include "strideweave/testing.h"

/* Without fault injection: nothing arms, hits, pauses or waits. */
static void test_disabled_answers_off(void)
{
    CHECK(sw_fault_arm("alloc", 0, 1) == SW_ENOTSUP);
    CHECK(sw_fault_hit("alloc") == 0);
    CHECK(sw_fault_armed("alloc") == 0);
    sw_fault_pause("alloc");                    /* returns: never hit */
    CHECK(sw_fault_wait_paused() == SW_ENOTSUP); /* returns: nothing pauses */
    sw_fault_resume();
    sw_fault_clear();
}

/* Bad names and counts are refused; the table holds 8 names. */
static void test_arm_refusals(void)
{
    char longname[33];
    memset(longname, 'x', 32);
    longname[32] = '\0';
    CHECK(sw_fault_arm(longname, 0, 1) == SW_EINVAL);
    CHECK(sw_fault_arm(NULL, 0, 1) == SW_EINVAL);
    CHECK(sw_fault_arm("a", -1, 1) == SW_EINVAL);
    char name[8] = "slot_0";
    for (int i = 0; i < 8; i++) {
        name[5] = (char)('0' + i);
        CHECK(sw_fault_arm(name, 0, 1) == SW_OK);
    }
    CHECK(sw_fault_arm("slot_9", 0, 1) == SW_ENOMEM);
    CHECK(sw_fault_arm("slot_0", 0, 2) == SW_OK); /* re-arming replaces */
    sw_fault_clear();
}

/* armed looks without consuming; hit consumes skip, then count. */
static void test_armed_is_a_look(void)
{
    CHECK(sw_fault_arm("op", 1, 1) == SW_OK);
    CHECK(sw_fault_armed("op") && sw_fault_armed("op"));
    CHECK(!sw_fault_hit("op")); /* skipped */
    CHECK(sw_fault_hit("op"));
    CHECK(!sw_fault_armed("op") && !sw_fault_hit("op"));
    CHECK(!sw_fault_armed("other"));
    sw_fault_clear();
}

static void *pauser(void *arg)
{
    (void)arg;
    sw_fault_pause("test_pause");
    return NULL;
}

/* A thread stops at an armed pause point until resumed. */
static void test_pause_point(void)
{
    CHECK(sw_fault_arm("test_pause", 0, 1) == SW_OK);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, pauser, NULL) == 0);
    CHECK(sw_fault_wait_paused() == SW_OK);
    sw_fault_clear();
    sw_fault_resume();
    CHECK(pthread_join(t, NULL) == 0);
}

int main(void)
{
    if (!sw_fault_enabled()) {
        test_disabled_answers_off();
        return check_report("testing (fault injection off)");
    }
    test_arm_refusals();
    test_armed_is_a_look();
    test_pause_point();
    return check_report("testing");
}
