"""The checks of the Python test clients (orm_sqlalchemy.py,
pooler_clients.py), printed as test/lib/checks.sh prints those of the
scripted suites: one "ok - ..." or "not ok - ..." line each, with what
differed after a failure.
"""

failed = 0


def check(desc, want, got):
    """ok when got equals want; else show both."""
    global failed
    if want == got:
        print(f"ok - {desc}")
    else:
        failed += 1
        print(f"not ok - {desc}\n#   expected: {want!r}\n#        got: {got!r}")


def exit_status():
    """The client's exit status: 1 if any check failed."""
    return 1 if failed else 0
