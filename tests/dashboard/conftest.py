"""Dashboard tests: unit tests over the fake scheduler (``tests/support/fake_scheduler.py``) through
Starlette's test client, and browser tests (``test_dashboard_browser.py``) against a real
``torchx dashboard`` process with real apps."""
