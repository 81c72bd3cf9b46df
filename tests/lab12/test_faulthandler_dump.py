"""Lab 12's 'outside this course' section (learner s12r4f: the hang table exists only in the course's launcher; where
is every rank in my own job?): faulthandler's dump of Bug 1's hang, read per rank beside the launcher's table."""
import faulthandler
import tempfile
import threading

import nbformat

from lab_utils.labs.lab12 import debugging

DUMP = """Timeout (0:00:02)!
Thread 0x00007f7ca74796c0 (most recent call first):
  File "/usr/lib/python3.11/signal.py", line 82 in sigwait
  File "/work/lab_utils/launch/record.py", line 207 in answer

Thread 0x00007f7cc99d3b80 (most recent call first):
  File "/venv/site-packages/torch/distributed/distributed_c10d.py", line 5356 in barrier
  File "/venv/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/work/train.py", line 15 in metric_sum_worker
  File "/work/train.py", line 22 in dumped_worker
  File "<string>", line 1 in <module>
"""


def test_a_dump_is_read_as_the_main_threads_collective_and_the_workers_line():
    frames = debugging.dumped_frames(DUMP, "metric_sum_worker")
    assert frames[0] == ("/venv/site-packages/torch/distributed/distributed_c10d.py", 5356, "barrier")
    assert debugging.dumped_frames(DUMP, "nowhere") == []
    [line] = debugging.dump_lines({1: DUMP}, "metric_sum_worker")
    assert line.startswith("rank 1: in barrier (distributed_c10d.py:5356), called from metric_sum_worker at ")
    assert line.endswith("train.py:15") and "wrapper" not in line and "answer" not in line, line
    assert debugging.dump_lines({0: ""}, "metric_sum_worker") == ["rank 0: no dump"]


def test_the_excerpt_is_the_waiting_thread_as_written_cut_below_the_workers_frame():
    """Learner walk, lab 12: the raw dump had to be decoded. The excerpt keeps faulthandler's own lines for the thread
    that runs the worker only, from the hanging call down to the worker's frame, with paths shortened."""
    excerpt = debugging.dump_excerpt(DUMP, "metric_sum_worker")
    assert excerpt == ["Thread 0x00007f7cc99d3b80 (most recent call first):",
                       '  File ".../torch/distributed/distributed_c10d.py", line 5356 in barrier',
                       '  File ".../torch/distributed/c10d_logger.py", line 83 in wrapper',
                       '  File "train.py", line 15 in metric_sum_worker'], excerpt
    assert debugging.dump_excerpt(DUMP, "nowhere") == [] and debugging.dump_excerpt("", "metric_sum_worker") == []


def test_the_lab_says_what_to_read_before_the_raw_excerpt():
    """One line before the excerpt names the frame that is the hang and the rank the excerpt is from."""
    cells = nbformat.read("solutions/12_debugging_hangs.ipynb", 4).cells
    code = next(c.source for c in cells if c.cell_type == "code" and "faulthandler.dump_traceback_later" in c.source)
    said, excerpt = code.index("(top frame: the call it hangs in; metric_sum_worker: your line)"), code.index("dump_excerpt(")
    assert said < excerpt and "rank 0's dump" in code[code.rindex("print(", 0, said):said], code
    assert "dump_excerpt(dumps[0]" in code  # the excerpt is rank 0's, as the line says


def test_a_real_faulthandler_dump_names_the_waiting_function():
    """The reader reads what faulthandler writes (not only the made-up text above)."""
    release = threading.Event()

    def metric_sum_worker():
        release.wait(10)

    waiter = threading.Thread(target=metric_sum_worker)
    waiter.start()
    with tempfile.TemporaryFile("w+") as dump:
        faulthandler.dump_traceback(file=dump, all_threads=True)
        dump.seek(0)
        text = dump.read()
    release.set()
    waiter.join()
    frames = debugging.dumped_frames(text, "metric_sum_worker")
    assert frames and frames[0][2] == "wait" and any(name == "metric_sum_worker" for _, _, name in frames)
    excerpt = debugging.dump_excerpt(text, "metric_sum_worker")
    assert "most recent call first" in excerpt[0] and excerpt[-1].endswith(" in metric_sum_worker"), excerpt
    assert excerpt[1].strip().startswith('File "') and " in wait" in excerpt[1], excerpt


def test_the_learner_line_per_rank_is_read_from_the_table():
    table = ("rank | state           | waits in                  | learner's line    | last completed\n"
             "0    | in a collective | all_reduce #3 [1] float32 | cell [5], line 9  | all_reduce #2 [1] float32\n"
             "1    | in a collective | barrier #3                | cell [5], line 11 | all_reduce #2 [1] float32\n")
    assert debugging.learner_line_per_rank(table) == {0: "cell [5], line 9", 1: "cell [5], line 11"}


def test_the_lab_dumps_bug_1_as_a_plain_job_and_checks_the_dump_against_the_table():
    cells = nbformat.read("solutions/12_debugging_hangs.ipynb", 4).cells
    code = next(c.source for c in cells if c.cell_type == "code" and "faulthandler.dump_traceback_later" in c.source)
    assert '"LAB_COLLECTIVE_RECORD": "0"' in code and "dump_lines(dumps" in code and "learner_line_per_rank(table_of(hang))" in code
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert "faulthandler.register(signal.SIGUSR1" in prose and "py-spy dump --pid" in prose
    assert "divide_by_initial_world_size" not in prose.split("Join` context manager")[-1].split("`check` runs it")[0]


def test_the_cell_legend_is_printed_under_the_first_table_only(monkeypatch):
    """Learner s13r5f finding 4: 'cell [n]: the cell Jupyter shows ...' was printed under every table (3 times)."""
    from lab_utils.launch.where import CELL_LEGEND

    monkeypatch.setattr(debugging, "_LEGEND_SHOWN", [])
    table = "rank | state | waits in | learner's line | last completed\n0    | x | y | cell [5], line 9 | -\n"
    first, second = debugging.folded(table + CELL_LEGEND), debugging.folded(table + CELL_LEGEND)
    assert CELL_LEGEND.splitlines()[0] in first and "cell [n]:" not in second and "cell [5], line 9" in second


def test_the_mismatch_lines_say_who_aborted_what_came_back_and_whose_shape_is_first():
    """Learner s13r5f finding 7: the shapes cell parsed the error in 15 lines; debugging.mismatch_lines does it, and
    the lines are those of the quiet run."""
    abort = ("terminate called\n  what():  [enforce fail at pair.cc:1] op.preamble.length <= op.nbytes. 8 vs 4. "
             "Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?")
    bare = debugging.mismatch_lines("rank 1 failed: RuntimeError: Read error: Connection reset by peer.\nmore", 1,
                                    abort, 2)
    assert bare.splitlines()[0].startswith("   rank 0 aborted: op.preamble.length <= op.nbytes. 8 vs 4."), bare
    assert "rank 1 failed: RuntimeError: Read error: Connection reset by peer." in bare
    said = ("rank 0 failed: RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running "
            "collective: CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[4]). Collectives "
            "differ in the following aspects: \tTensor Tensor shapes: 4vs 5\nwhere each rank was ...")
    detail = debugging.mismatch_lines(said, 0, "", 2)
    assert "DETAIL's fingerprints differ in: Tensor Tensor shapes: 4vs 5" in detail, detail
    assert detail.splitlines()[-1] == "   rank 0 reported it: its own tensor first (4 elements), then rank 1's (5)"
    assert "aborted" not in detail and max(len(line) for line in (bare + "\n" + detail).splitlines()) <= 100
