#!/usr/bin/env bash
# Run the Criterion suites of one build directory through meson and print
# one closing line: "N passed, N failed, N skipped" (counting test cases).
set -u
build=${1:-build}
shift || true
meson test -C "$build" --print-errorlogs --num-processes 2 "$@"
status=$?
log="$build/meson-logs/testlog.txt"
# A sanitizer report fails the run even where the test's process exited 0
# (Criterion runs each test in a child; a leak found at its exit, or a
# report printed without halting, does not change the test's verdict).
reports=$(grep -cE 'ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:|WARNING: ThreadSanitizer' "$log")
if [ "$reports" -gt 0 ]; then
  grep -nE 'ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:|WARNING: ThreadSanitizer' "$log" | head -20
  echo "$reports sanitizer report(s) in $log"
  status=1
fi
awk -v status="$status" '
  /Synthesis: Tested:/ {
    for (i = 1; i <= NF; i++) {
      if ($i == "Tested:")  tested += $(i+1)
      if ($i == "Passing:") passed += $(i+1)
      if ($i == "Failing:") failed += $(i+1)
    }
    suites++
  }
  /\[SKIP\]/ { skipped++ }
  /^Skipped: +[0-9]+/ { skipped_suites = $2 }   # whole suites (exit 77: no GPU)
  END {
    if (status != 0 && failed == 0) failed = 1   # a suite died without a synthesis
    printf "%d passed, %d failed, %d skipped\n", passed, failed, skipped + skipped_suites
  }' "$log"
exit $status
