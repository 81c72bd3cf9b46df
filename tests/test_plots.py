"""The timeline charts: every bar inside the axis, and a bar too thin to see labelled (lab 02's phase chart hid device
0's own work, 1.69 ms of a 129 ms step, and cut device 1's backward bar off the axis)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from lab_utils import plots  # noqa: E402

PHASES = {"device 0": {"scatter": 0.0002, "replicate": 0.0003, "forward": 0.061, "gather": 0.0001, "loss": 0.0002,
                       "backward": 0.040, "reduce": 0.0009, "update": 0.0002},
          "device 1": {"forward": 0.062, "backward": 0.060}}


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_thin_bars_next_to_each_other_share_one_label_with_their_total():
    bars = [(0.0, 0.2, "scatter"), (0.2, 0.3, "replicate"), (0.5, 61.0, "forward"), (61.5, 0.1, "gather"),
            (61.6, 0.2, "loss")]
    groups = plots.thin_groups(bars, 130.0)
    assert [label for _, _, label in groups] == ["scatter+replicate 0.5", "gather+loss 0.3"], groups
    assert [(round(a, 6), round(b, 6)) for a, b, _ in groups] == [(0.0, 0.5), (61.5, 61.8)]
    assert plots.thin_groups([(0.0, 61.0, "forward")], 130.0) == []


def test_stacked_bars_fit_the_longest_row_and_label_the_thin_phases():
    fig, ax = plt.subplots()
    plots.stacked_bars(PHASES, ax)
    longest = sum(PHASES["device 1"].values()) * 1e3
    assert ax.get_xlim()[1] >= longest, (ax.get_xlim(), longest)
    labels = _texts(ax)
    assert any(t.startswith("scatter+replicate") and t.endswith("ms") for t in labels), labels
    assert any("reduce+update" in t for t in labels) and not any("forward" in t for t in labels), labels
    plt.close(fig)


def test_gantt_charts_on_a_shared_x_axis_each_keep_their_own_ops_in_range():
    measured = [plots.Interval("stage 0", "forward", 0.0, 0.030), plots.Interval("stage 1", "backward", 0.060, 0.0935)]
    ideal = [plots.Interval("stage 0", "forward", 0.0, 0.020), plots.Interval("stage 1", "backward", 0.040, 0.057)]
    for first, second in ((measured, ideal), (ideal, measured)):  # the longer chart drawn first, then second
        fig, axes = plt.subplots(2, 1, sharex=True)
        plots.gantt(first, axes[0])
        plots.gantt(second, axes[1])
        for ax in axes:
            low, high = ax.get_xlim()
            assert low <= 0.0 and high >= 93.5, (low, high)  # the measured backward to 93.5 ms is not cut off
        plt.close(fig)


def test_a_gantt_chart_keeps_every_interval_on_the_axis_and_labels_the_thin_ones():
    intervals = [plots.Interval("device 0", "scatter", 0.0, 0.0003), plots.Interval("device 0", "forward", 0.003, 0.056),
                 plots.Interval("device 1", "forward", 0.004, 0.068), plots.Interval("device 1", "backward", 0.075, 0.140),
                 plots.Interval("device 0", "reduce", 0.1301, 0.1309)]
    fig, ax = plt.subplots()
    plots.gantt(intervals, ax)
    low, high = ax.get_xlim()
    assert low <= 0.0 and high >= 140.0, (low, high)
    labels = _texts(ax)
    assert any(t.startswith("scatter") for t in labels) and any(t.startswith("reduce") for t in labels), labels
    plt.close(fig)
    fig, ax = plt.subplots()  # lab 04's ops carry their micro-batch's number: a thin one keeps it, nothing is added
    plots.gantt([plots.Interval("stage 0", "forward", 0.0, 0.1, "0"), plots.Interval("stage 0", "backward", 0.1, 0.1005, "0")],
                ax)
    assert _texts(ax) == ["0", "0"], _texts(ax)
    plt.close(fig)
