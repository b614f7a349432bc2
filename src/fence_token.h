/*-------------------------------------------------------------------------
 *
 * fence_token.h
 *	  The fence_token type: a 64-bit, non-negative, by-value integer.
 *
 * IDENTIFICATION
 *	  src/fence_token.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCE_TOKEN_H
#define FENCE_TOKEN_H

#include "fmgr.h"
#include "token_parse.h"			/* FENCE_TOKEN_MAX */

typedef int64 FenceToken;

#define DatumGetFenceToken(X)		((FenceToken) DatumGetInt64(X))
#define FenceTokenGetDatum(X)		Int64GetDatum((int64) (X))
#define PG_GETARG_FENCE_TOKEN(n)	DatumGetFenceToken(PG_GETARG_DATUM(n))
#define PG_RETURN_FENCE_TOKEN(x)	return FenceTokenGetDatum(x)

/* Room for the decimal text of any token, with its terminating NUL. */
#define FENCE_TOKEN_TEXT_LEN		21

extern char *fence_token_to_cstring(FenceToken token, char *buf);
extern bool fence_token_from_cstring(const char *str, FenceToken *token);
extern Oid	fence_token_type(Oid extnsp);

#endif							/* FENCE_TOKEN_H */
