"""The plots draw what the records say (where matplotlib is installed; skipped, with the reason, elsewhere)."""
import pytest

import flashlab

pytest.importorskip("matplotlib", reason="no matplotlib: flashlab.plots is optional (python3-matplotlib)")

from flashlab import plots  # noqa: E402


def test_roofline_points_and_roofs(tmp_path):
    records = flashlab.estimate(seqlen=[1024, 4096], algo="all")
    ax = plots.roofline(records)
    points = sum(len(c.get_offsets()) for c in ax.collections)
    assert points == len(records)
    assert any("roofs" in line.get_label() for line in ax.get_lines())
    ax.figure.savefig(tmp_path / "roofline.png")
    assert (tmp_path / "roofline.png").stat().st_size > 1000


def test_speedup_lines_follow_the_records():
    records = flashlab.estimate(seqlen=[512, 1024, 2048], algo="fa2")
    ax = plots.speedup_over_seqlen(records)
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == [r["speedup_vs_standard"] for r in records]


def test_measured_vs_predicted():
    records = flashlab.estimate(seqlen=[1024, 2048], algo="fa2")
    measured = [{"seqlen": 1024, "time_s": 2e-5}, {"seqlen": 2048, "time_s": 5e-5}]
    ax = plots.measured_vs_predicted(measured, records)
    predicted, real = ax.get_lines()
    assert list(real.get_ydata()) == [0.02, 0.05]
    assert list(predicted.get_ydata()) == [r["time_s"] * 1e3 for r in records]
