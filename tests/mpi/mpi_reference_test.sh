#!/usr/bin/env bash
# mpirun -np P dcp-verify reference: the keys split over P processes, their states merged on
# process 0. For each fixture case (GQA; a shared latent with a sink, top-k and base 2) and P = 2,
# 3: the file it writes is judged by `check` against the single-process oracle as an fp64 result
# (its bound is the fp64 claim's, about 1e-13 relative), and --tier certify is refused by name.
set -u
mpirun=$1 dcp=$2 cases=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
for c in "$cases"/gqa_causal_bf16.safetensors "$cases"/latent_sink_topk_base2.safetensors; do
  for p in 2 3; do
    out="$work/ref_$p.safetensors"
    if ! "$mpirun" -np "$p" "$dcp" reference --case "$c" --out "$out" > "$work/log" 2>&1; then
      echo "FAIL: mpirun -np $p reference on $(basename "$c")"; cat "$work/log"; fail=1; continue
    fi
    grep -q "$p processes" "$work/log" || { echo "FAIL: no '$p processes' in:"; cat "$work/log"; fail=1; }
    if ! "$dcp" check --case "$c" --result "$out" > "$work/check" 2>&1 ||
       ! grep -q "# check: OK" "$work/check"; then
      echo "FAIL: check of the $p-process reference of $(basename "$c")"; cat "$work/check"; fail=1
    fi
    rm -f "$out"
  done
done
"$mpirun" -np 2 "$dcp" reference --case "$cases"/gqa_causal_bf16.safetensors \
  --out "$work/c.safetensors" --tier certify > "$work/log" 2>&1
rc=$?
if [ "$rc" != 2 ] || ! grep -q "certify runs in one process" "$work/log"; then
  echo "FAIL: --tier certify under mpirun: exit $rc"; cat "$work/log"; fail=1
fi
[ -e "$work/c.safetensors" ] && { echo "FAIL: a refused run wrote its output"; fail=1; }
[ "$fail" = 0 ] && echo "mpi reference: OK"
exit "$fail"
