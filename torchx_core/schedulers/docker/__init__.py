"""The ``docker`` scheduler backend family (see ``schedulers/docker/scheduler.py``)."""
