#!/usr/bin/env bash
# tests/slurm/train_job.sh CHORUS_TRAIN: `sbatch chorus.sbatch chorus-train ...` (the README's
# batch file) under a Slurm cluster of 2 nodes with 2 CPUs each (scripts/slurm.sh): a small
# data-parallel job of 4 ranks, 2 per node, trains its few steps and saves its checkpoint.
# Exit status 77 (ctest's skip) where Slurm cannot be started.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: train_job.sh CHORUS_TRAIN" >&2; exit 2; }
train=$1
test_name=slurm_train
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT CHORUS_STORE_ADDR CHORUS_STORE_PORT
cd "$logs" || exit 1
run_slurm --nodes 2 --cpus 2 --timeout 150 -- \
  "$here/sbatch_wait.sh" --output=train.log "$here/chorus.sbatch" "$train" --model mlp --hidden 64 \
  --layers 1 --no-eval --steps 40 --log-every 10 --checkpoint "$logs/model.pt"
grep -q "; 4 ranks x batch" train.log || fail "the job did not run 4 ranks"
grep -q "^summary steps=40 " train.log || fail "the job did not train its 40 steps"
[ -s model.pt ] || fail "the job saved no checkpoint"
echo "$test_name: chorus-train ran as 4 ranks on 2 Slurm nodes"
