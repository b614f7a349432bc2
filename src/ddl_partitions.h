/*-------------------------------------------------------------------------
 *
 * ddl_partitions.h
 *	  The TRUNCATE guards of partitions, cloned from their parents'.
 *
 * IDENTIFICATION
 *	  src/ddl_partitions.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DDL_PARTITIONS_H
#define DDL_PARTITIONS_H

#include "nodes/parsenodes.h"

extern int	ddl_clone_truncate_guards(Oid relid, Oid truncate_guard);
extern void ddl_clones_follow(Oid relid, const char *tgname,
							  Oid truncate_guard);
extern void ddl_make_room_for_trigger(CreateTrigStmt *stmt,
									  Oid truncate_guard);

#endif							/* DDL_PARTITIONS_H */
