"""scripts/check_sass.py, the Hopper kernels' SASS rules that .ci/run checks on the CUDA build, on
SASS written here in cuobjdump's format: HGMMA in every attention kernel, and local memory only
outside loops."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_sass", ROOT / "scripts" / "check_sass.py")
check_sass = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_sass)

FORWARD = (
    "_ZN6dualkv6detail4sm9014forward_kernelINS1_13ForwardConfigIN7cutlass10bfloat16_tELi128EEEEE"
    "vNS1_19ForwardKernelParamsE"
)


def backward(head_dim, accumulate_dq):
    return (
        "_ZN6dualkv6detail4sm9018backward_kv_kernelINS1_14BackwardConfigIN7cutlass10bfloat16_tE"
        f"Li{head_dim}EEELb{int(accumulate_dq)}EEEvNS1_17BackwardTmaParamsE"
    )


def sass(name, instructions):
    """cuobjdump -sass text of one function; instruction i at address 16 i, a branch target
    written as {label} for the address of the instruction tagged label: at its start."""
    addresses = {}
    for i, text in enumerate(instructions):
        if ":" in text.split(" ")[0]:
            addresses[text.split(":")[0]] = 16 * i
    lines = ["\tcode for sm_90a", f"\t\tFunction : {name}"]
    for i, text in enumerate(instructions):
        text = text.split(":", 1)[1].strip() if ":" in text.split(" ")[0] else text
        text = text.format(**{label: hex(address) for label, address in addresses.items()})
        lines.append(f"        /*{16 * i:04x}*/                   {text} ;")
        lines.append("                                                                 /* 0x000fe200078e00ff */")
    return "\n".join(lines) + "\n"


LOOP_WITH_LOCAL_LOAD = [
    "STL [R1], R4",
    "top: HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24, gsb0",
    "LDL R12, [R1]",
    "@P0 BRA {top}",
    "EXIT",
]
LOCAL_LOAD_AFTER_THE_LOOP = [
    "STL [R1], R4",
    "top: HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24, gsb0",
    "@P0 BRA {top}",
    "LDL R12, [R1]",
    "EXIT",
]


def check(name, instructions):
    return check_sass.problems(check_sass.functions(sass(name, instructions)))


def test_local_memory_inside_a_loop_is_a_violation_and_outside_a_note():
    violations, notes = check(FORWARD, LOOP_WITH_LOCAL_LOAD)
    assert len(violations) == 1 and "local memory inside a loop at 0x20" in violations[0]
    assert notes == [f"{FORWARD}: 1 local accesses inside loops, 1 outside"]
    violations, notes = check(FORWARD, LOCAL_LOAD_AFTER_THE_LOOP)
    assert violations == [] and notes == [f"{FORWARD}: 0 local accesses inside loops, 2 outside"]


def test_a_slow_path_that_branches_back_is_no_loop():
    """The wait's retry block at the function's end spins on itself and returns to the code after
    the wait; the load there is not inside a loop."""
    instructions = [
        "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24, gsb0",
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2",
        "@!P0 BRA {retry}",
        "after: LDL R12, [R1]",
        "EXIT",
        "retry: SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2",
        "@!P0 BRA {retry}",
        "BRA {after}",
    ]
    violations, notes = check(FORWARD, instructions)
    assert violations == [] and notes == [f"{FORWARD}: 0 local accesses inside loops, 1 outside"]


def test_a_subroutine_call_falls_through():
    instructions = [
        "top: HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24, gsb0",
        "CALL.REL.NOINC {helper}",
        "@P0 BRA {top}",
        "EXIT",
        "helper: LDL R12, [R1]",
        "RET.REL.NODEC R20 0x0",
    ]
    violations, notes = check(FORWARD, instructions)
    assert violations == [] and notes == [f"{FORWARD}: 0 local accesses inside loops, 1 outside"]


def test_an_attention_kernel_without_hgmma_is_a_violation():
    violations, _ = check(backward(128, True), ["MOV R1, R2", "EXIT"])
    assert violations == [f"{backward(128, True)}: no HGMMA instruction"]


def test_no_backward_kernel_may_keep_local_memory_in_its_loop():
    for name in (backward(64, True), backward(64, False), backward(128, True), backward(128, False)):
        assert len(check(name, LOOP_WITH_LOCAL_LOAD)[0]) == 1, name


def test_kernels_of_other_families_are_not_checked():
    portable = (
        "_ZN6dualkv6detail4sm8018backward_dq_kernelINS1_14BackwardTraitsIN7cutlass10bfloat16_tE"
        "Li64ELi128ELi64EEEEEvNS0_20BackwardKernelParamsE"
    )
    assert check(portable, ["MOV R1, R2", *LOOP_WITH_LOCAL_LOAD[1:]]) == ([], [])
