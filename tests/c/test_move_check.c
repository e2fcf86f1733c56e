/* Which row refused a move (move.h, sw_move_refusal): sw_move_check and
 * sw_move_async name the row of the validation table in its order, and
 * nothing changes after a refusal (no growth, no pending mark, no handle,
 * no profiling record). A binding's answers for a STATE_ONLY carrier
 * (dtype, mutability, size) take part in the core's rows. */
#include <string.h>

#include "check.h"
#include "helpers.h"
#include <strideweave/strideweave.h>
#include <strideweave/binding.h>

static const sw_carrier_class binding_class = {
    .name = "BindingCarrier", .flags = SW_CARRIER_CLASS_STATE_ONLY,
};

static sw_carrier *state_only(void)
{
    sw_carrier *c = NULL;
    sw_carrier_new(&binding_class, NULL, SW_DT_ANY, 0, &c, NULL);
    return c;
}

static sw_carrier *cpu(int64_t n, sw_dtype dt)
{
    sw_carrier *c = NULL;
    sw_cpu_new(n, dt, 0, &c, NULL);
    return c;
}

static sw_carrier *immutable(int64_t n, sw_dtype dt)
{
    int32_t values[8] = {0};
    sw_carrier *c = NULL;
    sw_generic_new(values, n, dt, SW_CARRIER_IMMUTABLE, &c, NULL);
    return c;
}

/* What a refusal must leave alone. */
typedef struct snap {
    int released, pending, is_mutable, owned;
    int64_t size;
    uint64_t version;
} snap;

static snap take(sw_carrier *c)
{
    snap s = {0};
    if (c)
        s = (snap){sw_carrier_is_released(c), sw_carrier_is_pending(c),
                   sw_carrier_is_mutable(c), sw_carrier_is_owned(c), sw_carrier_size(c),
                   sw_carrier_version(c)};
    return s;
}

static int same(snap a, snap b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static int submits;

static void on_profile(const sw_move_event *ev, void *user)
{
    (void)user;
    if (ev->kind == SW_MOVE_EVENT_SUBMIT)
        __atomic_fetch_add(&submits, 1, __ATOMIC_SEQ_CST);
}

/* sw_move_check answers `row` with `want`, and so does sw_move_async
 * (err->detail) unless `args` holds a binding's answers or flags only
 * sw_move_check takes; both leave the carriers as they were. */
static void expect_row(sw_carrier *src, sw_carrier *dst, const sw_move_check_args *args,
                       sw_status want, sw_move_refusal row, int also_async, int line)
{
    snap s0 = take(src), d0 = take(dst);
    sw_error err = {0};
    sw_move_refusal got = (sw_move_refusal)-1;
    int grows = -1;
    sw_status st = sw_move_check(src, dst, args, &got, &grows, &err);
    if (st != want || got != row || err.detail != (int)row)
        fprintf(stderr, "line %d: check got %d row %d detail %d (%s), want %d row %d\n", line,
                (int)st, (int)got, err.detail, err.msg, (int)want, (int)row);
    CHECK(st == want);
    CHECK(got == row);
    CHECK(err.detail == (int)row);
    CHECK(grows == 0);
    CHECK(same(take(src), s0) && same(take(dst), d0));
    if (!also_async)
        return;
    sw_tensor *t = src && !sw_carrier_is_state_only(src) && !sw_carrier_is_released(src)
                       ? flat_tensor(src, args->cosize)
                       : NULL;
    sw_move_handle *m = NULL;
    int before = submits;
    sw_error aerr = {0};
    if (t || !src) {
        st = sw_move_async(t, dst, NULL, &m, &aerr);
    } else {
        uint8_t profile[1] = {SW_NODE_LEAF};
        int64_t ext[1] = {args->cosize};
        sw_layout *l = sw_layout_canonical(1, profile, ext, NULL);
        st = sw_move_span_async(src, 0, l, dst, NULL, &m, &aerr);
        sw_layout_free(l);
    }
    if (st != want || aerr.detail != (int)row)
        fprintf(stderr, "line %d: move got %d detail %d (%s), want %d row %d\n", line, (int)st,
                aerr.detail, aerr.msg, (int)want, (int)row);
    CHECK(st == want);
    CHECK(aerr.detail == (int)row);
    CHECK(m == NULL);
    CHECK(submits == before);
    CHECK(same(take(src), s0) && same(take(dst), d0));
    sw_tensor_unref(t);
}

#define ROW(src, dst, args, want, row) expect_row(src, dst, args, want, row, 1, __LINE__)
#define CHECK_ONLY(src, dst, args, want, row) expect_row(src, dst, args, want, row, 0, __LINE__)

/* Each case breaks its own row and every later one it can, so the row
 * named proves the order. */
static void test_rows_in_table_order(void)
{
    sw_error err;
    uint64_t token;
    sw_move_check_args four = {.cosize = 4};
    sw_carrier *src = cpu(4, SW_DT_FLOAT32);
    sw_carrier *bad_dst = immutable(1, SW_DT_INT32); /* immutable, Int32, too small */

    /* row 1 */
    ROW(NULL, bad_dst, &four, SW_ETYPE, SW_MOVE_NO_SOURCE);
    /* row 2: before anything about the destination */
    sw_carrier *rel = cpu(4, SW_DT_FLOAT32);
    sw_tensor *trel = flat_tensor(rel, 4);
    sw_carrier_release(rel, &err);
    CHECK_ONLY(rel, NULL, &four, SW_ESTATE, SW_MOVE_SOURCE_RELEASED);
    CHECK_ONLY(rel, bad_dst, &four, SW_ESTATE, SW_MOVE_SOURCE_RELEASED);
    sw_move_handle *m = NULL;
    sw_error aerr = {0};
    CHECK(sw_move_async(trel, NULL, NULL, &m, &aerr) == SW_ESTATE && m == NULL);
    CHECK(aerr.detail == SW_MOVE_SOURCE_RELEASED);
    CHECK(sw_move_async(trel, bad_dst, NULL, &m, &aerr) == SW_ESTATE && m == NULL);
    CHECK(aerr.detail == SW_MOVE_SOURCE_RELEASED);
    /* row 3: owned, no owner access */
    CHECK(sw_carrier_claim(src, &token, &err) == SW_OK);
    ROW(src, bad_dst, &four, SW_ESTATE, SW_MOVE_SOURCE_OWNED);
    CHECK(sw_carrier_relinquish(src, token, &err) == SW_OK);
    /* row 3: pending in another move (held before its transfer) */
    sw_carrier *held_src = cpu(4, SW_DT_FLOAT32), *held_dst = cpu(4, SW_DT_FLOAT32);
    sw_tensor *theld = flat_tensor(held_src, 4);
    sw_move_hold(1);
    CHECK(sw_move_async(theld, held_dst, NULL, &m, &err) == SW_OK);
    ROW(held_src, bad_dst, &four, SW_ESTATE, SW_MOVE_SOURCE_PENDING);
    ROW(held_dst, bad_dst, &four, SW_ESTATE, SW_MOVE_SOURCE_PENDING);
    /* a STATE_ONLY source without a supplied transfer */
    sw_carrier *so_src = state_only(), *so_dst = state_only();
    ROW(so_src, bad_dst, &four, SW_ENOTSUP, SW_MOVE_SOURCE_STATE_ONLY);
    /* row 4 */
    ROW(src, NULL, &four, SW_ETYPE, SW_MOVE_NO_DESTINATION);
    /* row 5 */
    ROW(src, src, &four, SW_EINVAL, SW_MOVE_SAME_CARRIER);
    /* a STATE_ONLY destination without a supplied transfer */
    ROW(src, so_dst, &four, SW_ENOTSUP, SW_MOVE_DESTINATION_STATE_ONLY);
    /* row 6 */
    sw_carrier *drel = immutable(1, SW_DT_INT32);
    sw_carrier_release(drel, &err);
    ROW(src, drel, &four, SW_ESTATE, SW_MOVE_DESTINATION_RELEASED);
    /* row 7: pending, owned, immutable, in that order */
    sw_carrier *dint = cpu(1, SW_DT_INT32);
    ROW(src, held_dst, &four, SW_ESTATE, SW_MOVE_DESTINATION_PENDING);
    CHECK(sw_carrier_claim(dint, &token, &err) == SW_OK);
    ROW(src, dint, &four, SW_ESTATE, SW_MOVE_DESTINATION_OWNED);
    CHECK(sw_carrier_relinquish(dint, token, &err) == SW_OK);
    ROW(src, bad_dst, &four, SW_ESTATE, SW_MOVE_DESTINATION_IMMUTABLE);
    /* row 8 (and too small) */
    ROW(src, dint, &four, SW_ETYPE, SW_MOVE_DTYPE_MISMATCH);
    /* row 9: a TiledEvictable never moves; OWN_ROUTE leaves it to the caller */
    int64_t grid[1] = {2}, tile[1] = {2}; /* 4 slots */
    sw_carrier *p = cpu(4, SW_DT_FLOAT32), *s2 = cpu(0, SW_DT_FLOAT32), *tec = NULL;
    sw_tiled_evictable *te = NULL;
    if (sw_tiled_evictable_new(p, s2, 1, grid, tile, &te, &err) != SW_OK)
        fprintf(stderr, "tiled: %s\n", err.msg);
    CHECK(te != NULL);
    CHECK(sw_tiled_evictable_carrier(te, &tec, &err) == SW_OK);
    sw_move_check_args eight = {.cosize = 8};
    sw_carrier *src8 = cpu(8, SW_DT_FLOAT32);
    ROW(src8, tec, &eight, SW_ENOTSUP, SW_MOVE_ROUTE_REFUSED);
    sw_move_check_args own = {.cosize = 8, .flags = SW_MOVE_CHECK_OWN_ROUTE};
    CHECK_ONLY(src8, tec, &own, SW_EINVAL, SW_MOVE_TOO_SMALL);
    /* row 10 */
    sw_carrier *small = cpu(3, SW_DT_FLOAT32);
    ROW(src, small, &four, SW_EINVAL, SW_MOVE_TOO_SMALL);

    sw_move_hold(0);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK);
    sw_move_unref(m);
    sw_tensor_unref(theld);
    sw_tensor_unref(trel);
    sw_carrier_release(tec, &err);
    sw_carrier *all[] = {src, bad_dst, rel, held_src, held_dst, so_src, so_dst, drel,
                         dint, p, s2, tec, small, src8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sw_carrier_unref(all[i]);
    sw_tiled_evictable_unref(te);
}

/* Accepted: SW_OK, no row, and whether the move would grow an empty
 * destination; still nothing changed. */
static void test_accepted_says_whether_it_grows(void)
{
    sw_error err = {0};
    sw_move_check_args four = {.cosize = 4};
    sw_carrier *src = cpu(4, SW_DT_FLOAT32), *big = cpu(4, SW_DT_FLOAT32), *fb = NULL;
    CHECK(sw_file_backed_new(NULL, SW_DT_FLOAT32, 0, &fb, &err) == SW_OK);
    sw_move_refusal row = (sw_move_refusal)-1;
    int grows = -1;
    CHECK(sw_move_check(src, big, &four, &row, &grows, &err) == SW_OK);
    CHECK(row == SW_MOVE_ACCEPTED && grows == 0);
    snap f0 = take(fb);
    CHECK(sw_move_check(src, fb, &four, &row, &grows, &err) == SW_OK);
    CHECK(row == SW_MOVE_ACCEPTED && grows == 1);
    CHECK(same(take(fb), f0) && sw_carrier_size(fb) == 0);
    CHECK(sw_move_check(src, fb, &four, NULL, NULL, &err) == SW_OK);
    CHECK(sw_move_check(src, fb, NULL, &row, NULL, &err) == SW_EINVAL);
    sw_carrier_unref(src);
    sw_carrier_unref(big);
    sw_carrier_unref(fb);
}

/* A binding's answers for STATE_ONLY carriers: rows 7, 8 and 10 use them,
 * and each row is skipped without its answer. */
static void test_binding_answers_for_state_only(void)
{
    sw_carrier *src = cpu(4, SW_DT_FLOAT32), *so = state_only(), *so_src = state_only();
    unsigned supplied = SW_MOVE_CHECK_SUPPLIED;
    sw_move_check_args none = {.cosize = 4, .flags = supplied};
    CHECK_ONLY(src, so, &none, SW_OK, SW_MOVE_ACCEPTED);
    sw_move_check_args frozen = {.cosize = 4,
                                 .flags = supplied | SW_MOVE_CHECK_DST_MUTABILITY |
                                          SW_MOVE_CHECK_DST_DTYPE,
                                 .dst_immutable = 1,
                                 .dst_dtype = SW_DT_INT32};
    CHECK_ONLY(src, so, &frozen, SW_ESTATE, SW_MOVE_DESTINATION_IMMUTABLE);
    frozen.dst_immutable = 0;
    CHECK_ONLY(src, so, &frozen, SW_ETYPE, SW_MOVE_DTYPE_MISMATCH);
    frozen.dst_dtype = SW_DT_FLOAT32;
    CHECK_ONLY(src, so, &frozen, SW_OK, SW_MOVE_ACCEPTED);
    /* the values' dtype against a core destination, from a STATE_ONLY source */
    sw_move_check_args values = {.cosize = 4, .flags = supplied | SW_MOVE_CHECK_DTYPE,
                                 .dtype = SW_DT_INT32};
    CHECK_ONLY(so_src, src, &values, SW_ETYPE, SW_MOVE_DTYPE_MISMATCH);
    values.dtype = SW_DT_FLOAT32;
    CHECK_ONLY(so_src, so, &values, SW_OK, SW_MOVE_ACCEPTED);
    /* size: too small, or empty and able to grow */
    sw_move_check_args sized = {.cosize = 4, .flags = supplied | SW_MOVE_CHECK_DST_SIZE,
                                .dst_slots = 2};
    CHECK_ONLY(src, so, &sized, SW_EINVAL, SW_MOVE_TOO_SMALL);
    sized.dst_slots = 0;
    CHECK_ONLY(src, so, &sized, SW_EINVAL, SW_MOVE_TOO_SMALL);
    sized.dst_grows = 1;
    sw_move_refusal row;
    int grows = 0;
    sw_error err;
    CHECK(sw_move_check(src, so, &sized, &row, &grows, &err) == SW_OK && grows == 1);
    sw_carrier_unref(src);
    sw_carrier_unref(so);
    sw_carrier_unref(so_src);
}

/* Any later failure resets the row: err->detail is 0 for a failure that
 * is no row of the table. */
static void test_other_failures_name_no_row(void)
{
    sw_error err = {0};
    sw_move_check_args four = {.cosize = 4};
    sw_move_refusal row;
    CHECK(sw_move_check(NULL, NULL, &four, &row, NULL, &err) == SW_ETYPE);
    CHECK(err.detail == SW_MOVE_NO_SOURCE);
    sw_carrier *src = cpu(4, SW_DT_FLOAT32);
    uint8_t profile[1] = {SW_NODE_LEAF};
    int64_t ext[1] = {4};
    sw_layout *l = sw_layout_canonical(1, profile, ext, NULL);
    sw_move_handle *m = NULL;
    /* a span past the carrier's end: the tensor's own check, no row */
    CHECK(sw_move_span_async(src, 2, l, NULL, NULL, &m, &err) != SW_OK);
    CHECK(err.detail == 0 && m == NULL);
    sw_error_set(&err, SW_EIO, "x");
    CHECK(err.detail == 0);
    sw_layout_free(l);
    sw_carrier_unref(src);
}

/* Row 7: a destination pending in a move is refused even on the thread
 * that runs that move's transfer (its transfer access lets its slot writes
 * through the pending guard, not a second move, whose commit would clear
 * the first one's mark). */
typedef struct inside {
    sw_carrier *dst, *other;
    sw_status st;
    int detail;
    sw_move_handle *second;
} inside;

static void transfer_then_move(sw_move_handle *m, void *user)
{
    inside *in = user;
    sw_error err = {0};
    sw_tensor *t = flat_tensor(in->other, 4);
    sw_carrier_begin_transfer(in->dst);
    in->st = sw_move_async(t, in->dst, NULL, &in->second, &err);
    in->detail = err.detail;
    sw_carrier_end_transfer(in->dst);
    sw_tensor_unref(t);
    sw_move_transfer_done(m, SW_OK, NULL);
}

static void test_destination_pending_on_its_transfer_thread(void)
{
    sw_error err = {0};
    sw_carrier *src = cpu(4, SW_DT_FLOAT32);
    inside in = {.dst = cpu(4, SW_DT_FLOAT32), .other = cpu(4, SW_DT_FLOAT32)};
    sw_tensor *t = flat_tensor(src, 4);
    sw_move_options o = {.transfer = transfer_then_move, .user = &in, .no_result = 1};
    sw_move_handle *m = NULL;
    CHECK(sw_move_async(t, in.dst, &o, &m, &err) == SW_OK);
    CHECK(sw_move_wait(m, NULL, &err) == SW_OK);
    CHECK(in.st == SW_ESTATE && in.detail == SW_MOVE_DESTINATION_PENDING);
    CHECK(in.second == NULL);
    CHECK(!sw_carrier_is_released(in.other) && !sw_carrier_is_pending(in.other));
    if (in.second) {
        sw_move_wait(in.second, NULL, &err);
        sw_move_unref(in.second);
    }
    sw_move_unref(m);
    sw_tensor_unref(t);
    sw_carrier_unref(src);
    sw_carrier_unref(in.dst);
    sw_carrier_unref(in.other);
}

int main(void)
{
    sw_move_set_profile_hook(on_profile, NULL);
    test_rows_in_table_order();
    test_accepted_says_whether_it_grows();
    test_binding_answers_for_state_only();
    test_other_failures_name_no_row();
    test_destination_pending_on_its_transfer_thread();
    sw_move_set_profile_hook(NULL, NULL);
    return check_report("move_check");
}
