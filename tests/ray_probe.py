"""vLLM's Ray worker machinery on a real Ray cluster, driven by hand.

Run as a script (the driver), it does what vLLM 0.27.1's
``RayDistributedExecutor._init_workers_ray`` does to start its workers, with
vLLM's own pieces: ``load_general_plugins()`` (which calls the plugin's
``register``), ``get_env_vars_to_copy`` with the executor's arguments, one
``RayWorkerWrapper`` actor per node, ``update_environment_variables`` then
``init_worker`` through ``execute_method``. ``init_worker`` loads the general
plugins in each actor, as in a served engine, and builds ``ProbeWorker``
(named as the config's ``worker_cls``), which imports vLLM's real flashmla
module and reports what the plugin did there.

Driven by hand because vLLM 0.27.1 from PyPI on a machine without a GPU runs
on its ``UnspecifiedPlatform``, which has no Ray device key: the executor
itself cannot place workers there, and no model runs. Actors are pinned to a
node by a custom resource each node declares (the executor uses placement
groups of GPU bundles instead).

Prints one JSON object: ``{"driver": {...}, "workers": [{...}, ...]}``.
"""

from __future__ import annotations

import json
import os
import sys
import types


class ProbeWorker:
    """A stand-in for vLLM's GPU worker: what a worker process holds."""

    def __init__(self, **kwargs):
        self.rank = kwargs.get("rank")

    def report(self) -> dict:
        import vllm.plugins
        from vllm.models.deepseek_v4.nvidia import flashmla

        from_plugin = sys.modules.get("dspark_attn_plugin.instrumentation")
        patched = False
        if from_plugin is not None:
            from dspark_attn_plugin import patch

            patched = patch.is_patched(flashmla)
        return {
            "rank": self.rank,
            "ip": _ip(),
            "pid": os.getpid(),
            "switch": os.environ.get("DSPARK_ATTN_PLUGIN"),
            "vllm_plugins": os.environ.get("VLLM_PLUGINS"),
            "plugins_loaded": vllm.plugins.plugins_loaded,
            "registered": from_plugin is not None and from_plugin._hook is not None,
            "plugin_imported": from_plugin is not None,
            "flashmla_file": flashmla.__file__,
            "vllm_version": vllm.__version__,
            "patched": patched,
        }


def _ip() -> str:
    import ray

    return ray.util.get_node_ip_address()


def main(address: str, node_resources: list[str], load_plugins: bool) -> dict:
    import ray

    ray.init(address=address, log_to_driver=False)
    import vllm.plugins
    from vllm.config import DeviceConfig, ParallelConfig, VllmConfig
    from vllm.platforms import current_platform
    from vllm.ray.ray_env import get_env_vars_to_copy
    from vllm.v1.executor.ray_utils import WORKER_SPECIFIC_ENV_VARS, RayWorkerWrapper

    if load_plugins:
        vllm.plugins.load_general_plugins()  # the engine core does this first
    names = get_env_vars_to_copy(
        exclude_vars=WORKER_SPECIFIC_ENV_VARS,
        additional_vars=set(current_platform.additional_env_vars),
        destination="workers",
    )
    copied = {n: os.environ[n] for n in names if n in os.environ}
    actor = ray.remote(num_cpus=0)(RayWorkerWrapper)
    workers = [
        actor.options(resources={res: 0.001}).remote(rpc_rank=rank)
        for rank, res in enumerate(node_resources)
    ]
    envs = [dict(copied) for _ in workers]
    ray.get([w.execute_method.remote("update_environment_variables", envs) for w in workers])
    config = VllmConfig(
        device_config=DeviceConfig(device="cpu"),
        parallel_config=ParallelConfig(worker_cls="ray_probe.ProbeWorker"),
    )
    # No model: init_worker asks only whether it is multimodal.
    object.__setattr__(config, "model_config", types.SimpleNamespace(multimodal_config=None))
    kwargs = [
        dict(vllm_config=config, local_rank=0, rank=rank,
             distributed_init_method="tcp://127.0.0.1:1", is_driver_worker=rank == 0)
        for rank in range(len(workers))
    ]
    ray.get([w.execute_method.remote("init_worker", kwargs) for w in workers])
    reports = ray.get([w.execute_method.remote("report") for w in workers])
    driver = {
        "switch": os.environ.get("DSPARK_ATTN_PLUGIN"),
        "prefixes": os.environ.get("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"),
        "copied": sorted(n for n in copied if n.startswith(("DSPARK", "VLLM_PLUGINS"))),
        "plugins_loaded": vllm.plugins.plugins_loaded,
    }
    for w in workers:
        ray.kill(w)
    ray.shutdown()
    return {"driver": driver, "workers": reports}


if __name__ == "__main__":
    address, resources, load = sys.argv[1], sys.argv[2].split(","), sys.argv[3] == "1"
    print("PROBE " + json.dumps(main(address, resources, load)), flush=True)
