/* The carrier handle: refcount, release, version, mutability, ownership
 * claims and the pending guard, the same for every ops table. One mutex
 * per carrier; ops callbacks run under it except during a move's transfer
 * (move.c), which the pending guard protects instead. */
#include "carrier_internal.h"

#include <stddef.h>
#include <string.h>

#include "strideweave/alloc.h"
#include "blockdev_internal.h"
#include "strideweave/block_device.h"

/* What a move reads of a carrier lies in the struct's first two cache
 * lines (carrier_internal.h); sw_calloc starts it on a line. */
#define IN_TWO_LINES(f) \
    (offsetof(struct sw_carrier, f) + sizeof(((struct sw_carrier *)0)->f) <= 2 * 64)
_Static_assert(IN_TWO_LINES(version) && IN_TWO_LINES(owner_token) && IN_TWO_LINES(exports) &&
                   IN_TWO_LINES(access_thread) && IN_TWO_LINES(transfer_depth) &&
                   IN_TWO_LINES(pending_dst) &&
                   offsetof(struct sw_carrier, inline_impl) + 16 <= 2 * 64,
               "the fields a move reads fit in two cache lines");
_Static_assert(SW_ALIGNMENT % 64 == 0, "a carrier starts on a cache line");

static uint64_t next_token(void)
{
    static _Atomic uint64_t counter = 1;
    return atomic_fetch_add(&counter, 1);
}

/* sw_carrier_new's checks of the ops table and dtype. */
static sw_status check_class(const sw_carrier_class *ops, sw_dtype dtype, sw_error *err)
{
    if (!ops)
        return sw_error_set(err, SW_EINVAL, "carrier: the ops table must not be NULL");
    int state_only = (ops->flags & SW_CARRIER_CLASS_STATE_ONLY) != 0;
    if ((ops->flags & SW_CARRIER_CLASS_SLOTS_UNLOCKED) &&
        (!state_only || !ops->read_slots))
        return sw_error_set(err, SW_EINVAL,
                            "carrier: a SLOTS_UNLOCKED class is STATE_ONLY and needs read_slots");
    if ((ops->flags & SW_CARRIER_CLASS_WRITES_STEP_VERSION) &&
        (!(ops->flags & SW_CARRIER_CLASS_SLOTS_UNLOCKED) || !ops->write_slots))
        return sw_error_set(err, SW_EINVAL,
                            "carrier: a WRITES_STEP_VERSION class is SLOTS_UNLOCKED with "
                            "write_slots");
    if (!state_only && (!ops->size || !ops->read || !ops->write || !ops->release))
        return sw_error_set(err, SW_EINVAL,
                            "carrier: the ops table needs size, read, write and release");
    if ((int)dtype < 0 || dtype >= SW_DT_COUNT ||
        (!state_only && sw_dtype_slot_bytes(dtype) == 0))
        return sw_error_set(err, SW_EINVAL, "carrier: dtype %d has no storage slots",
                            (int)dtype);
    return SW_OK;
}

/* A checked carrier of `ops` with impl `impl`, or with its inline area
 * as the impl when `impl` is NULL; `who` names it in the out-of-memory
 * message. */
static sw_status carrier_make(const sw_carrier_class *ops, void *impl, sw_dtype dtype, int flags,
                              const char *who, sw_carrier **out, sw_error *err)
{
    sw_carrier *c = sw_calloc(1, sizeof *c);
    if (!c)
        return sw_error_set(err, SW_ENOMEM, "%s: out of memory", who);
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        sw_free(c);
        return sw_error_set(err, SW_ENOMEM, "%s: cannot create its mutex", who);
    }
    c->ops = sw_carrier_class_ref(ops); /* a run-time class lives while its carriers do */
    c->impl = impl ? impl : (void *)c->inline_impl.bytes;
    c->dtype = dtype;
    atomic_init(&c->refs, 1);
    c->intrinsic_mutable = !(flags & SW_CARRIER_IMMUTABLE);
    *out = c;
    return SW_OK;
}

sw_status sw_carrier_new(const sw_carrier_class *ops, void *impl, sw_dtype dtype, int flags,
                         sw_carrier **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "carrier: out must not be NULL");
    sw_status st = check_class(ops, dtype, err);
    return st != SW_OK ? st : carrier_make(ops, impl, dtype, flags, "carrier", out, err);
}

sw_status sw_carrier_new_inline(const sw_carrier_class *ops, size_t impl_bytes, sw_dtype dtype,
                                int flags, sw_carrier **out, sw_error *err)
{
    if (!out)
        return sw_error_set(err, SW_EINVAL, "carrier: out must not be NULL");
    if (impl_bytes > SW_CARRIER_INLINE_IMPL)
        return sw_error_set(err, SW_EINVAL, "carrier: an inline impl takes at most %d bytes",
                            SW_CARRIER_INLINE_IMPL);
    sw_status st = check_class(ops, dtype, err);
    return st != SW_OK ? st : carrier_make(ops, NULL, dtype, flags, ops->name ? ops->name : "carrier",
                                           out, err);
}

sw_carrier *sw_carrier_ref(sw_carrier *c)
{
    if (c)
        atomic_fetch_add(&c->refs, 1);
    return c;
}

void sw_carrier_unref(sw_carrier *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    /* Last reference: no export, move or tensor can reach it any more
     * (each holds a reference). */
    if (!c->storage_freed && c->ops->release)
        c->ops->release(c->impl);
    if (c->ops->destroy)
        c->ops->destroy(c->impl);
    pthread_mutex_destroy(&c->lock);
    sw_carrier_class_unref(c->ops);
    sw_free(c);
}

void sw_carrier_lock_pair(sw_carrier *a, sw_carrier *b)
{
    if ((uintptr_t)a > (uintptr_t)b) {
        sw_carrier *t = a;
        a = b;
        b = t;
    }
    pthread_mutex_lock(&a->lock);
    pthread_mutex_lock(&b->lock);
}

void sw_carrier_unlock_pair(sw_carrier *a, sw_carrier *b)
{
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_unlock(&b->lock);
}

/* ---- state ---------------------------------------------------------------- */

static int has_access_locked(sw_carrier *c)
{
    return c->owner_token && c->access_depth > 0 &&
           pthread_equal(c->access_thread, pthread_self());
}

int sw_carrier_in_transfer_locked(sw_carrier *c)
{
    return c->transfer_depth > 0 && pthread_equal(c->transfer_thread, pthread_self());
}

/* The one exception to the pending guard: a move's own transfer writes its
 * destination. */
static int transfer_may_write_locked(sw_carrier *c)
{
    return c->pending_dst && !c->pending_src && sw_carrier_in_transfer_locked(c);
}

int sw_carrier_owned_blocks_locked(sw_carrier *c)
{
    return c->owner_token && !has_access_locked(c);
}

int sw_carrier_mutable_locked(sw_carrier *c)
{
    return c->intrinsic_mutable && !sw_carrier_owned_blocks_locked(c) &&
           ((!c->pending_src && !c->pending_dst) || transfer_may_write_locked(c));
}

#define LOCKED_GETTER(type, name, expr)      \
    type name(sw_carrier *c)                 \
    {                                        \
        pthread_mutex_lock(&c->lock);        \
        type v = (expr);                     \
        pthread_mutex_unlock(&c->lock);      \
        return v;                            \
    }

LOCKED_GETTER(int64_t, sw_carrier_size,
              c->released || SW_CARRIER_STATE_ONLY(c) ? 0 : c->ops->size(c->impl))
LOCKED_GETTER(uint64_t, sw_carrier_version, c->version)
LOCKED_GETTER(int, sw_carrier_is_released, c->released)
LOCKED_GETTER(int, sw_carrier_is_mutable, sw_carrier_mutable_locked(c))
LOCKED_GETTER(int, sw_carrier_is_owned, c->owner_token != 0)
LOCKED_GETTER(int, sw_carrier_is_pending, c->pending_src || c->pending_dst)
LOCKED_GETTER(int, sw_carrier_has_owner_access, has_access_locked(c))

const sw_carrier_class *sw_carrier_class_of(sw_carrier *c) { return c->ops; }
int sw_carrier_is_state_only(sw_carrier *c) { return SW_CARRIER_STATE_ONLY(c); }
int sw_carrier_slots_unlocked(sw_carrier *c) { return SW_CARRIER_SLOTS_UNLOCKED(c); }

int sw_carrier_endpoint(sw_carrier *c, sw_endpoint *out)
{
    if (!c || !out)
        return 0;
    *out = (sw_endpoint){.kind = SW_ENDPOINT_HOST, .host = NULL, .fd = -1, .offset = 0};
    if (c->ops == &sw_cpu_class || c->ops == &sw_generic_class) {
        out->host = c->ops == &sw_cpu_class ? sw_cpu_pointer(c) : sw_generic_pointer(c);
        return 1;
    }
    if (c->ops == &sw_file_backed_class) {
        out->kind = SW_ENDPOINT_FILE;
        out->fd = sw_file_backed_fd(c);
        return 1;
    }
    if (sw_block_device_carrier_endpoint(c, out))
        return 1;
    if (SW_CARRIER_STATE_ONLY(c) || !c->ops->storage)
        return 0;
    sw_carrier_storage st;
    pthread_mutex_lock(&c->lock);
    int known = !c->released && c->ops->storage(c->impl, &st, NULL) == SW_OK;
    pthread_mutex_unlock(&c->lock);
    if (known)
        *out = (sw_endpoint){.kind = st.kind, .host = st.host, .fd = st.fd, .offset = 0};
    return known;
}

sw_status sw_carrier_refuse_state_only(sw_carrier *c, const char *what, sw_error *err)
{
    return sw_error_set(err, SW_ENOTSUP,
                        "%s: cannot %s: the carrier's slots are kept by its language binding, "
                        "so reach them through the binding",
                        sw_carrier_name(c), what);
}
const char *sw_carrier_name(sw_carrier *c) { return c->ops->name ? c->ops->name : "Carrier"; }
sw_dtype sw_carrier_dtype(sw_carrier *c) { return c->dtype; }

sw_status sw_carrier_check_tier_pair(sw_carrier *primary, sw_carrier *secondary, sw_error *err)
{
    if (!primary || !secondary)
        return sw_error_set(err, SW_ETYPE, "the %s tier must be a carrier, not NULL",
                            primary ? "secondary" : "primary");
    if (primary == secondary)
        return sw_error_set(err, SW_EINVAL, "primary and secondary must be different carriers");
    sw_carrier *tiers[2] = {primary, secondary};
    const char *roles[2] = {"primary", "secondary"};
    for (int i = 0; i < 2; i++)
        if (sw_carrier_is_released(tiers[i]))
            return sw_error_set(err, SW_ESTATE, "the %s %s carrier is released", roles[i],
                                sw_carrier_name(tiers[i]));
    for (int i = 0; i < 2; i++)
        if (sw_carrier_is_owned(tiers[i]))
            return sw_error_set(err, SW_ESTATE,
                                "the %s %s carrier is already owned by another composite",
                                roles[i], sw_carrier_name(tiers[i]));
    return SW_OK;
}

/* ---- slot access ---------------------------------------------------------- */

/* `st` (already set in err) refused by rule `why`: err->detail names it. */
static sw_status refused(sw_error *err, sw_status st, sw_carrier_refusal why)
{
    if (err)
        err->detail = (int)why;
    return st;
}

/* [slot, slot + count) within a carrier of `size` slots. */
static sw_status check_range(sw_carrier *c, int64_t size, int64_t slot, int64_t count,
                             sw_error *err)
{
    int64_t end;
    if (slot < 0 || count < 0 || __builtin_add_overflow(slot, count, &end) || end > size)
        return refused(err,
                       sw_error_set(err, SW_ERANGE,
                                    "%s: slots [%lld, %lld + %lld) are out of range for size %lld",
                                    sw_carrier_name(c), (long long)slot, (long long)slot,
                                    (long long)count, (long long)size),
                       SW_CARRIER_REFUSED_RANGE);
    return SW_OK;
}

/* The read rule that refuses `c` now, in sw_carrier_read's order; 0 when
 * none does. */
static int read_refusal_locked(sw_carrier *c)
{
    if (c->released)
        return SW_CARRIER_REFUSED_RELEASED;
    if (c->pending_dst && !sw_carrier_in_transfer_locked(c))
        return SW_CARRIER_REFUSED_PENDING;
    return 0;
}

sw_status sw_carrier_check_readable_locked(sw_carrier *c, sw_error *err)
{
    switch (read_refusal_locked(c)) {
    case 0:
        return SW_OK;
    case SW_CARRIER_REFUSED_RELEASED:
        return sw_carrier_refuse_released(c, 0, err);
    default:
        return refused(err,
                       sw_error_set(err, SW_ESTATE,
                                    "%s: the carrier is the destination of a pending move; "
                                    "wait for the move before reading it",
                                    sw_carrier_name(c)),
                       SW_CARRIER_REFUSED_PENDING);
    }
}

/* The write rule that refuses `c` now, in sw_carrier_write's order; 0 when
 * none does. */
static int write_refusal_locked(sw_carrier *c)
{
    if (c->released)
        return SW_CARRIER_REFUSED_RELEASED;
    if ((c->pending_src || c->pending_dst) && !transfer_may_write_locked(c))
        return SW_CARRIER_REFUSED_PENDING;
    if (sw_carrier_owned_blocks_locked(c))
        return SW_CARRIER_REFUSED_OWNED;
    if (!c->intrinsic_mutable)
        return SW_CARRIER_REFUSED_IMMUTABLE;
    return 0;
}

/* What a write refused by rule `why` cannot be done to. */
static const char *unwritable_words(int why)
{
    switch (why) {
    case SW_CARRIER_REFUSED_RELEASED:
        return "a released carrier";
    case SW_CARRIER_REFUSED_PENDING:
        return "a carrier taking part in a pending move; wait for the move first";
    case SW_CARRIER_REFUSED_OWNED:
        return "a carrier owned by another carrier";
    default:
        return "an immutable carrier";
    }
}

sw_status sw_carrier_refuse_released(sw_carrier *c, int writing, sw_error *err)
{
    if (writing)
        return refused(err,
                       sw_error_set(err, SW_ESTATE, "%s: cannot write to %s", sw_carrier_name(c),
                                    unwritable_words(SW_CARRIER_REFUSED_RELEASED)),
                       SW_CARRIER_REFUSED_RELEASED);
    return refused(err,
                   sw_error_set(err, SW_ESTATE, "%s: the carrier is released", sw_carrier_name(c)),
                   SW_CARRIER_REFUSED_RELEASED);
}

sw_status sw_carrier_check_writable_locked(sw_carrier *c, const char *what, sw_error *err)
{
    int why = write_refusal_locked(c);
    if (!why)
        return SW_OK;
    return refused(err,
                   sw_error_set(err, SW_ESTATE, "%s: cannot %s %s", sw_carrier_name(c), what,
                                unwritable_words(why)),
                   (sw_carrier_refusal)why);
}

/* The class's words for why the live carrier cannot reach its slots now
 * (carrier.h: `unavailable`); a STATE_ONLY class is never called. */
static sw_status check_reachable_locked(sw_carrier *c, sw_error *err)
{
    const char *why = !c->released && !SW_CARRIER_STATE_ONLY(c) && c->ops->unavailable
                          ? c->ops->unavailable(c->impl)
                          : NULL;
    if (!why)
        return SW_OK;
    return refused(err, sw_error_set(err, SW_ESTATE, "%s", why), SW_CARRIER_REFUSED_UNAVAILABLE);
}

/* The checks of a slot access in carrier.h's order: released,
 * unavailable, the write's or the read's state rules, then (where the
 * core holds the slots) the range of [slot, slot + count). *size_seen:
 * the size compared against (0 released, -1 STATE_ONLY: not checked). */
static sw_status check_slots_locked(sw_carrier *c, int writing, int64_t slot, int64_t count,
                                    int64_t *size_seen, sw_error *err)
{
    *size_seen = c->released ? 0 : SW_CARRIER_STATE_ONLY(c) ? -1 : c->ops->size(c->impl);
    sw_status st = check_reachable_locked(c, err);
    /* the rules first, the words only for a refusal (a read or write that
     * is let through pays for no call) */
    if (st == SW_OK && (writing ? write_refusal_locked(c) : read_refusal_locked(c)))
        st = writing ? sw_carrier_check_writable_locked(c, "write to", err)
                     : sw_carrier_check_readable_locked(c, err);
    if (st == SW_OK && *size_seen >= 0)
        st = check_range(c, *size_seen, slot, count, err);
    return st;
}

static sw_status check_span(sw_carrier *c, int writing, int64_t slot, int64_t count,
                            int64_t *size_seen, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    int64_t size;
    pthread_mutex_lock(&c->lock);
    sw_status st = check_slots_locked(c, writing, slot, count, &size, err);
    pthread_mutex_unlock(&c->lock);
    if (size_seen)
        *size_seen = size;
    return st;
}

static sw_status check_slot(sw_carrier *c, int writing, int64_t slot, int64_t *size_seen,
                            sw_error *err)
{
    return check_span(c, writing, slot, 1, size_seen, err);
}

sw_status sw_carrier_check_slots(sw_carrier *c, int writing, int64_t slot, int64_t count,
                                 sw_error *err)
{
    return check_span(c, writing, slot, count, NULL, err);
}

sw_status sw_carrier_check_write_slot(sw_carrier *c, int64_t slot, int64_t *size_seen,
                                      sw_error *err)
{
    return check_slot(c, 1, slot, size_seen, err);
}

sw_status sw_carrier_check_read_slot(sw_carrier *c, int64_t slot, int64_t *size_seen,
                                     sw_error *err)
{
    return check_slot(c, 0, slot, size_seen, err);
}

sw_status sw_carrier_read(sw_carrier *c, int64_t slot, int64_t count, void *out,
                          sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    int64_t size;
    pthread_mutex_lock(&c->lock);
    sw_status st = check_slots_locked(c, 0, slot, count, &size, err);
    if (st == SW_OK && SW_CARRIER_STATE_ONLY(c))
        st = sw_carrier_refuse_state_only(c, "read slots", err);
    else if (st == SW_OK && count > 0)
        st = c->ops->read(c->impl, slot, count, out, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_carrier_write(sw_carrier *c, int64_t slot, int64_t count, const void *in,
                           sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    int64_t size;
    pthread_mutex_lock(&c->lock);
    sw_status st = check_slots_locked(c, 1, slot, count, &size, err);
    if (st == SW_OK && SW_CARRIER_STATE_ONLY(c))
        st = sw_carrier_refuse_state_only(c, "write slots", err);
    if (st == SW_OK && count > 0)
        st = c->ops->write(c->impl, slot, count, in, err);
    if (st == SW_OK && !sw_carrier_in_transfer_locked(c))
        c->version++;
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_carrier_increment_version(sw_carrier *c, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    pthread_mutex_lock(&c->lock);
    sw_status st = sw_carrier_check_writable_locked(c, "advance the version of", err);
    if (st == SW_OK && !sw_carrier_in_transfer_locked(c))
        c->version++;
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- growth --------------------------------------------------------------- */

sw_status sw_carrier_check_growable_locked(sw_carrier *c, const char *what, int owner,
                                          sw_error *err)
{
    if (c->released)
        return refused(err,
                       sw_error_set(err, SW_ESTATE, "%s: cannot %s a released carrier",
                                    sw_carrier_name(c), what),
                       SW_CARRIER_REFUSED_RELEASED);
    if (c->pending_src || c->pending_dst)
        return refused(err,
                       sw_error_set(err, SW_ESTATE,
                                    "%s: cannot %s a carrier taking part in a pending move; "
                                    "wait for the move first",
                                    sw_carrier_name(c), what),
                       SW_CARRIER_REFUSED_PENDING);
    if (owner && sw_carrier_owned_blocks_locked(c))
        return refused(err,
                       sw_error_set(err, SW_ESTATE,
                                    "%s: cannot %s a carrier owned by another carrier",
                                    sw_carrier_name(c), what),
                       SW_CARRIER_REFUSED_OWNED);
    if (SW_CARRIER_STATE_ONLY(c))
        return sw_carrier_refuse_state_only(c, what, err);
    if (!c->ops->allocate || !c->ops->unallocate)
        return sw_error_set(err, SW_EINVAL, "%s: the carrier cannot %s its storage",
                            sw_carrier_name(c), what);
    return SW_OK;
}

/* sw_carrier_allocate's checks in its order; *size: the size the shrink
 * check compared against (0 when refused before it). */
static sw_status check_allocate_locked(sw_carrier *c, int64_t slots, int64_t *size,
                                       sw_error *err)
{
    *size = 0;
    sw_status st = sw_carrier_check_growable_locked(c, "grow", 1, err);
    if (st != SW_OK)
        return st;
    *size = c->ops->size(c->impl);
    if (slots < *size)
        return refused(err,
                       sw_error_set(err, SW_EINVAL,
                                    "%s: cannot shrink the carrier from %lld to %lld slots",
                                    sw_carrier_name(c), (long long)*size, (long long)slots),
                       SW_CARRIER_REFUSED_SHRINK);
    return SW_OK;
}

sw_status sw_carrier_check_allocate(sw_carrier *c, int64_t slots, int64_t *size_seen,
                                    sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    int64_t size;
    pthread_mutex_lock(&c->lock);
    sw_status st = check_allocate_locked(c, slots, &size, err);
    pthread_mutex_unlock(&c->lock);
    if (size_seen)
        *size_seen = size;
    return st;
}

sw_status sw_carrier_allocate(sw_carrier *c, int64_t slots, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    int64_t size;
    pthread_mutex_lock(&c->lock);
    sw_status st = check_allocate_locked(c, slots, &size, err);
    if (st == SW_OK && slots > size)
        st = c->ops->allocate(c->impl, slots, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_carrier_unallocate(sw_carrier *c, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    pthread_mutex_lock(&c->lock);
    sw_status st = sw_carrier_check_growable_locked(c, "shrink", 0, err);
    if (st == SW_OK)
        st = c->ops->unallocate(c->impl, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- release -------------------------------------------------------------- */

void sw_carrier_release_locked(sw_carrier *c)
{
    c->released = 1;
    if (!c->storage_freed && c->exports == 0) {
        if (c->ops->release)
            c->ops->release(c->impl);
        c->storage_freed = 1;
    }
}

/* The rule that refuses a release of `c` now, in carrier.h's order
 * (pending, then with check_owner owned without owner access here); 0
 * when none does. A released carrier is checked too: releasing it again
 * is let through only where a first release would be. */
static int release_refusal_locked(sw_carrier *c, int check_owner)
{
    if (c->pending_src || c->pending_dst)
        return SW_CARRIER_REFUSED_PENDING;
    if (check_owner && sw_carrier_owned_blocks_locked(c))
        return SW_CARRIER_REFUSED_OWNED;
    return 0;
}

static sw_status refuse_release(sw_carrier *c, int why, sw_error *err)
{
    if (why == SW_CARRIER_REFUSED_PENDING)
        return refused(err,
                       sw_error_set(err, SW_ESTATE,
                                    "%s: cannot release a carrier taking part in a pending "
                                    "move; wait for the move first",
                                    sw_carrier_name(c)),
                       SW_CARRIER_REFUSED_PENDING);
    return refused(err,
                   sw_error_set(err, SW_ESTATE,
                                "%s: cannot release a carrier owned by another carrier",
                                sw_carrier_name(c)),
                   SW_CARRIER_REFUSED_OWNED);
}

/* Release unless refused (release_refusal_locked); idempotent. */
static sw_status release_checked(sw_carrier *c, int check_owner, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    pthread_mutex_lock(&c->lock);
    int why = release_refusal_locked(c, check_owner);
    sw_status st = why ? refuse_release(c, why, err) : SW_OK;
    if (!why && !c->released)
        sw_carrier_release_locked(c);
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_carrier_release(sw_carrier *c, sw_error *err)
{
    return release_checked(c, 1, err);
}

sw_status sw_carrier_check_release(sw_carrier *c, int *released_seen, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    pthread_mutex_lock(&c->lock);
    int why = release_refusal_locked(c, 1);
    sw_status st = why ? refuse_release(c, why, err) : SW_OK;
    int released = c->released;
    pthread_mutex_unlock(&c->lock);
    if (released_seen)
        *released_seen = released;
    return st;
}

void sw_carrier_export_begin_locked(sw_carrier *c)
{
    c->exports++;
}

void sw_carrier_export_end(sw_carrier *c)
{
    pthread_mutex_lock(&c->lock);
    /* The last export of a carrier released meanwhile frees its storage
     * now: until here a consumer could still address it. */
    if (--c->exports == 0 && c->released && !c->storage_freed) {
        if (c->ops->release)
            c->ops->release(c->impl);
        c->storage_freed = 1;
    }
    pthread_mutex_unlock(&c->lock);
}

/* ---- ownership claims ----------------------------------------------------- */

sw_status sw_carrier_claim(sw_carrier *c, uint64_t *token, sw_error *err)
{
    if (!c || !token)
        return sw_error_set(err, SW_ETYPE, "carrier and token must not be NULL");
    pthread_mutex_lock(&c->lock);
    sw_status st = SW_OK;
    if (c->released)
        st = refused(err,
                     sw_error_set(err, SW_ESTATE, "%s: cannot claim a released carrier",
                                  sw_carrier_name(c)),
                     SW_CARRIER_REFUSED_RELEASED);
    else if (c->owner_token)
        st = refused(err,
                     sw_error_set(err, SW_ESTATE,
                                  "%s: the carrier is already owned by another carrier",
                                  sw_carrier_name(c)),
                     SW_CARRIER_REFUSED_OWNED);
    else if (c->pending_src || c->pending_dst)
        st = refused(err,
                     sw_error_set(err, SW_ESTATE,
                                  "%s: cannot claim a carrier taking part in a pending move",
                                  sw_carrier_name(c)),
                     SW_CARRIER_REFUSED_PENDING);
    else {
        c->owner_token = next_token();
        c->claims++;
        c->access_depth = 0;
        *token = c->owner_token;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static sw_status check_token_locked(sw_carrier *c, uint64_t token, sw_error *err)
{
    if (!c->owner_token || token != c->owner_token)
        return refused(err,
                       sw_error_set(err, SW_ESTATE, "%s: wrong ownership token",
                                    sw_carrier_name(c)),
                       SW_CARRIER_REFUSED_TOKEN);
    return SW_OK;
}

sw_status sw_carrier_relinquish(sw_carrier *c, uint64_t token, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    pthread_mutex_lock(&c->lock);
    sw_status st = check_token_locked(c, token, err);
    if (st == SW_OK) {
        c->owner_token = 0;
        c->access_depth = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_carrier_begin_owner_access(sw_carrier *c, uint64_t token, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    pthread_mutex_lock(&c->lock);
    sw_status st = check_token_locked(c, token, err);
    if (st == SW_OK) {
        if (c->access_depth > 0 && !pthread_equal(c->access_thread, pthread_self()))
            st = refused(err,
                         sw_error_set(err, SW_ESTATE,
                                      "%s: another thread holds owner access to the carrier",
                                      sw_carrier_name(c)),
                         SW_CARRIER_REFUSED_ACCESS_ELSEWHERE);
        else {
            c->access_thread = pthread_self();
            c->access_depth++;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

sw_status sw_carrier_end_owner_access(sw_carrier *c, uint64_t token, sw_error *err)
{
    if (!c)
        return sw_error_set(err, SW_ETYPE, "carrier must not be NULL");
    pthread_mutex_lock(&c->lock);
    sw_status st = check_token_locked(c, token, err);
    if (st == SW_OK && !has_access_locked(c))
        st = refused(err,
                     sw_error_set(err, SW_ESTATE, "%s: this thread holds no owner access",
                                  sw_carrier_name(c)),
                     SW_CARRIER_REFUSED_NO_ACCESS);
    if (st == SW_OK)
        c->access_depth--;
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- a binding's own move engine ------------------------------------------ */

LOCKED_GETTER(int, sw_carrier_pending_roles,
              (c->pending_src ? SW_CARRIER_PENDING_SOURCE : 0) |
                  (c->pending_dst ? SW_CARRIER_PENDING_DESTINATION : 0))
LOCKED_GETTER(int, sw_carrier_in_transfer, sw_carrier_in_transfer_locked(c))

void sw_carrier_get_state(sw_carrier *c, sw_carrier_state *out)
{
    pthread_mutex_lock(&c->lock);
    out->version = c->version;
    out->released = c->released;
    out->pending = (c->pending_src ? SW_CARRIER_PENDING_SOURCE : 0) |
                   (c->pending_dst ? SW_CARRIER_PENDING_DESTINATION : 0);
    out->owned = c->owner_token != 0;
    out->owner_access = has_access_locked(c);
    out->in_transfer = sw_carrier_in_transfer_locked(c);
    out->claims = c->claims;
    pthread_mutex_unlock(&c->lock);
}

void sw_carrier_mark_pending(sw_carrier *c, int roles)
{
    pthread_mutex_lock(&c->lock);
    if (roles & SW_CARRIER_PENDING_SOURCE)
        c->pending_src = 1;
    if (roles & SW_CARRIER_PENDING_DESTINATION)
        c->pending_dst = 1;
    pthread_mutex_unlock(&c->lock);
}

void sw_carrier_unmark_pending(sw_carrier *c, int roles)
{
    pthread_mutex_lock(&c->lock);
    if (roles & SW_CARRIER_PENDING_SOURCE)
        c->pending_src = 0;
    if (roles & SW_CARRIER_PENDING_DESTINATION)
        c->pending_dst = 0;
    pthread_mutex_unlock(&c->lock);
}

void sw_carrier_begin_transfer(sw_carrier *c)
{
    pthread_mutex_lock(&c->lock);
    c->transfer_thread = pthread_self();
    c->transfer_depth++;
    pthread_mutex_unlock(&c->lock);
}

void sw_carrier_end_transfer(sw_carrier *c)
{
    pthread_mutex_lock(&c->lock);
    if (sw_carrier_in_transfer_locked(c))
        c->transfer_depth--;
    pthread_mutex_unlock(&c->lock);
}

sw_status sw_carrier_release_moved(sw_carrier *c, sw_error *err)
{
    /* ownership was checked when the move started */
    return release_checked(c, 0, err);
}

void sw_carrier_drop_inherited_access(sw_carrier *c)
{
    pthread_mutex_lock(&c->lock);
    if (c->access_depth > 0 && !pthread_equal(c->access_thread, pthread_self()))
        c->access_depth = 0;
    if (c->transfer_depth > 0 && !pthread_equal(c->transfer_thread, pthread_self()))
        c->transfer_depth = 0;
    pthread_mutex_unlock(&c->lock);
}
