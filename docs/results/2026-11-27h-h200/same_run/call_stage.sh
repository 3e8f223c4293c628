#!/bin/bash
# The FA4 wheels (55 MiB) and the tracked tree do not fit one call's 64 MiB carry: this call
# carries the largest wheel alone and leaves it in /tmp/whl-stage on the warm machine, where
# call_same_run.sh finds it (as docs/results/2026-11-26j-h200/d64_same_run/call_stage.sh).
cd "$(dirname "$0")/../../../.."
mkdir -p /tmp/whl-stage && cp .whl/big/nvidia_cutlass_dsl_libs_cu13-*.whl.xz /tmp/whl-stage/ && ls -la /tmp/whl-stage
