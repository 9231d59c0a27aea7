# Sourced by the bench scripts (#61): run_rounds MIN FILE FUNC calls FUNC 1,
# FUNC 2, ... (each round appends its headline figure to FILE) at least MIN
# times, then more while scripts/lib/settle.py says the figure's median is
# not yet known to +-5%, up to three times MIN. Sets `rounds` to the number
# run.
run_rounds() {
  local min=$1 file=$2 func=$3
  local settle
  settle="$(dirname "${BASH_SOURCE[0]}")/settle.py"
  rounds=0
  while :; do
    rounds=$((rounds + 1))
    "$func" "$rounds"
    [ "$rounds" -lt "$min" ] && continue
    python3 "$settle" check "$file" && break
    if [ "$rounds" -ge $((min * 3)) ]; then break; fi
    echo "round $rounds: the headline figure is not settled yet (scripts/lib/settle.py); one more round" >&2
  done
}
