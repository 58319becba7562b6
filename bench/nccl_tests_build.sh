# Sourced by the bench scripts that run nccl-tests beside the suite (gpu_measure.sh,
# gpu_scaleout.sh): build_nccl_tests compiles the carried source (.ref/nccl-tests, a copy of
# ../shared/reference/nccl-tests) against the NCCL that torch uses, into /tmp/nccl-tests-build,
# writing the build log to $OUT/nccl-tests-build.txt.
#
# Where its ranks live (perfsuite.crosscheck.nccl_tests.layout): with MPICH's wheel carried beside the source
# (.ref/mpich-*.whl, from PyPI: `pip download --no-deps --only-binary=:all: --python-version 3.12
# --platform manylinux_2_28_x86_64 -d .ref mpich`), nccl-tests is built with MPI=1 and runs as
# one process per GPU under its mpiexec (PERFSUITE_NCCL_TESTS_MPIRUN), the suite's own layout:
# both sides then reach the peer through the same NCCL transport between processes. Without
# it, one process with a thread per GPU, over the transport of the suite's separate processes
# (P2P/CUMEM, not P2P/direct pointer: NCCL_P2P_DIRECT_DISABLE=1) unless the caller sets otherwise.
# NCCL_TESTS_LAYOUT names the layout for the steps' titles.
MPICH_WHEEL=$(ls .ref/mpich-*.whl 2>/dev/null | head -1)
if [ -n "$MPICH_WHEEL" ]; then
  MPI_HOME=/tmp/mpich/data
  export PERFSUITE_NCCL_TESTS_MPIRUN=$MPI_HOME/bin/mpiexec
  export PERFSUITE_NCCL_TESTS_ENV=${PERFSUITE_NCCL_TESTS_ENV-}
  NCCL_TESTS_LAYOUT="mpiexec -n N -g 1"
else
  export PERFSUITE_NCCL_TESTS_ENV=${PERFSUITE_NCCL_TESTS_ENV-NCCL_P2P_DIRECT_DISABLE=1}
  NCCL_TESTS_LAYOUT="-t N -g 1${PERFSUITE_NCCL_TESTS_ENV:+ $PERFSUITE_NCCL_TESTS_ENV}"
fi
build_nccl_tests() {
  local src=.ref/nccl-tests kind=threads
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
  local mpi=(MPI=0)
  if [ -n "$MPICH_WHEEL" ]; then  # the wheel's data folder is a whole MPICH prefix: bin, include, lib
    kind=mpi
    if [ ! -x "$MPI_HOME/bin/mpiexec" ]; then
      # python's zipfile (unzip may be missing there) keeps no file modes: the programs made executable again
      rm -rf /tmp/mpich-unpack /tmp/mpich && python3 -m zipfile -e "$MPICH_WHEEL" /tmp/mpich-unpack \
        && mv /tmp/mpich-unpack/mpich-*.data /tmp/mpich && chmod +x "$MPI_HOME"/bin/* || return 1
    fi
    export LD_LIBRARY_PATH=$MPI_HOME/lib:$LD_LIBRARY_PATH
    mpi=(MPI=1 MPI_HOME="$MPI_HOME")
  fi
  if [ -x /tmp/nccl-tests-build/all_reduce_perf ] && [ -x /tmp/nccl-tests-build/alltoall_perf ] \
     && [ "$(cat /tmp/nccl-tests-build/.kind 2>/dev/null)" = "$kind" ]; then
    echo "nccl-tests ($kind) already built in /tmp/nccl-tests-build (an earlier call on this machine)"
    return 0
  fi
  rm -rf /tmp/nccl-tests-src /tmp/nccl-tests-build && cp -r "$src" /tmp/nccl-tests-src
  make -C /tmp/nccl-tests-src "${mpi[@]}" NCCL_HOME="$NCCL_SHIM" CUDA_HOME=/usr/local/cuda \
       NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=/tmp/nccl-tests-build src.build -j 16 \
       > "$OUT/nccl-tests-build.txt" 2>&1 || { tail -20 "$OUT/nccl-tests-build.txt"; return 1; }
  echo "$kind" > /tmp/nccl-tests-build/.kind
  ls /tmp/nccl-tests-build/*_perf | head -20
  local gpus
  gpus=$(nvidia-smi -L | wc -l)
  if [ "$kind" = mpi ]; then
    "$PERFSUITE_NCCL_TESTS_MPIRUN" -n "$gpus" /tmp/nccl-tests-build/all_reduce_perf -b 8 -e 8 -g 1 -n 1 -w 1 | tail -6
  else
    /tmp/nccl-tests-build/all_reduce_perf -b 8 -e 8 -g "$gpus" -n 1 -w 1 | tail -4
  fi
}
