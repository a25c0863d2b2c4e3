"""Small job-side programs the builtin components run (TorchX's ``torchx.apps``)."""
