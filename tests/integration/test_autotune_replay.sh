#!/usr/bin/env bash
# long
# serial
# test_autotune.sh on a surface where the config matters: ResNet-50
# replayed (ps-worker --model resnet50, 1.25 TFLOP/s simulated device,
# batch 32: 100 MB of gradients a step against 0.63 s of compute) by two
# workers over a tbf-shaped link of 2 Gbit/s, re-shaped to 1 Gbit/s after
# the first lock-in.  There the best partition beats the worst by 30-40 %
# (docs/benchmarks.md "Scheduling"), where the check-mode surfaces of
# test_autotune.sh are flat to a few percent.  The grid must show a
# spread of at least AT_MIN_SPREAD (1.2) at each rate, else the test
# fails as unable to judge;
# the tuner's locked configs, re-measured interleaved with each rate's
# grid best, must reach AT_FIRST_MIN / AT_SECOND_MIN (0.90) of it.  The
# test prints how many grid points reach that bar: 4-6 of 8 at 2 Gbit/s
# and 5 of 8 at 1 Gbit/s here, so a random pick passes both rates about
# a third of the time (one run, 535 s at load 7: 0.94 and 0.975).
# A sample is the median of 5 steps (AT_STEPS_PER_SAMPLE): with 3, stop
# 49's CI run locked 128 KiB x 16 at 0.898 of the 2 Gbit/s grid best
# after the whole budget (a median of 3 gives way to two slow steps); on
# the shallow surface of test_tuner_search, with 3 % noise per step and
# a tenth of the steps at 0.67x, 11 of 100 seeds locked below 0.9 with 3
# steps a sample, 1 with 5 (tuner_slow_steps_need_longer_samples).
export AT_MODEL=${AT_MODEL:-resnet50}
export AT_R1=${AT_R1:-2gbit} AT_R2=${AT_R2:-1gbit}
export AT_PARTS=${AT_PARTS:-"16K 128K 1M 8M"} AT_MULTS=${AT_MULTS:-"1 4"}
export AT_GRID_STEPS1=${AT_GRID_STEPS1:-8} AT_GRID_STEPS2=${AT_GRID_STEPS2:-6}
export AT_STEPS_PER_SAMPLE=${AT_STEPS_PER_SAMPLE:-5}
export AT_TUNE_STEPS=${AT_TUNE_STEPS:-200}
export AT_ROUNDS=${AT_ROUNDS:-3}
export AT_MIN_SPREAD=${AT_MIN_SPREAD:-1.2}
export AT_FIRST_MIN=${AT_FIRST_MIN:-0.90} AT_SECOND_MIN=${AT_SECOND_MIN:-0.90}
exec bash "$(dirname "$0")/test_autotune.sh"
