#!/bin/bash
# usage: exp/pack.sh variant... : xz-compresses exp-bin/<variant>/* into exp-xz/<variant>/ (fresh exp-xz).
cd "$(dirname "$0")/.."
rm -rf exp-xz
for v in "$@"; do
  mkdir -p exp-xz/$v
  for b in exp-bin/$v/*; do xz -T2 -3 -c "$b" > exp-xz/$v/$(basename "$b").xz; done
done
du -sh exp-xz
