#!/bin/bash
# Session 34, one H100 (issue 12): step/'s call with one run, meant for a second H100 to see whether
# step/'s 1.22x is that chip's or the H100's. The device was still warm: it ran on step/'s machine.
bash "$(dirname "$0")/../step/call_step.sh" 1
