#!/usr/bin/env bash
# test/scripts/dist.sh: the release tarball that "make dist" builds is
# complete on its own.
#
# Builds the tarball (git archive of HEAD: uncommitted changes are not in
# it), checks its name, its single top directory and the packaging files
# and their versions, unpacks it in a temporary directory away from the
# working tree, builds it with warnings as errors, installs it and runs
# "make installcheck" there against a throwaway cluster.  Whatever
# happens, the working tree's build is installed again at exit, so that the
# suites that run next test the working tree.
#
# Prints one "ok - ..." or "not ok - ..." line per assertion and exits
# non-zero if any failed.
#
#   bash test/scripts/dist.sh
# test/run: alone
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"

# Put the working tree's build back, then let the harness clean up, keeping
# the script's exit status.
restore_working_tree() {
	local rc=$?
	harness_log "installing the working tree again"
	as_root make -C "$FENCING_TOP" -s install PG_CONFIG="$PG_CONFIG" >/dev/null 2>&1 ||
		echo "# could not install the working tree again" >&2
	(exit $rc)
	harness_cleanup
}
trap restore_working_tree EXIT

harness_tmpdir workdir
version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$FENCING_TOP/fencing.control")
name=fencing-$version

harness_log "make dist ($name.tar.gz)"
if ! git -C "$FENCING_TOP" diff --quiet HEAD --; then
	echo "# the working tree has uncommitted changes: the tarball holds HEAD"
fi
make -C "$FENCING_TOP" -s dist PG_CONFIG="$PG_CONFIG" 2>/dev/null
mv "$FENCING_TOP/$name.tar.gz" "$workdir/"
tarball=$workdir/$name.tar.gz
check "make dist builds $name.tar.gz" test -s "$tarball"

tar -tzf "$tarball" >"$workdir/contents"
tops=$(cut -d/ -f1 "$workdir/contents" | sort -u)
check "every file of the tarball is under $name/" test "$tops" = "$name"
for f in LICENSE CHANGELOG.md META.json README.md Makefile fencing.control \
	sql/fencing--1.0.sql sql/fencing--1.0--1.1.sql sql/fencing--1.1--1.2.sql sql/fencing--1.2--1.3.sql src/fencing.c \
	$(cd "$FENCING_TOP" && echo doc/*.md); do
	check "the tarball holds $f" grep -qxF "$name/$f" "$workdir/contents"
done
# one executable-bit convention: no file under test/ is executable; every
# script runs through its interpreter (bash X, /usr/bin/python3 X), as
# test/run and the docs run them
executable=$(tar -tvzf "$tarball" | awk -v t="$name/test/" '$1 ~ /^-..x/ && index($NF, t) == 1 { print $NF }' | tr '\n' ' ')
check "the tarball holds the tests" grep -q "^$name/test/run$" "$workdir/contents"
expect "no file under test/ is executable (scripts run as bash X, python3 X)" "$executable" ""

tar -xzf "$tarball" -C "$workdir"
tree=$workdir/$name
meta_versions=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print(m["version"], m["provides"]["fencing"]["version"], m["license"])
' "$tree/META.json")
check "META.json gives version $version.0 (semver) for the release and the extension, licence postgresql" \
	test "$meta_versions" = "$version.0 $version.0 postgresql"
# PGXN's docfile is one file; x_docfiles lists them all: README.md and
# every doc/*.md of the tree, each in the tarball
meta_docs=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["provides"]["fencing"]
print(m["docfile"], *sorted(m["x_docfiles"]))
' "$tree/META.json")
expect "META.json's docfile is README.md, and x_docfiles lists README.md and every doc/*.md" \
	"$meta_docs" "README.md $(cd "$FENCING_TOP" && printf '%s\n' README.md doc/*.md | sort | tr '\n' ' ' | sed 's/ $//')"
for f in ${meta_docs#README.md }; do
	check "the tarball holds META.json's $f" test -f "$tree/$f"
done
check "CHANGELOG.md has a section for $version" grep -q "^## $version\b" "$tree/CHANGELOG.md"
# META.json agrees with CHANGELOG.md and the tree (PGXN Meta spec 1.0.0):
# release_status is "stable" only for a version CHANGELOG.md dates, and
# "testing" or "unstable" while its section says "(unreleased)";
# provides' file is the file that defines the extension (its control
# file), not one of its update scripts; resources, when given, are URLs
python3 - "$tree" "$version" >"$workdir/meta_checks" <<'EOF' ||
import json, os, re, sys
tree, version = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(tree, "META.json")))
heading = next((l for l in open(os.path.join(tree, "CHANGELOG.md"))
                if re.match(r"## %s\b" % re.escape(version), l)), "")
unreleased = "(unreleased)" in heading
status = m.get("release_status")
want = {"testing", "unstable"} if unreleased else {"stable"}
def report(ok, what):
    print(("ok - " if ok else "not ok - ") + what)
report(status in want,
       "META.json's release_status (%s) agrees with CHANGELOG.md's \"%s\"" % (status, heading.strip()))
f = m["provides"]["fencing"].get("file", "")
report(f == "fencing.control" and os.path.isfile(os.path.join(tree, f)),
       "META.json's provides.fencing.file (%s) is the control file, in the tarball" % f)
report(not re.search(r"--[^/]*--", f), "META.json's provides.fencing.file is no update script")
report(m.get("meta-spec", {}).get("version") == "1.0.0", "META.json follows meta-spec 1.0.0")
res = m.get("resources", {})
urls = [res.get("homepage"), res.get("bugtracker", {}).get("web"), res.get("repository", {}).get("url"),
        res.get("repository", {}).get("web")]
report(all(u is None or re.match(r"(https|git)://[^ ]+$", u) for u in urls) and set(res) <= {"homepage", "bugtracker", "repository"},
       "META.json's resources, if any, are homepage, bugtracker and repository URLs (%s)" % (", ".join(sorted(res)) or "none given"))
EOF
	echo "not ok - META.json's checks ran (python3 failed)" >>"$workdir/meta_checks"
while IFS= read -r line; do
	case "$line" in
		"ok - "*) ok "${line#ok - }" ;;
		*) not_ok "${line#not ok - }" ;;
	esac
done <"$workdir/meta_checks"
check "LICENSE is the PostgreSQL Licence" grep -q '^PostgreSQL License$' "$tree/LICENSE"

harness_log "building and installing $name from the tarball"
make -C "$tree" -s PG_CONFIG="$PG_CONFIG" \
	PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers" \
	>"$workdir/build.log" 2>&1 && ok "the unpacked tarball builds with -Werror" ||
	{ not_ok "the unpacked tarball builds with -Werror"; sed 's/^/#   /' "$workdir/build.log"; }
as_root make -C "$tree" -s install PG_CONFIG="$PG_CONFIG" >>"$workdir/build.log" 2>&1 &&
	ok "the unpacked tarball installs" || not_ok "the unpacked tarball installs"
check "the installed library is the one built from the tarball" \
	cmp -s "$tree/fencing.so" "$("$PG_CONFIG" --pkglibdir)/fencing.so"

harness_start_pg
harness_log "make installcheck in the unpacked tarball"
if make -C "$tree" -s installcheck PG_CONFIG="$PG_CONFIG" >"$workdir/installcheck.log" 2>&1; then
	ok "make installcheck passes in the unpacked tarball ($(grep -c ' ok ' "$workdir/installcheck.log") tests)"
else
	not_ok "make installcheck passes in the unpacked tarball"
	sed 's/^/#   /' "$workdir/installcheck.log"
	for d in "$tree/regression.diffs" "$tree/output_iso/regression.diffs"; do
		[ -f "$d" ] && sed 's/^/#   /' "$d"
	done
fi

checks_finish
