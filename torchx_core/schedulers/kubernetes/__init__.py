"""The ``kubernetes`` scheduler backend family (see ``schedulers/kubernetes/scheduler.py``)."""
