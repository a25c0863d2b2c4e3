"""The ``ray`` scheduler backend family (see ``schedulers/ray/scheduler.py``)."""
