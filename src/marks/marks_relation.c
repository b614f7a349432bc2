/*-------------------------------------------------------------------------
 *
 * marks_relation.c
 *	  The marks table's relation, fence_high_water: found through the
 *	  extension, its shape checked once per relcache entry, opened with its
 *	  primary key for marks_table.c's reads and marks_write.c's writes.
 *
 * The table is found through the extension, not the search path, and its
 * shape (a logged heap; its columns by name and type; a primary key on
 * the resource, a btree under the "C" collation) is checked before it is
 * read or written: a table altered by hand would otherwise be misread or
 * corrupted.
 *
 * IDENTIFICATION
 *	  src/marks/marks_relation.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "fencing_errcodes.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#define MARKS_TABLE "fence_high_water"

/*
 * The marks table, found once per backend through the extension, and
 * whether its shape has been checked, with the primary key checked; all
 * forgotten when the relcache entry of the table or of that index is
 * invalidated (DROP EXTENSION, ALTER TABLE, a catalog edited by hand).
 */
static Oid	marks_relid_cache = InvalidOid;
static Oid	marks_pkey_checked = InvalidOid;
static bool marks_shape_checked = false;

/* The size of the table for marks_fetch, and when it was read. */
static BlockNumber nblocks = 0;
static LocalTransactionId nblocks_lxid = InvalidLocalTransactionId;
static SubTransactionId nblocks_subid = InvalidSubTransactionId;

/* What the caller of marks_table_init remembers of the table's rows. */
static void (*marks_forget_versions) (void) = NULL;

/* Forget where the marks table is when its relcache entry goes. */
static void
marks_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == marks_relid_cache ||
		relid == marks_pkey_checked)
	{
		marks_relid_cache = InvalidOid;
		marks_pkey_checked = InvalidOid;
		marks_shape_checked = false;
		nblocks_lxid = InvalidLocalTransactionId;

		/*
		 * The table may have been truncated or rewritten: a remembered
		 * version's address may now hold another row.
		 */
		marks_forget_versions();
	}
}

/*
 * marks_table_init
 *		Register the cache invalidation; forget_versions is called when
 *		remembered addresses of rows may have become wrong.
 */
void
marks_table_init(void (*forget_versions) (void))
{
	marks_forget_versions = forget_versions;
	CacheRegisterRelcacheCallback(marks_relcache_callback, (Datum) 0);
}

/*
 * marks_relid
 *		The marks table of the installed extension, wherever its schema is.
 *		Looked up on first use and after an invalidation of the table, as
 *		pg_cron finds its job table.
 */
Oid
marks_relid(void)
{
	if (!OidIsValid(marks_relid_cache))
		marks_relid_cache = extension_table(extension_schema(), MARKS_TABLE);
	return marks_relid_cache;
}

/* Refuse a marks table whose column attnum is not named name of type typid. */
static void
marks_check_column(Relation heap, AttrNumber attnum, const char *name,
				   Oid typid)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(heap), attnum - 1);

	if (att->attisdropped || strcmp(NameStr(att->attname), name) != 0 ||
		att->atttypid != typid)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" has an unexpected shape", MARKS_TABLE),
				 errdetail("Column %d must be \"%s\" of type %s.",
						   attnum, name, format_type_be(typid)),
				 errhint("Reinstall the extension, or restore the table as the extension's script creates it.")));
}

/* Refuse a marks table whose primary key is not what the scans expect. */
static void
marks_refuse_key(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
			 errmsg("table \"%s\" has an unexpected primary key", MARKS_TABLE),
			 errdetail("%s", detail),
			 errhint("Restore the primary key as the extension's script creates it: PRIMARY KEY (resource), the column of collation \"C\".")));
}

/*
 * Check that the marks table is what this file reads and writes with
 * heap_* calls: a logged heap, its four columns by name and type (three
 * before the extension is updated from 1.2, without set_by), and a
 * primary key that is a btree on the resource alone, under the "C"
 * collation and the default text operators, as the scans' F_TEXTEQ key
 * assumes.  An unlogged table would be emptied by a crash, and every
 * stale token accepted again.
 */
static void
marks_check_shape(Relation heap, Relation index)
{
	Oid			token_type;

	if (heap->rd_rel->relam != HEAP_TABLE_AM_OID)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" is not a heap table", MARKS_TABLE),
				 errhint("Run ALTER TABLE %s SET ACCESS METHOD heap.",
						 MARKS_TABLE)));
	if (heap->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" is not logged", MARKS_TABLE),
				 errdetail("A crash would empty it, and every stale token would be accepted again."),
				 errhint("Run ALTER TABLE %s SET LOGGED.", MARKS_TABLE)));
	if (RelationGetDescr(heap)->natts != Natts_mark &&
		RelationGetDescr(heap)->natts != Natts_mark_1_2)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" has an unexpected shape", MARKS_TABLE),
				 errdetail("It must have exactly %d columns.", Natts_mark),
				 errhint("Reinstall the extension, or restore the table as the extension's script creates it.")));
	token_type = fence_token_type(RelationGetNamespace(heap));
	marks_check_column(heap, Anum_mark_resource, "resource", TEXTOID);
	marks_check_column(heap, Anum_mark_token, "token", token_type);
	marks_check_column(heap, Anum_mark_moved_at, "moved_at", TIMESTAMPTZOID);
	if (RelationGetDescr(heap)->natts == Natts_mark)
		marks_check_column(heap, Anum_mark_set_by, "set_by", CHAROID);

	if (index->rd_rel->relam != BTREE_AM_OID)
		marks_refuse_key("It must be a btree index.");
	if (index->rd_index->indnatts != 1 ||
		index->rd_index->indkey.values[0] != Anum_mark_resource)
		marks_refuse_key("It must be on column \"resource\" alone.");
	if (index->rd_indcollation[0] != C_COLLATION_OID ||
		index->rd_opfamily[0] != TEXT_BTREE_FAM_OID)
		marks_refuse_key("It must compare resources under collation \"C\" with the default text operators.");
}

/*
 * The primary key of the marks table, refused if it has none; found
 * through the open table, whose relcache entry is kept current by its
 * lock.
 */
static Oid
marks_primary_key(Relation heap)
{
	Oid			pk = fencing_primary_key_index(heap);

	if (!OidIsValid(pk))
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" has no primary key", MARKS_TABLE),
				 errhint("Reinstall the extension, or restore the table as the extension's script creates it.")));
	return pk;
}

/*
 * marks_open
 *		Open the marks table and its primary key index.  Locks are kept to
 *		the end of the transaction, as for any table written.
 */
void
marks_open(MarksRel *m, const char *resource, LOCKMODE lockmode)
{
	m->resource = resource;
	m->key = CStringGetTextDatum(resource);

	/* Kept open, locked at least as strongly, by this transaction. */
	m->kept = marks_shape_checked && lockmode <= RowExclusiveLock &&
		marks_kept_get(marks_relid(), &m->heap, &m->index);
	if (!m->kept)
	{
		m->heap = table_open(marks_relid(), lockmode);
		m->index = index_open(marks_primary_key(m->heap), lockmode);
		if (!marks_shape_checked)
		{
			marks_check_shape(m->heap, m->index);
			marks_pkey_checked = RelationGetRelid(m->index);
			marks_shape_checked = true;
		}
		if (lockmode == RowExclusiveLock)
			marks_keep(RelationGetRelid(m->heap), RelationGetRelid(m->index));
	}
	/* A table not yet updated to 1.3 has no set_by: 1.2's rule then. */
	m->has_set_by = RelationGetDescr(m->heap)->natts == Natts_mark;
}

void
marks_close(MarksRel *m)
{
	if (m->kept)
		return;
	index_close(m->index, NoLock);
	table_close(m->heap, NoLock);
}

/*
 * The size of the marks table, in blocks, at least as known to this
 * subtransaction.  The table cannot shrink while we hold a lock on it:
 * VACUUM truncates it under an exclusive lock.  Our lock is held from
 * marks_open to the end of the subtransaction that took it, or of its
 * parent if it commits: so the size read once in a subtransaction stays
 * a bound in it, and a version beyond it (the table grew) is simply not
 * taken.  TRUNCATE, by our own transaction, gives the table a new file
 * and its relcache entry an invalidation, which forgets the size.
 */
BlockNumber
marks_nblocks(MarksRel *m)
{
	if (nblocks_lxid != FencingLocalTransactionId() ||
		nblocks_subid != GetCurrentSubTransactionId())
	{
		nblocks = RelationGetNumberOfBlocks(m->heap);
		nblocks_lxid = FencingLocalTransactionId();
		nblocks_subid = GetCurrentSubTransactionId();
	}
	return nblocks;
}
