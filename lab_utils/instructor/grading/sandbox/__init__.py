"""A sandbox per graded submission, without privileges, whoever runs the grader.

With bubblewrap: a root file system built from a minimal tree (the system's /usr and /etc, the Python that runs the
course, the course's `lab_utils`, `datasets` and student `notebooks`, all read-only; the root itself read-only), so
nothing of the instructor's layout (solutions, tests, the output folder, classmates, the grader's own folders) exists
inside, not even in /proc/self/mountinfo; its own pid, mount, network, ipc and uts namespaces; every capability
dropped; no_new_privs; a seccomp filter (`seccomp.py`); an environment built from an allow-list. As root, each sandbox
also runs under a dedicated unprivileged uid of its own, so the per-user process limit is a per-sandbox limit and
sandboxes cannot signal each other; as an ordinary user, in a user namespace. The command is the namespace's pid 1
(not dumpable), so no process of the submission can open its descriptors (the answer channel) through /proc.

Disk: all it can write is two size-limited tmpfs that share the limit, /tmp (its working folders; /var/tmp points
into it) and /dev/shm; the root and /dev are read-only. So the kernel counts everything the submission writes,
deleted-but-open files included, and frees it when the sandbox's last process ends: nothing of it is left on the
machine's disk. Files come in and out through pipes. CPU: with a writable cgroup cpu controller (as root) each sandbox gets at most its share (`Limits.cpus`, a
quota) and its CPU time is counted (`cpu_seconds`); elsewhere the grader grades one submission at a time and each
process gets an RLIMIT_CPU. Processes and memory: cgroups where writable, else rlimits. Where processes or CPU cannot
be limited per sandbox, `Isolation.one_at_a_time` says the grader must grade one at a time, and why.

Without bubblewrap (or with one that fails here), `detect_isolation()` says what is not promised; the grader then refuses
unless the instructor accepts the risk, and grades correctly with the risk written in every row.

Rooms: isolation.py (Limits, Isolation: what is promised), machine.py (`detect_isolation`), jail.py (`Sandbox`), bubblewrap.py
(its command line and minimal tree), cgroups.py, host.py (uids, processes, tmpfs mounts, cleanup), seccomp.py.
"""
