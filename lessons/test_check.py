#!/usr/bin/env python3
"""Tests of lessons/check: a correct lesson passes; a lesson whose quoted number was changed fails,
naming the number and its line; malformed marks, unknown ids, number-less marks and failing commands
fail with the file and line. Each case runs the checker on a copy of lesson 01 in a temporary folder.

    python3 lessons/test_check.py --flashlab build/cli/flashlab
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LESSON = "01-attention-is-memory-bound.md"


def run_check(flashlab, text):
    """Runs lessons/check on `text` saved as lesson 01 in a temporary folder: (exit status, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, LESSON)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        r = subprocess.run([sys.executable, os.path.join(HERE, "check"), "--flashlab", flashlab, path],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flashlab", required=True)
    flashlab = os.path.abspath(ap.parse_args().flashlab)
    original = open(os.path.join(HERE, LESSON), encoding="utf-8").read()
    lines = original.split("\n")
    failures = []

    def expect(name, text, ok, pattern):
        status, out = run_check(flashlab, text)
        good = (status == 0) == ok and re.search(pattern, out)
        print(f"{'ok    ' if good else 'FAILED'} {name} (exit {status})")
        if not good:
            failures.append(name)
            print("\n".join("    " + l for l in out.splitlines()[-8:]))

    expect("the lesson as written passes", original, True, r"quoted numbers match .*: ok")

    # Change the first quoted number of a mark with a relative tolerance by half its value.
    n, line = next((n, l) for n, l in enumerate(lines) if re.search(r"<!--check \S+ .* \d+(\.\d+)?%-->", l))
    mark = line.index("<!--check")
    number = re.findall(r"(\d+(?:\.\d+)?)", line[:mark])[-1]
    changed = f"{float(number) * 1.5:g}"
    start = line.rindex(number, 0, mark)
    drifted = lines[:n] + [line[:start] + changed + line[start + len(number):]] + lines[n + 1:]
    expect(f"a changed number ({number} -> {changed}, line {n + 1}) fails, naming it",
           "\n".join(drifted), False, rf"{LESSON}:{n + 1}: the quoted {re.escape(changed)} is not within")

    extra = {
        "a malformed mark": ("The answer is 42<!--check tiny-->.", r":\d+: malformed mark"),
        "a mark naming an unknown block": ("It is 42<!--check nosuch len(text) 1%-->.", r"does not have"),
        "a mark after no number": ("No number here<!--check tiny len(text) 1%-->.", r"follows no number"),
        "a tolerance that is not one": ("It is 42<!--check tiny len(text) two-->.", r"tolerance 'two'"),
        "an expression that fails": ("It is 42<!--check tiny grab(r'no such (\\d+)') 1%-->.", r"found nothing"),
        "a command that fails": ("```sh id=broken\nflashlab estimate --gpu b200\n```", r"block 'broken': .* exited 1"),
        "two commands in one block": ("```sh id=two\nflashlab lesson 1\nflashlab lesson 2\n```", r"holds 2 command lines"),
        "json for a command without JSON": ("```sh id=stepjson json\nflashlab step --non-interactive 1\n```",
                                            r"has no JSON output"),
    }
    for name, (paragraph, pattern) in extra.items():
        expect(name + " fails", original + "\n" + paragraph + "\n", False, pattern)

    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
