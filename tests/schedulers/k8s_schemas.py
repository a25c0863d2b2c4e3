"""Strict validation of the Kubernetes objects our schedulers generate (offline).

Core kinds (Pod, Service) are checked by ``kubernetes_validate`` against the bundled OpenAPI
schemas in strict mode (unknown fields are errors). The custom resources have no published schema,
so their envelopes are checked against the JSON schemas below, written from the CRDs' documented
fields, with every embedded pod/job template checked against the bundled Kubernetes definitions
(``PodTemplateSpec``, ``JobTemplateSpec``, ``Pod``, ``Service``).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from typing import Any

import jsonschema
import kubernetes_validate

K8S_VERSION = "1.37.0"
DNS_LABEL = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}


@functools.cache
def _defs() -> dict[str, Any]:
    root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    path = root / f"v{K8S_VERSION}-local-strict" / "_definitions.json"
    return json.loads(path.read_text())["$defs"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


_META = _ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")

# batch.volcano.sh/v1alpha1 Job (volcano.sh/apis pkg/apis/batch/v1alpha1/job.go)
VOLCANO_JOB: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "batch.volcano.sh/v1alpha1"},
        "kind": {"const": "Job"},
        "metadata": _META,
        "status": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["tasks"],
            "properties": {
                "schedulerName": {"type": "string"},
                "queue": {"type": "string"},
                "priorityClassName": {"type": "string"},
                "minAvailable": {"type": "integer", "minimum": 0},
                "minSuccess": {"type": "integer", "minimum": 1},
                "maxRetry": {"type": "integer", "minimum": 0},
                "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
                "volumes": {"type": "array"},
                "plugins": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                },
                "policies": {"type": "array", "items": {"$ref": "#/$defs/_vc_policy"}},
                "runningEstimate": {"type": "string"},
                "networkTopology": {"type": "object"},
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "template"],
                        "properties": {
                            "name": DNS_LABEL,
                            "replicas": {"type": "integer", "minimum": 0},
                            "minAvailable": {"type": "integer", "minimum": 0},
                            "maxRetry": {"type": "integer", "minimum": 0},
                            "policies": {"type": "array", "items": {"$ref": "#/$defs/_vc_policy"}},
                            "topologyPolicy": {"type": "string"},
                            "dependsOn": {"type": "object"},
                            "template": _ref("io.k8s.api.core.v1.PodTemplateSpec"),
                        },
                    },
                },
            },
        },
    },
}

_VC_POLICY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "event": {
            "enum": [
                "*",
                "PodFailed",
                "PodEvicted",
                "PodPending",
                "Unknown",
                "TaskCompleted",
                "TaskFailed",
                "OutOfSync",
                "CommandIssued",
                "JobUpdated",
            ]
        },
        "events": {"type": "array", "items": {"type": "string"}},
        "action": {
            "enum": [
                "AbortJob",
                "RestartJob",
                "RestartTask",
                "RestartPod",
                "TerminateJob",
                "CompleteJob",
                "ResumeJob",
                "SyncJob",
                "EnqueueJob",
            ]
        },
        "exitCode": {"type": "integer"},
        "timeout": {"type": "string"},
    },
}

# bus.volcano.sh/v1alpha1 Command (what `vcctl job suspend` creates)
VOLCANO_COMMAND: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "action", "target"],
    "properties": {
        "apiVersion": {"const": "bus.volcano.sh/v1alpha1"},
        "kind": {"const": "Command"},
        "metadata": _META,
        "action": {"enum": ["AbortJob", "RestartJob", "ResumeJob", "TerminateJob"]},
        "target": _ref("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"),
        "reason": {"type": "string"},
        "message": {"type": "string"},
    },
}

# jobset.x-k8s.io/v1alpha2 JobSet (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go)
JOBSET: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "jobset.x-k8s.io/v1alpha2"},
        "kind": {"const": "JobSet"},
        "metadata": _META,
        "status": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["replicatedJobs"],
            "properties": {
                "replicatedJobs": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "template"],
                        "properties": {
                            "name": DNS_LABEL,
                            "replicas": {"type": "integer", "minimum": 1},
                            "dependsOn": {"type": "array"},
                            "template": _ref("io.k8s.api.batch.v1.JobTemplateSpec"),
                        },
                    },
                },
                "network": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "enableDNSHostnames": {"type": "boolean"},
                        "subdomain": DNS_LABEL,
                        "publishNotReadyAddresses": {"type": "boolean"},
                    },
                },
                "successPolicy": {"type": "object"},
                "failurePolicy": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "maxRestarts": {"type": "integer", "minimum": 0},
                        "restartStrategy": {"enum": ["Recreate", "BlockingRecreate"]},
                        "rules": {"type": "array"},
                    },
                },
                "startupPolicy": {"type": "object"},
                "suspend": {"type": "boolean"},
                "coordinator": {"type": "object"},
                "managedBy": {"type": "string"},
                "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
            },
        },
    },
}

# workload.codeflare.dev/v1beta1 AppWrapper (project-codeflare multi-cluster-app-dispatcher)
APP_WRAPPER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "workload.codeflare.dev/v1beta1"},
        "kind": {"const": "AppWrapper"},
        "metadata": _META,
        "status": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["resources"],
            "properties": {
                "priority": {"type": "integer"},
                "priorityslope": {"type": "number"},
                "service": {"type": "object"},
                "schedulingSpec": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "minAvailable": {"type": "integer", "minimum": 0},
                        "requeuing": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "initialTimeInSeconds": {"type": "integer"},
                                "timeInSeconds": {"type": "integer", "minimum": 0},
                                "maxTimeInSeconds": {"type": "integer"},
                                "growthType": {"type": "string"},
                                "numRequeuings": {"type": "integer"},
                                "maxNumRequeuings": {"type": "integer", "minimum": 0},
                            },
                        },
                        "dispatchDuration": {"type": "object"},
                        "clusterScheduling": {"type": "object"},
                    },
                },
                "resources": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "GenericItems": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["generictemplate"],
                                "properties": {
                                    "replicas": {"type": "integer", "minimum": 1},
                                    "minavailable": {"type": "integer"},
                                    "allocated": {"type": "integer"},
                                    "priority": {"type": "integer"},
                                    "completionstatus": {"type": "string"},
                                    "custompodresources": {"type": "array"},
                                    "generictemplate": {"type": "object"},
                                },
                            },
                        }
                    },
                },
            },
        },
    },
}

POD_GROUP: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "scheduling.sigs.k8s.io/v1alpha1"},
        "kind": {"const": "PodGroup"},
        "metadata": _META,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "minMember": {"type": "integer", "minimum": 1},
                "minResources": {"type": "object"},
                "scheduleTimeoutSeconds": {"type": "integer"},
            },
        },
    },
}

_BY_KIND = {
    ("batch.volcano.sh/v1alpha1", "Job"): VOLCANO_JOB,
    ("bus.volcano.sh/v1alpha1", "Command"): VOLCANO_COMMAND,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): JOBSET,
    ("workload.codeflare.dev/v1beta1", "AppWrapper"): APP_WRAPPER,
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"): POD_GROUP,
}


def errors(doc: dict[str, Any]) -> list[str]:
    """Every schema error of ``doc`` (empty when valid). Nested AppWrapper items are checked too."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    schema = _BY_KIND.get(key)  # type: ignore[arg-type]
    if schema is None:
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            return [f"{key[1]}: {e.message}"]
        return []
    full = {**schema, "$defs": {**_defs(), "_vc_policy": _VC_POLICY}}
    validator = jsonschema.Draft202012Validator(full)
    out = [
        f"{key[1]} {'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(doc)
    ]
    if key[1] == "AppWrapper":
        for item in doc["spec"]["resources"].get("GenericItems", []):
            out.extend(errors(item["generictemplate"]))
    return out
