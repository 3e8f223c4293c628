#!/bin/bash
# The FA4 wheels (55 MiB) and the tree no longer fit one call's 64 MiB carry: this first call
# carries the largest wheel alone and leaves it in /tmp/whl-stage for call_d64.sh on the warm
# machine (session 22's scheme).
cd "$(dirname "$0")/../../../.."
mkdir -p /tmp/whl-stage && cp .whl/big/nvidia_cutlass_dsl_libs_cu13-*.whl.xz /tmp/whl-stage/ && ls -la /tmp/whl-stage
