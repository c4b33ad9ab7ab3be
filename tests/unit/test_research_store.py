"""The results store (local folder or S3 by configuration) and the CLI's bar and table."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agentloop.research.cli import ProgressBar, summary_table
from agentloop.research.jobs import Rejection
from agentloop.research.runner import JobOutcome
from agentloop.research.store import (
    LocalResultStore,
    S3ResultStore,
    VersionConflict,
    Versioned,
    store_from_env,
)


def test_the_local_store_writes_files_under_its_root(tmp_path: Path) -> None:
    store = LocalResultStore(tmp_path / "out")

    where = store.put("research/2025-06-02/a/report.md", b"# A\n", "text/markdown")
    store.put("research/2025-06-02/a/report.md", b"# A again\n", "text/markdown")

    assert where == str(tmp_path / "out" / "research" / "2025-06-02" / "a" / "report.md")
    assert Path(where).read_text() == "# A again\n"
    assert [p.name for p in Path(where).parent.iterdir()] == ["report.md"]  # no temp files left


@pytest.mark.parametrize("key", ["", "/etc/passwd", "research/../../x", "research/./x"])
def test_keys_stay_inside_the_store(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="not a relative store key"):
        LocalResultStore(tmp_path).put(key, b"", "text/plain")
    with pytest.raises(ValueError, match="not a relative store key"):
        S3ResultStore("bucket", client=object()).location(key)


def test_the_local_store_deletes_a_key_and_ignores_a_missing_one(tmp_path: Path) -> None:
    store = LocalResultStore(tmp_path)
    where = Path(store.put("research/d/j/failure.json", b"{}", "application/json"))

    store.delete("research/d/j/failure.json")
    store.delete("research/d/j/failure.json")  # gone already: not an error

    assert not where.exists()
    with pytest.raises(ValueError, match="not a relative store key"):
        store.delete("research/../../etc/passwd")


def test_the_local_store_replaces_a_key_only_at_the_version_it_was_read(tmp_path: Path) -> None:
    store = LocalResultStore(tmp_path)
    key = "checkpoints/2025-06-02/j/e.json"
    assert store.get(key) is None

    first = store.put_if(key, b"one", "application/json", version=None)
    with pytest.raises(VersionConflict):
        store.put_if(key, b"created twice", "application/json", version=None)
    second = store.put_if(key, b"two", "application/json", version=first)
    with pytest.raises(VersionConflict):
        store.put_if(key, b"from a stale read", "application/json", version=first)

    assert store.get(key) == Versioned(b"two", second)
    assert first != second
    with pytest.raises(ValueError, match="not a relative store key"):
        store.put_if("checkpoints/../../x", b"", "application/json", version=None)


def test_the_store_is_chosen_by_the_environment(tmp_path: Path) -> None:
    default = store_from_env({})
    assert isinstance(default, LocalResultStore)
    assert default.root == Path("./research-output")
    folder = store_from_env({"AGENTLOOP_RESULTS_DIR": str(tmp_path)})
    assert isinstance(folder, LocalResultStore)
    assert folder.root == tmp_path
    s3 = store_from_env({"AGENTLOOP_RESULTS_BUCKET": "results", "AGENTLOOP_RESULTS_DIR": "x"})
    assert isinstance(s3, S3ResultStore)
    assert s3.location("research/d/j/report.md") == "s3://results/research/d/j/report.md"


def outcome(
    job_id: str, *, failed: bool = False, limit: str | None = None, invocations: int = 1
) -> JobOutcome:
    return JobOutcome(
        job_id=job_id,
        execution_id="e",
        status="failed" if failed else "incomplete" if limit else "succeeded",
        stop_reason="error" if failed else limit or "completed",
        tokens=0 if failed else 12_345,
        cost_usd=None if failed else 0.0123,
        seconds=1.25,
        location=f"out/{job_id}/{'failure.json' if failed else 'report.md'}",
        error="configuration: GROQ_API_KEY is not set" if failed else None,
        invocations=invocations,
    )


def test_the_table_has_one_row_per_job_and_the_errors() -> None:
    table = summary_table(
        [
            outcome("alpha"),
            outcome("beta-longer-name", failed=True),
            outcome("gamma", limit="deadline", invocations=3),
        ],
        [
            Rejection("#2", 2, "id", "Field required"),
            Rejection("#2", 2, "prompt", "Field required"),
        ],
    )

    lines = table.splitlines()
    header = [
        "job",
        "status",
        "stop",
        "reason",
        "tokens",
        "seconds",
        "invocations",
        "cost",
        "report",
        "error",
    ]
    assert lines[0].split() == header
    assert lines[2].split() == [
        "alpha",
        "succeeded",
        "completed",
        "12,345",
        "1.2",
        "1",
        "$0.012300",
        "out/alpha/report.md",
    ]
    assert lines[3].split()[:8] == [
        "beta-longer-name",
        "failed",
        "error",
        "0",
        "1.2",
        "1",
        "-",
        "out/beta-longer-name/failure.json",
    ]
    assert lines[3].endswith("configuration: GROQ_API_KEY is not set")
    assert lines[4].split() == [
        "gamma",
        "incomplete",
        "deadline",
        "12,345",
        "1.2",
        "3",
        "$0.012300",
        "out/gamma/report.md",
    ]
    assert lines[5].split()[:8] == ["#2", "rejected", "-", "-", "-", "-", "-", "-"]
    assert lines[5].endswith("id: Field required; prompt: Field required")
    assert lines[2].index("1.2") + 3 == lines[0].index("seconds") + 7  # numbers right-aligned


def test_without_errors_the_table_has_no_error_column() -> None:
    assert "error" not in summary_table([outcome("alpha")]).splitlines()[0]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_redraws_in_place_on_a_terminal() -> None:
    stream = Tty()
    now = [100.0]
    bar = ProgressBar(4, stream, width=8, clock=lambda: now[0])

    now[0] = 101.5
    bar.advance(outcome("a"))
    bar.advance(outcome("b", failed=True))
    bar.close()

    frames = stream.getvalue().split("\r")
    assert frames[1].startswith("[##......] 1/4 jobs  1.5s")
    assert frames[-1].startswith("[####....] 2/4 jobs, 1 failed  1.5s")
    assert stream.getvalue().endswith("\n")


def test_the_progress_bar_writes_lines_when_not_a_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(3, stream, width=4, clock=lambda: 0.0)

    bar.advance(outcome("a"))
    bar.refresh()  # a no-op off a terminal
    bar.advance(outcome("b", failed=True))
    bar.advance(outcome("c", limit="max_iterations"))
    bar.close()

    assert stream.getvalue().splitlines() == [
        "[#...] 1/3 jobs  0.0s  a: completed",
        "[##..] 2/3 jobs, 1 failed  0.0s  b: error",
        "[####] 3/3 jobs, 1 failed, 1 incomplete  0.0s  c: max_iterations",
    ]
