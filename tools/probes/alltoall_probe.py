"""What torch.distributed's ``all_to_all_single`` runs, beside what nccl-tests' alltoall runs:
on 2xH200 (NCCL 2.28.9) the suite's out-of-place all_to_all read 3-7% faster than nccl-tests'
out-of-place column at 1, 2, 8 and 16 MiB, and within 0.7-2.0% of nccl-tests' in-place column
(nccl-tests' own out-of-place and in-place figures differ by 3-9% there; both call
``ncclAlltoAll``). For each size this lists the GPU operations of one call (torch.profiler)
and times, the suite's way (one interval around ``--iters`` calls behind a stream hold):

- ``oop``: separate send and receive tensors, as the suite's sweep;
- ``same``: one tensor as both, as nccl-tests' in-place mode (torch may refuse: reported);
- ``oop_offset``: separate tensors whose receive buffer starts 256 B into its allocation.

Run with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL`` to see which NCCL calls torch makes.

    torchrun --nproc-per-node 2 tools/probes/alltoall_probe.py --out FILE.json
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: bench.nccl_rank

MIB = 1 << 20


def one_call_ops(fn) -> dict:
    """The GPU operations of one call, by name, with their total time (us)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ops: dict = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type.name == "CUDA":
            ops[e.name[:70]] += e.time_range.elapsed_us()
    return {k: round(v, 2) for k, v in ops.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=f"{MIB},{2 * MIB},{16 * MIB}", help="bytes, comma-separated")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist

    from bench.nccl_rank import init_nccl_rank
    from perfsuite.measure.timing import StreamHold, time_loop
    from perfsuite.workloads.collectives._sweep import HOLD_TRIES
    from perfsuite.workloads.collectives._sweep import _all_held as all_held

    rank, world = init_nccl_rank()
    hold = StreamHold()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        n = size // 4
        send = torch.zeros(n, device="cuda")
        recv = torch.zeros(n, device="cuda")
        padded = torch.zeros(n + 64, device="cuda")
        variants = {"oop": (send, recv), "same": (send, send), "oop_offset": (send, padded[64:])}
        for name, (inp, out) in variants.items():

            def call(inp=inp, out=out):
                dist.all_to_all_single(out, inp)

            try:
                for _ in range(5):
                    call()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - torch refusing a variant is the finding
                rows.append({"size_bytes": size, "variant": name, "error": f"{type(exc).__name__}: {exc}"})
                continue
            ops = one_call_ops(call)
            samples = []
            for _ in range(args.repeats):
                for _attempt in range(HOLD_TRIES):
                    dist.barrier()
                    torch.cuda.synchronize()
                    lt = time_loop(call, args.iters, "cuda", hold, before=call)
                    if all_held(lt.held):
                        break
                    hold.grow()
                samples.append(lt.seconds / args.iters)
            mine = torch.tensor([statistics.median(samples)], device="cuda", dtype=torch.float64)
            dist.all_reduce(mine)
            t_us = float(mine[0]) / world * 1e6
            busbw = size / (t_us * 1e-6) / 1e9 * (world - 1) / world
            rows.append(
                {
                    "size_bytes": size,
                    "variant": name,
                    "time_us": round(t_us, 3),
                    "busbw_gbps": round(busbw, 2),
                    "gpu_ops_one_call": ops,
                }
            )
            if rank == 0:
                print(
                    f"all_to_all {size:>9} B {name:10} {t_us:8.2f} us  busbw {busbw:7.2f} GB/s  ops {ops}", flush=True
                )
    if rank == 0:
        args.out.write_text(
            json.dumps(
                {
                    "world_size": world,
                    "torch": torch.__version__,
                    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                    "rows": rows,
                },
                indent=1,
            )
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    from bench.nccl_rank import run_rank

    run_rank(main, "alltoall_probe")
