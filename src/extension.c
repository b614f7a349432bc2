/*-------------------------------------------------------------------------
 *
 * extension.c
 *	  The one lookup of the extension's own objects: its schema, its
 *	  tables and its functions.
 *
 * The extension is not relocatable, but its schema is chosen at CREATE
 * EXTENSION, and objects of the same names may exist in other schemas of
 * the search path.  Its objects are therefore always found in its own
 * schema, by name: that of the function being called, when there is one
 * (the schema of a trigger function or of fence_attach() is the
 * extension's), else the one pg_extension records.
 *
 * IDENTIFICATION
 *	  src/extension.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "extension.h"
#include "fence_token.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

/*
 * extension_schema
 *		The schema of the installed extension.  PostgreSQL 15 keeps its own
 *		get_extension_schema() private; this is the same catalog lookup.
 */
Oid
extension_schema(void)
{
	Oid			extoid = get_extension_oid("fencing", false);
	Relation	rel;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			nsp = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&skey, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &skey);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		nsp = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp))
		elog(ERROR, "cache lookup failed for extension %u", extoid);
	return nsp;
}

/*
 * extension_schema_of_call
 *		The schema of the extension's objects, as that of the function
 *		being called: a syscache lookup, cheaper than extension_schema().
 */
Oid
extension_schema_of_call(FunctionCallInfo fcinfo)
{
	return get_func_namespace(fcinfo->flinfo->fn_oid);
}

/*
 * extension_table
 *		The OID of the extension's table name in schema extnsp.
 */
Oid
extension_table(Oid extnsp, const char *name)
{
	Oid			relid = get_relname_relid(name, extnsp);

	if (!OidIsValid(relid))
		elog(ERROR, "table %s not found in schema %u", name, extnsp);
	return relid;
}

/*
 * extension_func
 *		The OID of the extension's function name(argtypes) in schema extnsp.
 */
Oid
extension_func(Oid extnsp, const char *name, int nargs, Oid *argtypes)
{
	return LookupFuncName(list_make2(makeString(get_namespace_name(extnsp)),
									 makeString(pstrdup(name))),
						  nargs, argtypes, false);
}

/*
 * extension_advance_func
 *		The OID of fence_advance(text, fence_token) in schema extnsp.
 */
Oid
extension_advance_func(Oid extnsp)
{
	Oid			argtypes[2];

	argtypes[0] = TEXTOID;
	argtypes[1] = fence_token_type(extnsp);
	return extension_func(extnsp, "fence_advance", 2, argtypes);
}
