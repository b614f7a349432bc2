/*-------------------------------------------------------------------------
 *
 * hiredis_compat.h
 *	  What the extension needs of the hiredis version it is built against,
 *	  in one place: 0.14 (Debian 12) and 1.x (Debian 13 and later).
 *
 * IDENTIFICATION
 *	  src/redis/hiredis_compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_HIREDIS_COMPAT_H
#define FENCING_HIREDIS_COMPAT_H

#include <hiredis/hiredis.h>

/*
 * hiredis 1.0 gave the reader's createArray() callback the element count
 * as a size_t (it was an int: arrays of more than 2^31 elements), along
 * with RESP3.
 */
#if HIREDIS_MAJOR >= 1
typedef size_t RedisArrayCount;
#else
typedef int RedisArrayCount;
#endif

/*
 * Whether a reply holds only RESP2 types.  hiredis 1.x also parses RESP3
 * (doubles, booleans, maps, sets, pushes, big numbers, verbatim strings),
 * which fencing never asks for (it sends no HELLO 3): from a server one is
 * a protocol error, as hiredis 0.14 reports an unknown type byte itself.
 */
static inline bool
redis_reply_is_resp2(const redisReply *r)
{
	size_t		i;

	switch (r->type)
	{
		case REDIS_REPLY_STRING:
		case REDIS_REPLY_STATUS:
		case REDIS_REPLY_ERROR:
		case REDIS_REPLY_INTEGER:
		case REDIS_REPLY_NIL:
			return true;
		case REDIS_REPLY_ARRAY:
			for (i = 0; i < r->elements; i++)
				if (!redis_reply_is_resp2(r->element[i]))
					return false;
			return true;
		default:
			return false;
	}
}

#endif							/* FENCING_HIREDIS_COMPAT_H */
