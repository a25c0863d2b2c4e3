"""The ``lsf`` scheduler backend family (see ``schedulers/lsf/scheduler.py``)."""
