"""The options Slurm reads from a batch script's #SBATCH lines (lab 11's exercise 2 and your-turn check)."""
from __future__ import annotations

SHORT = {"N": "nodes", "n": "ntasks", "c": "cpus-per-task", "t": "time", "J": "job-name", "p": "partition",
         "G": "gpus", "o": "output", "A": "account"}


def total_tasks_message(tasks_per_node) -> str:
    """The one answer to --ntasks without --ntasks-per-node, shared by the your-turn check and exercise 2."""
    return ("--ntasks is the job's total and lets Slurm spread the tasks unevenly: ask "
            f"--ntasks-per-node={tasks_per_node} (one per GPU on GPU nodes)")


def parse_sbatch(header: str) -> dict:
    """The options Slurm reads from a script's #SBATCH lines (it stops at the first command), name -> value."""
    options = {}
    for line in header.splitlines():
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not line.startswith("#SBATCH")):
            continue  # a comment, or a line Slurm does not read as an option
        if not line.startswith("#SBATCH"):
            break  # the first command ends the header
        words = line[len("#SBATCH"):].split("#", 1)[0].split()
        while words:
            word = words.pop(0)
            if word.startswith("--"):
                name, eq, value = word[2:].partition("=")
                if not eq and words and not words[0].startswith("-"):
                    value = words.pop(0)
            elif word.startswith("-") and len(word) >= 2:
                name, value = SHORT.get(word[1], word[1]), word[2:] or (words.pop(0) if words else "")
            else:
                continue
            options[name] = value
    return options
