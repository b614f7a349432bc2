/*-------------------------------------------------------------------------
 *
 * attach.h
 *	  Seeding the marks of a table that joins a fenced hierarchy.
 *
 * IDENTIFICATION
 *	  src/attach.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef ATTACH_H
#define ATTACH_H

extern int64 attach_seed_joined(Oid relid, Oid extnsp, Oid guard);

#endif							/* ATTACH_H */
