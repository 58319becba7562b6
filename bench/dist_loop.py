"""A plain torch.distributed all_reduce loop, timed as nccl-tests and perfsuite time theirs
(one pair of CUDA events around ``iters`` back-to-back calls, ``repeats`` times, the median
over repeats and the mean over ranks; with ``--hold``, the default, queued behind the same stream hold as
perfsuite's ``timing=loop``): the floor perfsuite's eager collectives are compared with for
small messages. One tensor, in place, float32 sum; no buffer rotation, no checks.

    torchrun --nproc-per-node 2 bench/dist_loop.py --max-bytes 65536 --out FILE.json

The process sets the variables the suite sets for its own measuring processes
(``perfsuite.engine.launcher.suite_env``: flight recorder and NVLink multicast off) before NCCL starts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=64 * 1024)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--no-hold", dest="hold", action="store_false", help="time the loop as Python issues it")
    args = ap.parse_args()

    import torch
    import torch.distributed as dist

    from bench.nccl_rank import init_nccl_rank
    from perfsuite.measure.timing import StreamHold, time_loop
    from perfsuite.workloads.collectives._sweep import (  # the sweep's own rule
        HOLD_TRIES,
    )
    from perfsuite.workloads.collectives._sweep import _all_held as all_held

    rank, world = init_nccl_rank()
    hold = StreamHold() if args.hold else None
    rows = []
    unheld = 0  # loops whose hold still ran out after HOLD_TRIES (their time is the host's)
    size = args.min_bytes
    while size <= args.max_bytes:
        t = torch.zeros(max(1, size // 4), device="cuda")
        for _ in range(args.warmup):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        samples, launches = [], []
        for _ in range(args.repeats):
            for _attempt in range(HOLD_TRIES):
                dist.barrier()
                torch.cuda.synchronize()
                # the untimed call before the start event aligns the ranks, as perfsuite's sweep does
                lt = time_loop(lambda: dist.all_reduce(t), args.iters, "cuda", hold, before=lambda: dist.all_reduce(t))
                if hold is None or all_held(lt.held):
                    break
                hold.grow()  # as the sweep: every rank agreed that some hold ran out, so all redo
            else:
                unheld += 1
            samples.append(lt.seconds / args.iters)
            launches.append(lt.launch_s / args.iters)
        mine = torch.tensor(
            [statistics.median_low(samples), sum(launches) / len(launches)], device="cuda", dtype=torch.float64
        )  # the median of the loops, as the sweep takes it
        dist.all_reduce(mine)
        rows.append(
            {"size_bytes": size, "time_us": float(mine[0]) / world * 1e6, "launch_us": float(mine[1]) / world * 1e6}
        )
        size *= 2
    if rank == 0:
        args.out.write_text(
            json.dumps(
                {
                    "collective": "all_reduce",
                    "world_size": world,
                    "iters": args.iters,
                    "repeats": args.repeats,
                    "hold": args.hold,
                    "unheld_loops": unheld,
                    "hold_s": hold.seconds if hold else None,
                    "rows": rows,
                },
                indent=1,
            )
        )
        for r in rows:
            print(
                f"plain dist.all_reduce {r['size_bytes']:>8} B  {r['time_us']:8.2f} us  "
                f"(host launch {r['launch_us']:.2f} us)"
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
