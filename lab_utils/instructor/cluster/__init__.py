"""A real Slurm cluster on this machine, for lab 11 and CI: its daemons and its accounting."""
