"""Builtin components: functions returning an :py:class:`~torchx_core.specs.AppDef`.

Run them by name with ``torchx run <name> [args]`` or ``Runner.run_component(<name>, ...)``;
``torchx run <name> --help`` shows a component's arguments (from its docstring).

================  ==========================================================================
``dist.ddp``      distributed data parallel: ``torchrun`` on ``{nnodes}x{nproc_per_node}``
``dist.spmd``     single program, multiple data (``torchrun``, one process per GPU)
``utils.echo``    echoes a message
``utils.sh``      runs a shell command
``utils.python``  runs ``python`` with a module, a command or a script
``utils.binary``  runs an executable
``utils.touch``   creates a file
``utils.copy``    copies a file between fsspec URLs
``utils.booth``   evaluates the Booth function (an HPO test objective)
``serve.torchserve``  uploads a model to a TorchServe management API
================  ==========================================================================
"""

# The default image of the builtin components: the working directory on ``local_cwd``; on
# container schedulers pass ``--image`` (an image with Python, torch and torchx-suite installed).
IMAGE: str = "ghcr.io/pytorch/torchx:latest"
