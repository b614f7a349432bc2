#!/usr/bin/env bash
# test/scripts/build_without_hiredis.sh: the extension builds, warning-free,
# without hiredis (make WITH_HIREDIS=0), and the library it makes refers to
# no hiredis symbol.  Builds in a scratch copy, leaving the tree and the
# installed library alone.
set -euo pipefail
echo "1..1"

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cp -r "$top/Makefile" "$top/fencing.control" "$top/src" "$top/sql" "$scratch/"
make -C "$scratch" -s clean >/dev/null
make -C "$scratch" -s WITH_HIREDIS=0 \
	PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers"

if nm -D --undefined-only "$scratch/fencing.so" | grep -qE ' (redis[A-Z]|freeReplyObject)'; then
	echo "not ok - fencing.so built with WITH_HIREDIS=0 still refers to hiredis"
	exit 1
fi
if ldd "$scratch/fencing.so" | grep -q hiredis; then
	echo "not ok - fencing.so built with WITH_HIREDIS=0 links libhiredis"
	exit 1
fi
# TLS to Redis is part of the Redis client: no OpenSSL without it either
if nm -D --undefined-only "$scratch/fencing.so" | grep -qE ' (SSL_|ERR_|X509_)'; then
	echo "not ok - fencing.so built with WITH_HIREDIS=0 still refers to OpenSSL"
	exit 1
fi
echo "ok - make WITH_HIREDIS=0 builds warning-free, without hiredis or OpenSSL"
