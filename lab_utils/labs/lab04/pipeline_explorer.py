"""Interactive explorers for the labs (ipywidgets): the pipeline schedule and its bubble."""
from __future__ import annotations

from . import pipeline as pl
from ... import measure, plots


def phase_colors() -> dict:
    """Forward and backward keep the same colours in every chart."""
    return plots.kind_colors(("forward", "backward"))


def draw_ideal(stages: int, micro_batches: int, schedule: str, ax=None, forward_s=1.0, backward_s=2.0):
    """The ideal Gantt chart of a schedule (forward = 1 unit, backward = 2 by default), with its bubble."""
    sched = pl.make_schedule(schedule, stages, micro_batches)
    intervals = pl.simulate(sched, forward_s, backward_s)
    title = (f"ideal {schedule}, K={stages}, M={micro_batches}: bubble {pl.bubble_fraction(intervals, stages):.3f} "
             f"(theory (K-1)/(M+K-1) = {sched.theoretical_bubble:.3f})")
    return plots.gantt(intervals, ax, rows=[f"stage {s}" for s in range(stages)], title=title, unit="s",
                       colors=phase_colors(), xlabel="time (units: forward = 1, backward = 2)")


def draw_measured(measured: pl.Measured, ax=None, title: str = "", refused: bool = False):
    """The Gantt chart of the median step (typical()), titled with Measured.makespan and .bubble (from the medians over
    the steps, the figure the lines print) beside the theory;
    `refused`: the load refuses the bubble, so the title prints n/m, as the lines do."""
    sched = pl.make_schedule(measured.run.schedule, measured.stages, measured.run.micro_batches)
    bubble = f"{measure.N_M} (the load)" if refused else f"{measured.bubble:.3f}"
    title = title or (f"measured {measured.run.label} (median step): makespan {measured.makespan * 1e3:.1f} ms, "
                      f"bubble {bubble} (medians; theory {sched.theoretical_bubble:.3f})")
    return plots.gantt(measured.typical(), ax, rows=[f"stage {s}" for s in range(measured.stages)], title=title,
                       colors=phase_colors())


def png(fig) -> bytes:
    """The figure as PNG bytes, closed afterwards (so no backend shows it a second time)."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def pipeline_explorer(stage_worker, forward_op, backward_op, *,
                      model: str = "cnn2d_2layer_fullconnected_2layer", micro_batch_size: int = 32,
                      max_stages: int = 4, layer_times=None, timeout: float = 120.0):
    """Sliders for K, M and schedule redraw the ideal chart; a button runs the real pipeline with the given stage
    worker and ops."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    from ... import spec

    model_spec = spec.preset(model)
    max_stages = min(max_stages, len(model_spec))
    k = w.IntSlider(value=2, min=1, max=max_stages, description="stages K")
    m = w.IntSlider(value=4, min=1, max=32, description="micro-batches M")
    schedule = w.Dropdown(options=["gpipe", "1f1b", "naive"], value="gpipe", description="schedule")
    run = w.Button(description="run it for real", button_style="primary")
    # the chart is a PNG in an Image widget, not an Output widget: a headless runner (nbclient, papermill) mocks an
    # Output widget by sending its state back to the kernel on the shell channel while it waits there for the cell's
    # reply, a race reported to hang such runs (jupyter/nbclient#312); an Image's value only travels kernel -> runner
    status, chart = w.HTML(), w.Image(format="png")
    measured: dict
    measured = {}

    def draw(*_):
        m.disabled = schedule.value == "naive"
        micro = 1 if schedule.value == "naive" else m.value
        key = (k.value, micro, schedule.value)
        rows = 2 if key in measured else 1
        fig, axes = plt.subplots(rows, 1, figsize=(10, 1.2 + 1.6 * rows * max(1, k.value / 2)), squeeze=False)
        draw_ideal(k.value, micro, schedule.value, axes[0][0])
        if key in measured:
            draw_measured(measured[key], axes[1][0])
        fig.tight_layout()
        chart.value = png(fig)

    def run_real(_):
        micro = 1 if schedule.value == "naive" else m.value
        key = (k.value, micro, schedule.value)
        times = layer_times or pl.layer_times(model_spec, (1, 28, 28))
        split = pl.balanced_split(times, k.value)
        config = pl.PipelineRun("explorer", schedule.value, micro, micro_batch_size * micro, split, model=model)
        status.value = f"running {k.value} rank(s), split before layers {list(split)}, batch {config.batch_size} ..."
        try:
            measured[key] = pl.run_pipelines([config], k.value, stage_worker, forward_op, backward_op, rounds=1,
                                             warmup=1, timeout=timeout)["explorer"]
            status.value = f"measured: K={k.value}, M={micro}, {schedule.value}, batch {config.batch_size}"
        except Exception as exc:  # show it in the widget instead of losing it in a callback
            status.value = f"<b>failed</b>: {type(exc).__name__}: {str(exc)[:500]}"
        draw()

    for control in (k, m, schedule):
        control.observe(draw, names="value")
    run.on_click(run_real)
    box = w.VBox([w.HBox([k, m, schedule]), w.HBox([run, status]), chart])
    draw()
    display(box)
    return box
