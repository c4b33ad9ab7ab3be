"""A seccomp filter for model-written code: the system calls it never needs are refused.

It is a deny list, so ordinary Python runs unchanged: calls that inspect or change other
processes (``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``kcmp``), make or
enter namespaces and mounts (``unshare``, ``setns``, ``mount``..., ``clone`` with namespace
flags; ``clone3``, whose flags a filter cannot read, answers ENOSYS so libc falls back to
``clone``), and kernel surfaces a program has no use for (keyrings, ``bpf``,
``perf_event_open``, ``userfaultfd``, ``io_uring``, modules, ``kexec``) fail with EPERM.
Any other architecture or ABI (i386 or x32 calls on x86_64) is refused outright.

The program is classic BPF, built here as bytes: the supervisor installs it with
``prctl(PR_SET_SECCOMP)`` (after ``no_new_privs``), and bwrap takes the same bytes with
``--seccomp FD``. Only x86_64 and aarch64 are known; elsewhere :func:`program` is None.
"""

from __future__ import annotations

import functools
import platform
import struct

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM = 1
ENOSYS = 38

# struct seccomp_data: nr at 0, arch at 4, args at 16 (the low half of args[0] on LE).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

_NAMESPACE_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)

_DENIED_NAMES = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "open_by_handle_at",
)  # fmt: skip

# (audit arch, syscall numbers by name, first number of a foreign ABI to refuse or None)
_ARCHES: dict[str, tuple[int, dict[str, int], int | None]] = {
    "x86_64": (
        0xC000003E,
        {
            "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
            "pidfd_getfd": 438, "kcmp": 312, "unshare": 272, "setns": 308, "mount": 165,
            "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429,
            "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "keyctl": 250,
            "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
            "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "init_module": 175, "finit_module": 313,
            "delete_module": 176, "kexec_load": 246, "open_by_handle_at": 304,
            "clone": 56, "clone3": 435,
        },
        0x40000000,  # x32 system calls
    ),
    "aarch64": (
        0xC00000B7,
        {
            "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
            "pidfd_getfd": 438, "kcmp": 272, "unshare": 97, "setns": 268, "mount": 40,
            "umount2": 39, "pivot_root": 41, "open_tree": 428, "move_mount": 429,
            "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "keyctl": 219,
            "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
            "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "init_module": 105, "finit_module": 273,
            "delete_module": 106, "kexec_load": 104, "open_by_handle_at": 265,
            "clone": 220, "clone3": 435,
        },
        None,
    ),
}  # fmt: skip


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


@functools.cache
def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one) as ``struct sock_filter[]`` bytes."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, numbers, foreign = arch
    deny = RET_ERRNO | EPERM
    body: list[bytes] = []
    # Each check jumps over the rest to its verdict: laid out as "if nr == N: return V".
    checks: list[tuple[int, int]] = [(numbers[name], deny) for name in _DENIED_NAMES]
    checks.append((numbers["clone3"], RET_ERRNO | ENOSYS))
    for number, verdict in checks:
        body += [_insn(_JEQ_K, number, 0, 1), _insn(_RET_K, verdict)]
    # clone with any namespace flag: refused; any other clone is allowed below.
    body += [
        _insn(_JEQ_K, numbers["clone"], 0, 3),
        _insn(_LD_W_ABS, _ARG0_LOW),
        _insn(_JSET_K, _NAMESPACE_FLAGS, 0, 1),
        _insn(_RET_K, deny),
        _insn(_RET_K, RET_ALLOW),
    ]
    head = [
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, audit_arch, 1, 0),
        _insn(_RET_K, deny),  # another architecture's calls: refused
        _insn(_LD_W_ABS, _NR),
    ]
    if foreign is not None:
        head += [_insn(_JGE_K, foreign, 0, 1), _insn(_RET_K, deny)]
    return b"".join(head + body)
