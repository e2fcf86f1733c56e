/* Carrier classes made at run time (carrier.h, "Classes made at run
 * time"): a refcounted copy of a template, for a binding whose classes can
 * be collected while core carriers of theirs live on. */
#include "strideweave/carrier.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "strideweave/alloc.h"

/* The table comes first, so a class pointer is the box's address. */
typedef struct class_box {
    sw_carrier_class cls;
    _Atomic long refs;
    char name[]; /* the copied name */
} class_box;

static class_box *box_of(const sw_carrier_class *cls)
{
    return (class_box *)(void *)((char *)cls - offsetof(class_box, cls));
}

static int refcounted(const sw_carrier_class *cls)
{
    return cls && (cls->flags & SW_CARRIER_CLASS_REFCOUNTED);
}

sw_status sw_carrier_class_new(const sw_carrier_class *tmpl, const sw_carrier_class **out,
                               sw_error *err)
{
    if (!tmpl || !out)
        return sw_error_set(err, SW_ETYPE, "carrier class: a template and out, not NULL");
    size_t len = tmpl->name ? strlen(tmpl->name) + 1 : 0;
    class_box *b = sw_calloc(1, sizeof *b + len);
    if (!b)
        return sw_error_set(err, SW_ENOMEM, "carrier class: out of memory");
    b->cls = *tmpl;
    if (tmpl->name)
        b->cls.name = memcpy(b->name, tmpl->name, len);
    b->cls.flags |= SW_CARRIER_CLASS_REFCOUNTED;
    atomic_init(&b->refs, 1);
    *out = &b->cls;
    return SW_OK;
}

const sw_carrier_class *sw_carrier_class_ref(const sw_carrier_class *cls)
{
    if (refcounted(cls))
        atomic_fetch_add_explicit(&box_of(cls)->refs, 1, memory_order_relaxed);
    return cls;
}

void sw_carrier_class_unref(const sw_carrier_class *cls)
{
    if (!refcounted(cls))
        return;
    /* acq_rel: every use of the class by a thread that dropped its
     * reference happens before the free. */
    if (atomic_fetch_sub_explicit(&box_of(cls)->refs, 1, memory_order_acq_rel) == 1)
        sw_free(box_of(cls));
}
