# Sourced by the bench scripts that run nccl-tests beside the suite (gpu_measure.sh,
# gpu_scaleout.sh): build_nccl_tests compiles the carried source (.ref/nccl-tests, a copy of
# ../shared/reference/nccl-tests) against the NCCL that torch uses, into /tmp/nccl-tests-build,
# writing the build log to $OUT/nccl-tests-build.txt.
# nccl-tests is one process (a thread per GPU): it runs over the NCCL transport of the suite's
# separate processes (P2P/CUMEM, not P2P/direct pointer) unless the caller sets otherwise
export PERFSUITE_NCCL_TESTS_ENV=${PERFSUITE_NCCL_TESTS_ENV-NCCL_P2P_DIRECT_DISABLE=1}
build_nccl_tests() {
  local src=.ref/nccl-tests
  [ -d "$src" ] || { echo "no $src: copy ../shared/reference/nccl-tests there and carry it"; return 1; }
  local wheel
  wheel=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])') || return 1
  # The wheel ships libnccl.so.2 only: a shim NCCL_HOME with the libnccl.so the linker asks for.
  NCCL_SHIM=/tmp/nccl-home
  mkdir -p "$NCCL_SHIM/lib"
  ln -sfn "$wheel/include" "$NCCL_SHIM/include"
  ln -sf "$wheel/lib/libnccl.so.2" "$NCCL_SHIM/lib/libnccl.so"
  ln -sf "$wheel/lib/libnccl.so.2" "$NCCL_SHIM/lib/libnccl.so.2"
  export LD_LIBRARY_PATH=$NCCL_SHIM/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ -x /tmp/nccl-tests-build/all_reduce_perf ] && [ -x /tmp/nccl-tests-build/alltoall_perf ]; then
    echo "nccl-tests already built in /tmp/nccl-tests-build (an earlier call on this machine)"
    return 0
  fi
  rm -rf /tmp/nccl-tests-src && cp -r "$src" /tmp/nccl-tests-src
  make -C /tmp/nccl-tests-src MPI=0 NCCL_HOME="$NCCL_SHIM" CUDA_HOME=/usr/local/cuda \
       NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=/tmp/nccl-tests-build src.build -j 16 \
       > "$OUT/nccl-tests-build.txt" 2>&1 || { tail -20 "$OUT/nccl-tests-build.txt"; return 1; }
  ls /tmp/nccl-tests-build/*_perf | head -20
  /tmp/nccl-tests-build/all_reduce_perf -b 8 -e 8 -g "$(nvidia-smi -L | wc -l)" -n 1 -w 1 | tail -4
}
