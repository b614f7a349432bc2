/*-------------------------------------------------------------------------
 *
 * session_state.h
 *	  fencing.allow_session_state: whether this session may declare tokens
 *	  and take locks that outlive a transaction.
 *
 * IDENTIFICATION
 *	  src/session_state.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_SESSION_STATE_H
#define FENCING_SESSION_STATE_H

extern void session_state_init(void);
extern void session_state_check(const char *form);

#endif							/* FENCING_SESSION_STATE_H */
