"""Internals of the local scheduler (private; the public API is ``local_scheduler``).

* :mod:`._layout` - the files of an app and the status document (names, writes, format);
* :mod:`._procs` - finding and killing an app's processes in ``/proc``, the process title;
* :mod:`._replicas`, :mod:`._supervisor`, :mod:`._detached` - the small detached process that
  runs one app's replicas (its model, its event loop, its daemon entry points);
* :mod:`._options`, :mod:`._request` - the run options and naming rules; the request, its
  dry run and the plan the supervisor runs;
* :mod:`._state` - the state root: reading statuses, dead supervisors, listing, garbage
  collection;
* :mod:`._create`, :mod:`._launch` - creating an app directory, starting its supervisor;
* :mod:`._logio`, :mod:`._owner` - reading and following logs, the owner token.

The first five import only the standard library (and each other), so that the supervisor starts
fast in a bare interpreter (`test_local_layout.py` checks it); `_state`, `_create`, `_options`,
`_request` and the scheduler also use the scheduler API (errors, specs).
"""
