# tests/tools/lib.sh — what the programs' test scripts share: checks that
# count passes and failures under a suite name, and the Criterion-style
# synthesis line that tests/run-suite.sh sums. Sourced after SUITE and TMP
# (a scratch folder of the script's) are set.

passed=0
failed=0
check() { # name, then the command; passes when it exits 0
    local name=$1
    shift
    if "$@" >"$TMP/out.log" 2>&1; then
        passed=$((passed + 1))
        echo "[PASS] $SUITE::$name"
    else
        failed=$((failed + 1))
        echo "[FAIL] $SUITE::$name"
        sed 's/^/    /' "$TMP/out.log"
    fi
}
says() { # expected text, then the command (which must exit 1)
    local want=$1
    shift
    "$@"
    local got=$?
    [ "$got" = 1 ] || { echo "exit status $got, expected 1"; return 1; }
    "$@" 2>&1 | grep -q -- "$want"
}
exits() { # expected status, then the command
    local want=$1
    shift
    "$@"
    local got=$?
    [ "$got" = "$want" ] || { echo "exit status $got, expected $want"; return 1; }
}
finish() { # the synthesis line; the script's status
    echo "[====] Synthesis: Tested: $((passed + failed)) | Passing: $passed | Failing: $failed | Crashing: 0"
    [ "$failed" = 0 ]
}
