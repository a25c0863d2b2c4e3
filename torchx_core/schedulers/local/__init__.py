"""Internals of the local scheduler (private; the public API is ``local_scheduler``).

* :mod:`._state` – the on-disk layout: one root per user, one directory per app, the status file
  (written atomically), the supervisor lock, listing and garbage collection;
* :mod:`._supervisor` – the small detached process that runs one app's replicas (stdlib only);
* :mod:`._launch` – starting a supervisor (fork when safe, a fresh interpreter otherwise);
* :mod:`._logio` – reading and following replica logs.

Everything here imports only the standard library, so the supervisor starts fast.
"""
