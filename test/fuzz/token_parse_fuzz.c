/*-------------------------------------------------------------------------
 *
 * token_parse_fuzz.c
 *	  libFuzzer target that checks token_parse() against a reference parser.
 *
 * Every input is parsed twice: by token_parse() and by reference_parse(),
 * a second implementation of the grammar stated in token_parse.c that
 * shares no code with it.  The two must agree on the verdict (OK, SYNTAX
 * or RANGE) and, on OK, on the value.  Any disagreement aborts, so that
 * libFuzzer saves the input as a crash artifact.
 *
 * The reference parser is deliberately built differently: it trims white
 * space from both ends instead of scanning over it, validates the whole
 * body against a character set with strspn(), and leaves the arithmetic
 * and the overflow detection to strtoull().  A bug would have to be made
 * twice, in two different ways, to go unnoticed.
 *
 * Build with "make fuzz"; run with test/fuzz/run.
 *
 * IDENTIFICATION
 *	  test/fuzz/token_parse_fuzz.c
 *
 *-------------------------------------------------------------------------
 */
#include "token_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The white-space bytes the grammar allows around a token, and no others. */
#define REF_SPACE_CHARS		" \t\n\r\v\f"
#define REF_DEC_DIGITS		"0123456789"
#define REF_HEX_DIGITS		"0123456789abcdefABCDEF"

/* Planted in *result to check that a failed parse leaves it alone. */
#define RESULT_SENTINEL		INT64_C(-0x5a5a5a5a5a5a5a5b)

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *
verdict_name(TokenParseResult r)
{
	switch (r)
	{
		case TOKEN_PARSE_OK:
			return "OK";
		case TOKEN_PARSE_SYNTAX:
			return "SYNTAX";
		case TOKEN_PARSE_RANGE:
			return "RANGE";
	}
	return "(invalid verdict)";
}

/*
 * print_escaped
 *		Print a string as a C literal, so that white space and control
 *		bytes in a failing input are visible.
 */
static void
print_escaped(FILE *out, const char *str)
{
	const unsigned char *p;

	fputc('"', out);
	for (p = (const unsigned char *) str; *p != '\0'; p++)
	{
		switch (*p)
		{
			case '\t':
				fputs("\\t", out);
				break;
			case '\n':
				fputs("\\n", out);
				break;
			case '\r':
				fputs("\\r", out);
				break;
			case '\v':
				fputs("\\v", out);
				break;
			case '\f':
				fputs("\\f", out);
				break;
			case '\\':
			case '"':
				fputc('\\', out);
				fputc(*p, out);
				break;
			default:
				if (*p >= 0x20 && *p < 0x7f)
					fputc(*p, out);
				else
					fprintf(out, "\\x%02x", *p);
				break;
		}
	}
	fputc('"', out);
}

/*
 * report_and_abort
 *		Describe a failed check and abort; libFuzzer then writes the input
 *		to a crash-* artifact.
 */
static void
report_and_abort(const char *what, const char *input,
				 TokenParseResult got, int64_t got_value,
				 TokenParseResult want, int64_t want_value)
{
	fprintf(stderr, "token_parse_fuzz: %s\n  input:     ", what);
	print_escaped(stderr, input);
	fprintf(stderr, "\n  token_parse: %s", verdict_name(got));
	if (got == TOKEN_PARSE_OK)
		fprintf(stderr, " %" PRId64, got_value);
	fprintf(stderr, "\n  reference:   %s", verdict_name(want));
	if (want == TOKEN_PARSE_OK)
		fprintf(stderr, " %" PRId64, want_value);
	fputc('\n', stderr);
	abort();
}

/*
 * reference_parse
 *		Independent implementation of the token grammar.
 *
 * strtoull() alone is far too lenient for the grammar: it skips leading
 * white space of its own (locale-dependent), accepts a sign, accepts "0x"
 * itself in base 16, and wraps negative numbers around.  So the body is
 * first trimmed of exactly the allowed white-space bytes and checked
 * against a character set; strtoull() then only ever sees a non-empty run
 * of plain digits, and is used for what it does well: the value and the
 * overflow detection.
 */
static TokenParseResult
reference_parse(const char *str, int64_t *result)
{
	const char *body = str;
	size_t		len;
	bool		negative = false;
	const char *digits;
	size_t		ndigits;
	int			base;
	unsigned long long value;
	char	   *end;

	/* Trim the allowed white space from both ends. */
	body += strspn(body, REF_SPACE_CHARS);
	len = strlen(body);
	while (len > 0 && strchr(REF_SPACE_CHARS, body[len - 1]) != NULL)
		len--;

	if (len == 0)
		return TOKEN_PARSE_SYNTAX;	/* empty or blank */

	if (len >= 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X'))
	{
		/* Hexadecimal; a sign before "0x" falls to the decimal branch. */
		base = 16;
		digits = body + 2;
		ndigits = len - 2;
		if (ndigits == 0 || strspn(digits, REF_HEX_DIGITS) < ndigits)
			return TOKEN_PARSE_SYNTAX;
	}
	else
	{
		base = 10;
		digits = body;
		ndigits = len;
		if (digits[0] == '+' || digits[0] == '-')
		{
			negative = (digits[0] == '-');
			digits++;
			ndigits--;
		}
		if (ndigits == 0 || strspn(digits, REF_DEC_DIGITS) < ndigits)
			return TOKEN_PARSE_SYNTAX;
	}

	/*
	 * The digit run was checked above, so its first byte is a digit and
	 * strtoull() cannot skip white space, take a sign or a second "0x".
	 * The run ends in white space or NUL, where strtoull() stops.
	 */
	errno = 0;
	value = strtoull(digits, &end, base);
	if (end != digits + ndigits)
	{
		fprintf(stderr, "token_parse_fuzz: reference parser stopped at offset %td of ",
				end - str);
		print_escaped(stderr, str);
		fputc('\n', stderr);
		abort();
	}
	if (errno == ERANGE)
		return TOKEN_PARSE_RANGE;	/* above ULLONG_MAX */
	if (value > (unsigned long long) FENCE_TOKEN_MAX)
		return TOKEN_PARSE_RANGE;
	if (negative && value != 0)
		return TOKEN_PARSE_RANGE;	/* "-0" (any number of zeros) is 0 */

	*result = (int64_t) value;
	return TOKEN_PARSE_OK;
}

/*
 * check_round_trip
 *		Print an accepted value back as text and parse it again.
 *
 * Both output forms are tried: decimal, which is what fence_token_out
 * produces, and hexadecimal, the ZooKeeper form the parser accepts too.
 */
static void
check_round_trip(const char *input, int64_t value)
{
	char		buf[64];
	const char *formats[] = {"%lld", "0x%llx"};
	size_t		i;

	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
	{
		int64_t		again = RESULT_SENTINEL;
		TokenParseResult r;

		snprintf(buf, sizeof(buf), formats[i], (long long) value);
		r = token_parse(buf, &again);
		if (r != TOKEN_PARSE_OK || again != value)
		{
			fprintf(stderr, "token_parse_fuzz: round trip through ");
			print_escaped(stderr, buf);
			fprintf(stderr, " failed\n");
			report_and_abort("round trip failed", input,
							 r, again, TOKEN_PARSE_OK, value);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *str;
	int64_t		got_value = RESULT_SENTINEL;
	int64_t		want_value = RESULT_SENTINEL;
	TokenParseResult got;
	TokenParseResult want;

	/*
	 * token_parse() takes a C string.  An input with an embedded NUL is
	 * therefore cut at the first NUL, for both parsers alike: that is what
	 * the backend would pass in, since text input never holds a NUL.
	 */
	str = malloc(size + 1);
	if (str == NULL)
		return 0;
	memcpy(str, data, size);
	str[size] = '\0';

	got = token_parse(str, &got_value);
	want = reference_parse(str, &want_value);

	if (got != want)
		report_and_abort("verdicts differ", str,
						 got, got_value, want, want_value);
	if (got == TOKEN_PARSE_OK)
	{
		if (got_value != want_value)
			report_and_abort("values differ", str,
							 got, got_value, want, want_value);
		check_round_trip(str, got_value);
	}
	else if (got_value != RESULT_SENTINEL)
	{
		/* The header promises *result is left alone on failure. */
		fprintf(stderr, "token_parse_fuzz: *result became %" PRId64 "\n",
				got_value);
		report_and_abort("*result written on failure", str,
						 got, got_value, want, want_value);
	}

	free(str);
	return 0;
}
