/*-------------------------------------------------------------------------
 *
 * fence_token.c
 *	  I/O and conversions of the fence_token type, and the one lookup of
 *	  the extension's own objects: its schema, its tables, its functions
 *	  and that type.
 *
 * A fence token is stored exactly as a bigint whose value is never
 * negative.  Comparison, hashing and sort support are therefore bound to
 * the backend's int8 functions in the install script; only the functions
 * that must enforce the range live here.
 *
 * The extension is not relocatable, but its schema is chosen at CREATE
 * EXTENSION, and objects of the same names may exist in other schemas of
 * the search path.  Its objects are therefore always found in its own
 * schema, by name: that of the function being called, when there is one
 * (the schema of a trigger function or of fence_attach() is the
 * extension's), else the one pg_extension records.
 *
 * IDENTIFICATION
 *	  src/core/fence_token.c
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
#include "core/core.h"
#include "core/pg_compat.h"
#include "core/token_parse.h"
#include "libpq/pqformat.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(fence_token_in);
PG_FUNCTION_INFO_V1(fence_token_out);
PG_FUNCTION_INFO_V1(fence_token_recv);
PG_FUNCTION_INFO_V1(fence_token_send);
PG_FUNCTION_INFO_V1(fence_token_from_int8);
PG_FUNCTION_INFO_V1(fence_token_from_int4);
PG_FUNCTION_INFO_V1(fence_token_from_int2);
PG_FUNCTION_INFO_V1(fence_token_from_numeric);
PG_FUNCTION_INFO_V1(fence_token_to_numeric);

/*
 * fence_token_type
 *		The OID of the fence_token type of the extension in schema extnsp.
 */
Oid
fence_token_type(Oid extnsp)
{
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum("fence_token"),
						   ObjectIdGetDatum(extnsp));
}

/*
 * fence_token_from_cstring
 *		Parse the text of a token, as fence_token's input function does;
 *		false, without an error, if str is not one.  For text that comes
 *		from elsewhere than a user (a Redis reply), whose caller reports it.
 */
bool
fence_token_from_cstring(const char *str, FenceToken *token)
{
	int64_t		value;

	if (token_parse(str, &value) != TOKEN_PARSE_OK)
		return false;
	*token = (FenceToken) value;
	return true;
}

/*
 * fence_token_to_cstring
 *		Write the decimal text of a token into buf, which must hold
 *		FENCE_TOKEN_TEXT_LEN bytes, and return buf.
 */
char *
fence_token_to_cstring(FenceToken token, char *buf)
{
	pg_lltoa(token, buf);
	return buf;
}

/*
 * fence_token_from_integer
 *		Check that an integer is in a token's range and return it.
 *
 * The message is the one fence_token_in uses, so that a client sees the
 * same error whichever way a negative value reaches the type.
 */
static FenceToken
fence_token_from_integer(int64 value)
{
	if (value < 0)
	{
		char		buf[FENCE_TOKEN_TEXT_LEN];

		pg_lltoa(value, buf);
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value \"%s\" is out of range for type %s",
						buf, "fence_token")));
	}
	return (FenceToken) value;
}

/*
 * fence_token_in
 *		Convert text to a token.
 *
 * Errors are soft where the server supports it, so that
 * pg_input_is_valid() and COPY ... ON_ERROR can use them.
 */
Datum
fence_token_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	int64_t		token;

	switch (token_parse(str, &token))
	{
		case TOKEN_PARSE_OK:
			break;
		case TOKEN_PARSE_RANGE:
			fencing_ereturn(fcinfo->context, (Datum) 0,
							(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
							 errmsg("value \"%s\" is out of range for type %s",
									str, "fence_token")));
			break;
		case TOKEN_PARSE_SYNTAX:
			fencing_ereturn(fcinfo->context, (Datum) 0,
							(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
							 errmsg("invalid input syntax for type %s: \"%s\"",
									"fence_token", str)));
			break;
	}

	PG_RETURN_FENCE_TOKEN(token);
}

/*
 * fence_token_out
 *		Convert a token to decimal text.
 */
Datum
fence_token_out(PG_FUNCTION_ARGS)
{
	FenceToken	token = PG_GETARG_FENCE_TOKEN(0);
	char	   *buf = palloc(FENCE_TOKEN_TEXT_LEN);

	PG_RETURN_CSTRING(fence_token_to_cstring(token, buf));
}

/*
 * fence_token_recv
 *		Convert the binary form (a big-endian int64) to a token.
 */
Datum
fence_token_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int64		value = pq_getmsgint64(buf);

	PG_RETURN_FENCE_TOKEN(fence_token_from_integer(value));
}

/*
 * fence_token_send
 *		Convert a token to its binary form.
 */
Datum
fence_token_send(PG_FUNCTION_ARGS)
{
	FenceToken	token = PG_GETARG_FENCE_TOKEN(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendint64(&buf, token);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/*
 * fence_token_from_int8, fence_token_from_int4, fence_token_from_int2
 *		Casts from the integer types.
 */
Datum
fence_token_from_int8(PG_FUNCTION_ARGS)
{
	PG_RETURN_FENCE_TOKEN(fence_token_from_integer(PG_GETARG_INT64(0)));
}

Datum
fence_token_from_int4(PG_FUNCTION_ARGS)
{
	PG_RETURN_FENCE_TOKEN(fence_token_from_integer(PG_GETARG_INT32(0)));
}

Datum
fence_token_from_int2(PG_FUNCTION_ARGS)
{
	PG_RETURN_FENCE_TOKEN(fence_token_from_integer(PG_GETARG_INT16(0)));
}

/*
 * fence_token_from_numeric
 *		Cast from numeric, rounding to the nearest integer as the cast to
 *		bigint does.
 */
Datum
fence_token_from_numeric(PG_FUNCTION_ARGS)
{
	Numeric		num = PG_GETARG_NUMERIC(0);
	Datum		rounded;

	if (!numeric_is_nan(num) && !numeric_is_inf(num))
	{
		rounded = DirectFunctionCall2(numeric_round, NumericGetDatum(num),
									  Int32GetDatum(0));
		if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, rounded,
											  NumericGetDatum(int64_to_numeric(0)))) >= 0 &&
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, rounded,
											  NumericGetDatum(int64_to_numeric(PG_INT64_MAX)))) <= 0)
			PG_RETURN_FENCE_TOKEN(DatumGetInt64(DirectFunctionCall1(numeric_int8,
																	rounded)));
	}

	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("value \"%s\" is out of range for type %s",
					DatumGetCString(DirectFunctionCall1(numeric_out,
														NumericGetDatum(num))),
					"fence_token")));
	PG_RETURN_NULL();			/* keep compiler quiet */
}

/*
 * fence_token_to_numeric
 *		Cast to numeric.
 */
Datum
fence_token_to_numeric(PG_FUNCTION_ARGS)
{
	PG_RETURN_NUMERIC(int64_to_numeric(PG_GETARG_FENCE_TOKEN(0)));
}


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
