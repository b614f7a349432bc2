#!/usr/bin/env bash
# test/scripts/build_without_hiredis.sh: the extension builds, warning-free,
# without hiredis (make WITH_HIREDIS=0), and the library it makes refers to
# no hiredis symbol; the regression suite passes against that build, whose
# outputs where Redis is out are the expected files' _1 variants
# (expected/*_1.out).  Builds in a scratch copy and runs it from a copy of
# the server's binaries and share directory, leaving the tree and the
# installed library alone.
set -euo pipefail
echo "1..2"

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/harness.sh
source "$top/test/lib/harness.sh"
scratch=
harness_tmpdir scratch

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

# PostgreSQL finds its share directory and libraries relative to its
# binaries: a copy of both, with the build installed into it, is a server
# of its own.
pgdir=$(dirname "$("$PG_CONFIG" --bindir)")
sharedir=$("$PG_CONFIG" --sharedir)
root=
harness_tmpdir root
mkdir -p "$root$(dirname "$pgdir")" "$root$(dirname "$sharedir")"
cp -a "$pgdir" "$root$(dirname "$pgdir")/"
cp -a "$sharedir" "$root$(dirname "$sharedir")/"
make -C "$scratch" -s WITH_HIREDIS=0 install DESTDIR="$root" >/dev/null
cp -r "$top/expected" "$scratch/"
chmod -R a+rX "$scratch"
PG_CONFIG=$root$pgdir/bin/pg_config
harness_start_pg
if make -C "$scratch" -s WITH_HIREDIS=0 PG_CONFIG="$PG_CONFIG" installcheck ISOLATION= >"$scratch/installcheck.log" 2>&1; then
	echo "ok - the regression suite passes against the build without hiredis"
else
	sed 's/^/# /' "$scratch/installcheck.log"
	[ -f "$scratch/regression.diffs" ] && sed 's/^/# /' "$scratch/regression.diffs"
	echo "not ok - the regression suite passes against the build without hiredis"
	exit 1
fi
