#!/bin/bash
# Session 35, one H100 (the call asked for an H200 and got an H100; issue 11). The FA4 wheels (about 56 MiB) and the tracked tree do not fit
# one call's 64 MiB carry, nor does the largest wheel (49 MiB xz'd) with the tree any more: it is
# split in two parts (`split -b 26000000 -d <wheel>.whl.xz cu13.part`), and two calls of this
# script each carry one part (.whl-cu13/, git-ignored) and leave it in /tmp/whl-stage on the warm
# machine, where call_same_run.sh joins them (as docs/results/2026-11-27h-h200/same_run/).
cd "$(dirname "$0")/../../../.."
mkdir -p /tmp/whl-stage && cp .whl-cu13/cu13.part* /tmp/whl-stage/ && ls -la /tmp/whl-stage
