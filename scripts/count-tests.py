#!/usr/bin/env python3
"""One closing line for the whole test run, from its log: cargo's test binaries, node's TAP
suites and Python's unittest runs.

Every cargo test binary that started (`Running …` / `Doc-tests …`) must end with a
`test result:` line; one that does not (it crashed or was killed) counts as a failure. Ignored or
skipped tests count as failures too: a green run has run everything. A `not run: …` line (a suite
test.sh could not start, e.g. the browser suite without a dashboard) counts as a failure. Exit
status 1 when anything failed.
"""
import re
import sys


def main(path):
    passed = failed = skipped = 0
    suites = 0
    problems = []
    open_binary = None
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    unittest_ran = None
    for line in lines:
        stripped = line.strip()
        # A suite the run could not start (test.sh says why): a failure, not a silence.
        if stripped.startswith("not run: "):
            problems.append(stripped)
            failed += 1
            suites += 1
            continue
        m = re.match(r"(Running|Doc-tests) (.+?)( \(|$)", stripped)
        if m:
            if open_binary:
                problems.append(f"{open_binary}: ended without a result (crashed?)")
                failed += 1
            open_binary = m.group(2)
            suites += 1
            continue
        m = re.match(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", stripped)
        if m:
            p, f, i = map(int, m.groups())
            passed, failed, skipped = passed + p, failed + f, skipped + i
            if f:
                problems.append(f"{open_binary}: {f} failed")
            if i:
                problems.append(f"{open_binary}: {i} ignored")
            open_binary = None
            continue
        if re.match(r"# tests \d+$", stripped):
            suites += 1
            continue
        m = re.match(r"# (pass|fail|cancelled|skipped|todo) (\d+)$", stripped)
        if m:
            kind, n = m.group(1), int(m.group(2))
            if kind == "pass":
                passed += n
            elif kind in ("fail", "cancelled"):
                failed += n
                if n:
                    problems.append(f"node: {n} {kind}")
            elif kind in ("skipped", "todo"):
                skipped += n
                if n:
                    problems.append(f"node: {n} {kind}")
            continue
        m = re.match(r"Ran (\d+) tests? in", stripped)
        if m:
            unittest_ran = int(m.group(1))
            suites += 1
            continue
        if unittest_ran is not None and re.match(r"(OK|FAILED)\b", stripped):
            bad = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", stripped))
            sk = sum(int(n) for n in re.findall(r"(?:skipped|expected failures)=(\d+)", stripped))
            passed += unittest_ran - bad - sk
            failed += bad
            skipped += sk
            if bad:
                problems.append(f"unittest: {bad} failed")
            if sk:
                problems.append(f"unittest: {sk} skipped")
            unittest_ran = None
    if open_binary:
        problems.append(f"{open_binary}: ended without a result (crashed?)")
        failed += 1
    for p in problems:
        print(f"  {p}")
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped ({suites} test binaries and suites ran)")
    return 1 if failed or skipped else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
