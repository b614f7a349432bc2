#!/usr/bin/env bash
# test/scripts/layers.sh: the arrows between the layers of src/ point one
# way (doc/internals.md, "Layers").
#
# - every source file is in a layer folder: core, stats, marks, guard,
#   adopt, redis, lock (src/fencing.c, the module's init, and
#   src/fencing_errcodes.h sit on top);
# - each layer includes only the layers below it, and from another folder
#   only that folder's public header: nothing outside src/lock/ includes
#   src/redis/; core, marks and guard include nothing of lock or redis;
#   marks nothing of the guard; the Redis client nothing above it;
# - the same for calls, read from the object files of a build (nm), so that
#   a prototype written by hand does not get around the headers;
# - no two files include each other or call each other.
#
# The library is built in a scratch copy of the tree, so that the checks
# read what the sources make, and the tree and the installed library are
# left alone.
#
#   bash test/scripts/layers.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cp -r "$FENCING_TOP/Makefile" "$FENCING_TOP/fencing.control" "$FENCING_TOP/src" "$FENCING_TOP/sql" "$scratch/"
make -C "$scratch" -s clean >/dev/null
if make -C "$scratch" -s PG_CONFIG="$PG_CONFIG" >"$scratch/build.log" 2>&1; then
	ok "the library builds, for its objects to be read"
else
	not_ok "the library builds, for its objects to be read"
	sed 's/^/#   /' "$scratch/build.log" | head -20
fi

while IFS= read -r line; do
	case "$line" in
		"ok - "*) ok "${line#ok - }" ;;
		"not ok - "*) not_ok "${line#not ok - }" ;;
		*) echo "$line" ;;
	esac
done < <(/usr/bin/python3 "$FENCING_TOP/test/lib/layers.py" "$FENCING_TOP" "$scratch" || true)

checks_finish
