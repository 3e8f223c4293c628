#!/bin/bash
# Session 34, a second freshly started H100 (issue 12): step/'s call with one run, to see whether
# step/'s 1.22x is that chip's or the H100's.
bash "$(dirname "$0")/../step/call_step.sh" 1
