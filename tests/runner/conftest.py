from support.fake_scheduler import fake_plugin  # noqa: F401  (fixture)
