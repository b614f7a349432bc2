/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *	  What the extension needs of the PostgreSQL version it is built
 *	  against, in one place.
 *
 * PostgreSQL 15 is the oldest supported: MarkGUCPrefixReserved(), the
 * MERGE command (CMD_MERGE) and shmem_request_hook are all new in 15.  The
 * Makefile refuses an older server with a message; this refuses a build
 * that goes around the Makefile.  Newer versions are untested; where
 * their C API differs from 15's, the difference is bridged here.
 *
 * IDENTIFICATION
 *	  src/pg_compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_PG_COMPAT_H
#define FENCING_PG_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "fencing needs PostgreSQL 15 or later"
#endif

/* PostgreSQL 17 moved the local transaction id into MyProc->vxid. */
#if PG_VERSION_NUM >= 170000
#define FencingLocalTransactionId() (MyProc->vxid.lxid)
#else
#define FencingLocalTransactionId() (MyProc->lxid)
#endif

/* PostgreSQL 18 added log_lock_failure, and an argument for it. */
#if PG_VERSION_NUM >= 180000
#define FencingConditionalXactLockTableWait(xid) \
	ConditionalXactLockTableWait((xid), false)
#else
#define FencingConditionalXactLockTableWait(xid) \
	ConditionalXactLockTableWait(xid)
#endif

#endif							/* FENCING_PG_COMPAT_H */
