"""Build the Lambda artifacts for python3.13 / arm64 without Docker (`make package`).

    build/layer/python/   layers/agent/requirements.txt + the agentloop package
    build/chat/           functions/chat/*.py + run.sh + static/ (the chat page) + the chat
                          requirements the layer lacks
    build/sandbox/        functions/sandbox/*.py (the runner is in the layer)
    build/research/       functions/research/*.py (planner and worker share this CodeUri)
    build/agent-layer.zip, build/chat-function.zip, build/sandbox-function.zip,
    build/research-function.zip

Dependencies come as binary wheels for the Lambda target (``pip --platform``), so nothing is
compiled for this machine. The chat function's requirements are resolved against the versions
already in the layer (as constraints) and whatever the layer provides is left out of the
function. Then a table of sizes is printed, with the total against Lambda's 250 MB limit.

This file lives outside every function's CodeUri, so it is never deployed.
"""

from __future__ import annotations

import argparse
import email.parser
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYER_SOURCE = ROOT / "layers" / "agent"
CHAT_SOURCE = ROOT / "functions" / "chat"
SANDBOX_SOURCE = ROOT / "functions" / "sandbox"
RESEARCH_SOURCE = ROOT / "functions" / "research"

# Lambda python3.13 runs on Amazon Linux 2023 (glibc 2.34): any manylinux wheel up to 2.34 works.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")
PYTHON_VERSION = "3.13"

# Lambda's limit for a function and all its layers, unzipped: 250 MB (262,144,000 bytes).
UNZIPPED_LIMIT = 262_144_000
MB = 1024 * 1024

# Fixed timestamp so that unchanged inputs give byte-identical zips.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def pip_install(target: Path, requirements: Path, constraints: Path | None = None) -> None:
    """Install requirements as target-platform wheels into target (no bytecode, no sdists)."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--root-user-action=ignore",
        # Conflicts would be reported against this interpreter's own packages, not the target.
        "--no-warn-conflicts",
        "--no-compile",
        *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--only-binary=:all:",
        "--target",
        str(target),
        "-r",
        str(requirements),
    ]
    if constraints is not None:
        command += ["-c", str(constraints)]
    print(f"pip install -r {show(requirements)} -> {show(target)}")
    subprocess.run(command, check=True)


def show(path: Path) -> str:
    """A path relative to the repository when it is inside it, for short messages."""
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def distributions(site: Path) -> dict[str, tuple[str, Path]]:
    """Installed distributions under site: normalised name -> (version, dist-info dir)."""
    found: dict[str, tuple[str, Path]] = {}
    for info in sorted(site.glob("*.dist-info")):
        metadata = email.parser.Parser().parsestr((info / "METADATA").read_text("utf-8"))
        name = re.sub(r"[-_.]+", "-", metadata["Name"]).lower()
        found[name] = (metadata["Version"], info)
    return found


def remove_distribution(site: Path, info: Path) -> None:
    """Delete every file a distribution installed (from its RECORD), then empty directories."""
    for line in (info / "RECORD").read_text("utf-8").splitlines():
        relative = line.split(",", 1)[0]
        if not relative:
            continue
        path = (site / relative).resolve()
        if path.is_relative_to(site.resolve()) and path.is_file():
            path.unlink()
    shutil.rmtree(info, ignore_errors=True)
    prune_empty_dirs(site)


def prune_empty_dirs(root: Path) -> None:
    for directory, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        path = Path(directory)
        if path != root and not any(path.iterdir()):
            path.rmdir()


def strip(root: Path) -> None:
    """Remove what never runs on Lambda: bytecode caches and console scripts for this machine."""
    for cache in sorted(root.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)
    for compiled in root.rglob("*.py[co]"):
        compiled.unlink()
    shutil.rmtree(root / "bin", ignore_errors=True)


def build_layer(build: Path) -> Path:
    layer = build / "layer"
    site = layer / "python"
    shutil.rmtree(layer, ignore_errors=True)
    site.mkdir(parents=True)
    pip_install(site, LAYER_SOURCE / "requirements.txt")
    shutil.copytree(
        LAYER_SOURCE / "agentloop",
        site / "agentloop",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    strip(site)
    return layer


def build_chat(build: Path, layer_site: Path) -> Path:
    chat = build / "chat"
    shutil.rmtree(chat, ignore_errors=True)
    chat.mkdir(parents=True)
    for source in [*sorted(CHAT_SOURCE.glob("*.py")), CHAT_SOURCE / "run.sh"]:
        shutil.copy2(source, chat / source.name)
    (chat / "run.sh").chmod(0o755)
    shutil.copytree(CHAT_SOURCE / "static", chat / "static")

    provided = distributions(layer_site)
    constraints = build / "layer-constraints.txt"
    constraints.write_text(
        "".join(f"{name}=={version}\n" for name, (version, _) in sorted(provided.items())),
        "utf-8",
    )
    pip_install(chat, CHAT_SOURCE / "requirements.txt", constraints)
    for name, (_, info) in distributions(chat).items():
        if name in provided:
            remove_distribution(chat, info)
    strip(chat)
    return chat


def build_handlers(build: Path, name: str, source: Path) -> Path:
    """A function that is its handler modules alone: everything else comes from the layer.

    That is the sandbox function and the research planner and worker (one CodeUri for both);
    their requirements.txt lists nothing, so there is nothing to install.
    """
    target = build / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for module in sorted(source.glob("*.py")):
        shutil.copy2(module, target / module.name)
    return target


def zip_dir(source: Path, archive: Path) -> None:
    """Zip source's contents (paths relative to it) with file modes kept (run.sh stays +x)."""
    archive.unlink(missing_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo.from_file(path, path.relative_to(source).as_posix())
            info.date_time = ZIP_DATE
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes(), compresslevel=9)


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    args = parser.parse_args(argv)
    build: Path = args.build_dir.resolve()
    build.mkdir(parents=True, exist_ok=True)

    layer = build_layer(build)
    chat = build_chat(build, layer / "python")
    sandbox = build_handlers(build, "sandbox", SANDBOX_SOURCE)
    research = build_handlers(build, "research", RESEARCH_SOURCE)
    artifacts = [
        ("agent layer", layer, build / "agent-layer.zip"),
        ("chat function", chat, build / "chat-function.zip"),
        ("sandbox func.", sandbox, build / "sandbox-function.zip"),
        ("research func.", research, build / "research-function.zip"),
    ]
    for _, directory, archive in artifacts:
        zip_dir(directory, archive)

    print()
    print(f"{'artifact':<15} {'files':>6} {'unzipped':>11} {'zipped':>10}  zip")
    total = 0
    for label, directory, archive in artifacts:
        count, size = tree_size(directory)
        if directory in (layer, chat):  # the others are a few kB each beside the layer
            total += size
        zipped = archive.stat().st_size
        print(
            f"{label:<15} {count:>6} {size / MB:>7.1f} MiB {zipped / MB:>6.1f} MiB  {show(archive)}"
        )
    share = 100 * total / UNZIPPED_LIMIT
    print(
        f"\nchat function + agent layer, unzipped: {total / MB:.1f} MiB of Lambda's 250 MiB "
        f"limit ({share:.0f}%; the Lambda Web Adapter layer adds a few MiB more)"
    )
    if total > UNZIPPED_LIMIT:
        print("error: over Lambda's unzipped size limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
