#!/usr/bin/env bash
# Bad input never loses data, never crashes, never hangs: every input below must end within
# kLimit seconds with exit 2 and exactly one line on stderr, with no core dump and no input file
# changed (their checksums are compared before and after every command). One section per class
# of failure that once happened: data loss, aborts, endless runs, silent clamping, wrong blame,
# accepted nonsense. Prints how many bad inputs it tried.
# Usage: bad_input_test.sh path/to/dcp-verify path/to/fixtures path/to/make_result path/to/plugin.so
set -u
bin=$1
fixtures=$2
make_result=$3
plugin=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=10
failures=0
tried=0

# Inputs the commands read, copied so that a command that writes them cannot harm the repository.
cp "$fixtures/cases/gqa_causal_bf16.safetensors" "$tmp/case.safetensors"
cp "$fixtures/dcp/pinned.json" "$tmp/pinned.json"
cp "$plugin" "$tmp/plugin.so"
"$make_result" --case "$tmp/case.safetensors" --out "$tmp/result.safetensors" --impl model \
  --dcp-size 2 >/dev/null || { echo "FAIL: make_result"; exit 1; }
echo '{"keep": "this report"}' >"$tmp/old.json"
ln -s "$tmp/case.safetensors" "$tmp/link-to-case.safetensors"
ln "$tmp/result.safetensors" "$tmp/hardlink-to-result.safetensors"
inputs=("$tmp/case.safetensors" "$tmp/pinned.json" "$tmp/result.safetensors" "$tmp/old.json"
        "$tmp/plugin.so")
sums() { sha256sum "${inputs[@]}"; }
sums >"$tmp/sums.before"

# bad WHAT -- COMMAND...: exit 2, one line on stderr, within the limit, no input changed.
bad() {
  local what=$1
  shift 2
  tried=$((tried + 1))
  local start end rc
  start=$(date +%s)
  timeout -s KILL "$limit" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$?
  end=$(date +%s)
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ]; then
    echo "FAIL: $what: exit $rc (expected 2), $lines stderr lines (expected 1), $((end - start)) s"
    sed 's/^/  stderr: /' "$tmp/err" | head -5
    failures=$((failures + 1))
  fi
  if ! sums | cmp -s - "$tmp/sums.before"; then
    echo "FAIL: $what: an input file changed"
    failures=$((failures + 1))
    sums >"$tmp/sums.before"
  fi
  if ls "$tmp"/core* >/dev/null 2>&1; then
    echo "FAIL: $what: left a core dump"
    failures=$((failures + 1))
    rm -f "$tmp"/core*
  fi
}

# says TEXT WHAT: the last command's stderr names what is wrong.
says() {
  if ! grep -qF -- "$1" "$tmp/err"; then
    echo "FAIL: $2: stderr does not say '$1'"
    sed 's/^/  stderr: /' "$tmp/err" | head -3
    failures=$((failures + 1))
  fi
}

case=$tmp/case.safetensors
result=$tmp/result.safetensors

echo "== data loss: an output that is one of the command's inputs"
bad "reference --out is the case" -- "$bin" reference --case "$case" --out "$case"
says "--out" "reference --out is the case"
bad "reference --out is a symlink to the case" -- "$bin" reference --case "$tmp/link-to-case.safetensors" --out "$case"
bad "reference --out is the case through a symlink" -- "$bin" reference --case "$case" --out "$tmp/link-to-case.safetensors"
bad "check --json is the result" -- "$bin" check --case "$case" --result "$result" --json "$result"
says "--result" "check --json is the result"
bad "check --json is the case" -- "$bin" check --case "$case" --result "$result" --json "$case"
bad "check --json is a hard link to the result" -- "$bin" check --case "$case" --result "$result" --json "$tmp/hardlink-to-result.safetensors"
bad "properties --json is the pinned file" -- "$bin" properties --pinned "$tmp/pinned.json" --json "$tmp/pinned.json" --cases 1
bad "run --json is the --impl plug-in" -- "$bin" run --impl "$tmp/plugin.so" --seq 16 --json "$tmp/plugin.so"
says "--impl" "run --json is the --impl plug-in"
bad "properties --junit is the --impl plug-in" -- "$bin" properties --impl "$tmp/plugin.so" --cases 1 --junit "$tmp/plugin.so"
says "--impl" "properties --junit is the --impl plug-in"
bad "check --json and --junit one new file" -- "$bin" check --case "$case" --result "$result" --json "$tmp/r.out" --junit "$tmp/./r.out"
says "one report would replace the other" "check --json and --junit one new file"
bad "run --json and --junit one file" -- "$bin" run --json "$tmp/old.json" --junit "$tmp/old.json"
bad "run --json is a folder" -- "$bin" run --json "$tmp"
bad "run --json: a name too long, refused before the run" -- "$bin" run --seq 16 --json "$tmp/$(printf 'a%.0s' {1..300})"
says "File name too long" "run --json: a name too long"
[ -s "$tmp/out" ] && { echo "FAIL: run --json: a name too long: the run ran first"; failures=$((failures + 1)); }
bad "run --bound names no tier" -- "$bin" run --bound loose
bad "check --bound names no tier" -- "$bin" check --case "$case" --result "$result" --bound 0.5
mkdir -p "$tmp/locked" && echo '{}' >"$tmp/locked/r.json" && chmod 555 "$tmp/locked"
if [ "$(id -u)" -ne 0 ]; then  # root may write anywhere
  bad "check --json in a read-only folder" -- "$bin" check --case "$case" --result "$result" --json "$tmp/locked/r.json"
fi
bad "check --json in a missing folder" -- "$bin" check --case "$case" --result "$result" --json "$tmp/no/such/r.json"
# A run refused after its --json was checked leaves the old report as it was.
bad "run refused after --json" -- "$bin" run --json "$tmp/old.json" --exp poly3 --tile 1 --seq 8000 --head-dim 8 --v-dim 4
says "the oracle cannot judge" "run refused after --json"

echo "== aborts: sizes beyond what can be allocated or counted"
for args in "--interleave 99999999999" "--tile 9999999999999" "--seq 9999999999999" \
            "--heads 99999999999 --kv-heads 1" "--head-dim 99999999999" "--kv-heads 99999999999" \
            "--tokens 999999999999" "--batch 99999999999" "--cases 99999999999" \
            "--seq 100000000 --heads 64 --kv-heads 64" "--tokens 1000000 --heads 1024 --kv-heads 1 --seq 1000" \
            "--tile 1099511627776 --seq 16" "--splits 1099511627776 --seq 16" \
            "--batch 4096 --seq 100000000" "--window 1099511627777" \
            "--seq 1099511627776 --heads 1048576"; do  # the last: its chunk list alone is GBs
  # shellcheck disable=SC2086
  bad "run $args" -- "$bin" run $args
done
bad "run: too much memory, named" -- "$bin" run --seq 100000000 --heads 64 --kv-heads 64
says "of memory" "run: too much memory, named"
says "--seq 100000000" "run: too much memory, named"
bad "sweep -n overflowing warmup + iters" -- "$bin" sweep -n 9223372036854775807 -w 9223372036854775807
bad "sweep -e beyond memory" -- "$bin" sweep -b 16 -e 16777216 --heads 1024 --kv-heads 1024 --dcp-size 1 --tp-size 1
bad "sweep: too many sizes" -- "$bin" sweep -b 1 -e 16777216 -f 1.0000001
bad "sweep: -f one ulp above 1" -- "$bin" sweep -b 1 -e 16777216 -f 1.0000000000000002
bad "properties --pinned a folder" -- "$bin" properties --pinned "$tmp"
says "a folder" "properties --pinned a folder"
: >"$tmp/empty-pinned.json"
bad "properties --pinned an empty file" -- "$bin" properties --pinned "$tmp/empty-pinned.json"
says "an empty file; expected a non-empty JSON array" "properties --pinned an empty file"
python3 - "$tmp/pinned.json" "$tmp/huge.json" <<'PY'
import json, sys
entries = json.load(open(sys.argv[1]))
e = entries[0]
e["setup"]["spec"]["seq"] = 1 << 39
e["setup"]["chunks"] = [1 << 39]
json.dump([e], open(sys.argv[2], "w"))
PY
bad "a pinned entry with a huge seq" -- "$bin" properties --pinned "$tmp/huge.json" --only pinned
says "entry 0" "a pinned entry with a huge seq"
truncate -s 200G "$tmp/sparse.safetensors"  # 200 GB long, no block of it written
bad "check: a case file too large for memory" -- "$bin" check --case "$tmp/sparse.safetensors" --result "$result"
says "of memory" "check: a case file too large for memory"
bad "reference: a case file too large for memory" -- "$bin" reference --case "$tmp/sparse.safetensors" --out "$tmp/r.safetensors"
bad "check: a case that is a device, not a file" -- "$bin" check --case /dev/zero --result "$result"
bad "reference: a case that is a folder" -- "$bin" reference --case "$tmp" --out "$tmp/r.safetensors"
bad "properties --cases beyond the cap" -- "$bin" properties --cases 1000001
bad "mutants --cases beyond the cap" -- "$bin" mutants --cases 99999999999

# A result's dcp_size is not bounded by its case: the oracle's memory is that of the row's keys,
# a merge no bound can hold is said before any row is computed, and N x splits must count.
"$bin" reference --case "$case" --out "$tmp/ref.safetensors" >/dev/null 2>&1 ||
  { echo "FAIL: reference"; failures=$((failures + 1)); }
python3 - "$tmp/ref.safetensors" "$tmp" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
for name, size in [("dcp30m", "30000000"), ("dcpmax", str(2**63 - 1))]:
    header["__metadata__"]["dcp_size"] = size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(f"{sys.argv[2]}/{name}.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
bad "check: a result claiming 30 million ranks" -- "$bin" check --case "$case" --result "$tmp/dcp30m.safetensors"
says "no bound holds in any row" "check: a result claiming 30 million ranks"
bad "check: a result claiming 2^63 - 1 ranks" -- "$bin" check --case "$case" --result "$tmp/dcpmax.safetensors"
says "'dcp_size'" "check: a result claiming 2^63 - 1 ranks"

echo "== endless runs"
bad "sweep -n 3000000000" -- "$bin" sweep -n 3000000000 -b 16 -e 16
bad "sweep -w 3000000000" -- "$bin" sweep -w 3000000000 -b 16 -e 16
bad "--timeout 0" -- "$bin" run --timeout 0
bad "--timeout beyond a day" -- "$bin" run --timeout 86401

echo "== silent clamping: out-of-range numbers are refused, naming the flag written"
bad "--seed 2^64" -- "$bin" run --seed 18446744073709551616
says "--seed" "--seed 2^64"
bad "--seed -1" -- "$bin" run --seed -1
bad "--dcp-size 1e20" -- "$bin" run --dcp-size 99999999999999999999
says "--dcp-size" "--dcp-size 1e20"
bad "model --seq 1e20" -- "$bin" model --seq 99999999999999999999
says "--seq" "model --seq 1e20"
for flag in "model --heads" "model --batch" "model --tokens" "layout --dcp-size" "layout --offset" \
            "layout --len" "layout --seq" "sweep -b" "sweep -e" "properties --cases" \
            "selfcheck --seed" "mutants --seed"; do
  # shellcheck disable=SC2086
  bad "$flag 1e20" -- "$bin" $flag 99999999999999999999
done
for v in "0x10" "1e3" "+4" " 4" "4.0" "four"; do
  bad "--dcp-size '$v'" -- "$bin" run --dcp-size "$v"
done
bad "--softcap inf" -- "$bin" run --softcap 1e999
bad "--softcap nan" -- "$bin" run --softcap nan
# The kernels keep the cap in fp32: a cap fp32 cannot hold as a normal number is refused, not
# judged as a failure of the kernels.
bad "--softcap below fp32's normals" -- "$bin" run --softcap 1e-300
says "normal fp32" "--softcap below fp32's normals"
bad "--softcap above fp32's range" -- "$bin" run --softcap 1e300
bad "sweep -f 1" -- "$bin" sweep -f 1
bad "--quiet=2x" -- "$bin" run --quiet=2x
bad "--latent=false-seq" -- "$bin" model --latent=false-seq 4096
says "--latent" "--latent=false-seq"
bad "model --hbm-gbps 0" -- "$bin" model --hbm-gbps 0
bad "model --latency-us -1" -- "$bin" model --latency-us -1

echo "== wrong blame: a malformed pinned entry is bad input, naming the entry and the field"
python3 - "$tmp/pinned.json" "$tmp" <<'PY'
import copy, json, sys
entries = json.load(open(sys.argv[1]))
out = sys.argv[2]
def write(name, mutate):
    es = copy.deepcopy(entries)
    mutate(es[1]["setup"])
    json.dump(es, open(f"{out}/{name}.json", "w"))
write("dcp0", lambda s: s["config"].update(dcp_size=0))
write("negchunk", lambda s: s.update(chunks=[-1] + s["chunks"]))
write("typo", lambda s: s["spec"].update(seq="twelve"))
write("unknown", lambda s: s["spec"].update(sq=3))
write("missing", lambda s: s["config"].pop("tile"))
write("badstyle", lambda s: s["spec"].update(values="loud"))
write("hugeint", lambda s: s["spec"].update(tokens=2**70))
write("tpn", lambda s: s["config"].update(tp_size=3, dcp_size=2))
write("a2a16", lambda s: s["config"].update(comm="a2a", math={"exp": "libm", "p_cast": "f32",
                                             "tf32": False, "partial": "f32", "merge": "f16"}))
write("mathexp", lambda s: s["config"].update(math={"exp": "fast", "p_cast": "f32",
                                               "tf32": False, "partial": "f32", "merge": "f32"}))
write("scale16", lambda s: s["spec"].update(kv_dtype="BF16", kv_scale="per_tensor"))
write("badscale", lambda s: s["spec"].update(kv_dtype="F8_E4M3", kv_scale="per_row"))
write("page", lambda s: s["config"].update(page_size=-2, page_seed=1))
json.dump({"not": "a list"}, open(f"{out}/notlist.json", "w"))
open(f"{out}/notjson.json", "w").write("[{")
json.dump([], open(f"{out}/empty.json", "w"))
PY
for f in dcp0 negchunk typo unknown missing badstyle hugeint tpn a2a16 mathexp scale16 badscale page \
         notlist notjson empty; do
  bad "pinned $f" -- "$bin" properties --pinned "$tmp/$f.json" --only pinned
  says "pinned counterexamples" "pinned $f"
done
bad "pinned scales on a bf16 cache" -- "$bin" properties --pinned "$tmp/scale16.json" --only pinned
says "entry 1: setup.spec.kv_scale: scales are for fp8 and int8 caches" "pinned scales on a bf16 cache"
bad "pinned dcp_size 0: the field named" -- "$bin" properties --pinned "$tmp/dcp0.json" --only pinned
says "entry 1: setup.config.dcp_size: got 0" "pinned dcp_size 0: the field named"
bad "pinned 16-bit sum with a2a" -- "$bin" properties --pinned "$tmp/a2a16.json" --only pinned
says "setup.config.math.merge: got f16; a2a merges in fp32" "pinned 16-bit sum with a2a"
bad "pinned mistyped field: no raw json exception" -- "$bin" properties --pinned "$tmp/typo.json" --only pinned
says "spec.seq: expected an integer" "pinned mistyped field"

bad "properties: ranges beyond memory, blamed on the ranges" -- "$bin" properties --cases 1 --max-dcp 256 --max-seq 65536 --max-head-dim 256 --max-v-dim 256
says "--max-dcp 256 --max-seq 65536 --max-head-dim 256 --max-v-dim 256: the largest case they draw needs" "properties: ranges beyond memory"
bad "cases: ranges beyond memory, blamed on the ranges" -- "$bin" cases --count 1 --out "$tmp" --max-dcp 256 --max-seq 65536
says "--max-dcp 256 --max-seq 65536: the largest case" "cases: ranges beyond memory"

echo "== accepted nonsense: combinations refused up front, before any output"
bad "--topk beyond the context" -- "$bin" run --topk 5000 --seq 100
says "--topk" "--topk beyond the context"
bad "--topk beyond the window" -- "$bin" run --topk 20 --seq 100 --window 10
bad "--splits beyond a rank's keys" -- "$bin" run --splits 500 --seq 100
says "--splits" "--splits beyond a rank's keys"
bad "--json ''" -- "$bin" run --json ""
bad "check --json ''" -- "$bin" check --case "$case" --result "$result" --json ""
bad "--v-dim above --head-dim for a latent" -- "$bin" run --latent --head-dim 8 --v-dim 16
bad "properties --only with a newline in the name" -- "$bin" properties --only "$(printf 'a\nb')" --cases 1
bad "mutants --list with a run's flag" -- "$bin" mutants --list --only no_such_mutant
says "--only is a run's" "mutants --list with a run's flag"
bad "mutants --markdown without --list" -- "$bin" mutants --markdown --cases 1
says "--markdown is --list's" "mutants --markdown without --list"
bad "sweep --seq" -- "$bin" sweep --seq 5
bad "sweep --shared-prefix" -- "$bin" sweep -b 64 -e 64 --shared-prefix 4
says "run --batch --page-size" "sweep --shared-prefix: what to run instead"
bad "sweep -e below -b" -- "$bin" sweep -b 100 -e 10
for args in "--seq 64 --page-size 3 --interleave 2" "--seq 4096 --batch 2 --page-size 4" \
            "--seq 64 --batch 4 --shared-prefix 64 --page-size 4" \
            "--seq 64 --batch 4 --retired 4 --page-size 4"; do
  # shellcheck disable=SC2086
  bad "layout $args" -- "$bin" layout $args
  [ -s "$tmp/out" ] && { echo "FAIL: layout $args: printed tables before its error"; failures=$((failures + 1)); }
done
for b in "--heads 6 --kv-heads 4" "--dcp-size 4 --tp-size 6" "--heads 6 --dcp-size 4"; do
  # shellcheck disable=SC2086
  bad "run $b" -- "$bin" run $b
done

echo "== hardening, round two: hostile files, plug-ins and names"
# A case whose k_scale has no element: refused, not read as "no scale" (the kernel was blamed).
# A case whose logits overflow double (scale 1e308): refused by reference and check alike (reference
# printed NaN and exited 0; check blamed the result).
python3 - "$case" "$tmp" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
def write(name, h):
    text = json.dumps(h).encode()
    text += b" " * (-len(text) % 8)
    open(f"{sys.argv[2]}/{name}.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + data)
empty = json.loads(json.dumps(header))
empty["k_scale"] = {"dtype": "F32", "shape": [0], "data_offsets": [len(data), len(data)]}
write("empty_scale", empty)
huge = json.loads(json.dumps(header))
huge["__metadata__"]["scale"] = "1e308"
write("overflow", huge)
PY
bad "reference: k_scale with no element" -- "$bin" reference --case "$tmp/empty_scale.safetensors" --out "$tmp/x.safetensors"
says "tensor 'k_scale'" "reference: k_scale with no element"
bad "reference: logits beyond double" -- "$bin" reference --case "$tmp/overflow.safetensors" --out "$tmp/x.safetensors"
says "overflow double" "reference: logits beyond double"
bad "check: logits beyond double" -- "$bin" check --case "$tmp/overflow.safetensors" --result "$result"
says "overflow double" "check: logits beyond double"
# --only dcp-batch where the run cannot draw it: said why, not "unknown property".
bad "properties --impl --only dcp-batch" -- "$bin" properties --impl "$tmp/plugin.so" --only dcp-batch
says "levels take one request per step (a batch needs ABI 2" "properties --impl --only dcp-batch"
bad "properties --without batch --only dcp-batch" -- "$bin" properties --without batch --only dcp-batch
says "--without batch leaves the batch property out" "properties --without batch --only dcp-batch"
# Partials with an owner map but no dcp_size: the map does not say how many ranks there are, and
# the line does not claim it could.
"$make_result" --case "$case" --out "$tmp/partials.safetensors" --impl model --dcp-size 2 \
  --partials >/dev/null || { echo "FAIL: make_result --partials"; failures=$((failures + 1)); }
python3 - "$tmp/partials.safetensors" "$tmp/owner_no_n.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
seq = 100  # the case's keys
for key in ("dcp_size", "interleave"):
    header["__metadata__"].pop(key, None)
header["owner"] = {"dtype": "I64", "shape": [seq], "data_offsets": [len(data), len(data) + 8 * seq]}
data += b"".join(struct.pack("<q", p % 2) for p in range(seq))
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data)
PY
bad "check: partials, an owner map, no dcp_size" -- "$bin" check --case "$case" --result "$tmp/owner_no_n.safetensors"
says "(tensor 'owner' does not replace it)" "check: partials, an owner map, no dcp_size"
# --impl a FIFO: dlopen would wait for a writer, --timeout or not.
mkfifo "$tmp/fifo.so"
bad "run --impl a FIFO" -- "$bin" run --impl "$tmp/fifo.so" --timeout 2
says "not a regular file" "run --impl a FIFO"

# Standard output on a full device: the report is lost, so the exit says so (it was 0).
bad "run > /dev/full" -- bash -c '"$0" run --dcp-size 2 --seq 64 >/dev/full' "$bin"
says "standard output: write failed" "run > /dev/full"
# A report this user may not write (mode 0444) is refused, not replaced by a rename; as root,
# which may write it, the test runs as nobody (setpriv).
mkdir -p "$tmp/ro" && cp "$tmp/old.json" "$tmp/ro/report.json" && chmod 0444 "$tmp/ro/report.json"
as_user=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  chown -R 65534:65534 "$tmp/ro"
  chmod 0755 "$tmp"
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
if [ "$(id -u)" -ne 0 ] || [ ${#as_user[@]} -gt 0 ]; then
  bad "run --json a 0444 file" -- "${as_user[@]}" "$bin" run --dcp-size 2 --seq 64 --json "$tmp/ro/report.json"
  says "not writable by this user (mode 0444)" "run --json a 0444 file"
  cmp -s "$tmp/old.json" "$tmp/ro/report.json" || { echo "FAIL: a 0444 report was replaced"; failures=$((failures + 1)); }
else
  echo "SKIP: run --json a 0444 file: running as root without setpriv to become another user"
fi

echo "== tables and flags that must be honoured (these succeed)"
# A pipe (like /dev/null or /dev/stdout) named as the report is written into, not replaced.
mkfifo "$tmp/pipe"
# The pipe is open for reading before the command runs (a FIFO without a reader is the command's
# error, not a wait: a reader started in the background could still be starting, as on a loaded
# machine it was), and read without blocking after it ends (the report fits the pipe's buffer).
exec 3<>"$tmp/pipe"
timeout "$limit" "$bin" info --json "$tmp/pipe" >/dev/null 2>&1
dd bs=1M count=1 iflag=nonblock status=none <&3 >"$tmp/from-pipe" || true
exec 3<&-
if [ ! -p "$tmp/pipe" ] || ! grep -q '"dcp-verify/info/1"' "$tmp/from-pipe"; then
  echo "FAIL: --json into a pipe replaced the pipe or wrote nothing through it"
  failures=$((failures + 1))
fi
# So is this process's own standard output, through a link to it (as /dev/stdout is) when it is a
# file: the report follows what was printed, what the shell writes next follows the report, and
# the link stays a link.
ln -s /proc/self/fd/1 "$tmp/my-stdout"
{ timeout "$limit" "$bin" info --json "$tmp/my-stdout"; echo "after the report"; } >"$tmp/stdout-file" 2>&1
if [ ! -L "$tmp/my-stdout" ] || ! grep -q '^# dcp-verify info' "$tmp/stdout-file" ||
   ! grep -q '"schema": "dcp-verify/info/1"' "$tmp/stdout-file" ||
   [ "$(tail -n 1 "$tmp/stdout-file")" != "after the report" ]; then
  echo "FAIL: --json through a link to stdout (a file) replaced the link, lost the table or was overwritten"
  failures=$((failures + 1))
fi
timeout "$limit" "$bin" run --preset k3-mla --latent=false --seq 64 >"$tmp/out" 2>&1
if [ $? -ne 0 ] || grep -q "/512L" "$tmp/out" || ! grep -q "1x96/1x576/512 " "$tmp/out"; then
  echo "FAIL: run --preset k3-mla --latent=false still runs a shared latent"
  failures=$((failures + 1))
fi
timeout "$limit" "$bin" model --preset k3-mla --latent=false >"$tmp/out" 2>&1
grep -q "shared latent" "$tmp/out" && { echo "FAIL: model --latent=false"; failures=$((failures + 1)); }
# Every column of a run row stays apart, whatever the values: as many fields as the header names.
timeout "$limit" "$bin" run --interleave 50000 --dcp-size 100 --tp-size 100 --heads 100 \
  --kv-heads 1 --seq 10 --window 1099511627776 >"$tmp/out" 2>&1
if ! awk '/^   0 /{ if (NF != 14) bad = 1; seen = 1 } END { exit !(seen && !bad) }' "$tmp/out"; then
  echo "FAIL: run table columns run together for large values"
  grep "^   0 " "$tmp/out"
  failures=$((failures + 1))
fi
timeout "$limit" "$bin" layout --offset 1099511627776 --len 4 --dcp-size 1024 --interleave 1048576 \
  --seq 1099511627776 >"$tmp/out" 2>&1
if ! awk '/^  +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+  OK$/{ n++ } END { exit !(n == 4) }' "$tmp/out"; then
  echo "FAIL: layout table columns run together for large positions"
  head -8 "$tmp/out"
  failures=$((failures + 1))
fi

# A path that would print a verdict line of its own: escaped in the header, so that a failing
# check's stdout holds no "# check: OK" line.
"$make_result" --case "$case" --out "$tmp/wrong.safetensors" --impl model --dcp-size 2 \
  --bug merge_unweighted_mean --partials >/dev/null
sneaky=$(printf '%s/case\n# check: OK\n.safetensors' "$tmp")
cp "$case" "$sneaky"
timeout "$limit" "$bin" check --case "$sneaky" --result "$tmp/wrong.safetensors" >"$tmp/out" 2>&1
if [ $? -ne 1 ] || grep -qx '# check: OK' "$tmp/out" || ! grep -qF 'case\n# check: OK\n' "$tmp/out"; then
  echo "FAIL: a case path with a newline and a verdict in it printed a line of its own"
  head -3 "$tmp/out"
  failures=$((failures + 1))
fi

# A case path that is not UTF-8 (legal on Linux): the reports are written, their strings valid
# UTF-8 with the byte escaped (an internal error, and no report, before).
odd=$(printf '%s/case-\xff.safetensors' "$tmp")
cp "$case" "$odd"
timeout "$limit" "$bin" check --case "$odd" --result "$result" --json "$tmp/odd.json" \
  --junit "$tmp/odd.xml" >"$tmp/out" 2>&1
if [ $? -ne 0 ] ||
   ! python3 -c 'import json, sys; json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))' "$tmp/odd.json" ||
   ! python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$tmp/odd.xml" ||
   ! grep -qF 'case-\\xff.safetensors' "$tmp/odd.json"; then
  echo "FAIL: a case path with a byte that is not UTF-8"
  tail -3 "$tmp/out"
  failures=$((failures + 1))
fi

echo "bad_input_test: $tried bad inputs tried, $failures failures"
[ "$failures" -eq 0 ]
