#!/usr/bin/env bash
# make demo: the closed loop on the embedded local cluster, headless, checked at the end.
#
# flotilla up (devcluster with two emulated-GPU nodes, the CRD, the operator), then a TrainingJob
# that is admitted on 1 GPU, scaled up through the Poisson benefit check, shrunk pipeline-first
# when a node fails, and finished; then it checks that the job succeeded and that its loss log
# equals an uninterrupted run of the same job bit for bit, prints the decisions, and stops
# everything. Exits non-zero if a check fails. (The scripted multi-job scenario with emulated
# speeds, the live view and the picture come with the demo issue.)
set -euo pipefail
build="${1:-build}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
kubectl="$("./scripts/install-tools.sh" --print-dir)/bin/kubectl"
[ -x "$kubectl" ] || kubectl=kubectl
work="$(mktemp -d /tmp/flotilla-demo.XXXXXX)"
export KUBECONFIG="$work/state/kubeconfig"
cleanup() { "$build/cli/flotilla" down --dir "$work/state" >/dev/null 2>&1 || true; }
trap cleanup EXIT

cat docs/*.md > "$work/data.txt"
sed -e "s|/tmp/flotilla-example/data.txt|$work/data.txt|" -e "s|/tmp/flotilla-example/ckpt|$work/ckpt|" \
    -e "s|trainSteps: 500|trainSteps: 800|" examples/trainingjob.yaml > "$work/job.yaml"
echo "== flotilla up (examples/local-nodes.yaml: 2 nodes x 2 emulated GPUs)"
"$build/cli/flotilla" up --nodes examples/local-nodes.yaml --gpu-catalog examples/local-catalog.yaml \
    --dir "$work/state" --detach | sed -n 1p
"$kubectl" apply -f "$work/job.yaml"
field() { "$kubectl" get tj demo -o "jsonpath={$1}"; }
wait_for() {  # wait_for SECONDS COMMAND...
  local limit=$1; shift
  for _ in $(seq 1 $((limit * 5))); do "$@" && return 0; sleep 0.2; done
  return 1
}
scaled_up() { [ "$(field .status.plan.gpus)" = 4 ] && [ "$(field .status.phase)" = Running ]; }
past_step() { [ "$(field .status.progress.step)" -ge 200 ] 2>/dev/null; }
shrunk() { [ "$(field .status.plan.gpus)" = 2 ]; }
done_ok() { [ "$(field .status.phase)" = Succeeded ]; }
wait_for 60 scaled_up || { echo "demo: the job did not scale up to 4 GPUs"; exit 1; }
echo "== scaled up: $(field .status.plan.summary); decision: $(field .status.lastDecision.reason)"
wait_for 60 past_step || { echo "demo: no progress"; exit 1; }
echo "== node n1 fails at step $(field .status.progress.step)"
"$build/devcluster/flotilla-devcluster" admin fail-node n1 --kubeconfig "$KUBECONFIG" >/dev/null
wait_for 30 shrunk || { echo "demo: the job did not shrink onto the surviving node"; exit 1; }
echo "== shrunk: $(field .status.plan.summary); decision: $(field .status.lastDecision.reason)"
wait_for 180 done_ok || { echo "demo: the job did not finish: $(field .status)"; exit 1; }
"$kubectl" get tj demo
echo "== events"
"$kubectl" get events --sort-by=.metadata.resourceVersion | tail -n 12
echo "== reference: the same job, uninterrupted, on one process"
"$build/worker/flotilla-worker" run --world-size 1 --pp 1 --dp 1 --model small --global-batch 8 --micro-batch 1 \
    --virtual-shards 8 --seed 1234 --steps 800 --data "$work/data.txt" --checkpoint-dir "$work/ref" \
    --loss-log "$work/ref-loss.log" > "$work/ref.out"
if cmp -s "$work/ckpt/loss.log" "$work/ref-loss.log"; then
  echo "demo: PASS: 800 steps, the elastic job's loss log equals the uninterrupted run bit for bit"
else
  echo "demo: FAIL: the loss logs differ"; diff "$work/ckpt/loss.log" "$work/ref-loss.log" | head; exit 1
fi
