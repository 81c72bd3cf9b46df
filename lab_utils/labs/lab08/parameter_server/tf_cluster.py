"""TensorFlow's ParameterServerStrategy on one machine: worker and ps servers in this TF-only process."""
from __future__ import annotations

import os


def tf_in_process_cluster(n_workers: int = 2, n_ps: int = 1):
    """Start `n_workers` worker and `n_ps` ps TF servers in this TF-only process; returns their cluster resolver."""
    from .... import tf_distribute
    from ....launch import free_port

    tf = tf_distribute.import_tensorflow()
    # gRPC's worker cache polls with 64 threads per task by default: hundreds of threads in one process, more than
    # a grading sandbox allows; a few are plenty on loopback
    for variable in ("TF_GRPC_WORKER_CACHE_QUEUES", "TF_GRPC_WORKER_CACHE_THREADS"):
        os.environ.setdefault(variable, "2")
    cluster = tf.train.ClusterSpec({"worker": [f"localhost:{free_port()}" for _ in range(n_workers)],
                                    "ps": [f"localhost:{free_port()}" for _ in range(n_ps)]})
    # one intra-op thread per task; inter-op threads for every task, or the tasks of one process can wait forever
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=n_workers + n_ps)
    for job, count in (("worker", n_workers), ("ps", n_ps)):
        for index in range(count):
            tf.distribute.Server(cluster, job_name=job, task_index=index, config=config, protocol="grpc", start=True)
    return tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
