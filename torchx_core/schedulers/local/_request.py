"""What the local scheduler submits: the request (``LocalRequest``), its plan and its dry run.

The dry run turns an AppDef and the run options into a :class:`LocalRequest`: per role, the
working directory, the argv and environment with the macros substituted, and per replica what
differs (``TORCHX_REPLICA_IDX``, the reply file, ``$replica_id`` substitutions, GPUs).
:meth:`LocalRequest.materialize` is the plan the supervisor runs (``plan.json``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from torchx_core.schedulers.local._layout import TORCHX_LAYOUT, error_file_path, log_path
from torchx_core.schedulers.local._options import (
    MAX_NAME_CHARS,
    SAFE_NAME,
    LocalOpts,
    env_drop_entries,
    env_drop_problems,
)
from torchx_core.specs import AppDef, CfgVal, Role, macros

if TYPE_CHECKING:
    from torchx_core.schedulers.local._images import ImageProvider, ReplicaParam

logger: logging.Logger = logging.getLogger(__name__)

RANK0_ENV = "TORCHX_RANK0_HOST"


@dataclass
class LocalReplica:
    """One replica: its environment additions and, when it differs from the role's, its argv."""

    env: dict[str, str]
    argv: list[str] | None = None


@dataclass
class LocalRole:
    """How the supervisor runs one role."""

    name: str
    cwd: str
    entrypoint: str
    argv: list[str]
    env: dict[str, str]
    replicas: list[LocalReplica]
    max_retries: int
    retry_policy: str
    path: tuple[str, str] = ("", "")


@dataclass
class LocalRequest:
    """What ``schedule`` submits: the app id, its directory and the replicas to run.

    Args:
        app_id: the id of the app (``{name}-{suffix}``)
        app_dir: the app's state directory
        root: the per-user root where the app can be found by id
        roles: the roles to run
        grace_period: seconds between SIGTERM and SIGKILL
        staged: workspace copies to move into the app directory on submit (``src -> dst``)
        layout: ``"torchx"`` for TorchX's log layout (apps run with ``log_dir``), else ``None``
        env_drop: names (or ``PREFIX*``) of launcher variables the replicas do not inherit
    """

    app_id: str
    app_dir: str
    root: str
    roles: list[LocalRole]
    grace_period: float = 5.0
    staged: dict[str, str] = field(default_factory=dict)
    layout: str | None = None
    env_drop: list[str] = field(default_factory=list)

    def materialize(self) -> dict[str, Any]:
        """The JSON plan the supervisor runs (``plan.json``).

        Nothing of the launcher's environment is in it: the supervisor passes its own
        environment on (minus ``env_drop``), and a role's ``PATH`` is kept as what goes before
        and after the inherited one (``"path"``).
        """
        return {
            "app_id": self.app_id,
            "name": self.app_id.rsplit("-", 1)[0],
            "grace": self.grace_period,
            "layout": self.layout,
            "env_drop": self.env_drop,
            "roles": [
                {
                    "name": r.name,
                    "cwd": r.cwd,
                    "entrypoint": r.entrypoint,
                    "argv": r.argv,
                    "env": {k: v for k, v in r.env.items() if k != "PATH"},
                    "path": list(r.path),
                    "num_replicas": len(r.replicas),
                    "replica_env": [rep.env for rep in r.replicas],
                    "replica_argv": {
                        str(k): rep.argv for k, rep in enumerate(r.replicas) if rep.argv is not None
                    },
                    "max_retries": r.max_retries,
                    "retry_policy": r.retry_policy,
                }
                for r in self.roles
            ],
        }

    def __str__(self) -> str:
        return format_request(self)

    # -- TorchX's view of the request (its ``PopenRequest``) ------------------------------------

    @property
    def log_dir(self) -> str:
        """The app's directory, where its logs are (TorchX's ``PopenRequest.log_dir``)."""
        return self.app_dir

    @property
    def role_params(self) -> dict[str, list[ReplicaParam]]:
        """Per role, how each replica starts: argv, environment, log files, working directory.

        The environment is what the request sets (the role's, with the macros substituted, and
        the replica's own variables); replicas also inherit the launcher's environment. As in
        TorchX, ``PATH`` is the request's own part (extra paths, the role's ``PATH``, the working
        directory) without the launcher's ``PATH``, which the replicas get between them.
        """
        from torchx_core.schedulers.local._images import ReplicaParam

        out: dict[str, list[ReplicaParam]] = {}
        for r in self.roles:
            env = {k: v for k, v in r.env.items() if k != "PATH"}
            if _join_path(*r.path):
                env["PATH"] = _join_path(*r.path)
            out[r.name] = [
                ReplicaParam(
                    args=list(rep.argv if rep.argv is not None else r.argv),
                    env={**env, **rep.env},
                    stdout=log_path(self.app_dir, r.name, k, "stdout", self.layout),
                    stderr=log_path(self.app_dir, r.name, k, "stderr", self.layout),
                    combined=log_path(self.app_dir, r.name, k, "combined", self.layout),
                    cwd=r.cwd,
                )
                for k, rep in enumerate(r.replicas)
            ]
        return out

    @property
    def role_log_dirs(self) -> dict[str, list[str]]:
        """Per role, the directory holding each replica's log files."""
        return {
            r.name: [
                os.path.dirname(log_path(self.app_dir, r.name, k, "stdout", self.layout))
                for k in range(len(r.replicas))
            ]
            for r in self.roles
        }


def format_request(req: LocalRequest) -> str:
    lines = [f"local app {req.app_id}", f"  app dir: {req.app_dir}"]
    for r in req.roles:
        lines.append(
            f"  role {r.name}: {len(r.replicas)} replica(s), cwd={r.cwd},"
            f" retry_policy={r.retry_policy}, max_retries={r.max_retries}"
        )
        lines.append(f"    cmd: {' '.join(r.argv)}")
        for name in sorted(r.env):
            if name != "PATH":
                lines.append(f"    env {name}={r.env[name]}")
        for k, rep in enumerate(r.replicas[:4]):
            extra = " ".join(f"{n}={v}" for n, v in sorted(rep.env.items()))
            argv = f" cmd: {' '.join(rep.argv)}" if rep.argv is not None else ""
            lines.append(f"    [{k}]{argv} {extra}")
        if len(r.replicas) > 4:
            lines.append(f"    ... {len(r.replicas) - 4} more replica(s)")
    return "\n".join(lines)


def app_problems(app: AppDef, backend: str, cfg: Mapping[str, CfgVal]) -> list[str]:
    """What keeps ``app`` from running on the local ``backend`` with the run options ``cfg``.

    Role names become directory names (unique, at most ``MAX_NAME_CHARS``), every role needs an
    entrypoint, and on ``local`` an image that is an existing directory (or a workspace).
    """
    problems = []
    seen: set[str] = set()
    for role in app.roles:
        if len(role.name or "") > MAX_NAME_CHARS:
            problems.append(
                f"role name {role.name[:40]!r}... has {len(role.name)} characters; use at"
                f" most {MAX_NAME_CHARS}"
            )
            continue
        if not SAFE_NAME.match(role.name or ""):
            problems.append(
                f"role name {role.name!r} is not usable as a directory name; use letters,"
                " digits, `_`, `-` and `.` only"
            )
        if role.name in seen:
            problems.append(f"role name {role.name!r} is used twice; role names must be unique")
        seen.add(role.name)
        if not role.entrypoint or role.entrypoint == "<MISSING>":
            problems.append(f"role `{role.name}` has no entrypoint; set `entrypoint=...`")
        if backend == "local" and not role.workspace and not os.path.isdir(role.image or ""):
            problems.append(
                f"role `{role.name}` has image={role.image!r}, which is not an existing"
                " directory; the `local` scheduler runs each role in the directory named by"
                " its image (use `local_cwd` to run in the current directory)"
            )
    problems.extend(env_drop_problems(cfg.get("env_drop")))
    return problems


class RequestBuilder:
    """Builds the dry run's :class:`LocalRequest` of an app for one scheduler.

    Args:
        backend: ``"local_cwd"`` (roles run in the current directory) or ``"local"`` (in the
            directory named by their ``image``)
        session_name: the runner session (part of the app handle)
        root: the state root the app is found in by id
        staging_dir: where workspace copies wait for a submit (with a trailing separator)
        extra_paths: directories prepended to every replica's ``PATH``
        gpu_count: GPUs on this host for ``auto_set_cuda_visible_devices``, or a function
            counting them (called once per dry run that needs it)
        image_provider: asked where each role runs (image root, working directory, command);
            None: the backend's own rule (``local``: the image directory, ``local_cwd``: here)
    """

    def __init__(
        self,
        backend: str,
        session_name: str,
        root: str,
        staging_dir: str,
        extra_paths: list[str],
        gpu_count: int | Callable[[], int],
        image_provider: ImageProvider | None = None,
    ) -> None:
        self.backend = backend
        self.session_name = session_name
        self.root = root
        self.staging_dir = staging_dir
        self.extra_paths = extra_paths
        self.gpu_count = gpu_count
        self.image_provider = image_provider
        self._gpus: int | None = None

    def build(self, app: AppDef, cfg: Mapping[str, CfgVal], app_id: str) -> LocalRequest:
        """The request of ``app`` as ``app_id``; ``cfg`` is resolved against the run options."""
        given: dict[str, Any] = {
            f.name: cfg[f.name] for f in fields(LocalOpts) if cfg.get(f.name) is not None
        }
        opts = LocalOpts(**given)
        root = self.root
        layout = None
        app_dir = os.path.join(root, app_id)
        if opts.log_dir:  # TorchX's layout: {log_dir}/{session}/{app_id}
            layout = TORCHX_LAYOUT
            app_dir = os.path.join(
                os.path.abspath(os.path.expanduser(opts.log_dir)), self.session_name, app_id
            )
        req = LocalRequest(
            app_id=app_id,
            app_dir=app_dir,
            root=root,
            roles=[],
            grace_period=opts.grace_period,
            layout=layout,
            env_drop=env_drop_entries(opts.env_drop),
        )
        handle = f"{self.backend}://{self.session_name}/{app_id}"
        gpu_next = 0
        for idx, role in enumerate(app.roles):
            cwd = self._role_cwd(role, idx, app_dir, req)
            img_root, entrypoint = cwd, role.entrypoint
            provider = self.image_provider
            if provider is not None and role.image not in req.staged:
                img_root = provider.fetch_role(role)
                cwd = provider.get_cwd(role.image) or os.getcwd()
                entrypoint = provider.get_entrypoint(img_root, role)
            local_role = self._materialize_role(
                role, idx, cwd, req, handle, opts, img_root, entrypoint
            )
            if opts.auto_set_cuda_visible_devices and role.resource.gpu > 0:
                gpu_next = self._assign_gpus(local_role, role.resource.gpu, gpu_next)
            req.roles.append(local_role)
        return req

    def _role_cwd(self, role: Role, idx: int, app_dir: str, req: LocalRequest) -> str:
        if role.workspace and role.image and role.image.startswith(self.staging_dir):
            dst = os.path.join(app_dir, "workspace" if idx == 0 else f"workspace-{role.name}")
            req.staged[role.image] = dst
            return dst
        if self.backend == "local":
            return os.path.abspath(role.image)
        return os.getcwd()

    def _materialize_role(
        self,
        role: Role,
        idx: int,
        cwd: str,
        req: LocalRequest,
        handle: str,
        opts: LocalOpts,
        img_root: str,
        entrypoint: str,
    ) -> LocalRole:
        app_id, app_dir = req.app_id, req.app_dir
        values = macros.Values(
            img_root=img_root, app_id=app_id, replica_id="0", rank0_env=RANK0_ENV
        )
        per_replica = values.to_dict()

        def sub(text: str, k: int | None = None) -> str:
            if "$" not in text:
                return text
            if k is None:
                return values.substitute(text)
            per_replica["replica_id"] = str(k)
            return _substitute(text, per_replica)

        # the working directory goes first with prepend_cwd, else after everything (TorchX)
        # kept as (before, after) the launcher's PATH: the plan on disk holds none of it
        # macros in extra_paths and the role's PATH are substituted like the rest of its env
        before = sub(_join_path(*self.extra_paths, role.env.get("PATH")))
        before, after = (_join_path(cwd, before), "") if opts.prepend_cwd else (before, cwd)
        path = _join_path(before, os.environ.get("PATH"), after)
        env: dict[str, str] = {}
        varying_env: list[str] = []
        for name, value in role.env.items():
            if "replica_id" in value:
                varying_env.append(name)
            else:
                env[name] = sub(value)
        env["PATH"] = path
        env.setdefault("PET_LOG_DIR", os.path.join(app_dir, "torchelastic", role.name))
        env.setdefault("PYTHONUNBUFFERED", "x")
        env.setdefault("MASTER_ADDR", "localhost")
        env.update(
            {
                RANK0_ENV: "localhost",
                "TORCHX_APP_ID": app_id,
                "TORCHX_JOB_ID": handle,
                "TORCHX_ROLE_NAME": role.name,
                "TORCHX_ROLE_IDX": str(idx),
                "TORCHX_NUM_REPLICAS": str(role.num_replicas),
            }
        )
        argv = [entrypoint, *(sub(a) for a in role.args)]
        varying_args = [i for i, a in enumerate(role.args) if "replica_id" in a]
        set_error_file = "TORCHELASTIC_ERROR_FILE" not in role.env
        replicas = []
        for k in range(role.num_replicas):
            renv = {"TORCHX_REPLICA_IDX": str(k)}
            if set_error_file:
                renv["TORCHELASTIC_ERROR_FILE"] = error_file_path(app_dir, role.name, k, req.layout)
            for name in varying_env:
                renv[name] = sub(role.env[name], k)
            rargv = None
            if varying_args:
                rargv = list(argv)
                for i in varying_args:
                    rargv[i + 1] = sub(role.args[i], k)
            replicas.append(LocalReplica(env=renv, argv=rargv))
        return LocalRole(
            name=role.name,
            cwd=cwd,
            entrypoint=entrypoint,
            argv=argv,
            env=env,
            replicas=replicas,
            max_retries=role.max_retries,
            retry_policy=getattr(role.retry_policy, "name", str(role.retry_policy)),
            path=(before, after),
        )

    def _assign_gpus(self, role: LocalRole, per_replica: int, start: int) -> int:
        if self._gpus is None:
            count = self.gpu_count
            self._gpus = count() if callable(count) else count
        total = self._gpus
        if total <= 0:
            logger.warning(
                "auto_set_cuda_visible_devices is set but no GPU was found on this host;"
                " CUDA_VISIBLE_DEVICES is left unset for role %s",
                role.name,
            )
            return start
        if per_replica * len(role.replicas) + start > total:
            logger.warning(
                "role %s asks for %d GPU(s) x %d replica(s) but this host has %d;"
                " devices are shared round-robin",
                role.name,
                per_replica,
                len(role.replicas),
                total,
            )
        nxt = start
        for rep in role.replicas:
            devices = [str((nxt + i) % total) for i in range(per_replica)]
            rep.env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
            nxt += per_replica
        return nxt


def submit_plan(req: LocalRequest, app_name: str | None, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The plan ``schedule`` writes: ``req.materialize()`` with the app's name, the run options
    (what ``run_options`` reads back) and a free ``MASTER_PORT`` (one per app) for every role."""
    plan = req.materialize()
    if app_name is not None:
        plan["name"] = app_name
    plan["cfg"] = _json_safe_cfg(cfg)
    port = _free_port()
    for r in plan["roles"]:
        r["env"].setdefault("MASTER_PORT", str(port))
    return plan


def saved_app(app: AppDef | None, app_id: str) -> dict[str, Any] | None:
    """The AppDef as JSON for ``app.json`` (read by ``describe``), None if it cannot be saved."""
    if app is None:
        return None
    try:
        import json

        app_json = app.to_dict()
        json.dumps(app_json)
    except (TypeError, ValueError) as e:  # e.g. metadata that is not JSON-serializable
        logger.warning("app %s: the AppDef is not saved (describe shows no roles): %s", app_id, e)
        return None
    return app_json


def _join_path(*paths: str | None) -> str:
    return os.pathsep.join(p for p in paths if p)


def _substitute(text: str, values: Mapping[str, str]) -> str:
    from string import Template

    return Template(text).safe_substitute(values)


def _free_port() -> int:
    # the C module directly: `socket` builds its enums on import (~ms on the CLI's hot path)
    import _socket

    s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
    finally:
        s.close()


def _json_safe_cfg(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The run options as JSON can keep them (a value JSON cannot hold becomes its repr)."""
    import json

    out: dict[str, Any] = {}
    for k, v in cfg.items():
        try:
            json.dumps(v)
            out[str(k)] = v
        except (TypeError, ValueError):
            out[str(k)] = repr(v)
    return out


def _join_PATH(*paths: str | None) -> str:
    """Joins ``PATH`` strings, leaving out empty ones and empty entries (TorchX's helper).

    >>> _join_PATH("/usr/local/bin", ":/usr/bin:/bin:", None)
    '/usr/local/bin:/usr/bin:/bin'
    """
    return os.pathsep.join(e for p in paths if p for e in p.split(os.pathsep) if e)
