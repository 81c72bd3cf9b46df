"""Lab 11's benchmark: lab 03's DDP worker (the learner's, from their lab 03 notebook) on Slurm nodes via submitit
vs lab_utils.launch with as many ranks, through the lesson's own measure (`side_by_side`), interleaved; the verdicts
say whether Slurm's steady steps are no more than 10 % slower."""
from __future__ import annotations

import json
import time

from ... import learner_code, measure, spec, workloads
from ...launch import OWN_SESSION
from ..lab03.lesson import DDPConfig
from . import lesson as lab11
from . import slurm


def cluster(*, repeats: int = 5, nodes: int = 2, steps: int = 60, seed: int = 0) -> dict:
    """Lab 11's measure: lab 03's DDP worker (from its notebook) on `nodes` Slurm nodes via submitit vs
    lab_utils.launch with as many ranks, and vs launch with each rank in a session of its own (as slurmstepd starts
    Slurm's tasks: the suspected cause of a slower Slurm on one shared machine), interleaved: seconds from
    submission to the first optimizer step, steady steps/s, and the verdicts. Needs a Slurm cluster (`make
    cluster`); without one the result says it was skipped."""
    found = slurm.find_cluster()
    if found is None:
        return {"benchmark": "cluster", "skipped": slurm.SKIPPED}
    worker = learner_code.from_notebook(learner_code.notebook_path("03_ddp.ipynb"), "ddp_worker").function
    # steps: enough that the steady rate is a median of about a second of training per run, not of a few jittery steps
    cfg = DDPConfig(data={"kind": "synthetic", "n_train": 128 * (steps + 1), "n_test": 64, "side": 28},
                    layers=spec.cnn2d_3layer_fullconnected_3layer(), epochs=1, per_rank_batch=128 // nodes, lr=0.05,
                    warmup_steps=0, accumulation=1, seed=seed, timeout_s=60, checkpoint=None)
    folder = measure.results_dir(None) / "slurm" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    ex = lab11.submitit_executor(folder / "submitit", nodes=nodes, job_name="lab11-bench",
                                 setup=["export LAB_ONE_HOST=1"] if found.one_host else [])
    own = "launch, a session per rank"
    begin = time.time()
    # lab 11's measure, with a third path: launch with each rank in a session of its own
    speed = lab11.side_by_side(worker, cfg, ex, folder, world_size=nodes, repeats=repeats, timeout=180,
                               more_launches={own: {OWN_SESSION: "1"}})
    rate = {p: speed[p]["steps_per_s_all"] for p in ("slurm", "launch", own)}

    def no_worse(a, b, claim):
        return measure.verdict(rate[a], rate[b], claim=claim, higher_is_better=True, no_worse_than=0.10, lab="11",
                               same_work=True, expected=f"{a} no more than 10 % slower than {b}",
                               workload=workloads.SLURM_VS_LAUNCH)

    verdicts = [no_worse("slurm", "launch", "Slurm vs launch, steady steps/s"),
                no_worse("slurm", own, "Slurm vs launch with a session per rank, steady steps/s"),
                no_worse(own, "launch", "a session per rank vs one session, steady steps/s")]
    return {"benchmark": "cluster", "nodes": nodes, "global_batch": 128, "steps": steps, "model": "cnn2d_3layer_fullconnected_3layer",
            "repeats": repeats, "one_host": found.one_host,
            "submit_to_first_step_s": round(speed["slurm"]["first_step_s"], 2),
            "submit_to_process_s": round(speed["slurm"]["to_process_s"], 2),  # until the task's process existed
            "submit_to_worker_s": round(speed["slurm"]["to_worker_s"], 2),
            "launch_to_first_step_s": round(speed["launch"]["first_step_s"], 2),
            "slurm_steps_per_s": round(speed["slurm"]["steps_per_s"], 2),
            "launch_steps_per_s": round(speed["launch"]["steps_per_s"], 2),
            "own_session_steps_per_s": round(speed[own]["steps_per_s"], 2),
            "slurm_steps_per_s_runs": speed["slurm"]["steps_per_s_runs"],
            "launch_steps_per_s_runs": speed["launch"]["steps_per_s_runs"],
            "own_session_steps_per_s_runs": speed[own]["steps_per_s_runs"],
            "slurm_vs_local_steps": round(speed["slurm_vs_local_steps"], 3),
            "target": 0.9, "verdicts": [{"claim": v.claim, "ratio": round(v.ratio, 3), "low": round(v.low, 3),
                                         "high": round(v.high, 3), "verdict": v.verdict, "text": str(v)} for v in verdicts],
            "wall_s": round(time.time() - begin, 1)}


def print_cluster(result: dict) -> None:
    """The table, the verdicts, then the JSON line (last line of output)."""
    if "skipped" in result:
        print(result["skipped"])
    else:
        print(f"{'':<28}{'steps/s':>9}   (lab 03's worker, {result['model']}, global batch {result['global_batch']}, "
              f"median of {result['repeats']} interleaved runs each)")
        for label, key in ((f"{result['nodes']} Slurm nodes", "slurm"), (f"launch, {result['nodes']} ranks", "launch"),
                           ("launch, a session per rank", "own_session")):
            print(f"{label:<28}{result[key + '_steps_per_s']:>9.2f}   {result[key + '_steps_per_s_runs']}")
        print(f"submission to first step: {result['submit_to_first_step_s']:.1f} s on Slurm, "
              f"{result['launch_to_first_step_s']:.1f} s with launch")
        for v in result["verdicts"]:
            print(v["text"])
    print(json.dumps(result))
