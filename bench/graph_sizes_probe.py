"""Why the suite's ``--cuda-graph`` sweep reads about 2 us more per call at 512 B and 1 KiB
in the first mode it measures there, and only there: on 2xH200 (records 81f5c08e, 7f57a639,
08100a4d, a7bacf52) all_gather out of place read 6.52 us at 512 B against 4.46 in place
and 4.46 at 256 B; all_reduce (in place only) 6.26 against 5.12 at 256 B; all_to_all (out
of place only) 7.36 against 5.32. nccl-tests' graph mode shows no such step.

This probe captures what the sweep captures, size by size and mode by mode in the sweep's
order: one untimed eager call, then ``--calls`` calls in one CUDA graph, call ``i`` on the
buffer slice at offset ``i x span`` (``perfsuite.workloads.collectives._sweep.Sweep.calls``), timed
the suite's way (behind a stream hold, an untimed eager call before the start event,
median of ``--repeats`` replays). For each graph it lists, on rank 0, the nodes by kind and
the kernels' names (NCCL names its kernels by algorithm and protocol), so a graph that
holds more than its calls, or other kernels, shows. ``--recapture`` captures each graph
twice and times the second: whether a first capture at a new size leaves something behind.
Run it with ``NCCL_RUNTIME_CONNECT=0`` (every connection made at start-up) beside the
default (NCCL makes connections when a call first needs them).

    torchrun --nproc-per-node 2 bench/graph_sizes_probe.py --op all_gather --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.graph_probe import dump_nodes  # noqa: E402

ENV_KNOBS = ("NCCL_RUNTIME_CONNECT", "NCCL_GRAPH_MIXING_SUPPORT", "NCCL_GRAPH_REGISTER")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="all_gather", choices=("all_reduce", "all_gather", "reduce_scatter", "all_to_all"))
    ap.add_argument("--sizes", default="256,512,1024,2048,4096", help="bytes, comma-separated, in order")
    ap.add_argument("--modes", default="oop,ip", help="modes in the order measured (the sweep's: oop,ip)")
    ap.add_argument("--max-bytes", type=int, default=1 << 20, help="buffer size: the sweep's largest size")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--recapture", action="store_true", help="capture each graph twice, time the second")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    from perfsuite.engine.launcher import suite_env
    from perfsuite.measure.timing import StreamHold, time_loop
    from perfsuite.workloads.collectives._ops import OPS, CallArgs

    os.environ.update(suite_env("cuda", cuda_graph=True))  # as a --cuda-graph run: NCCL's graph mixing off
    from bench.nccl_rank import init_nccl_rank

    rank, world = init_nccl_rank()
    args.out.mkdir(parents=True, exist_ok=True)
    op = OPS[args.op]
    cargs = CallArgs(rank, world, dist.ReduceOp.SUM if op.reduces else None, -1)
    span_max = op.counts(args.max_bytes // 4, world).span
    send = torch.zeros(span_max, device="cuda")
    recv = torch.zeros(span_max, device="cuda")
    hold = StreamHold()
    env = {k: os.environ[k] for k in ENV_KNOBS if k in os.environ}
    result = {
        "op": args.op,
        "world_size": world,
        "calls": args.calls,
        "recapture": args.recapture,
        "env": env,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "rows": [],
    }

    def calls_for(mode: str, c) -> list:
        steps = max(1, recv.numel() // c.span)
        out = []
        for i in range(args.calls):
            shift = c.span * (i % steps)
            v = (
                op.oop_views(send[shift:], recv[shift:], c, rank)
                if mode == "oop"
                else op.ip_views(recv[shift:], c, rank)
            )
            out.append(lambda v=v: op.call(v, cargs))
        return out

    def capture(calls: list):
        g = torch.cuda.CUDAGraph(keep_graph=True)  # its template stays for debug_dump
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            for call in calls:
                call()
        torch.cuda.synchronize()
        dist.barrier()
        return g

    # the sweep's warm-up: calls at the largest size, then at the smallest
    modes = [m for m in args.modes.split(",") if (op.oop_views if m == "oop" else op.ip_views) is not None]
    sizes = [int(s) for s in args.sizes.split(",")]
    for size in (args.max_bytes, sizes[0]):
        for call in calls_for(modes[0], op.counts(size // 4, world))[:5]:
            call()
    torch.cuda.synchronize()
    for size in sizes:
        c = op.counts(size // 4, world)
        for mode in modes:
            calls = calls_for(mode, c)
            calls[0]()  # the sweep's untimed call before the loop
            torch.cuda.synchronize()
            dist.barrier()
            g = capture(calls)
            first = None
            if args.recapture:
                first, g = g, capture(calls)
            name = f"{args.op} {size} B {mode}"
            nodes = dump_nodes(g, args.out / f"{args.op}-{size}B-{mode}.dot") if rank == 0 else None
            samples = []
            for _ in range(args.repeats):
                torch.cuda.synchronize()
                dist.barrier()
                lt = time_loop(g.replay, 1, "cuda", hold, before=calls[0])
                samples.append(lt.seconds / args.calls)
            mine = torch.tensor([statistics.median(samples)], device="cuda", dtype=torch.float64)
            dist.all_reduce(mine)
            row = {
                "size_bytes": size,
                "mode": mode,
                "time_us": float(mine[0]) / world * 1e6,
                "rank0_samples_us": [round(s * 1e6, 3) for s in samples],
                "nodes": nodes,
            }
            result["rows"].append(row)
            if rank == 0:
                print(
                    f"{name:28} {row['time_us']:6.2f} us per call (median of {args.repeats} replays of "
                    f"{args.calls}) {env or ''} nodes {nodes}",
                    flush=True,
                )
            del g, first
    if rank == 0:
        tag = "-recapture" if args.recapture else ""
        (args.out / f"graph_sizes_{args.op}{tag}.json").write_text(json.dumps(result, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    from bench.nccl_rank import run_rank

    run_rank(main, "graph_sizes_probe")
