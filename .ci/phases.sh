# Timing of .ci/run's phases, sourced by it.
#
#   phase NAME COMMAND...     runs COMMAND, recording how long it took
#   phase_log NAME FILE CMD…  the same, keeping its output in FILE too
#
# When the run ends (passed or failed), a table of the phases, the test
# binaries slowest first (from the `cargo test` output kept in a log) and
# the total against CI's budget is printed, so a regression shows in the
# run that made it.

CI_STARTED=$(date +%s)
CI_PHASES=()
CI_TEST_LOG=""
# The budget a clean run must fit on CI's 2-core machines, in minutes.
CI_BUDGET_MIN=25

phase() {
    local name="$1" start rc=0
    shift
    start=$(date +%s)
    echo "=== .ci/run: $name: $*"
    "$@" || rc=$?
    CI_PHASES+=("$name $(($(date +%s) - start)) $rc")
    return "$rc"
}

phase_log() {
    local name="$1" log="$2" start rc=0
    shift 2
    mkdir -p "$(dirname "$log")"
    CI_TEST_LOG="$log"
    start=$(date +%s)
    echo "=== .ci/run: $name: $*"
    "$@" 2>&1 | tee "$log" || rc=$?
    CI_PHASES+=("$name $(($(date +%s) - start)) $rc")
    return "$rc"
}

ci_summary() {
    local total=$(($(date +%s) - CI_STARTED))
    echo
    echo "=== .ci/run: where the time went"
    printf '  %-12s %8s  %s\n' phase seconds status
    local p name secs rc
    for p in "${CI_PHASES[@]}"; do
        read -r name secs rc <<<"$p"
        printf '  %-12s %8s  %s\n' "$name" "$secs" "$([[ $rc == 0 ]] && echo ok || echo "failed ($rc)")"
    done
    if [[ -n "$CI_TEST_LOG" && -f "$CI_TEST_LOG" ]]; then
        echo "  test binaries, slowest first (seconds their tests ran; building is the build phase):"
        awk '
            /^ *Running / {
                # (target/debug/deps/NAME-HASH): the binary, by its name.
                name = $NF; sub(/^\(.*\//, "", name); sub(/-[0-9a-f]+\)$/, "", name)
                name = name " (" ($2 == "unittests" ? $3 : $2) ")"
            }
            /^ *Doc-tests / { name = "doc-tests " $2 }
            /^test result:/ {
                for (i = 1; i <= NF; i++) if ($i == "in") { t = $(i + 1); sub(/s$/, "", t) }
                printf "%10.1f  %s\n", t, name
            }' "$CI_TEST_LOG" | sort -rn | head -15
    fi
    printf '  %-12s %8s  (budget %d min: %s)\n' total "$total" "$CI_BUDGET_MIN" \
        "$([[ $total -le $((CI_BUDGET_MIN * 60)) ]] && echo within || echo OVER)"
}
