"""Runs a test body on W processes, torchrun-free: torch.multiprocessing spawns them and a FileStore
in the test's tmp_path rendezvouses them. gloo (CPU) talks over loopback only; with NCCL, rank r
uses GPU r."""

import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# A hung collective must fail the test, not the CI job: generous for 2 shared cores, far below 90 min.
_DEADLINE_S = 300


def run_ranks(world: int, store_dir, body, *args, backend: str = "gloo") -> None:
    """Calls body(rank, world, *args) in `world` fresh processes with the default process group
    initialised on `backend`; re-raises the first failure (with its traceback) in the caller."""
    store_path = os.path.join(str(store_dir), f"store-{world}-{time.monotonic_ns()}")
    context = mp.start_processes(
        _bootstrap, args=(world, store_path, backend, body, args), nprocs=world, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + _DEADLINE_S
    while not context.join(timeout=max(1.0, deadline - time.monotonic())):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            raise TimeoutError(f"{world} ranks did not finish within {_DEADLINE_S} s")


def _bootstrap(rank, world, store_path, backend, body, args):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)  # W processes share the machine's cores
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend,
        store=dist.FileStore(store_path, world),
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=_DEADLINE_S),
    )
    try:
        body(rank, world, *args)
    finally:
        dist.destroy_process_group()
