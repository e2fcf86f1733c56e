/* The move engine's profiling subscribers (move.h, "Profiling hooks"),
 * shared by move.c and move_profile.c only (never installed). */
#ifndef SW_MOVE_PROFILE_INTERNAL_H
#define SW_MOVE_PROFILE_INTERNAL_H

#include "strideweave/move.h"

/* An immutable snapshot of the subscribers, refcounted: a move takes the
 * one current at its submission and keeps it until its handle goes, so
 * a subscriber removed meanwhile still gets that move's COMPLETE. */
typedef struct sw_move_hooks sw_move_hooks;

/* The current snapshot with one more reference, or NULL when nobody
 * subscribes (one atomic load: most moves observe no hook). */
sw_move_hooks *sw_move_hooks_take(void);
void sw_move_hooks_drop(sw_move_hooks *h);
/* Hand `ev` to every subscriber of `h`; ev->tag is `tag` for the one
 * whose function is `tag_hook` (every one when `tag_hook` is NULL), NULL
 * for the others: a tag is its owner's record, which no one else reads. */
void sw_move_hooks_emit(const sw_move_hooks *h, sw_move_event *ev, sw_move_profile_fn tag_hook,
                        void *tag);
/* After fork() in the child: the lock made fresh (the list stays). */
void sw_move_hooks_after_fork_child(void);

#endif
