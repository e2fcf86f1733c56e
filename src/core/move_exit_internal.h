/* The move engine's exit drain, shared with the session directory's exit
 * cleanup (filestore.c) so that no file goes while a move still uses it,
 * whichever of the two exit handlers was registered first. */
#ifndef SW_MOVE_EXIT_INTERNAL_H
#define SW_MOVE_EXIT_INTERNAL_H

/* Refuse new moves, then wait for every move in flight to commit (not on
 * the engine's own threads). Idempotent. */
void sw_move_exit_drain(void);

#endif
