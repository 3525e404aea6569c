#!/bin/bash
# The OpenCL engine on a real GPU: the test suite with OpenCL on the GPU's platform, the
# OpenCL benchmark, and the call-overhead benchmark with both halves of the call.
#
# Usage, from the repository root on a machine with an NVIDIA GPU and python3 with numpy,
# pytest and pyopencl importable (PLATFORM: a substring of the OpenCL platform's name):
#   PLATFORM=NVIDIA bash tools/opencl_gpu_check.sh [OUT_DIR]
# Where no OpenCL ICD names the NVIDIA driver, it registers /usr/local/nvidia's (root).
# Last run 2026-11-26 on an H200: 7,263 passed, 3 failed (PyTensor not installed there).
set -u
OUT=${1:-build/gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && [ -e /usr/local/nvidia/lib64/libnvidia-opencl.so ]; then
  mkdir -p /etc/OpenCL/vendors
  echo /usr/local/nvidia/lib64/libnvidia-opencl.so > /etc/OpenCL/vendors/nvidia.icd
fi
python3 -c "import pyopencl as cl; print([(p.name, [d.name for d in p.get_devices()]) for p in cl.get_platforms()])" || exit 2
python3 setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "no C half of the call (python half)"
export THEANO_DAG_FLAGS="opencl__platform=${PLATFORM:-NVIDIA},compiledir=${TMPDIR:-/tmp}/td-gpu-check"
for i in 1 2; do
  python3 benchmarks/call_overhead.py --repeats 15 | grep '"x+1"' | sed 's/^/C-half /'
  THEANO_DAG_PY_CALL=1 python3 benchmarks/call_overhead.py --repeats 15 | grep '"x+1"' | sed 's/^/Py-half /'
done | tee "$OUT/call_overhead.jsonl"
timeout "${BENCH_S:-120}" python3 benchmarks/opencl.py --runs 10 | grep '^{' | tee "$OUT/opencl.jsonl"
timeout "${TEST_S:-300}" python3 -m pytest tests theano_dag -p no:cacheprovider -rf \
  ${XDIST:-} 2>&1 | tee "$OUT/tests.log" | tail -15
