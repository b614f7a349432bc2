#!/usr/bin/env python3
"""test/lib/doc_links.py: the links of README.md and doc/*.md, checked.

    doc_links.py TOP        one "ok - ..." or "not ok - ..." line per check

Every relative link between README.md and doc/*.md must name a file that
exists and, after "#", an anchor that file has, by GitHub's rules: a
heading's text lowercased, every character but letters, digits, spaces,
"-" and "_" dropped, spaces made "-", and "-1", "-2", ... appended to a
repeated one.  Headings and links inside fenced code blocks do not count.
"""
import os
import re
import sys

LINK = re.compile(r'\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)')


def prose_lines(text):
    """The lines of text outside fenced code blocks, with their numbers."""
    fence = None
    for n, line in enumerate(text.split('\n'), 1):
        m = re.match(r'^\s*(```+|~~~+)', line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def anchors(text):
    seen = {}
    out = set()
    for _, line in prose_lines(text):
        m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        base = slug(m.group(1))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else '%s-%d' % (base, k))
    return out


def links(text):
    for n, line in prose_lines(text):
        # inline code spans are not links
        line = re.sub(r'`[^`]*`', '', line)
        for m in LINK.finditer(line):
            yield n, m.group(1)


def main(top):
    files = ['README.md'] + sorted(
        'doc/' + f for f in os.listdir(os.path.join(top, 'doc')) if f.endswith('.md'))
    texts = {f: open(os.path.join(top, f), encoding='utf-8').read() for f in files}
    anchor_sets = {f: anchors(t) for f, t in texts.items()}
    failed = 0
    count = 0
    for f in files:
        bad = []
        for n, target in links(texts[f]):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):
                continue            # http:, https:, mailto:
            count += 1
            path, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(os.path.join(top, dest)):
                bad.append('%s:%d: %s: no file %s' % (f, n, target, dest))
                continue
            if frag:
                if dest not in anchor_sets:
                    bad.append('%s:%d: %s: an anchor into a file not checked' % (f, n, target))
                elif frag not in anchor_sets[dest]:
                    bad.append('%s:%d: %s: %s has no heading with anchor #%s' % (f, n, target, dest, frag))
        if bad:
            failed += 1
            print('not ok - every relative link of %s resolves' % f)
            for b in bad:
                print('#   ' + b)
        else:
            print('ok - every relative link of %s resolves' % f)
    return failed


if __name__ == '__main__':
    sys.exit(1 if main(sys.argv[1]) else 0)
