# How jobs map onto a cluster (docs/cluster.md): per-provider job caps and where API-calling
# jobs run. Included before the inference rules, which use api_job_resources().
from dualcog.cluster import provider_resources, provider_slot

API_RESOURCES = provider_resources(config["models"])


def _slot_of(resource):
    return lambda wildcards: provider_slot(
        model_by_name(config, wildcards.model), resource
    )


def api_job_resources():
    """api_<provider>=1 for jobs of that provider's models, 0 for the others."""
    return {resource: _slot_of(resource) for resource in API_RESOURCES}


# api_jobs: local keeps the jobs that call APIs on the machine running Snakemake (a login
# node with internet); cluster (the default) submits them like any other job.
if config.get("api_jobs", "cluster") == "local":

    localrules:
        infer,
        infer_shard,
