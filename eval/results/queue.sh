#!/usr/bin/env bash
# The background queue of issue 32's runs, in order of what they answer: the
# budget-64 row of the accuracy table, the ablations (seed 2), window 8 confirmed
# on seed 1, the budget-32 row, then beacon and streaming at budget 128,
# beacon at 96. Every script resumes, so rerunning this after an interruption goes on.
#   setsid nohup eval/results/queue.sh > /tmp/eval-queue.log 2>&1 < /dev/null &
#   then lower its CPU share: echo 19 > /proc/<its pid>/autogroup
cd "$(dirname "$0")/../.."
STAGES=64 eval/results/reasoning-1.5b/run.sh
eval/results/ablation-1.5b/run.sh
STAGES=64w8 eval/results/reasoning-1.5b/run.sh
STAGES=32 eval/results/reasoning-1.5b/run.sh
STAGES=128 eval/results/reasoning-1.5b/run.sh
STAGES=96 eval/results/reasoning-1.5b/run.sh
