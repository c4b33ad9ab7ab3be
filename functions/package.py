"""Build the Lambda artifacts for python3.13 / arm64 without Docker (`make package`).

    build/layer/python/   layers/agent/requirements.txt + the agentloop package
    build/chat/           functions/chat/*.py + run.sh + static/ (the chat page) + the chat
                          requirements the layer lacks
    build/sandbox/        functions/sandbox/*.py (the runner is in its layer)
    build/sandbox-layer/  python/: agentloop and pydantic alone, the sandbox function's layer
    build/research/       functions/research/*.py (planner and worker share this CodeUri)
    build/sandbox-stack/  sandbox-stack/: functions/sandbox/requirements.txt (numpy, pandas,
                          matplotlib) for execute_code's programs, at /opt/sandbox-stack
    build/agent-layer.zip, build/chat-function.zip, build/sandbox-function.zip,
    build/research-function.zip, build/sandbox-stack-layer.zip

``--local-stack DIR`` instead builds the same stack for this interpreter (``make
sandbox-stack``): ``DIR/site``, the matplotlib font list and ``DIR/manifest.json``.

Dependencies come as binary wheels for the Lambda target (``pip --platform``), so nothing is
compiled for this machine. The chat function's requirements are resolved against the versions
already in the layer (as constraints) and whatever the layer provides is left out of the
function. Then a table of sizes is printed, with the total against Lambda's 250 MB limit.

This file lives outside every function's CodeUri, so it is never deployed.
"""

from __future__ import annotations

import argparse
import email.parser
import json
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

# execute_code's scientific stack: where the layer puts it (AGENTLOOP_SANDBOX_STACK on the
# sandbox function), the libraries its manifest names, and the interpreter that compiles its
# bytecode for Lambda (imports from a read-only layer could not cache any).
STACK_REQUIREMENTS = SANDBOX_SOURCE / "requirements.txt"
STACK_NAME = "sandbox-stack"
STACK_OPT = f"/opt/{STACK_NAME}"

# Run by the stack's own interpreter: a font list of matplotlib's bundled fonts only, so it is
# the same wherever the stack is (matplotlib stores those paths relative to its data dir) and
# never names a system font that a sandbox lacks (a missing font makes matplotlib rebuild).
FONTLIST_SCRIPT = """
import json, sys
from matplotlib import font_manager as fm
system_fonts = fm.findSystemFonts
fm.findSystemFonts = lambda fontpaths=None, fontext="ttf": (
    system_fonts(fontpaths, fontext) if fontpaths else [])
manager = fm.FontManager()
fm.json_dump(manager, sys.argv[1])
print(json.dumps({"version": fm.FontManager.__version__}))
"""


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
    return agentloop_layer(build / "layer", LAYER_SOURCE / "requirements.txt")


def agentloop_layer(layer: Path, requirements: Path) -> Path:
    """A layer of ``requirements`` and the agentloop package under ``layer/python``."""
    site = layer / "python"
    shutil.rmtree(layer, ignore_errors=True)
    site.mkdir(parents=True)
    pip_install(site, requirements)
    shutil.copytree(
        LAYER_SOURCE / "agentloop",
        site / "agentloop",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    strip(site)
    compile_for_lambda(site, "/opt/python")
    return layer


SANDBOX_LAYER_NEEDS = ("pydantic",)
"""What the sandbox function's handler imports besides agentloop (and what they bring)."""


def build_sandbox_layer(build: Path, layer_site: Path) -> Path:
    """The sandbox function's own layer: agentloop and pydantic, at the agent layer's versions.

    Its handler imports only ``agentloop.sandbox`` (with ``config`` and ``files``) and
    pydantic, so it needs nothing else of the agent layer: about 70 MiB left out, and the
    room the stack layer needs under Lambda's limit."""
    provided = distributions(layer_site)
    requirements = build / "sandbox-layer-requirements.txt"
    requirements.write_text(
        "".join(f"{name}=={provided[name][0]}\n" for name in SANDBOX_LAYER_NEEDS), "utf-8"
    )
    return agentloop_layer(build / "sandbox-layer", requirements)


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
    compile_for_lambda(chat, "/var/task")
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


# What programs never use: build inputs (C sources, headers, Cython) and type stubs.
BUILD_ONLY = ("*.c", "*.h", "*.pxd", "*.pyx", "*.pyi")


def prune_stack(site: Path) -> None:
    """Remove what programs never use (about 90 MB with bytecode), so the stack fits Lambda.

    The libraries' own test suites; build inputs and type stubs; and fontTools' compiled
    speed-ups (12 MB): each is its own ``.py`` module compiled with Cython, which fontTools
    imports instead when the extension is missing (matplotlib uses it to subset fonts).
    """
    for tests in sorted(site.glob("*/**/tests"), reverse=True):
        if tests.is_dir():
            shutil.rmtree(tests)
    for pattern in BUILD_ONLY:
        for path in site.rglob(pattern):
            path.unlink()
    for extension in (site / "fontTools").rglob("*.so"):
        if extension.with_name(extension.name.split(".", 1)[0] + ".py").is_file():
            extension.unlink()


def stack_env(site: Path, scratch: Path) -> dict[str, str]:
    """The environment for running the stack's matplotlib at build time: nothing inherited."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(scratch),
        "PYTHONPATH": str(site),
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(scratch),
    }


def build_fontlist(root: Path, site: Path) -> str:
    """Write ``root/matplotlib/fontlist-v*.json`` (bundled fonts only); its path in ``root``."""
    scratch = root / "fontlist-build"
    scratch.mkdir()
    built = scratch / "fontlist.json"
    done = subprocess.run(
        [sys.executable, "-s", "-P", "-c", FONTLIST_SCRIPT, str(built)],
        env=stack_env(site, scratch),
        capture_output=True,
        text=True,
        check=True,
    )
    version = json.loads(done.stdout.splitlines()[-1])["version"]
    entries = json.loads(built.read_text("utf-8"))
    names = [e["fname"] for e in entries["ttflist"] + entries["afmlist"]]
    if not names or any(os.path.isabs(name) for name in names):
        raise SystemExit("error: the font list must name matplotlib's bundled fonts only")
    # The name matplotlib looks for in its cache dir (MPLCONFIGDIR), where the runner puts it.
    relative = f"matplotlib/fontlist-v{version}.json"
    (root / relative).parent.mkdir()
    built.rename(root / relative)
    shutil.rmtree(scratch)
    return relative


def requirement_names(requirements: Path) -> list[str]:
    """The distributions a requirements file pins, normalised, in its order."""
    names = []
    for line in requirements.read_text("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(re.sub(r"[-_.]+", "-", re.split(r"[=<>!~\[; ]", line)[0]).lower())
    return names


def write_manifest(root: Path, site: Path, fontlist: str, python: str) -> dict[str, object]:
    """``root/manifest.json``: what the runner and the tool description read."""
    installed = distributions(site)
    manifest: dict[str, object] = {
        "python": python,
        "site": "site",
        "fontlist": fontlist,
        "libraries": {name: installed[name][0] for name in requirement_names(STACK_REQUIREMENTS)},
        "distributions": {name: version for name, (version, _) in sorted(installed.items())},
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
    return manifest


def build_local_stack(target: Path) -> int:
    """The stack for this interpreter in ``target`` (``make sandbox-stack``), swapped in whole."""
    target = target.resolve()
    scratch = target.with_name(target.name + ".new")
    shutil.rmtree(scratch, ignore_errors=True)
    site = scratch / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # --no-warn-conflicts: pip would compare the stack with this virtualenv's own packages.
    command += ["--no-warn-conflicts", "--only-binary=:all:", "--target", str(site)]
    command += ["-r", str(STACK_REQUIREMENTS)]
    print(f"pip install -r {show(STACK_REQUIREMENTS)} -> {show(target)}/site")
    subprocess.run(command, check=True)
    shutil.rmtree(site / "bin", ignore_errors=True)
    prune_stack(site)
    fontlist = build_fontlist(scratch, site)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    write_manifest(scratch, site, fontlist, version)
    (scratch / ".gitignore").write_text("*\n", "utf-8")
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return 0


def local_fontlist(local: Path, matplotlib_version: str) -> Path:
    """The local stack's font list, if its matplotlib is the layer's (the same bundled fonts)."""
    try:
        manifest = json.loads((local / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        message = f"error: no local stack in {show(local)} ({exc}): run make sandbox-stack"
        raise SystemExit(message) from exc
    built = manifest.get("libraries", {}).get("matplotlib")
    if built != matplotlib_version:
        raise SystemExit(
            f"error: {show(local)} has matplotlib {built}, the layer {matplotlib_version}: "
            "run make sandbox-stack"
        )
    return local / str(manifest["fontlist"])


def find_python313() -> str | None:
    """A python3.13 that runs: $PYTHON313, on PATH, or pyenv's (a pyenv shim may not run)."""
    candidates = [os.environ.get("PYTHON313"), shutil.which("python3.13")]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.13*/bin/python3.13"))
    for candidate in filter(None, candidates):
        try:
            done = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0 and done.stdout.strip() == "True":
            return candidate
    return None


def compile_for_lambda(site: Path, deployed_at: str) -> None:
    """Bytecode for python3.13, valid whatever the files' times (the zip sets them to 1980);
    ``deployed_at`` is the directory's path on Lambda, which tracebacks name.

    Layers and function code are read-only, so Python cannot cache the bytecode it compiles
    there: without this, every new chat container would compile agentloop and its
    dependencies again (0.6 s more to import the chat app here), and every program numpy,
    pandas and matplotlib.
    """
    python = find_python313()
    if python is None:
        print(f"warning: no python3.13 (set PYTHON313): {show(site)} has no bytecode, so each")
        print("         cold start compiles what it imports (seconds on Lambda)")
        return
    command = [python, "-m", "compileall", "-q", "-j", "0"]
    command += ["--invalidation-mode", "unchecked-hash", "-s", str(site)]
    subprocess.run([*command, "-p", deployed_at, str(site)], check=True)


def build_stack_layer(build: Path, local: Path) -> Path:
    """The sandbox function's stack layer: ``sandbox-stack/`` (at /opt/sandbox-stack)."""
    layer = build / "sandbox-stack"
    root = layer / STACK_NAME
    site = root / "site"
    shutil.rmtree(layer, ignore_errors=True)
    site.mkdir(parents=True)
    pip_install(site, STACK_REQUIREMENTS)
    strip(site)
    prune_stack(site)
    fontlist = local_fontlist(local, distributions(site)["matplotlib"][0])
    relative = f"matplotlib/{fontlist.name}"
    (root / "matplotlib").mkdir()
    shutil.copyfile(fontlist, root / relative)
    write_manifest(root, site, relative, PYTHON_VERSION)
    compile_for_lambda(site, f"{STACK_OPT}/site")
    return layer


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
    parser.add_argument(
        "--local-stack",
        type=Path,
        metavar="DIR",
        help="only build execute_code's stack for this interpreter in DIR (make sandbox-stack)",
    )
    parser.add_argument(
        "--stack-source",
        type=Path,
        default=ROOT / ".sandbox-stack",
        help="the local stack whose font list the layer reuses (make sandbox-stack)",
    )
    args = parser.parse_args(argv)
    if args.local_stack is not None:
        return build_local_stack(args.local_stack)
    build: Path = args.build_dir.resolve()
    build.mkdir(parents=True, exist_ok=True)

    layer = build_layer(build)
    chat = build_chat(build, layer / "python")
    sandbox = build_handlers(build, "sandbox", SANDBOX_SOURCE)
    sandbox_layer = build_sandbox_layer(build, layer / "python")
    research = build_handlers(build, "research", RESEARCH_SOURCE)
    stack = build_stack_layer(build, args.stack_source.resolve())
    artifacts = [
        ("agent layer", layer, build / "agent-layer.zip"),
        ("chat function", chat, build / "chat-function.zip"),
        ("sandbox func.", sandbox, build / "sandbox-function.zip"),
        ("sandbox layer", sandbox_layer, build / "sandbox-layer.zip"),
        ("research func.", research, build / "research-function.zip"),
        ("sandbox stack", stack, build / "sandbox-stack-layer.zip"),
    ]
    for _, directory, archive in artifacts:
        zip_dir(directory, archive)
    sizes = print_sizes(artifacts)
    within = [
        check_limit(
            "chat function + agent layer",
            sizes[chat] + sizes[layer],
            "; the Lambda Web Adapter layer adds a few MiB more",
        ),
        check_limit(
            "sandbox function + its layer + stack layer",
            sizes[sandbox] + sizes[sandbox_layer] + sizes[stack],
        ),
    ]
    return 0 if all(within) else 1


def print_sizes(artifacts: list[tuple[str, Path, Path]]) -> dict[Path, int]:
    """The table of files and sizes; each directory's unzipped size."""
    print()
    print(f"{'artifact':<15} {'files':>6} {'unzipped':>11} {'zipped':>10}  zip")
    sizes: dict[Path, int] = {}
    for label, directory, archive in artifacts:
        count, sizes[directory] = tree_size(directory)
        zipped = archive.stat().st_size
        unzipped = sizes[directory] / MB
        print(
            f"{label:<15} {count:>6} {unzipped:>7.1f} MiB {zipped / MB:>6.1f} MiB  {show(archive)}"
        )
    print()
    return sizes


def check_limit(what: str, total: int, note: str = "") -> bool:
    """Print ``what``'s unzipped size against Lambda's limit; False when over it."""
    share = 100 * total / UNZIPPED_LIMIT
    print(f"{what}, unzipped: {total / MB:.1f} MiB of Lambda's 250 MiB limit ({share:.0f}%{note})")
    if total > UNZIPPED_LIMIT:
        print(f"error: {what} is over Lambda's unzipped size limit", file=sys.stderr)
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
