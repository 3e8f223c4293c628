#!/bin/bash
# The FA4 wheels (55 MiB) and the tracked tree (10 MiB) no longer fit one call's 64 MiB carry.
# This first call carries the largest wheel alone and leaves it in /tmp/whl-stage, where the next
# call on the warm machine finds it (call_d64.sh copies it back into .whl/big/).
cd "$(dirname "$0")/../../../.."
mkdir -p /tmp/whl-stage && cp .whl/big/nvidia_cutlass_dsl_libs_cu13-*.whl.xz /tmp/whl-stage/ && ls -la /tmp/whl-stage
