#!/usr/bin/env bash
# The main job: set up, then run a demo domain of local web services.
#  1. two endpoints (`mpiws serve`) host the `sum` service; a domain of 4 ranks
#     is started on them over HTTP and each rank's result is printed (the
#     endpoints and the client share the user's key, ~/.config/mpiws/key,
#     which the first `mpiws serve` creates);
#  2. `mpiws run -n 4` runs the example programs as domains of 4 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: setting up .venv and building mpiws (scripts/setup.sh; the first time, several minutes) ..."
scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for port in 18301 18302; do
    mpiws serve --port "$port" --service sum=examples.service_sum:service &
    pids+=($!)
done
for port in 18301 18302; do
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done
done
echo
echo "== a domain of 4 ranks on two endpoints (ranks 0,2 on :18301; 1,3 on :18302)"
mpiws run --endpoints http://127.0.0.1:18301,http://127.0.0.1:18302,http://127.0.0.1:18301,http://127.0.0.1:18302 \
    --service sum --params '{"n": 1000000}'
echo
echo "== what endpoint :18301 reports (GET /, with the key mpiws serve uses: domains are shown to key holders only)"
curl -s -H "Authorization: Bearer $(mpiws key)" http://127.0.0.1:18301/ | .venv/bin/python -m json.tool
for ex in hello ring compute_pi pingpong; do
    echo
    echo "== mpiws run -n 4 examples/$ex.py"
    mpiws run -n 4 -l "examples/$ex.py"
done
