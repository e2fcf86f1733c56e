/* The options' commit check (move.h, sw_move_options.commit_check): the
 * binding answers for the destination inside the core's commit, after the
 * commit guard is entered and before the source is released. A refusal
 * fails the move as a failed transfer does: the source live with its
 * values and version, both marks cleared, a growth undone, on_commit and
 * the COMPLETE event carrying the failure. Covered on every path that
 * commits: a move on the pool, a light move on its caller, a supplied
 * transfer into a STATE_ONLY destination (a Python carrier's case), and a
 * growth of an empty FileBacked. */
#include <string.h>

#include "check.h"
#include <strideweave/strideweave.h>

#define BIG (1 << 15)  /* 128 KiB of Int32: past the caller's line, on the pool */
#define SMALL 16       /* a light move, on its caller */

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

/* What the hooks saw, in order: 'e'nter, 'c'heck, 'o'n_commit, 'l'eave. */
typedef struct ctx {
    sw_carrier *src, *dst;
    sw_status answer;       /* the check's */
    int fill;               /* the check fills err */
    char order[8];
    int n;
    int pending_at_check;   /* both carriers still pending in the check */
    int src_live_at_check;
    sw_status committed;
    int result_at_commit;   /* on_commit got a result */
} ctx;

static void note(ctx *c, char what)
{
    if (c->n < (int)sizeof c->order - 1)
        c->order[c->n++] = what;
}

static void enter(void *user)
{
    note(user, 'e');
}

static void leave(void *user)
{
    note(user, 'l');
}

static sw_status check(sw_move_handle *m, void *user, sw_error *err)
{
    (void)m;
    ctx *c = user;
    note(c, 'c');
    c->pending_at_check = sw_carrier_is_pending(c->src) && sw_carrier_is_pending(c->dst);
    c->src_live_at_check = !sw_carrier_is_released(c->src);
    if (c->answer != SW_OK && c->fill)
        return sw_error_set(err, c->answer, "binding: the destination shrank");
    return c->answer;
}

static void on_commit(sw_move_handle *m, sw_status st, sw_tensor *result, void *user)
{
    (void)m;
    ctx *c = user;
    note(c, 'o');
    c->committed = st;
    c->result_at_commit = result != NULL;
}

/* The transfer a binding supplies, reported inside the call. */
static void supplied(sw_move_handle *m, void *user)
{
    (void)user;
    sw_move_transfer_done(m, SW_OK, NULL);
}

static sw_move_options options_for(ctx *c)
{
    sw_move_options o = {.on_commit = on_commit, .user = c, .commit_enter = enter,
                         .commit_leave = leave, .commit_check = check};
    return o;
}

static sw_carrier *cpu_values(int64_t n)
{
    sw_error err;
    sw_carrier *c = NULL;
    if (sw_cpu_new(n, SW_DT_INT32, 0, &c, &err) != SW_OK)
        return NULL;
    int32_t *p = sw_cpu_pointer(c);
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)(100 + i);
    return c;
}

static int values_intact(sw_carrier *c, int64_t n)
{
    const int32_t *p = sw_cpu_pointer(c);
    for (int64_t i = 0; i < n; i++)
        if (p[i] != (int32_t)(100 + i))
            return 0;
    return 1;
}

static sw_tensor *whole(sw_carrier *c, int64_t n)
{
    sw_error err;
    sw_tensor *t = NULL;
    int64_t ext[1] = {n};
    CHECK(sw_tensor_new_strided(c, 0, 1, ext, NULL, &t, &err) == SW_OK);
    return t;
}

/* A move of `n` slots from a CPU source into c->dst (`supply`: with a
 * supplied transfer), its check answering c->answer; the move's status. */
static sw_status run_move(ctx *c, int64_t n, int supply, sw_error *err)
{
    sw_move_options o = options_for(c);
    if (supply) {
        o.transfer = supplied;
        o.dst_slots = n;
        o.no_result = 1;
    }
    sw_tensor *t = whole(c->src, n);
    sw_move_handle *m = NULL;
    sw_status st = sw_move_async(t, c->dst, &o, &m, err);
    sw_tensor_unref(t); /* the move holds its own */
    CHECK(st == SW_OK);
    if (st != SW_OK)
        return st;
    sw_tensor *r = NULL;
    st = sw_move_wait(m, &r, err);
    CHECK(st == SW_OK ? r != NULL || supply : r == NULL);
    sw_tensor_unref(r);
    sw_move_unref(m);
    return st;
}

/* A refusal keeps the source live and unchanged, on each path. */
static void test_refusal_keeps_the_source(int64_t n, int supply)
{
    sw_error err;
    ctx c = {.answer = SW_ESTATE, .fill = 1, .src = cpu_values(n)};
    sw_carrier *dst = NULL;
    if (supply)
        CHECK(sw_carrier_new(&binding_class, NULL, SW_DT_INT32, 0, &dst, &err) == SW_OK);
    else
        CHECK(sw_cpu_new(n, SW_DT_INT32, 0, &dst, &err) == SW_OK);
    c.dst = dst;
    uint64_t src_version = sw_carrier_version(c.src), dst_version = sw_carrier_version(dst);
    CHECK(run_move(&c, n, supply, &err) == SW_ESTATE);
    CHECK_MSG(err, "binding: the destination shrank");
    CHECK(strcmp(c.order, "ecol") == 0);
    CHECK(c.pending_at_check && c.src_live_at_check);
    CHECK(c.committed == SW_ESTATE && !c.result_at_commit);
    CHECK(!sw_carrier_is_released(c.src));
    CHECK(!sw_carrier_is_pending(c.src) && !sw_carrier_is_pending(dst));
    CHECK(sw_carrier_version(c.src) == src_version);
    CHECK(sw_carrier_version(dst) == dst_version);
    CHECK(values_intact(c.src, n));
    /* The source moves again, with a check that agrees this time. */
    ctx again = {.answer = SW_OK, .src = c.src, .dst = dst};
    CHECK(run_move(&again, n, supply, &err) == SW_OK);
    CHECK(strcmp(again.order, "ecol") == 0);
    CHECK(again.committed == SW_OK && again.src_live_at_check);
    CHECK(sw_carrier_is_released(c.src));
    sw_carrier_unref(c.src);
    sw_carrier_unref(dst);
}

/* A check that refuses without a message gets the core's words. */
static void test_refusal_without_a_message(void)
{
    sw_error err;
    ctx c = {.answer = SW_ESTATE, .src = cpu_values(SMALL)};
    CHECK(sw_cpu_new(SMALL, SW_DT_INT32, 0, &c.dst, &err) == SW_OK);
    CHECK(run_move(&c, SMALL, 0, &err) == SW_ESTATE);
    CHECK_MSG(err, "move: the CPU destination cannot take the result");
    CHECK(!sw_carrier_is_released(c.src) && !sw_carrier_is_pending(c.src));
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* An empty FileBacked the move grew goes back to empty on a refusal. */
static void test_refusal_undoes_the_growth(void)
{
    sw_error err;
    ctx c = {.answer = SW_ESTATE, .fill = 1, .src = cpu_values(BIG)};
    CHECK(sw_file_backed_new(NULL, SW_DT_INT32, 0, &c.dst, &err) == SW_OK);
    CHECK(run_move(&c, BIG, 0, &err) == SW_ESTATE);
    CHECK(c.n > 1 && c.order[1] == 'c');
    CHECK_EQ_I64(sw_carrier_size(c.dst), 0);
    CHECK(!sw_carrier_is_released(c.src) && values_intact(c.src, BIG));
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

/* A supplied transfer that fails, reported inside the call. */
static void supplied_failing(sw_move_handle *m, void *user)
{
    (void)user;
    sw_error e;
    sw_error_set(&e, SW_EIO, "binding: the copy failed");
    sw_move_transfer_done(m, SW_EIO, &e);
}

/* A failed transfer is the move's failure already: no check is asked. */
static void test_no_check_after_a_failed_transfer(void)
{
    sw_error err;
    ctx c = {.answer = SW_OK, .src = cpu_values(SMALL)};
    CHECK(sw_carrier_new(&binding_class, NULL, SW_DT_INT32, 0, &c.dst, &err) == SW_OK);
    sw_move_options o = options_for(&c);
    o.transfer = supplied_failing;
    o.dst_slots = SMALL;
    o.no_result = 1;
    sw_tensor *t = whole(c.src, SMALL);
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, c.dst, &o, &m, &err) == SW_OK);
    CHECK(sw_move_wait(m, NULL, &err) == SW_EIO);
    CHECK_MSG(err, "binding: the copy failed");
    CHECK(strcmp(c.order, "eol") == 0);
    CHECK(!sw_carrier_is_released(c.src) && !sw_carrier_is_pending(c.src));
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(c.src);
    sw_carrier_unref(c.dst);
}

int main(void)
{
    test_refusal_keeps_the_source(BIG, 0);
    test_refusal_keeps_the_source(SMALL, 0);
    test_refusal_keeps_the_source(SMALL, 1);
    test_refusal_without_a_message();
    test_refusal_undoes_the_growth();
    test_no_check_after_a_failed_transfer();
    return check_report("move_commit_check");
}
