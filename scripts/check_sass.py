#!/usr/bin/env python3
"""Checks the SASS of the Hopper kernels of a CUDA build (run by .ci/run):

- every sm90 attention kernel (forward, both backward key-tile kernels) issues HGMMA (wgmma);
- no sm90 kernel touches local memory (LDL/STL) inside a loop.

Local memory outside every loop (a value stored once before the main loop and read after it) is
reported but allowed. Loops are the natural loops of each kernel's control-flow graph.

usage: scripts/check_sass.py BUILD_DIR   (BUILD_DIR: a CMake build of the CUDA preset; cuobjdump
from PATH or $CUOBJDUMP, e.g. the nvidia-cuda-cuobjdump wheel: docs/gpu_testing.md)
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

FUNCTION = re.compile(r"^\s*Function : (\S+)")
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH_TARGET = re.compile(r"\b(?:BRA|CALL)(?:\.\S+)?\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))")
LOCAL_ACCESS = re.compile(r"\b(?:LDL|STL)\b")
# Opcodes that end a basic block.
FLOW_OPCODES = ("BRA", "EXIT", "CALL", "RET")
ATTENTION_KERNEL = re.compile(r"sm90\d+(?:forward_kernel|backward_kv_kernel|backward_split_dim_kernel)I")
HOPPER_KERNEL = re.compile(r"sm90\d+\w+_kernelI")


def functions(sass: str) -> dict[str, list[tuple[int, str]]]:
    """Each function's instructions as (address, text), from cuobjdump -sass output."""
    found: dict[str, list[tuple[int, str]]] = {}
    current = None
    for line in sass.splitlines():
        if match := FUNCTION.match(line):
            current = found.setdefault(match[1], [])
        elif current is not None and (match := INSTRUCTION.search(line)):
            current.append((int(match[1], 16), match[2]))
    return found


def _opcode(text: str) -> str:
    """The opcode of an instruction, its predicate (@P0, @!UP1, @PT) removed."""
    return text.lstrip("@!UPT0123456789 ").split(" ")[0]


def _control_flow(instructions: list[tuple[int, str]]) -> tuple[list[list[int]], list[list[int]]]:
    """Basic blocks (as instruction indices) and each block's successor blocks. A branch, call,
    return or exit ends a block; a predicated branch or exit also falls through, and a call goes to
    its subroutine and falls through (a subroutine's RET has no successor, so a subroutine called
    inside a loop does not count as inside it). Indirect branches are refused."""
    index_of = {address: i for i, (address, _) in enumerate(instructions)}
    leaders = {0}
    targets: dict[int, int] = {}
    for i, (_, text) in enumerate(instructions):
        opcode = _opcode(text)
        if opcode.startswith(("BRX", "JMX")):
            raise ValueError(f"check_sass: cannot follow {text!r}")
        if opcode.startswith(FLOW_OPCODES):
            leaders.add(i + 1)
            if match := BRANCH_TARGET.search(text):
                if match[1] is None:
                    raise ValueError(f"check_sass: a branch to a label, not an address: {text!r}")
                targets[i] = index_of[int(match[1], 16)]
                leaders.add(targets[i])
    starts = sorted(leader for leader in leaders if leader < len(instructions))
    blocks = [list(range(start, end)) for start, end in zip(starts, starts[1:] + [len(instructions)])]
    block_of = {start: b for b, start in enumerate(starts)}
    successors = []
    for b, block in enumerate(blocks):
        last = block[-1]
        text = instructions[last][1]
        opcode = _opcode(text)
        predicated = text.startswith("@") or opcode.startswith("CALL")
        ends_flow = opcode.startswith(FLOW_OPCODES)
        following = [block_of[last + 1]] if last + 1 in block_of and (predicated or not ends_flow) else []
        successors.append(([block_of[targets[last]]] if last in targets else []) + following)
    return blocks, successors


def _predecessors(successors: list[list[int]]) -> list[list[int]]:
    predecessors: list[list[int]] = [[] for _ in successors]
    for b, following in enumerate(successors):
        for s in following:
            predecessors[s].append(b)
    return predecessors


def _dominators(successors: list[list[int]], predecessors: list[list[int]]) -> list[set[int]]:
    """dominators[b]: the blocks on every path from the entry to b (unreachable blocks: all)."""
    everything = set(range(len(successors)))
    dominators = [{0}] + [set(everything) for _ in successors[1:]]
    changed = True
    while changed:
        changed = False
        for b in range(1, len(successors)):
            incoming = [dominators[p] for p in predecessors[b]]
            updated = (set.intersection(*incoming) if incoming else set(everything)) | {b}
            if updated != dominators[b]:
                dominators[b], changed = updated, True
    return dominators


def loop_instructions(instructions: list[tuple[int, str]]) -> set[int]:
    """Indices of the instructions inside some natural loop: for every edge u -> h whose target h
    dominates u, the blocks that reach u without passing h, and h. (An out-of-line slow path that
    branches back to the code after its wait is no loop: its target does not dominate it.)"""
    if not instructions:
        return set()
    blocks, successors = _control_flow(instructions)
    predecessors = _predecessors(successors)
    dominators = _dominators(successors, predecessors)
    inside: set[int] = set()
    reachable = {0}
    stack = [0]
    while stack:
        for s in successors[stack.pop()]:
            if s not in reachable:
                reachable.add(s)
                stack.append(s)
    for tail, following in enumerate(successors):
        for header in following:
            if tail not in reachable or header not in dominators[tail]:
                continue
            body, stack = {header, tail}, ([tail] if tail != header else [])
            while stack:
                for p in predecessors[stack.pop()]:
                    if p not in body:
                        body.add(p)
                        stack.append(p)
            for b in body:
                inside.update(blocks[b])
    return inside


def local_accesses(instructions: list[tuple[int, str]]) -> tuple[list[int], list[int]]:
    """Addresses of the LDL/STL instructions inside some loop, and outside every loop."""
    in_loops = loop_instructions(instructions)
    inside, outside = [], []
    for i, (address, text) in enumerate(instructions):
        if LOCAL_ACCESS.search(text):
            (inside if i in in_loops else outside).append(address)
    return inside, outside


def problems(all_functions: dict[str, list[tuple[int, str]]]) -> tuple[list[str], list[str]]:
    """(rule violations, notes) over the sm90 kernels among `all_functions`."""
    violations, notes = [], []
    for name, instructions in sorted(all_functions.items()):
        if not HOPPER_KERNEL.search(name):
            continue
        if ATTENTION_KERNEL.search(name) and not any(text.startswith("HGMMA") for _, text in instructions):
            violations.append(f"{name}: no HGMMA instruction")
        inside, outside = local_accesses(instructions)
        if inside:
            violations.append(f"{name}: local memory inside a loop at {', '.join(hex(a) for a in inside)}")
        if inside or outside:
            notes.append(f"{name}: {len(inside)} local accesses inside loops, {len(outside)} outside")
    return violations, notes


def hopper_objects(build_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(build_dir.glob("CMakeFiles/*/src/cuda/sm90/*.cu.o"))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    objects = hopper_objects(pathlib.Path(argv[1]))
    if not objects:
        print(f"check_sass: no sm90 objects under {argv[1]}/CMakeFiles/*/src/cuda/sm90/", file=sys.stderr)
        return 2
    cuobjdump = os.environ.get("CUOBJDUMP", "cuobjdump")
    all_functions: dict[str, list[tuple[int, str]]] = {}
    for path in objects:
        sass = subprocess.run([cuobjdump, "-sass", str(path)], check=True, capture_output=True, text=True).stdout
        all_functions.update(functions(sass))
    checked = [name for name in all_functions if HOPPER_KERNEL.search(name)]
    if not any(ATTENTION_KERNEL.search(name) for name in checked):
        print("check_sass: cuobjdump listed no sm90 attention kernel", file=sys.stderr)
        return 2
    violations, notes = problems(all_functions)
    for line in notes:
        print(f"note: {line}")
    for line in violations:
        print(f"FAILED: {line}")
    print(f"check_sass: {len(checked)} sm90 kernels in {len(objects)} objects, {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
