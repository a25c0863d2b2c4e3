"""The Runner API that submits AppDefs as jobs (``torchx.runner`` compatible)::

    from torchx_core.runner import get_runner

    with get_runner() as runner:
        handle = runner.run_component("utils.echo", ["--msg", "hi"], scheduler="local_cwd")
        print(runner.wait(handle, wait_interval=0.1))
"""

from torchx_core.runner.api import Runner as Runner
from torchx_core.runner.api import RunnerError as RunnerError
from torchx_core.runner.api import get_runner as get_runner

__all__ = ["Runner", "RunnerError", "get_runner"]
