#!/usr/bin/env bash
# On a GPU machine without network: the trainer integrations' GPU test
# (tests/python/test_integrations_cuda.py: one TRL GRPO step and one veRL actor update, bf16,
# dualkv's CUDA kernels against the unmodified trainers, times printed).
#
#   bash scripts/run_integrations_gpu.sh [extra pytest flags]
#
# Needs, next to the checkout:
#   .whl-integrations/  trl, verl and the dependencies the GPU machine lacks (scripts/fetch_integration_wheels.sh)
#   .cutlass/           the CuTe/CUTLASS headers for the extension's CUDA build
# Steps: installs the wheels offline (--no-deps) into INTEGRATIONS_SITE, checks that trl's
# GRPOTrainer and veRL's engine import (stops here if not: no CUDA build for a test that would
# only skip), builds dualkv with the CUDA kernels (sm_90) into DUALKV_SITE, then runs the test and
# fails unless both cases ran and passed. Ray, which verl imports but this path never calls, is
# replaced by scripts/integrations_gpu_shims/ray when it is not installed.
# Logs go to $OUT when it is set, else build/integrations-gpu-results:
# install.log, imports.log, build.log, tests.log, junit.xml. DUALKV_SKIP_BUILD=1 reuses the dualkv
# in DUALKV_SITE (a second run on a warm machine; the build folder build/integrations-gpu also
# makes a rebuild there incremental).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
results=${OUT:-$root/build/integrations-gpu-results}
# The folder's path must contain "site-packages": dill, which datasets uses to fingerprint a
# Dataset, pickles by value (and fails on pyarrow's types) any module it finds outside
# sys.prefix and outside a folder of that name.
int_site=${INTEGRATIONS_SITE:-/tmp/pysite-int/site-packages}
dualkv_site=${DUALKV_SITE:-/tmp/pysite}
wheels="$root/.whl-integrations"
mkdir -p "$results"
export PYTHONUNBUFFERED=1
cd "$root"

if ! compgen -G "$wheels/*.whl" >/dev/null; then
  echo "no wheels in $wheels: run scripts/fetch_integration_wheels.sh where PyPI is reachable, and carry .whl-integrations" >&2
  exit 2
fi
if [[ -f .cutlass/include/cute/tensor.hpp ]]; then cutlass=$root/.cutlass/include; else cutlass=$root/.cutlass; fi
if [[ ! -f "$cutlass/cute/tensor.hpp" ]]; then
  echo "no CuTe headers in .cutlass (or .cutlass/include): carry .cutlass" >&2
  exit 2
fi

echo "== installing $(find "$wheels" -maxdepth 1 -name "*.whl" | wc -l) wheels from .whl-integrations into $int_site"
rm -rf "$int_site"
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --target "$int_site" \
  "$wheels"/*.whl >"$results/install.log" 2>&1 || { cat "$results/install.log"; exit 1; }

export PYTHONPATH="$int_site:$dualkv_site${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import ray" >/dev/null 2>&1; then
  echo "== ray is not installed: using the import-only stand-in scripts/integrations_gpu_shims/ray"
  export PYTHONPATH="$PYTHONPATH:$root/scripts/integrations_gpu_shims"
fi

# Versions and folders of what the test imports, then the imports themselves: a missing or
# incompatible module shows here, named, instead of as a skipped test.
check_imports() {
  python3 - "$@" <<'EOF'
import importlib.metadata as md, os, sys, traceback
print("python", sys.version.split()[0], sys.executable)
DISTS = """torch transformers accelerate huggingface_hub tokenizers safetensors numpy pandas pyarrow fsspec
packaging peft datasets dill multiprocess trl verl tensordict pyvers orjson hydra-core omegaconf
antlr4-python3-runtime codetiming ray dualkv""".split()
for dist in DISTS if os.environ.get("SHOW_VERSIONS") == "1" else []:
    try:
        found = md.distribution(dist)
        print(f"  {dist:24} {found.version:14} {found.locate_file('')}")
    except md.PackageNotFoundError:
        print(f"  {dist:24} -")
failed = 0
for statement in sys.argv[1:]:
    try:
        exec(statement, {})
        print(f"ok      {statement}")
    except BaseException:
        failed += 1
        print(f"FAILED  {statement}")
        traceback.print_exc(limit=-4)
sys.exit(1 if failed else 0)
EOF
}
echo "== imports (trainers)"
SHOW_VERSIONS=1 check_imports "import torch; print('    torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())" \
  "import ray; print('    ray from', ray.__file__)" \
  "import datasets; datasets.Dataset.from_dict({'prompt': ['w2 w3', 'w4']})" \
  "from trl import GRPOConfig, GRPOTrainer" \
  "import verl; from verl.workers.engine.fsdp import transformer_impl; from verl.workers.utils.losses import ppo_loss" \
  "from verl.workers.config import FSDPActorConfig; from verl.workers.utils.padding import left_right_2_no_padding" \
  2>&1 | tee "$results/imports.log" || { echo "imports failed: not building (imports.log)" >&2; exit 1; }

if [[ "${DUALKV_SKIP_BUILD:-0}" == 1 ]]; then
  echo "== DUALKV_SKIP_BUILD=1: using the dualkv already in $dualkv_site"
else
  echo "== building dualkv with the CUDA kernels (sm_90) into $dualkv_site"
  DUALKV_CUDA=1 python3 -m pip install --no-build-isolation --no-deps --upgrade --target "$dualkv_site" \
    -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR="$cutlass" \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    -C build-dir=build/integrations-gpu \
    -C build.tool-args=-j"$(nproc)" . >"$results/build.log" 2>&1 || { tail -40 "$results/build.log"; exit 1; }
fi

echo "== imports (dualkv)"
check_imports "import dualkv; assert dualkv.cuda_compiled(), 'dualkv was built without its CUDA kernels'" \
  "import dualkv.integrations.trl" "import dualkv.integrations.verl" 2>&1 | tee -a "$results/imports.log" ||
  { echo "imports failed (imports.log)" >&2; exit 1; }

echo "== tests/python/test_integrations_cuda.py"
status=0
python3 -m pytest -q -s -rs tests/python/test_integrations_cuda.py --junitxml="$results/junit.xml" "$@" 2>&1 |
  tee "$results/tests.log" || status=$?
# Both cases (or, with pytest flags given, every selected one) must have run: a skip (no GPU, no
# CUDA kernels, an import that failed) is a failure here.
python3 - "$results/junit.xml" "$(( $# ? 1 : 2 ))" <<'EOF' || status=1
import sys, xml.etree.ElementTree as ET
suite = ET.parse(sys.argv[1]).getroot()
suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
ok = counts["tests"] >= int(sys.argv[2]) and counts["failures"] == counts["errors"] == counts["skipped"] == 0
print("junit:", counts, "->", "PASSED" if ok else "FAILED (a case skipped, failed or did not run)")
sys.exit(0 if ok else 1)
EOF
exit "$status"
