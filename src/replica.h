/*-------------------------------------------------------------------------
 *
 * replica.h
 *	  Fenced tables on a logical-replication subscriber.
 *
 * IDENTIFICATION
 *	  src/replica.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REPLICA_H
#define REPLICA_H

#include "core/core.h"

extern bool replica_applying(void);
extern void replica_raise(Oid extnsp, const char *resource, FenceToken token);

#endif							/* REPLICA_H */
