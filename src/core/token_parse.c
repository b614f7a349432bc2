/*-------------------------------------------------------------------------
 *
 * token_parse.c
 *	  Text parser for fence tokens.
 *
 * Accepted forms, with optional white space before and after:
 *
 *	  decimal		[+]digits, or -digits whose value is zero
 *	  hexadecimal	0x hexdigits (also 0X), as ZooKeeper prints zxids
 *
 * A negative number is a number, so it is reported as out of range rather
 * than as a syntax error, as the backend's unsigned types do.  Everything
 * else (an empty string, a bare sign, "0x" without digits, a sign before
 * a hexadecimal number, embedded or trailing junk) is a syntax error.
 *
 * No locale-dependent function is used: isspace() and isdigit() would
 * accept other bytes in some locales, and strtoll() would accept forms
 * we do not want (a sign before "0x", leading white space only).
 *
 * IDENTIFICATION
 *	  src/token_parse.c
 *
 *-------------------------------------------------------------------------
 */
#include "token_parse.h"

#include <stdbool.h>

/* The same set of white-space bytes as the backend's scanner_isspace(). */
static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
		c == '\f';
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * token_parse
 *		Parse a NUL-terminated string into a token.
 *
 * On TOKEN_PARSE_OK the value is stored in *result; otherwise *result is
 * left alone.
 */
TokenParseResult
token_parse(const char *str, int64_t *result)
{
	const char *p = str;
	bool		negative = false;
	bool		overflow = false;
	uint64_t	value = 0;
	int			ndigits = 0;

	while (is_space(*p))
		p++;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
	{
		int			digit;

		p += 2;
		while ((digit = hex_value(*p)) >= 0)
		{
			if (value > (uint64_t) FENCE_TOKEN_MAX >> 4)
				overflow = true;
			else
				value = (value << 4) | (uint64_t) digit;
			ndigits++;
			p++;
		}
	}
	else
	{
		if (*p == '+')
			p++;
		else if (*p == '-')
		{
			negative = true;
			p++;
		}

		while (*p >= '0' && *p <= '9')
		{
			uint64_t	digit = (uint64_t) (*p - '0');

			if (value > ((uint64_t) FENCE_TOKEN_MAX - digit) / 10)
				overflow = true;
			else
				value = value * 10 + digit;
			ndigits++;
			p++;
		}
	}

	while (is_space(*p))
		p++;

	if (ndigits == 0 || *p != '\0')
		return TOKEN_PARSE_SYNTAX;
	if (overflow || value > (uint64_t) FENCE_TOKEN_MAX ||
		(negative && value != 0))
		return TOKEN_PARSE_RANGE;

	*result = (int64_t) value;
	return TOKEN_PARSE_OK;
}
