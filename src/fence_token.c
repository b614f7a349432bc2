/*-------------------------------------------------------------------------
 *
 * fence_token.c
 *	  I/O and conversions of the fence_token type.
 *
 * A fence token is stored exactly as a bigint whose value is never
 * negative.  Comparison, hashing and sort support are therefore bound to
 * the backend's int8 functions in the install script; only the functions
 * that must enforce the range live here.
 *
 * IDENTIFICATION
 *	  src/fence_token.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fence_token.h"
#include "libpq/pqformat.h"
#include "pg_compat.h"
#include "token_parse.h"
#include "utils/builtins.h"
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
