/*-------------------------------------------------------------------------
 *
 * attach.h
 *	  Guarding an existing table (attach.c) and seeding its marks from the
 *	  rows it holds (attach_seed.c).
 *
 * IDENTIFICATION
 *	  src/attach.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_ATTACH_H
#define FENCING_ATTACH_H

extern const char *attach_table_sql(Oid relid);
extern int64 attach_seed(Oid relid, Oid extnsp, const char *token_column,
						 const char *resource_sql, const char *notnull_sql);

#endif							/* FENCING_ATTACH_H */
