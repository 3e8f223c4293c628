#!/bin/bash
# Unpacks exp-xz/<variant>/<binary>.xz (binaries built on the CPU machine, xz-compressed to fit
# the carry limit) into exp-bin/<variant>/<binary>.
cd "$(dirname "$0")/.."
for f in exp-xz/*/*.xz; do
  v=$(basename "$(dirname "$f")"); b=$(basename "$f" .xz)
  mkdir -p exp-bin/$v && python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$f" exp-bin/$v/$b && chmod +x exp-bin/$v/$b
done
