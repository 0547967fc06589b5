#!/usr/bin/env bash
# test-summary.sh reads `go test -v` output on stdin, passes it through unchanged, and ends with a
# short table: tests (subtests included) passed, failed and skipped per package. Before the table
# it prints again the last lines each failed test printed: with tests running in parallel their
# output is interleaved, and a log that keeps only its end (CI's) would otherwise lose why a test
# failed. It exits 1 when it saw a failure, else 0; with `set -o pipefail` (the Makefile's shell)
# a go test failure that printed nothing recognisable still fails the pipeline.
#
#   go test -v -tags e2e ./test/e2e/... 2>&1 | hack/test-summary.sh
set -euo pipefail

awk -v KEEP=15 '
function flush(pkg, result, took) {
  n++
  pkgs[n] = pkg; res[n] = result; dur[n] = took
  p[n] = pass; f[n] = fail; s[n] = skip
  tp += pass; tf += fail; ts += skip
  pass = fail = skip = 0
}
{ print; fflush() }
# Which test the lines that follow belong to (go test -v names it before its output).
/^=== (RUN|CONT|NAME|PAUSE)[[:space:]]/ { cur = $3; next }
/^[[:space:]]*--- (PASS|FAIL|SKIP): / { cur = $3 }
/^[[:space:]]+[^[:space:]-]/ && cur != "" { keep[cur, seen[cur] % KEEP] = $0; seen[cur]++ }
/^[[:space:]]*--- PASS: / { pass++; next }
/^[[:space:]]*--- FAIL: / { fail++; failed = 1; nfailed++; failedTests[nfailed] = $3; next }
/^[[:space:]]*--- SKIP: / { skip++; next }
/^ok  \t/                 { flush($2, "ok", $3); next }
/^FAIL\t/                 { failed = 1; flush($2, "FAIL", $3 " " $4); next }
/^\?   \t/                { flush($2, "no tests", ""); next }
END {
  if (pass + fail + skip > 0) flush("(unattributed)", fail ? "FAIL" : "?", "")
  for (i = 1; i <= nfailed; i++) {
    t = failedTests[i]
    printf "\n==== %s failed; its last lines ====\n", t
    from = seen[t] > KEEP ? seen[t] - KEEP : 0
    for (j = from; j < seen[t]; j++) print keep[t, j % KEEP]
  }
  printf "\n==== test summary ====\n"
  printf "%-58s %5s %5s %5s  %s\n", "PACKAGE", "PASS", "FAIL", "SKIP", "RESULT"
  for (i = 1; i <= n; i++) printf "%-58s %5d %5d %5d  %s %s\n", pkgs[i], p[i], f[i], s[i], res[i], dur[i]
  printf "%-58s %5d %5d %5d  %s\n", "TOTAL", tp, tf, ts, failed ? "FAIL" : "ok"
  exit failed ? 1 : 0
}
'
