/*-------------------------------------------------------------------------
 *
 * token_parse.h
 *	  Text parser for fence tokens, free of backend dependencies.
 *
 * The parser is plain C so that it can be linked into a fuzzer without
 * the server; fence_token.c wraps it in PostgreSQL's error reporting.
 *
 * IDENTIFICATION
 *	  src/token_parse.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TOKEN_PARSE_H
#define TOKEN_PARSE_H

#include <stdint.h>

/* Largest token: what Redis INCR, etcd revisions and zxids can reach. */
#define FENCE_TOKEN_MAX INT64_MAX

typedef enum TokenParseResult
{
	TOKEN_PARSE_OK,				/* *result holds the value */
	TOKEN_PARSE_SYNTAX,			/* not a number in any accepted form */
	TOKEN_PARSE_RANGE			/* a number, but negative or above
								 * FENCE_TOKEN_MAX */
} TokenParseResult;

extern TokenParseResult token_parse(const char *str, int64_t *result);

#endif							/* TOKEN_PARSE_H */
